//! One plugin connection, from `hello` to close (PROTOCOL.md, Plugin → host / Host →
//! plugin). The reader runs here; a writer task owns the socket's sending half and
//! batches whatever is queued before each flush.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket};
use base64_simd::STANDARD as BASE64;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::budget;
use super::events::{Admit, EventBudget};
use super::link::Link;
use super::pairing::{self, Pairing, Plan};
use super::registry::Registry;
use super::turns::Turns;
use super::writer::{WsMessage, write_until_done};
use super::{Progress, SessionEvent};
use crate::protocol::frame::FrameError;
use crate::protocol::messages::{
    DecodeBuffer, Framing, Hello, HostMessage, PluginFailure, PluginMessage, Routed, encode_frame,
};
use crate::protocol::{Context, ErrorCode, PROTOCOL_VERSION, SERVER_VERSION, ToolError, value};

const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
const PING_INTERVAL: Duration = Duration::from_secs(10);
/// Pings left unanswered before the connection is treated as dead.
const MAX_UNANSWERED_PINGS: u32 = 2;

const CLOSE_PROTOCOL: u16 = 4000;
const CLOSE_TOO_LARGE: u16 = 1009;
/// The plugin could not prove it holds this user's pairing secret (PROTOCOL.md, "Pairing
/// is mutual").
const CLOSE_UNPAIRED: u16 = 4003;

/// Why a connection's read loop ended.
enum End {
    Closed,
    /// This host is shutting down cleanly; the plugin reconnects to its successor.
    Shutdown,
    TooLarge(String),
    Dead,
}

/// Serves one plugin connection; `identified` runs once a well-formed `hello` was read
/// (it frees the connection's place among those that have not said hello and lifts its
/// pre-hello read budget, see `budget.rs`), or once the connection is refused before one.
/// Its pairing handshake then waits its turn among `handshakes`: a connection that said
/// hello is never evicted for a newer one.
pub async fn serve_plugin(
    socket: WebSocket,
    registry: Arc<Registry>,
    pairing: Arc<Pairing>,
    handshakes: Arc<Semaphore>,
    shutdown: CancellationToken,
    identified: impl FnOnce(),
) {
    let (mut sink, mut stream) = socket.split();
    let limit = registry.max_message_bytes.min(budget::HELLO_BYTES);
    let opening = read_opening(&mut stream, limit).await;
    let (opening, framing) = match opening {
        Ok(found) => {
            identified();
            found
        }
        Err((code, message)) => {
            identified();
            tracing::warn!(%message, "plugin connection refused");
            let reject = code.map(|code| (code, message.as_str()));
            refuse(
                &mut sink,
                Framing::Base64Text,
                reject,
                CLOSE_PROTOCOL,
                "expected a valid hello",
            )
            .await;
            return;
        }
    };
    // What is known of the plugin before it proved itself: a pairing hello names no place.
    let (protocol, nonce, named) = match &opening {
        Opening::Hello(hello) => (hello.protocol, hello.nonce.clone(), Some(hello)),
        Opening::Pairing { protocol, nonce } => (*protocol, Some(nonce.clone()), None),
    };
    let place = named
        .map_or(UNNAMED_PLACE, |hello| hello.place_name.as_str())
        .to_owned();
    if protocol != PROTOCOL_VERSION {
        let message = mismatch_message(protocol);
        tracing::warn!(place = %place, "{message}");
        registry.note_refused(&place, &message);
        let reject = Some(("protocol_mismatch", message.as_str()));
        refuse(&mut sink, framing, reject, CLOSE_PROTOCOL, "protocol mismatch").await;
        return;
    }
    // Only the socket's first hello is proven: the playtest sessions it carries later
    // (`CarriedSessions::open`) are vouched for by this paired connection.
    let proven = match tokio::time::timeout(HELLO_TIMEOUT, handshakes.acquire()).await {
        Ok(Ok(_turn)) => handshake(&mut sink, &mut stream, framing, nonce.as_deref(), &pairing).await,
        _ => Err(Refusal::went(&format!(
            "{} pairings were in progress for 5 s; studio-bridge was too busy to pair this plugin (it retries by itself)",
            budget::MAX_HANDSHAKES
        ))),
    };
    if let Err(Refusal { message, decided }) = proven {
        tracing::warn!(place = %place, "refused an unpaired plugin: {message}");
        if decided {
            registry.note_refused(&place, &message);
        }
        refuse(
            &mut sink,
            framing,
            Some(("unpaired", message.as_str())),
            CLOSE_UNPAIRED,
            "unpaired",
        )
        .await;
        return;
    }
    // A pairing hello's plugin names itself now that both sides are proven.
    let hello = match opening {
        Opening::Hello(hello) => *hello,
        Opening::Pairing { .. } => {
            let proven = encode_frame(&HostMessage::Proven, framing);
            if sink.send(Message::frame(proven)).await.is_err() {
                return;
            }
            match read_opening(&mut stream, limit).await {
                Ok((Opening::Hello(hello), _)) if hello.protocol == PROTOCOL_VERSION => *hello,
                Ok(_) => {
                    let reject = Some(("bad_hello", "after `proven`, the plugin's full hello"));
                    refuse(&mut sink, framing, reject, CLOSE_PROTOCOL, "expected a full hello").await;
                    return;
                }
                Err((code, message)) => {
                    tracing::warn!(%message, "a paired plugin did not name itself");
                    let reject = code.map(|code| (code, message.as_str()));
                    refuse(&mut sink, framing, reject, CLOSE_PROTOCOL, "expected a full hello").await;
                    return;
                }
            }
        }
    };

    let (outbound, queue) = mpsc::unbounded_channel();
    let writer = tokio::spawn(write_until_done(sink, queue, |_| {}));
    let link = Link::new(framing, outbound);
    let session_id = hello.session_id.clone();
    // Queued before the session becomes resolvable, so `welcome` is the first thing the
    // plugin reads and no request can overtake it.
    link.send(&HostMessage::Welcome {
        protocol: PROTOCOL_VERSION,
        server_version: SERVER_VERSION,
        session_id: &session_id,
        multiplex: true,
    });
    tracing::info!(session = %session_id, context = %hello.context, place = %hello.place_name, "plugin connected");
    let mut carried = CarriedSessions {
        own_session: session_id.clone(),
        own_instance: hello.instance_id.clone(),
        channels: HashMap::new(),
    };
    let generation = registry.connect(hello, Arc::clone(&link));

    let end = read_loop(&mut stream, &link, &registry, &mut carried, &shutdown).await;
    let error = match &end {
        End::TooLarge(reason) => {
            link.close(CLOSE_TOO_LARGE, "message too large");
            ToolError::new(
                ErrorCode::MessageTooLarge,
                format!(
                    "Studio sent a message larger than the bridge accepts ({reason}). Ask for less (a narrower path, a smaller depth or count), or raise --max-message-mib."
                ),
            )
        }
        End::Dead => {
            link.close(1011, "no pong");
            lost_error()
        }
        End::Closed => {
            link.close(1000, "closed");
            lost_error()
        }
        End::Shutdown => {
            link.close(1001, "host shutting down");
            lost_error()
        }
    };
    link.fail_all(&error);
    registry.disconnect(&session_id, generation);
    // The sessions this socket carried reconnect with it: the edit plugin says hello for
    // each again on its next connection.
    for (carried_id, channel) in carried.channels.drain() {
        channel.link.fail_all(&error);
        registry.disconnect(&carried_id, channel.generation);
    }
    tracing::info!(session = %session_id, "plugin disconnected");
    drop(link);
    let _ = writer.await;
}

/// Refuses a connection before it becomes a session: a `reject` naming the code and the fix
/// (when there is one to say), then the close frame.
async fn refuse(
    sink: &mut SplitSink<WebSocket, Message>,
    framing: Framing,
    reject: Option<(&str, &str)>,
    close_code: u16,
    close_reason: &'static str,
) {
    if let Some((code, message)) = reject {
        let frame = encode_frame(
            &HostMessage::Reject {
                code,
                message,
                session: None,
            },
            framing,
        );
        let _ = sink.send(Message::frame(frame)).await;
    }
    let _ = sink.send(Message::close(close_code, close_reason)).await;
}

fn mismatch_message(protocol: u64) -> String {
    format!(
        "This plugin speaks protocol {protocol} but studio-bridge {SERVER_VERSION} speaks {PROTOCOL_VERSION}. Run `studio-bridge install-plugin` with the studio-bridge your agent uses, then restart Studio."
    )
}

/// At most this many playtest DataModels on one plugin socket (a server and up to eight
/// clients is the largest Studio test; the cap bounds what a misbehaving plugin can make
/// the host hold).
const MAX_CARRIED: usize = 32;

/// The sessions one socket carries besides its own (PROTOCOL.md, Sessions): the Play
/// server and clients that the edit plugin multiplexes, each with its own link.
struct CarriedSessions {
    own_session: String,
    own_instance: String,
    channels: HashMap<String, Channel>,
}

struct Channel {
    link: Arc<Link>,
    generation: u64,
}

impl CarriedSessions {
    /// The link a message with `session` belongs to; `None` when that session is not
    /// carried here (its answer is dropped).
    fn link<'a>(&'a self, own: &'a Arc<Link>, session: Option<&str>) -> Option<(&'a Arc<Link>, &'a str)> {
        match session {
            None => Some((own, &self.own_session)),
            Some(id) if id == self.own_session => Some((own, &self.own_session)),
            Some(id) => self.channels.get_key_value(id).map(|(id, c)| (&c.link, id.as_str())),
        }
    }

    /// A `hello` after the first: a playtest DataModel the plugin carries from now on.
    fn open(&mut self, hello: Hello, own: &Link, registry: &Registry) {
        let refuse = |code: &str, message: &str| {
            tracing::warn!(session = %hello.session_id, %message, "refused a multiplexed session");
            own.send(&HostMessage::Reject {
                code,
                message,
                session: Some(&hello.session_id),
            });
        };
        if hello.protocol != PROTOCOL_VERSION {
            return refuse("protocol_mismatch", &mismatch_message(hello.protocol));
        }
        if hello.session_id == self.own_session || hello.context == Context::Edit {
            return refuse(
                "bad_hello",
                "a multiplexed session is a playtest DataModel (context server or client) with a sessionId of its own",
            );
        }
        if hello.instance_id != self.own_instance {
            return refuse(
                "bad_hello",
                "a multiplexed session belongs to the instance of the session whose socket carries it",
            );
        }
        if !self.channels.contains_key(&hello.session_id) && self.channels.len() >= MAX_CARRIED {
            return refuse("bad_hello", "too many playtest sessions on one connection");
        }
        let session_id = hello.session_id.clone();
        let link = own.channel(session_id.clone());
        link.send(&HostMessage::Welcome {
            protocol: PROTOCOL_VERSION,
            server_version: SERVER_VERSION,
            session_id: &session_id,
            multiplex: true,
        });
        tracing::info!(session = %session_id, context = %hello.context, via = %self.own_session, "playtest session connected");
        let generation = registry.connect(hello, Arc::clone(&link));
        if let Some(old) = self.channels.insert(session_id, Channel { link, generation }) {
            old.link.fail_all(&lost_error());
        }
    }

    /// A `bye`: that DataModel closed, so its session goes now, without a reconnect grace.
    fn close(&mut self, session_id: &str, registry: &Registry) {
        if let Some(channel) = self.channels.remove(session_id) {
            channel.link.fail_all(&ToolError::new(
                ErrorCode::SessionLost,
                "The playtest DataModel closed while the call was in flight (the test ended). It was not re-sent. Check studio_sessions, then retry in the context that is there now.",
            ));
            registry.remove(session_id, channel.generation);
            tracing::info!(session = %session_id, "playtest session closed");
        }
    }
}

fn lost_error() -> ToolError {
    ToolError::new(
        ErrorCode::SessionLost,
        "The Studio session disconnected while the call was in flight. It was not re-sent (it may have run). Check its effect with a read-only tool, then retry if needed.",
    )
}

/// Mutual pairing (PROTOCOL.md, "Pairing is mutual"; `pairing.rs` says why): proves this
/// host to a plugin that asked (its `hello` carried a nonce) and checks the plugin's
/// `auth`, all before the session exists. `Err` carries the refusal the plugin is sent.
async fn handshake(
    sink: &mut SplitSink<WebSocket, Message>,
    stream: &mut SplitStream<WebSocket>,
    framing: Framing,
    nonce: Option<&[u8]>,
    pairing: &Pairing,
) -> Result<(), Refusal> {
    let secret = match pairing.plan(nonce.is_some()) {
        Plan::Admit => return Ok(()),
        Plan::Refuse(message) => return Err(Refusal::decided(message)),
        Plan::Challenge { secret } => secret,
    };
    let nonce = nonce.unwrap_or_default();
    let host_nonce =
        pairing::nonce().map_err(|error| Refusal::decided(format!("studio-bridge could not pair: {error}")))?;
    let proof = pairing::host_proof(&secret, nonce, &host_nonce);
    let challenge = encode_frame(
        &HostMessage::Challenge {
            host_nonce: &BASE64.encode_to_string(host_nonce),
            proof: &BASE64.encode_to_string(proof),
        },
        framing,
    );
    if sink.send(Message::frame(challenge)).await.is_err() {
        return Err(Refusal::went("closed before the pairing challenge"));
    }
    let failed = || {
        pairing
            .refuse_failed_auth()
            .map_or(Ok(()), |message| Err(Refusal::decided(message)))
    };
    let answer = tokio::time::timeout(HELLO_TIMEOUT, stream.next()).await;
    let message = match answer {
        Ok(Some(Ok(message @ (Message::Binary(_) | Message::Text(_))))) => message,
        // No answer in time, or the connection went: nothing to admit either way.
        Err(_) => return Err(Refusal::went("no pairing answer within 5 s")),
        Ok(_) => return Err(Refusal::went("closed during pairing")),
    };
    let parsed = PluginMessage::decode_routed(
        message.into_data(),
        framing,
        budget::HELLO_BYTES,
        &mut DecodeBuffer::default(),
    );
    match parsed.map(|routed| routed.message) {
        Ok(PluginMessage::Auth { proof }) if pairing::plugin_proof_matches(&secret, &host_nonce, nonce, &proof) => {
            Ok(())
        }
        _ => failed(),
    }
}

/// Why a handshake did not admit a plugin, and whether this host decided it (a wrong or
/// missing proof: remembered, for `sessions` and `no_sessions` to name) or the plugin went
/// (it closed, or stopped answering: as `doctor`'s own probe does, or a plugin that did not
/// take this host's proof, which it says in Studio's output).
struct Refusal {
    message: String,
    decided: bool,
}

impl Refusal {
    fn decided(message: String) -> Refusal {
        Refusal { message, decided: true }
    }

    fn went(message: &str) -> Refusal {
        Refusal {
            message: message.to_owned(),
            decided: false,
        }
    }
}

/// How a plugin connection opens: a full `hello`, or a paired plugin's pairing hello
/// (`{protocol, nonce}` alone), whose full hello comes after the handshake.
enum Opening {
    Hello(Box<Hello>),
    Pairing { protocol: u64, nonce: Vec<u8> },
}

/// The place a refused plugin is remembered under when it never named one.
const UNNAMED_PLACE: &str = "(not named before pairing)";

async fn read_opening(
    stream: &mut SplitStream<WebSocket>,
    limit: usize,
) -> Result<(Opening, Framing), (Option<&'static str>, String)> {
    let first = tokio::time::timeout(HELLO_TIMEOUT, stream.next()).await;
    let message = match first {
        Err(_) => return Err((None, "no hello within 5 s".into())),
        Ok(None | Some(Err(_))) => return Err((None, "closed before hello".into())),
        Ok(Some(Ok(message))) => message,
    };
    let framing = match &message {
        Message::Binary(_) => Framing::Binary,
        Message::Text(_) => Framing::Base64Text,
        _ => return Err((Some("bad_hello"), "the first message must be a hello".into())),
    };
    let parsed = PluginMessage::decode_routed(message.into_data(), framing, limit, &mut DecodeBuffer::default())
        .map(|routed| routed.message);
    match parsed {
        Ok(PluginMessage::Hello(hello)) => Ok((Opening::Hello(Box::new(hello)), framing)),
        Ok(PluginMessage::PairingHello { protocol, nonce }) => Ok((Opening::Pairing { protocol, nonce }, framing)),
        Ok(_) => Err((Some("bad_hello"), "the first message must be a hello".into())),
        Err(error) => Err((Some("bad_hello"), format!("bad hello: {error}"))),
    }
}

async fn read_loop(
    stream: &mut SplitStream<WebSocket>,
    link: &Arc<Link>,
    registry: &Registry,
    carried: &mut CarriedSessions,
    shutdown: &CancellationToken,
) -> End {
    let session_id = carried.own_session.clone();
    let session_id = session_id.as_str();
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + PING_INTERVAL, PING_INTERVAL);
    let mut unanswered = 0u32;
    let mut ping_n = 0u64;
    let mut budgets = Budgets {
        events: EventBudget::new(tokio::time::Instant::now()),
        progress: EventBudget::new(tokio::time::Instant::now()),
    };
    let mut turns = Turns::default();
    let mut decode_buffer = DecodeBuffer::default();
    loop {
        // A socket that always has the next frame ready (a flood of events) takes turns
        // with the other connections (see `turns.rs`).
        turns.frame().await;
        let flush_at = budgets.events.flush_at();
        let message = tokio::select! {
            () = shutdown.cancelled() => return End::Shutdown,
            message = stream.next() => message,
            () = sleep_until(flush_at), if flush_at.is_some() => {
                // The flood is over and no event came to carry its count: say it now.
                for gap in budgets.events.flush() {
                    registry.publish_event(gap);
                }
                continue;
            }
            _ = ping.tick() => {
                if unanswered >= MAX_UNANSWERED_PINGS {
                    tracing::warn!(session = %session_id, "plugin stopped answering pings");
                    return End::Dead;
                }
                unanswered += 1;
                ping_n += 1;
                link.send(&HostMessage::Ping { n: ping_n });
                continue;
            }
        };
        let message = match message {
            None => return End::Closed,
            Some(Err(error)) => {
                let text = error.to_string();
                tracing::debug!(session = %session_id, %text, "plugin socket error");
                if text.contains("too long") || text.contains("Space limit") {
                    return End::TooLarge(text);
                }
                return End::Closed;
            }
            Some(Ok(message)) => message,
        };
        let framing = match &message {
            Message::Binary(_) => Framing::Binary,
            Message::Text(_) => Framing::Base64Text,
            Message::Close(_) => return End::Closed,
            Message::Ping(_) | Message::Pong(_) => continue,
        };
        // Any frame proves the plugin is alive.
        unanswered = 0;
        let payload = message.into_data();
        let limit = registry.max_message_bytes;
        // A large frame (a result of megabytes) is decoded off the async thread, so that
        // calls to other sessions are not held up behind it; in order, as it is awaited.
        let decoded = if payload.len() > OFF_THREAD_BYTES {
            let mut buffer = std::mem::take(&mut decode_buffer);
            let (decoded, buffer) = tokio::task::spawn_blocking(move || {
                let decoded = PluginMessage::decode_routed(payload, framing, limit, &mut buffer);
                (decoded, buffer)
            })
            .await
            .unwrap_or_else(|_| (Err(FrameError::NotAMessage), DecodeBuffer::default()));
            decode_buffer = buffer;
            decoded
        } else {
            PluginMessage::decode_routed(payload, framing, limit, &mut decode_buffer)
        };
        let Routed { session, message } = match decoded {
            Ok(routed) => routed,
            Err(FrameError::TooLarge { size, limit }) => return End::TooLarge(format!("{size} bytes, limit {limit}")),
            Err(error) => {
                tracing::warn!(session = %session_id, %error, "rejected a malformed message");
                continue;
            }
        };
        match message {
            PluginMessage::Hello(hello) => carried.open(hello, link, registry),
            PluginMessage::Bye => {
                if let Some(gone) = session.as_deref() {
                    carried.close(gone, registry);
                }
            }
            PluginMessage::Pong { .. } => {}
            PluginMessage::Unknown(kind) => {
                tracing::debug!(session = %session_id, %kind, "ignored an unknown message type")
            }
            message => {
                let Some((target, target_id)) = carried.link(link, session.as_deref()) else {
                    tracing::debug!(session = %session_id, via = ?session, "dropped a message for a session this socket does not carry");
                    continue;
                };
                deliver(message, target, target_id, registry, &mut budgets);
            }
        }
    }
}

/// How many events and progress reports one plugin socket may still pass on (see
/// `events.rs`): both are advisory, and a flood of either must not cost the host more
/// than a bounded share of its time and memory.
struct Budgets {
    events: EventBudget,
    progress: EventBudget,
}

/// Hands a response, progress or event to the session it belongs to.
fn deliver(message: PluginMessage, link: &Link, session_id: &str, registry: &Registry, budgets: &mut Budgets) {
    match message {
        PluginMessage::Response { id, outcome } => {
            if !link.resolve(id, outcome.map_err(plugin_failure)) {
                tracing::debug!(session = %session_id, id, "dropped a response nobody waits for");
            }
        }
        PluginMessage::Progress {
            id,
            progress,
            total,
            message,
        } => {
            // A dropped report only leaves the caller's progress bar a step behind.
            if !matches!(
                budgets.progress.admit(session_id, tokio::time::Instant::now()),
                Admit::Drop
            ) {
                link.progress(
                    id,
                    Progress {
                        progress,
                        total,
                        message,
                    },
                );
            }
        }
        PluginMessage::Event { event, data } => {
            // A session's run state is kept whatever the budget: `sessions` must not go
            // stale. Publishing it to subscribers is budgeted like any event, so that a
            // plugin cannot flood them with `state` instead.
            if event == "state"
                && let Some(state) = data
                    .as_map()
                    .and_then(|entries| entries.iter().find(|(key, _)| key.as_str() == Some("state")))
                    .and_then(|(_, state)| state.as_str())
            {
                registry.set_state(session_id, state.to_owned());
            }
            if event == "paused"
                && let Some(paused) = data
                    .as_map()
                    .and_then(|entries| entries.iter().find(|(key, _)| key.as_str() == Some("paused")))
                    .and_then(|(_, paused)| paused.as_bool())
            {
                registry.set_paused(session_id, paused);
            }
            match budgets.events.admit(session_id, tokio::time::Instant::now()) {
                Admit::Drop => return,
                Admit::AfterGap(gap) => registry.publish_event(gap),
                Admit::Publish => {}
            }
            let data = value::to_json(&data);
            registry.publish_event(SessionEvent {
                session_id: session_id.to_owned(),
                event,
                data,
            });
        }
        PluginMessage::Hello(_)
        | PluginMessage::PairingHello { .. }
        | PluginMessage::Auth { .. }
        | PluginMessage::Bye
        | PluginMessage::Pong { .. }
        | PluginMessage::Unknown(_) => {}
    }
}

/// A plugin's error response as the agent sees it. Codes outside the contract become
/// `plugin_error`, keeping the plugin's own code in `details`.
fn plugin_failure(failure: PluginFailure) -> ToolError {
    let details = failure.details.as_ref().map(value::to_json);
    match ErrorCode::parse(&failure.code) {
        Some(code) => {
            let error = ToolError::new(code, failure.message);
            match details {
                Some(details) => error.with_details(details),
                None => error,
            }
        }
        None => ToolError::new(ErrorCode::PluginError, failure.message)
            .with_details(serde_json::json!({ "pluginCode": failure.code, "details": details })),
    }
}

/// Sleeps until `at` (never, for `None`: the branch using it is disabled then).
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Frames larger than this are decoded on a blocking thread.
const OFF_THREAD_BYTES: usize = 256 * 1024;

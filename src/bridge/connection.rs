//! One plugin connection, from `hello` to close (PROTOCOL.md, Plugin → host / Host →
//! plugin). The reader runs here; a writer task owns the socket's sending half and
//! batches whatever is queued before each flush.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::budget;
use super::registry::{Link, Outbound, Registry};
use super::{Progress, SessionEvent};
use crate::protocol::messages::{
    FrameError, Framing, Hello, HostMessage, PluginFailure, PluginMessage, decode_frame, encode_frame,
};
use crate::protocol::{ErrorCode, PROTOCOL_VERSION, SERVER_VERSION, ToolError, value};

const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
const PING_INTERVAL: Duration = Duration::from_secs(10);
/// Pings left unanswered before the connection is treated as dead.
const MAX_UNANSWERED_PINGS: u32 = 2;

const CLOSE_PROTOCOL: u16 = 4000;
const CLOSE_TOO_LARGE: u16 = 1009;

/// Why a connection's read loop ended.
enum End {
    Closed,
    /// This host is shutting down cleanly; the plugin reconnects to its successor.
    Shutdown,
    TooLarge(String),
    Dead,
}

/// Serves one plugin connection; `identified` runs once its `hello` is accepted (it
/// lifts the connection's pre-hello read budget, see `budget.rs`) or refused.
pub async fn serve_plugin(
    socket: WebSocket,
    registry: Arc<Registry>,
    shutdown: CancellationToken,
    identified: impl FnOnce(),
) {
    let (mut sink, mut stream) = socket.split();
    let hello = read_hello(&mut stream, registry.max_message_bytes.min(budget::HELLO_BYTES)).await;
    identified();
    let (hello, framing) = match hello {
        Ok(found) => found,
        Err((code, message)) => {
            tracing::warn!(%message, "plugin connection refused");
            let framing = Framing::Base64Text;
            if let Some(code) = code {
                let reject = encode_frame(
                    &HostMessage::Reject {
                        code,
                        message: &message,
                    },
                    framing,
                );
                let _ = sink.send(to_message(reject)).await;
            }
            let _ = sink.send(close_message(CLOSE_PROTOCOL, "expected a valid hello")).await;
            return;
        }
    };
    if hello.protocol != PROTOCOL_VERSION {
        let message = format!(
            "This plugin speaks protocol {} but studio-bridge {SERVER_VERSION} speaks {PROTOCOL_VERSION}. Run `studio-bridge install-plugin` with the studio-bridge your agent uses, then restart Studio.",
            hello.protocol
        );
        tracing::warn!(session = %hello.session_id, "{message}");
        let reject = encode_frame(
            &HostMessage::Reject {
                code: "protocol_mismatch",
                message: &message,
            },
            framing,
        );
        let _ = sink.send(to_message(reject)).await;
        let _ = sink.send(close_message(CLOSE_PROTOCOL, "protocol mismatch")).await;
        return;
    }

    let (outbound, queue) = mpsc::unbounded_channel();
    let writer = tokio::spawn(write_loop(sink, queue));
    let link = Link::new(framing, outbound);
    let session_id = hello.session_id.clone();
    // Queued before the session becomes resolvable, so `welcome` is the first thing the
    // plugin reads and no request can overtake it.
    link.send(&HostMessage::Welcome {
        protocol: PROTOCOL_VERSION,
        server_version: SERVER_VERSION,
        session_id: &session_id,
    });
    tracing::info!(session = %session_id, context = %hello.context, place = %hello.place_name, "plugin connected");
    let generation = registry.connect(hello, Arc::clone(&link));

    let end = read_loop(&mut stream, &link, &registry, &session_id, &shutdown).await;
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
    tracing::info!(session = %session_id, "plugin disconnected");
    drop(link);
    let _ = writer.await;
}

fn lost_error() -> ToolError {
    ToolError::new(
        ErrorCode::SessionLost,
        "The Studio session disconnected while the call was in flight. It was not re-sent (it may have run). Check its effect with a read-only tool, then retry if needed.",
    )
}

async fn read_hello(
    stream: &mut SplitStream<WebSocket>,
    limit: usize,
) -> Result<(Hello, Framing), (Option<&'static str>, String)> {
    let first = tokio::time::timeout(HELLO_TIMEOUT, stream.next()).await;
    let message = match first {
        Err(_) => return Err((None, "no hello within 5 s".into())),
        Ok(None | Some(Err(_))) => return Err((None, "closed before hello".into())),
        Ok(Some(Ok(message))) => message,
    };
    let (payload, framing) = match &message {
        Message::Binary(bytes) => (&bytes[..], Framing::Binary),
        Message::Text(text) => (text.as_bytes(), Framing::Base64Text),
        _ => return Err((Some("bad_hello"), "the first message must be a hello".into())),
    };
    let parsed = decode_frame(payload, framing, limit).and_then(PluginMessage::parse);
    match parsed {
        Ok(PluginMessage::Hello(hello)) => Ok((hello, framing)),
        Ok(_) => Err((Some("bad_hello"), "the first message must be a hello".into())),
        Err(error) => Err((Some("bad_hello"), format!("bad hello: {error}"))),
    }
}

async fn read_loop(
    stream: &mut SplitStream<WebSocket>,
    link: &Link,
    registry: &Registry,
    session_id: &str,
    shutdown: &CancellationToken,
) -> End {
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + PING_INTERVAL, PING_INTERVAL);
    let mut unanswered = 0u32;
    let mut ping_n = 0u64;
    loop {
        let message = tokio::select! {
            () = shutdown.cancelled() => return End::Shutdown,
            message = stream.next() => message,
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
        let payload: &[u8] = match &message {
            Message::Binary(bytes) => bytes,
            Message::Text(text) => text.as_bytes(),
            Message::Close(_) => return End::Closed,
            Message::Ping(_) | Message::Pong(_) => continue,
        };
        // Any frame proves the plugin is alive.
        unanswered = 0;
        let this_framing = if matches!(message, Message::Binary(_)) {
            Framing::Binary
        } else {
            Framing::Base64Text
        };
        let decoded = match decode_frame(payload, this_framing, registry.max_message_bytes) {
            Ok(value) => value,
            Err(FrameError::TooLarge { size, limit }) => return End::TooLarge(format!("{size} bytes, limit {limit}")),
            Err(error) => {
                tracing::warn!(session = %session_id, %error, "rejected a malformed frame");
                continue;
            }
        };
        match PluginMessage::parse(decoded) {
            Ok(PluginMessage::Response { id, outcome }) => {
                if !link.resolve(id, outcome.map_err(plugin_failure)) {
                    tracing::debug!(session = %session_id, id, "dropped a response nobody waits for");
                }
            }
            Ok(PluginMessage::Progress {
                id,
                progress,
                total,
                message,
            }) => {
                link.progress(
                    id,
                    Progress {
                        progress,
                        total,
                        message,
                    },
                );
            }
            Ok(PluginMessage::Event { event, data }) => {
                let data = value::to_json(&data);
                if event == "state"
                    && let Some(state) = data.get("state").and_then(|s| s.as_str())
                {
                    registry.set_state(session_id, state.to_owned());
                }
                registry.publish_event(SessionEvent {
                    session_id: session_id.to_owned(),
                    event,
                    data,
                });
            }
            Ok(PluginMessage::Pong { .. }) => {}
            Ok(PluginMessage::Hello(_)) => tracing::debug!(session = %session_id, "ignored a second hello"),
            Ok(PluginMessage::Unknown(kind)) => {
                tracing::debug!(session = %session_id, %kind, "ignored an unknown message type")
            }
            Err(error) => tracing::warn!(session = %session_id, %error, "rejected a malformed message"),
        }
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

/// Owns the sending half of a socket: feeds everything already queued, then flushes
/// once. Shared by plugin and peer connections.
pub(super) async fn write_loop(mut sink: SplitSink<WebSocket, Message>, mut queue: mpsc::UnboundedReceiver<Outbound>) {
    while let Some(first) = queue.recv().await {
        let mut next = Some(first);
        // Feed everything already queued, then flush once.
        while let Some(item) = next {
            match item {
                Outbound::Frame(frame) => {
                    if sink.feed(to_message(frame)).await.is_err() {
                        return;
                    }
                }
                Outbound::Close(code, reason) => {
                    let _ = sink.send(close_message(code, reason)).await;
                    return;
                }
            }
            next = queue.try_recv().ok();
        }
        if sink.flush().await.is_err() {
            return;
        }
    }
    let _ = sink.close().await;
}

fn to_message(frame: crate::protocol::messages::Frame) -> Message {
    match frame {
        crate::protocol::messages::Frame::Binary(bytes) => Message::Binary(bytes.into()),
        crate::protocol::messages::Frame::Text(text) => Message::Text(text.into()),
    }
}

pub(super) fn close_message(code: u16, reason: &'static str) -> Message {
    Message::Close(Some(CloseFrame {
        code,
        reason: reason.into(),
    }))
}

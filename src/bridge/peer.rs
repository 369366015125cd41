//! The peer side of `/v1/client`: how a studio-bridge process that is not the host (a
//! second agent, a CLI command, `mcp --remote`) reaches Studio through the host.
//!
//! When the link drops, or the host stops answering pings (see `liveness.rs`), every call
//! in flight on it fails at once with `host_lost`; none is re-sent, since the host may
//! already have delivered it to Studio.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_util::sync::CancellationToken;

use super::calls::{InFlight, lock};
use super::events::{EventSink, EventStream};
use super::liveness::{self, Silence};
use super::peer_pairing::{self, Step, Unproven};
use super::peer_server::CLOSE_HOST_SHUTDOWN;
use super::writer::{Outbound, WriterEnd, write_frames};
use super::{Call, CallHooks, Progress, Reply, SessionEvent, SessionList, Target};
use crate::protocol::messages::Frame;
use crate::protocol::peer::{HostReply, PeerOut, encode};
use crate::protocol::{ErrorCode, ToolError, value};

/// Extra time a peer waits beyond a call's deadline for the host's own `timeout` answer.
const DEADLINE_SLACK: Duration = Duration::from_millis(500);

pub struct PeerLink {
    outbound: mpsc::UnboundedSender<Outbound>,
    calls: InFlight<Reply>,
    subscriptions: Mutex<HashMap<u64, EventSink>>,
    next_id: AtomicU64,
    lost: CancellationToken,
    closed_cleanly: AtomicBool,
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("the bridge host refused this peer's proof of the peer token")]
    Unauthorized,
    #[error(
        "the process holding port {port} did not prove itself to be this user's studio-bridge ({why}), so nothing was sent to it. Run `studio-bridge doctor` to see what holds the port."
    )]
    Unproven { port: u16, why: String },
    #[error("cannot connect to the bridge host at {addr}: {reason}")]
    Failed { addr: String, reason: String },
}

pub fn host_lost() -> ToolError {
    ToolError::new(
        ErrorCode::HostLost,
        "The studio-bridge process hosting the bridge exited or stopped answering while this call was in flight. It was not re-sent (it may have run); another studio-bridge takes over within about 2 s. Check the call's effect, then retry.",
    )
}

impl PeerLink {
    /// Connects to the host at `addr` (`host:port`): the host proves it holds `token`
    /// before anything else is sent, then this peer proves it (`peer_pairing.rs`); the
    /// token itself never crosses the wire.
    pub async fn connect(
        addr: &str,
        port: u16,
        token: &str,
        max_message_bytes: usize,
    ) -> Result<Arc<PeerLink>, ConnectError> {
        let failed = |reason: String| ConnectError::Failed {
            addr: addr.to_owned(),
            reason,
        };
        let mut request = format!("ws://{addr}/v1/client")
            .into_client_request()
            .map_err(|e| failed(e.to_string()))?;
        let headers = request.headers_mut();
        // The host accepts only a loopback Host header; a forwarded remote host (a
        // devcontainer's) is reached under the name the host knows itself by.
        headers.insert(
            "host",
            HeaderValue::from_str(&format!("127.0.0.1:{port}")).map_err(|e| failed(e.to_string()))?,
        );
        let config = WebSocketConfig::default()
            .read_buffer_size(super::SOCKET_READ_BUFFER)
            .max_message_size(Some(max_message_bytes + 1024))
            .max_frame_size(Some(max_message_bytes + 1024));
        let connected = tokio::time::timeout(
            Duration::from_secs(3),
            tokio_tungstenite::connect_async_with_config(request, Some(config), true),
        )
        .await
        .map_err(|_| failed("no answer within 3 s".into()))?;
        let (socket, _) = match connected {
            Ok(ok) => ok,
            Err(error) => return Err(failed(error.to_string())),
        };
        let (mut sink, mut stream) = socket.split();
        prove_the_host(&mut sink, &mut stream, port, token).await?;
        let (outbound, mut queue) = mpsc::unbounded_channel::<Outbound>();
        let link = Arc::new(PeerLink {
            outbound,
            // The host caps each session's calls; a peer's own may span many sessions.
            calls: InFlight::new(usize::MAX),
            subscriptions: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            lost: CancellationToken::new(),
            closed_cleanly: AtomicBool::new(false),
        });
        let writer_lost = link.lost.clone();
        tokio::spawn(async move {
            // Selected against the loss, so a writer blocked on a host that stopped
            // reading (its socket buffer full) does not outlive the link.
            let end = tokio::select! {
                () = writer_lost.cancelled() => WriterEnd::Drained,
                end = write_frames(&mut sink, &mut queue, |_| {}) => end,
            };
            match end {
                WriterEnd::SocketFailed => writer_lost.cancel(),
                WriterEnd::Drained | WriterEnd::Closed => {
                    let _ = tokio::time::timeout(liveness::PING_EVERY, sink.close()).await;
                }
            }
        });
        let reader = Arc::clone(&link);
        tokio::spawn(async move {
            let mut ping = liveness::ticker();
            let mut silence = Silence::new(tokio::time::Instant::now());
            loop {
                let message = tokio::select! {
                    () = reader.lost.cancelled() => break,
                    message = stream.next() => message,
                    now = ping.tick() => {
                        if silence.expired(now) {
                            tracing::warn!(
                                silence_ms = liveness::SILENCE_LIMIT.as_millis(),
                                "the bridge host stopped answering pings; treating it as gone"
                            );
                            break;
                        }
                        let _ = reader.outbound.send(Outbound::Ping);
                        continue;
                    }
                };
                silence.heard(tokio::time::Instant::now());
                match message {
                    Some(Ok(Message::Binary(bytes))) => reader.dispatch(bytes),
                    Some(Ok(Message::Close(frame))) => {
                        let clean = frame.is_some_and(|f| u16::from(f.code) == CLOSE_HOST_SHUTDOWN);
                        reader.closed_cleanly.store(clean, Ordering::SeqCst);
                        break;
                    }
                    Some(Ok(_)) => {}
                    Some(Err(_)) | None => break,
                }
            }
            reader.teardown();
        });
        Ok(link)
    }

    /// Fires when the link is gone (closed, or silent past the liveness limit).
    pub fn lost(&self) -> CancellationToken {
        self.lost.clone()
    }

    /// Whether the host said it was shutting down cleanly (no failover jitter needed).
    pub fn closed_cleanly(&self) -> bool {
        self.closed_cleanly.load(Ordering::SeqCst)
    }

    fn teardown(&self) {
        self.lost.cancel();
        self.calls.fail_all(&host_lost());
        lock(&self.subscriptions).clear();
    }

    fn dispatch(&self, frame: Bytes) {
        // The socket already caps the message size (see `connect`); the nesting limit is
        // the one every inbound frame gets.
        match HostReply::decode_bytes(frame, usize::MAX) {
            Ok(HostReply::Result { id, outcome, ran }) => {
                self.calls.resolve(id, outcome.map(|value| Reply { value, ran }));
            }
            Ok(HostReply::Progress {
                id,
                progress,
                total,
                message,
            }) => {
                self.calls.progress(
                    id,
                    Progress {
                        progress,
                        total,
                        message,
                    },
                );
            }
            Ok(HostReply::Event {
                id,
                session_id,
                event,
                data,
            }) => {
                let mut subscriptions = lock(&self.subscriptions);
                if let Some(sink) = subscriptions.get_mut(&id)
                    && !sink.offer(SessionEvent {
                        session_id,
                        event,
                        data: value::to_json(&data),
                    })
                {
                    subscriptions.remove(&id);
                    drop(subscriptions);
                    let _ = self
                        .outbound
                        .send(Outbound::Frame(Frame::Binary(encode(&PeerOut::Cancel { id }))));
                }
            }
            Ok(HostReply::Unknown(kind)) => tracing::debug!(%kind, "ignored an unknown host message"),
            Err(error) => tracing::warn!(%error, "rejected a malformed host message"),
        }
    }

    fn request(
        &self,
        progress: Option<mpsc::Sender<Progress>>,
        message: impl FnOnce(u64) -> Vec<u8>,
    ) -> Result<(u64, oneshot::Receiver<Result<Reply, ToolError>>), ToolError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let Ok(answer) = self.calls.register(id, progress) else {
            return Err(host_lost());
        };
        if self.outbound.send(Outbound::Frame(Frame::Binary(message(id)))).is_err() {
            self.calls.forget(id);
            return Err(host_lost());
        }
        Ok((id, answer))
    }

    pub async fn call(&self, call: Call, hooks: CallHooks) -> Result<Reply, ToolError> {
        let deadline = tokio::time::Instant::now() + call.timeout + DEADLINE_SLACK;
        let (id, reply) = self.request(hooks.progress.clone(), |id| {
            encode(&PeerOut::Call {
                id,
                // Resolution happens in the host, with its own command table.
                target: &call.target,
                action: &call.action,
                args: &call.args,
                timeout_ms: u64::try_from(call.timeout.as_millis()).unwrap_or(u64::MAX),
                plugin_timeout_ms: call
                    .plugin_timeout
                    .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
                default_context: call.default_context,
                operation_id: call.operation_id.as_deref(),
                quiet: call.quiet,
            })
        })?;
        tokio::select! {
            outcome = reply => outcome.unwrap_or_else(|_| Err(host_lost())),
            () = tokio::time::sleep_until(deadline) => {
                self.cancel(id);
                Err(ToolError::new(ErrorCode::Timeout, format!("The bridge host did not answer `{}` within {} ms. Retry; if it persists, restart your agent's studio-bridge.", call.action, call.timeout.as_millis())))
            }
            () = hooks.cancel.cancelled() => {
                self.cancel(id);
                Err(ToolError::new(ErrorCode::Cancelled, "The call was cancelled by the caller; Studio was asked to stop it."))
            }
        }
    }

    fn cancel(&self, id: u64) {
        self.calls.forget(id);
        let _ = self
            .outbound
            .send(Outbound::Frame(Frame::Binary(encode(&PeerOut::Cancel { id }))));
    }

    pub async fn sessions(&self, timeout: Duration) -> Result<SessionList, ToolError> {
        let (id, reply) = self.request(None, |id| encode(&PeerOut::Sessions { id }))?;
        let outcome = match tokio::time::timeout(timeout, reply).await {
            Ok(outcome) => outcome.unwrap_or_else(|_| Err(host_lost()))?,
            Err(_) => {
                self.cancel(id);
                return Err(ToolError::new(
                    ErrorCode::Timeout,
                    "The bridge host did not list its sessions in time; retry.",
                ));
            }
        };
        let json = outcome.value.decode().map(value::into_json).unwrap_or_default();
        serde_json::from_value::<SessionList>(json)
            .map_err(|e| ToolError::new(ErrorCode::PluginError, format!("The bridge host sent an unreadable session list ({e}); are both studio-bridge binaries the same version?")))
    }

    /// Streams `events` from the sessions `target` names, until the receiver is dropped
    /// or the link is lost.
    pub fn subscribe(&self, target: &Target, events: &[String]) -> Result<EventStream, ToolError> {
        let (sender, receiver) = EventSink::new();
        let (id, _ack) = self.request(None, |id| encode(&PeerOut::Subscribe { id, target, events }))?;
        lock(&self.subscriptions).insert(id, sender);
        Ok(receiver)
    }
}

/// The peer's side of the handshake (`peer_pairing.rs`): the host proves it holds `token`
/// before this peer sends its own proof or anything else.
async fn prove_the_host(
    sink: &mut futures_util::stream::SplitSink<
        tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
        Message,
    >,
    stream: &mut futures_util::stream::SplitStream<
        tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    >,
    port: u16,
    token: &str,
) -> Result<(), ConnectError> {
    use futures_util::SinkExt as _;
    let unproven = |why: String| ConnectError::Unproven { port, why };
    let send = |step: &Step| Message::Binary(step.encode().into());
    let (hello, nonce) = peer_pairing::peer_hello().map_err(|e| unproven(format!("no OS randomness: {e}")))?;
    sink.send(send(&hello))
        .await
        .map_err(|e| unproven(format!("it closed the connection: {e}")))?;
    let challenge = next_step(stream).await.map_err(unproven)?;
    let auth = match peer_pairing::peer_answer(token, &nonce, challenge) {
        Ok(auth) => auth,
        Err(Unproven::WrongProof) => {
            let _ = sink.close().await;
            return Err(unproven("its proof does not match the peer token".into()));
        }
        Err(Unproven::Refused(why)) => return Err(unproven(format!("it refused the handshake: {why}"))),
        Err(Unproven::NoChallenge(what)) => return Err(unproven(format!("it sent no challenge but {what}"))),
    };
    sink.send(send(&auth))
        .await
        .map_err(|e| unproven(format!("it closed the connection: {e}")))?;
    match next_step(stream).await.map_err(unproven)? {
        Step::Welcome => Ok(()),
        // A proven host that refuses us: our token is older than its own.
        Step::Reject { .. } => Err(ConnectError::Unauthorized),
        other => Err(unproven(format!("it answered {other:?} instead of welcome"))),
    }
}

/// The host's next handshake message, within [`peer_pairing::STEP_TIMEOUT`].
async fn next_step(
    stream: &mut futures_util::stream::SplitStream<
        tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    >,
) -> Result<Step, String> {
    loop {
        let message = tokio::time::timeout(peer_pairing::STEP_TIMEOUT, stream.next())
            .await
            .map_err(|_| "no handshake message within 5 s".to_owned())?;
        match message {
            Some(Ok(Message::Binary(bytes))) => return Step::decode(&bytes),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            Some(Ok(Message::Close(_))) | None => return Err("it closed the connection during the handshake".into()),
            Some(Ok(_)) => return Err("a text frame during the handshake".into()),
            Some(Err(error)) => return Err(format!("the connection failed: {error}")),
        }
    }
}

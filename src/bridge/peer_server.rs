//! The host's side of `/v1/client`: other studio-bridge processes (a second agent, a CLI
//! command) call, cancel, list sessions and subscribe through this host. Resolution
//! happens here, with this host's command table, so every process sees the same
//! sessions and the same rules.
//!
//! A peer is another process of the same user, but not one to trust with the host's
//! memory: it may open thousands of calls, or stop reading its socket. So each peer has
//! at most [`PEER_MAX_IN_FLIGHT`] calls and subscriptions open (past that, `busy`), and
//! what the host queues for it is counted in bytes ([`Outbox`]): events and progress are
//! dropped past [`PEER_LOSSY_BYTES`] (a subscription then carries one gap saying how many),
//! and a peer with more than [`peer_queue_limit`] unread is disconnected, as a peer that
//! stopped answering pings is.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::ws::{Message, WebSocket};
use futures_util::StreamExt;
use rmpv::Value as Msgpack;
use tokio::sync::{Notify, broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use super::budget::ReadBudget;
use super::events::{self, EventSink};
use super::liveness::{self, Silence};
use super::peer_pairing::{self, Step};
use super::registry::{self, Registry};
use super::turns::Turns;
use super::writer::{Outbound, write_until_done};
use super::{Call, CallHooks, PROGRESS_QUEUE, Progress, SessionEvent, Target};
use crate::protocol::messages::Frame;
use crate::protocol::peer::{HostOut, PeerRequest, encode, encode_result};
use crate::protocol::raw::RawValue;
use crate::protocol::{ErrorCode, ToolError, value};

/// Close code telling peers the host is shutting down cleanly: they take over at once
/// instead of waiting out the failover jitter.
pub const CLOSE_HOST_SHUTDOWN: u16 = 4002;

/// Calls and subscriptions one peer may have open at once; past this, `busy`. Above the
/// per-session cap (`link::MAX_IN_FLIGHT`), so that one agent may use several
/// Studios at full rate, but a bound on what one peer makes the host hold.
pub const PEER_MAX_IN_FLIGHT: usize = 1024;

/// Bytes queued for a peer past which its events and progress reports are dropped.
pub const PEER_LOSSY_BYTES: usize = 1024 * 1024;

/// Bytes queued for a peer past which it is disconnected (it is not reading): room for
/// two of the largest messages on top of the lossy allowance, so a peer that asked for
/// a few large results in a row is not cut off while it reads them.
pub fn peer_queue_limit(max_message_bytes: usize) -> usize {
    PEER_LOSSY_BYTES + 2 * (max_message_bytes + 1024)
}

type Inflight = Arc<Mutex<HashMap<u64, CancellationToken>>>;

/// What the host has queued for one peer's socket, counted in bytes until its writer has
/// handed them to the socket.
#[derive(Clone)]
struct Outbox {
    sender: mpsc::UnboundedSender<Outbound>,
    queued: Arc<AtomicUsize>,
    /// Woken when the writer brings `queued` back under [`PEER_LOSSY_BYTES`].
    room: Arc<Notify>,
    limit: usize,
    /// Cancelled when the peer has more than `limit` unread: the connection ends.
    overflow: CancellationToken,
}

impl Outbox {
    /// Queues a frame that must arrive (a result): past the limit, the peer is dropped.
    fn send(&self, frame: Vec<u8>) {
        let before = self.queued.fetch_add(frame.len(), Ordering::Relaxed);
        if before > 0 && before + frame.len() > self.limit {
            self.overflow.cancel();
        }
        let _ = self.sender.send(Outbound::Frame(Frame::Binary(frame)));
    }

    /// Whether there is room for a frame that may be lost (an event, progress).
    fn has_room(&self) -> bool {
        self.queued.load(Ordering::Relaxed) <= PEER_LOSSY_BYTES
    }

    /// Waits until there is room for an event; false if the peer is gone meanwhile.
    async fn room(&self) -> bool {
        loop {
            // Registered before the check, so a wake between the two is not lost.
            let woken = self.room.notified();
            if self.has_room() {
                return true;
            }
            tokio::select! {
                () = woken => {}
                () = self.sender.closed() => return false,
            }
        }
    }

    /// Queues a frame that may be lost (progress) if there is room for it.
    fn offer(&self, frame: impl FnOnce() -> Vec<u8>) {
        if self.has_room() {
            self.send(frame());
        }
    }

    fn control(&self, message: Outbound) {
        let _ = self.sender.send(message);
    }
}

pub async fn serve_peer(
    socket: WebSocket,
    registry: Arc<Registry>,
    shutdown: CancellationToken,
    token: Arc<str>,
    budget: ReadBudget,
) {
    let (mut sink, mut stream) = socket.split();
    if let Err(reason) = pair(&mut sink, &mut stream, &token).await {
        tracing::warn!(%reason, "refused a peer that did not prove it holds the peer token");
        return;
    }
    // A peer that proved itself is another studio-bridge of this user: no cap.
    budget.lift();
    let (sender, queue) = mpsc::unbounded_channel::<Outbound>();
    let queued = Arc::new(AtomicUsize::new(0));
    let outbound = Outbox {
        sender,
        queued: Arc::clone(&queued),
        room: Arc::new(Notify::new()),
        limit: peer_queue_limit(registry.max_message_bytes),
        overflow: CancellationToken::new(),
    };
    let room = Arc::clone(&outbound.room);
    let writer = tokio::spawn(write_until_done(sink, queue, move |written| {
        let before = queued.fetch_sub(written, Ordering::Relaxed);
        if before > PEER_LOSSY_BYTES && before - written <= PEER_LOSSY_BYTES {
            room.notify_waiters();
        }
    }));
    let inflight: Inflight = Arc::default();
    let mut ping = liveness::ticker();
    let mut silence = Silence::new(tokio::time::Instant::now());
    let mut silent = false;
    let mut turns = Turns::default();
    tracing::debug!("peer connected");
    loop {
        let message = tokio::select! {
            () = shutdown.cancelled() => {
                outbound.control(Outbound::Close(CLOSE_HOST_SHUTDOWN, "host shutting down"));
                break;
            }
            () = outbound.overflow.cancelled() => {
                tracing::warn!(
                    unread_bytes = outbound.queued.load(Ordering::Relaxed),
                    "a peer left too much unread; dropping it"
                );
                silent = true;
                break;
            }
            message = stream.next() => message,
            now = ping.tick() => {
                if silence.expired(now) {
                    tracing::warn!(
                        silence_ms = liveness::SILENCE_LIMIT.as_millis(),
                        "a peer stopped answering pings; dropping it"
                    );
                    silent = true;
                    break;
                }
                outbound.control(Outbound::Ping);
                continue;
            }
        };
        silence.heard(tokio::time::Instant::now());
        // A peer that always has the next frame ready takes turns with the other
        // connections (see `turns.rs`).
        turns.frame().await;
        let payload: &[u8] = match &message {
            Some(Ok(Message::Binary(bytes))) => bytes,
            Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Text(_))) => continue,
            Some(Ok(Message::Close(_)) | Err(_)) | None => break,
        };
        let request = PeerRequest::decode(payload, registry.max_message_bytes);
        match request {
            Ok(request) => handle(request, &registry, &outbound, &inflight),
            Err(error) => tracing::warn!(%error, "rejected a malformed peer frame"),
        }
    }
    // The peer is gone: nobody will read the answers, so stop what it started.
    let tokens: Vec<CancellationToken> = inflight
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .drain()
        .map(|(_, t)| t)
        .collect();
    for token in tokens {
        token.cancel();
    }
    drop(outbound);
    if silent {
        // A peer that stopped reading may never take the rest (a close frame included):
        // do not wait on its socket.
        writer.abort();
    } else {
        let _ = writer.await;
    }
    tracing::debug!("peer disconnected");
}

fn send(outbound: &Outbox, message: &HostOut<'_>) {
    outbound.send(encode(message));
}

fn send_result(outbound: &Outbox, message: &HostOut<'_>, result: Option<&RawValue>) {
    outbound.send(encode_result(message, result));
}

fn send_error(outbound: &Outbox, id: u64, error: &ToolError) {
    send(
        outbound,
        &HostOut::Result {
            id,
            ok: false,
            error: Some(error),
            session_id: None,
            context: None,
        },
    );
}

/// Registers a call or subscription of this peer, unless it has too many open.
fn open(inflight: &Inflight, id: u64, outbound: &Outbox) -> Option<CancellationToken> {
    let mut open = inflight.lock().unwrap_or_else(|p| p.into_inner());
    if open.len() >= PEER_MAX_IN_FLIGHT {
        drop(open);
        let error = ToolError::new(
            ErrorCode::Busy,
            format!(
                "This process already has {PEER_MAX_IN_FLIGHT} calls and subscriptions open through the bridge host, the most one process may. Wait for some to finish, then retry."
            ),
        );
        send_error(outbound, id, &error);
        return None;
    }
    let cancel = CancellationToken::new();
    open.insert(id, cancel.clone());
    Some(cancel)
}

fn handle(request: PeerRequest, registry: &Arc<Registry>, outbound: &Outbox, inflight: &Inflight) {
    match request {
        PeerRequest::Call {
            id,
            target,
            action,
            args,
            timeout_ms,
            plugin_timeout_ms,
            default_context,
            operation_id,
            quiet,
        } => {
            let Some(cancel) = open(inflight, id, outbound) else {
                return;
            };
            let call = Call {
                target,
                action,
                args,
                default_context,
                timeout: std::time::Duration::from_millis(timeout_ms),
                plugin_timeout: plugin_timeout_ms.map(std::time::Duration::from_millis),
                operation_id,
                quiet,
            };
            let (progress_tx, mut progress_rx) = mpsc::channel::<Progress>(PROGRESS_QUEUE);
            let progress_out = outbound.clone();
            tokio::spawn(async move {
                while let Some(p) = progress_rx.recv().await {
                    progress_out.offer(|| {
                        encode(&HostOut::Progress {
                            id,
                            progress: p.progress,
                            total: p.total,
                            message: p.message.as_deref(),
                        })
                    });
                }
            });
            let registry = Arc::clone(registry);
            let outbound = outbound.clone();
            let inflight = Arc::clone(inflight);
            tokio::spawn(async move {
                let outcome = registry
                    .call(
                        call,
                        CallHooks {
                            progress: Some(progress_tx),
                            cancel,
                        },
                    )
                    .await;
                match &outcome {
                    Ok(reply) => send_result(
                        &outbound,
                        &HostOut::Result {
                            id,
                            ok: true,
                            error: None,
                            session_id: reply.ran.as_ref().map(|r| r.session_id.as_str()),
                            context: reply.ran.as_ref().map(|r| r.context),
                        },
                        Some(&reply.value),
                    ),
                    Err(error) => send_error(&outbound, id, error),
                }
                inflight.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
            });
        }
        PeerRequest::Cancel { id } => {
            if let Some(token) = inflight.lock().unwrap_or_else(|p| p.into_inner()).remove(&id) {
                token.cancel();
            }
        }
        PeerRequest::Sessions { id } => {
            // Waits out this host's startup grace when no plugin has said hello yet, as
            // the host's own `sessions` does.
            let registry = Arc::clone(registry);
            let outbound = outbound.clone();
            tokio::spawn(async move {
                let deadline = tokio::time::Instant::now() + registry::STARTUP_GRACE;
                let list = registry.session_list_after_startup(deadline).await;
                let sessions = serde_json::to_value(list).unwrap_or_default();
                let result = RawValue::encode(&value::from_json(&sessions));
                send_result(
                    &outbound,
                    &HostOut::Result {
                        id,
                        ok: true,
                        error: None,
                        session_id: None,
                        context: None,
                    },
                    Some(&result),
                );
            });
        }
        PeerRequest::Subscribe { id, target, events } => {
            let Some(cancel) = open(inflight, id, outbound) else {
                return;
            };
            let registry = Arc::clone(registry);
            let outbound = outbound.clone();
            send_result(
                &outbound,
                &HostOut::Result {
                    id,
                    ok: true,
                    error: None,
                    session_id: None,
                    context: None,
                },
                Some(&RawValue::encode(&Msgpack::Map(Vec::new()))),
            );
            // The subscription's own bounded stream: while the peer's socket has no room,
            // this stream falls behind (and counts what it drops, reported as a gap once
            // it catches up), and the host's queue for the peer does not grow.
            let (mut sink, mut stream) = EventSink::new();
            tokio::spawn(forward_events(registry, target, events, cancel.clone(), move |event| {
                sink.offer(event)
            }));
            tokio::spawn(async move {
                loop {
                    let event = tokio::select! {
                        event = stream.recv() => event,
                        () = cancel.cancelled() => return,
                    };
                    let Some(event) = event else { return };
                    if !outbound.room().await {
                        return;
                    }
                    outbound.send(encode(&HostOut::Event {
                        id,
                        session_id: &event.session_id,
                        event: &event.event,
                        data: &event.data,
                    }));
                }
            });
        }
        PeerRequest::Unknown(kind) => tracing::debug!(%kind, "ignored an unknown peer message"),
    }
}

/// Feeds a subscriber (a peer's `subscribe`, or this host's own `logs --follow`) the
/// events it asked for until `deliver` says it is gone, it is cancelled, or the host
/// stops. One forwarder for both, so they cannot diverge: a subscriber that falls behind
/// a burst skips what it missed, is told so by a gap event, and carries on; it never
/// ends silently.
pub(super) async fn forward_events(
    registry: Arc<Registry>,
    target: Target,
    events: Vec<String>,
    cancel: CancellationToken,
    mut deliver: impl FnMut(SessionEvent) -> bool,
) {
    let mut feed = registry.subscribe_events();
    loop {
        let event = tokio::select! {
            () = cancel.cancelled() => return,
            event = feed.recv() => event,
        };
        match event {
            Ok(event) => {
                // A gap is part of every stream: it says what the stream lost.
                let wanted = events.is_empty() || events.contains(&event.event) || event.event == events::GAP_EVENT;
                if wanted && matches_target(&registry, &target, &event.session_id) && !deliver(event) {
                    return;
                }
            }
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                tracing::warn!(
                    missed,
                    "a subscriber fell behind a burst of events; {missed} were skipped"
                );
                if !deliver(events::fell_behind(missed)) {
                    return;
                }
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Whether an event from `session_id` is one the subscriber asked for: its session, or
/// its instance's sessions, narrowed to its context when it named one.
fn matches_target(registry: &Registry, target: &Target, session_id: &str) -> bool {
    if let Some(wanted) = &target.session_id {
        return wanted == session_id;
    }
    if target.instance_id.is_none() && target.context.is_none() {
        return true;
    }
    registry.sessions().iter().any(|s| {
        s.session_id == session_id
            && target.instance_id.as_ref().is_none_or(|i| &s.instance_id == i)
            && target.context.is_none_or(|c| s.context == c)
    })
}

/// The host's side of the peer handshake (`peer_pairing.rs`): proves this host to the
/// peer, then checks the peer's proof; `Err` once the peer was refused (and the socket
/// closed with [`peer_pairing::CLOSE_UNPROVEN`]). Nothing else is read before.
async fn pair(
    sink: &mut futures_util::stream::SplitSink<WebSocket, Message>,
    stream: &mut futures_util::stream::SplitStream<WebSocket>,
    token: &str,
) -> Result<(), String> {
    use futures_util::SinkExt as _;
    let send = |step: &Step| Message::Binary(step.encode().into());
    // Anything but a hello first (a call included) is refused as one.
    let hello = match next_step(stream).await {
        Err(reason) if reason.starts_with(NOT_A_STEP) => Step::Reject {
            code: String::new(),
            message: reason,
        },
        other => other?,
    };
    let (challenge, nonce, host_nonce) = match peer_pairing::host_challenge(token, hello) {
        Ok(found) => found,
        Err(refusal) => {
            refuse(sink, &refusal).await;
            return Err(format!("{refusal:?}"));
        }
    };
    sink.send(send(&challenge))
        .await
        .map_err(|e| format!("the peer went away: {e}"))?;
    let auth = next_step(stream).await?;
    if !peer_pairing::host_admits(token, &nonce, &host_nonce, &auth) {
        let refusal = peer_pairing::reject(
            "unauthorized",
            "the peer's proof does not match this host's peer token: re-read the token file and retry",
        );
        refuse(sink, &refusal).await;
        return Err("a wrong proof".into());
    }
    sink.send(send(&Step::Welcome))
        .await
        .map_err(|e| format!("the peer went away: {e}"))
}

/// Sends `refusal`, then closes with [`peer_pairing::CLOSE_UNPROVEN`].
async fn refuse(sink: &mut futures_util::stream::SplitSink<WebSocket, Message>, refusal: &Step) {
    use futures_util::SinkExt as _;
    let _ = sink.send(Message::Binary(refusal.encode().into())).await;
    let close = axum::extract::ws::CloseFrame {
        code: peer_pairing::CLOSE_UNPROVEN,
        reason: "unproven".into(),
    };
    let _ = sink.send(Message::Close(Some(close))).await;
}

/// How [`next_step`] says a frame came that is no handshake message.
const NOT_A_STEP: &str = "not a handshake message: ";

/// The peer's next handshake message, within [`peer_pairing::STEP_TIMEOUT`].
async fn next_step(stream: &mut futures_util::stream::SplitStream<WebSocket>) -> Result<Step, String> {
    loop {
        let message = tokio::time::timeout(peer_pairing::STEP_TIMEOUT, stream.next())
            .await
            .map_err(|_| "no handshake message within 5 s".to_owned())?;
        match message {
            Some(Ok(Message::Binary(bytes))) => return Step::decode(&bytes).map_err(|e| format!("{NOT_A_STEP}{e}")),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            Some(Ok(Message::Text(_))) => return Err(format!("{NOT_A_STEP}a text frame")),
            Some(Ok(_) | Err(_)) | None => return Err("the peer went away".into()),
        }
    }
}

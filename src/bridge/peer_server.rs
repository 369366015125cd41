//! The host's side of `/v1/client`: other studio-bridge processes (a second agent, a CLI
//! command) call, cancel, list sessions and subscribe through this host. Resolution
//! happens here, with this host's command table, so every process sees the same
//! sessions and the same rules.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::ws::{Message, WebSocket};
use futures_util::StreamExt;
use rmpv::Value as Msgpack;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use super::connection::write_loop;
use super::liveness::{self, Silence};
use super::registry::{self, Outbound, Registry};
use super::{Call, CallHooks, Progress, SessionEvent, Target};
use crate::protocol::messages::Frame;
use crate::protocol::peer::{HostOut, PeerRequest, encode, encode_result};
use crate::protocol::raw::RawValue;
use crate::protocol::value;

/// Close code telling peers the host is shutting down cleanly: they take over at once
/// instead of waiting out the failover jitter.
pub const CLOSE_HOST_SHUTDOWN: u16 = 4002;

type Inflight = Arc<Mutex<HashMap<u64, CancellationToken>>>;

pub async fn serve_peer(socket: WebSocket, registry: Arc<Registry>, shutdown: CancellationToken) {
    let (sink, mut stream) = socket.split();
    let (outbound, queue) = mpsc::unbounded_channel::<Outbound>();
    let writer = tokio::spawn(write_loop(sink, queue));
    let inflight: Inflight = Arc::default();
    let mut ping = liveness::ticker();
    let mut silence = Silence::new(tokio::time::Instant::now());
    let mut silent = false;
    tracing::debug!("peer connected");
    loop {
        let message = tokio::select! {
            () = shutdown.cancelled() => {
                let _ = outbound.send(Outbound::Close(CLOSE_HOST_SHUTDOWN, "host shutting down"));
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
                let _ = outbound.send(Outbound::Ping);
                continue;
            }
        };
        silence.heard(tokio::time::Instant::now());
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
        // A peer that stopped reading may never take the rest: do not wait on its socket.
        writer.abort();
    } else {
        let _ = writer.await;
    }
    tracing::debug!("peer disconnected");
}

fn send(outbound: &mpsc::UnboundedSender<Outbound>, message: &HostOut<'_>) {
    let _ = outbound.send(Outbound::Frame(Frame::Binary(encode(message))));
}

fn send_result(outbound: &mpsc::UnboundedSender<Outbound>, message: &HostOut<'_>, result: Option<&RawValue>) {
    let _ = outbound.send(Outbound::Frame(Frame::Binary(encode_result(message, result))));
}

fn handle(
    request: PeerRequest,
    registry: &Arc<Registry>,
    outbound: &mpsc::UnboundedSender<Outbound>,
    inflight: &Inflight,
) {
    match request {
        PeerRequest::Call {
            id,
            target,
            action,
            args,
            timeout_ms,
            plugin_timeout_ms,
            default_context,
        } => {
            let cancel = CancellationToken::new();
            inflight
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id, cancel.clone());
            let call = Call {
                target,
                action,
                args,
                default_context,
                timeout: std::time::Duration::from_millis(timeout_ms),
                plugin_timeout: plugin_timeout_ms.map(std::time::Duration::from_millis),
            };
            let (progress_tx, mut progress_rx) = mpsc::unbounded_channel::<Progress>();
            let progress_out = outbound.clone();
            tokio::spawn(async move {
                while let Some(p) = progress_rx.recv().await {
                    send(
                        &progress_out,
                        &HostOut::Progress {
                            id,
                            progress: p.progress,
                            total: p.total,
                            message: p.message.as_deref(),
                        },
                    );
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
                    Err(error) => send(
                        &outbound,
                        &HostOut::Result {
                            id,
                            ok: false,
                            error: Some(error),
                            session_id: None,
                            context: None,
                        },
                    ),
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
                let sessions = serde_json::json!({ "sessions": registry.sessions_after_startup(deadline).await });
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
            let cancel = CancellationToken::new();
            inflight
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id, cancel.clone());
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
            tokio::spawn(forward_events(registry, target, events, cancel, move |event| {
                send(
                    &outbound,
                    &HostOut::Event {
                        id,
                        session_id: &event.session_id,
                        event: &event.event,
                        data: &event.data,
                    },
                );
                !outbound.is_closed()
            }));
        }
        PeerRequest::Unknown(kind) => tracing::debug!(%kind, "ignored an unknown peer message"),
    }
}

/// Feeds a subscriber (a peer's `subscribe`, or this host's own `logs --follow`) the
/// events it asked for until `deliver` says it is gone, it is cancelled, or the host
/// stops. One forwarder for both, so they cannot diverge: a subscriber that falls behind
/// a burst skips what it missed (with a warning) and carries on; it never ends silently.
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
                let wanted = events.is_empty() || events.contains(&event.event);
                if wanted && matches_target(&registry, &target, &event.session_id) && !deliver(event) {
                    return;
                }
            }
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                tracing::warn!(
                    missed,
                    "a subscriber fell behind a burst of events; {missed} were skipped"
                );
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

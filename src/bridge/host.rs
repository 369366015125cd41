//! The bridge host: an axum server on loopback with `/v1/health`, the plugin WebSocket
//! `/v1/plugin` and the peer WebSocket `/v1/client`. Every request passes the
//! Host/Origin guard (see `origin.rs`) before any handler or upgrade runs; `/v1/client`
//! also needs the peer token (see `token.rs`).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{ConnectInfo, Request, State, WebSocketUpgrade};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::budget::{CappedListener, ReadBudget};
use super::pairing::Pairing;
use super::registry::Registry;
use super::unidentified::Pending;
use super::{connection, origin, peer_server, secret_file, token};
use crate::protocol::{PROTOCOL_VERSION, SERVER_VERSION};

/// Settings of a bridge host.
#[derive(Debug, Clone)]
pub struct HostConfig {
    pub port: u16,
    /// Largest decoded msgpack message accepted from a plugin or peer.
    pub max_message_bytes: usize,
    /// Whether a plugin's `hello` must carry the pairing secret.
    pub pairing: Pairing,
}

/// A running host.
pub struct Host {
    pub registry: Arc<Registry>,
    pub addr: SocketAddr,
    token_path: PathBuf,
    token: Arc<str>,
    /// Stops accepting connections.
    stop_accepting: CancellationToken,
    /// Closes the open plugin and peer connections.
    shutdown: CancellationToken,
    connections: TaskTracker,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("port {port} on 127.0.0.1 is already in use")]
    InUse { port: u16 },
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Other { port: u16, source: std::io::Error },
}

#[derive(Clone)]
struct AppState {
    registry: Arc<Registry>,
    token: Arc<str>,
    shutdown: CancellationToken,
    connections: TaskTracker,
    pairing: Arc<Pairing>,
    /// Plugin connections that have not said hello yet.
    unidentified: Arc<Pending>,
    /// Turns for pairing handshakes in progress ([`budget::MAX_HANDSHAKES`]).
    handshakes: Arc<Semaphore>,
}

impl Host {
    /// Binds 127.0.0.1:`port`, writes a fresh peer token, and starts serving. The host
    /// counts as started (for the startup grace) from here.
    pub async fn start(config: HostConfig) -> Result<Host, BindError> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, config.port))
            .await
            .map_err(|source| {
                if source.kind() == std::io::ErrorKind::AddrInUse {
                    BindError::InUse { port: config.port }
                } else {
                    BindError::Other {
                        port: config.port,
                        source,
                    }
                }
            })?;
        let addr = listener.local_addr().map_err(|source| BindError::Other {
            port: config.port,
            source,
        })?;
        // The token is on disk before anything is served, so a peer that finds this host
        // can always authenticate.
        let token_path = token::token_path(addr.port());
        let token = secret_file::generate()
            .and_then(|t| secret_file::write(&token_path, &t).map(|()| t))
            .map_err(|source| BindError::Other {
                port: addr.port(),
                source,
            })?;
        let registry = Registry::new(addr.port(), config.max_message_bytes);
        let token: Arc<str> = token.into();
        let shutdown = CancellationToken::new();
        let stop_accepting = CancellationToken::new();
        let connections = TaskTracker::new();
        let state = AppState {
            registry: Arc::clone(&registry),
            token: Arc::clone(&token),
            shutdown: shutdown.clone(),
            connections: connections.clone(),
            pairing: Arc::new(config.pairing),
            unidentified: Pending::new(),
            handshakes: Arc::new(Semaphore::new(super::budget::MAX_HANDSHAKES)),
        };
        let app = router(state);
        let stop = stop_accepting.clone();
        let task = tokio::spawn(async move {
            let served = axum::serve(
                CappedListener(listener),
                app.into_make_service_with_connect_info::<ReadBudget>(),
            )
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
            if let Err(error) = served {
                tracing::error!(%error, "bridge host stopped");
            }
        });
        tracing::info!(%addr, "bridge host listening");
        Ok(Host {
            registry,
            addr,
            token_path,
            token,
            stop_accepting,
            shutdown,
            connections,
            task,
        })
    }

    /// Stops cleanly: the listener closes first (so the port is free), then peers are
    /// told (close 4002) so that one takes over at once without jitter, and the token
    /// file is removed unless a successor has already replaced it.
    pub async fn shutdown(self) {
        self.stop_accepting.cancel();
        let _ = tokio::time::timeout(Duration::from_millis(500), self.task).await;
        self.shutdown.cancel();
        self.connections.close();
        let _ = tokio::time::timeout(Duration::from_millis(500), self.connections.wait()).await;
        if secret_file::read(&self.token_path).as_deref() == Some(&*self.token) {
            let _ = std::fs::remove_file(&self.token_path);
        }
    }
}

fn router(state: AppState) -> Router {
    Router::new()
        .route("/v1/health", get(health))
        .route("/v1/plugin", get(plugin_socket))
        .route("/v1/client", get(peer_socket))
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

/// Refuses any request whose Host or Origin is not loopback, before routing or upgrade.
async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match origin::check(request.headers(), state.registry.port) {
        Ok(()) => next.run(request).await,
        Err(reason) => {
            tracing::warn!(%reason, path = %request.uri().path(), "refused a request");
            (StatusCode::FORBIDDEN, reason).into_response()
        }
    }
}

async fn health(State(state): State<AppState>) -> impl IntoResponse {
    axum::Json(serde_json::json!({
        "service": "studio-bridge",
        "version": SERVER_VERSION,
        "protocol": PROTOCOL_VERSION,
        "sessions": state.registry.session_count(),
        // Which process to stop or restart (`doctor` names it); no secret, and any local
        // user can learn it from the process table anyway.
        "pid": std::process::id(),
        // Whether this host refuses plugins without the pairing secret (`doctor` says
        // so). Anyone who can reach the port can learn it by connecting anyway.
        "pairing": if state.pairing.allows_unpaired() { "off" } else { "required" },
    }))
}

/// A base64 text frame may be 4/3 of the decoded limit; the decoded size is checked
/// again per frame.
fn wire_limit(registry: &Registry) -> usize {
    registry.max_message_bytes / 3 * 4 + 16
}

async fn plugin_socket(
    State(state): State<AppState>,
    ConnectInfo(budget): ConnectInfo<ReadBudget>,
    upgrade: WebSocketUpgrade,
) -> Response {
    // Never refused for want of a slot: with all taken, the oldest silent connection
    // makes room (`budget.rs`), so silent upgrades cannot keep a plugin out.
    let slot = state.unidentified.take(&budget);
    let evicted = slot.evicted();
    let limit = wire_limit(&state.registry);
    let tracker = state.connections.clone();
    upgrade
        .read_buffer_size(super::SOCKET_READ_BUFFER)
        .max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| {
            let identified = move || {
                budget.lift();
                drop(slot);
            };
            let serve = connection::serve_plugin(
                socket,
                state.registry,
                state.pairing,
                state.handshakes,
                state.shutdown,
                identified,
            );
            tracker.track_future(async move {
                tokio::select! {
                    biased;
                    // Still waiting for its hello when a newer connection needed the slot:
                    // closed (the socket is dropped with the connection).
                    () = evicted.cancelled() => {
                        tracing::info!("closed a plugin connection that had not said hello, for a newer one");
                    }
                    () = serve => {}
                }
            })
        })
}

async fn peer_socket(
    State(state): State<AppState>,
    ConnectInfo(budget): ConnectInfo<ReadBudget>,
    upgrade: WebSocketUpgrade,
) -> Response {
    // No bearer here: the peer proves it holds the token in the handshake that opens the
    // socket (`peer_pairing.rs`), after this host proved it first; its read budget is
    // lifted once it has.
    let limit = wire_limit(&state.registry);
    let tracker = state.connections.clone();
    let token = Arc::clone(&state.token);
    upgrade
        .read_buffer_size(super::SOCKET_READ_BUFFER)
        .max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| {
            tracker.track_future(peer_server::serve_peer(
                socket,
                state.registry,
                state.shutdown,
                token,
                budget,
            ))
        })
}

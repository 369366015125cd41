//! The bridge host: an axum server on loopback with `/v1/health` and the plugin
//! WebSocket `/v1/plugin`. Every request passes the Host/Origin guard (see `origin.rs`)
//! before any handler or upgrade runs.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State, WebSocketUpgrade};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::registry::Registry;
use super::{Bridge, connection, origin};
use crate::protocol::{PROTOCOL_VERSION, SERVER_VERSION};

/// Settings of a bridge host.
#[derive(Debug, Clone)]
pub struct HostConfig {
    pub port: u16,
    /// Largest decoded msgpack message accepted from a plugin.
    pub max_message_bytes: usize,
}

/// A running host: the bridge it serves and the token that stops it.
pub struct Host {
    pub bridge: Bridge,
    pub registry: Arc<Registry>,
    pub addr: SocketAddr,
    pub shutdown: CancellationToken,
    pub task: tokio::task::JoinHandle<()>,
}

#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error(
        "port {port} on 127.0.0.1 is already in use. Another studio-bridge (or another program) holds it; choose another port with --port or STUDIO_BRIDGE_PORT (the Studio plugin must use the same port)"
    )]
    InUse { port: u16 },
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Other { port: u16, source: std::io::Error },
}

impl Host {
    /// Binds 127.0.0.1:`port` and starts serving. The host counts as started (for the
    /// startup grace) from here.
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
        let registry = Registry::new(addr.port(), config.max_message_bytes);
        let shutdown = CancellationToken::new();
        let app = router(Arc::clone(&registry));
        let stop = shutdown.clone();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
            if let Err(error) = served {
                tracing::error!(%error, "bridge host stopped");
            }
        });
        tracing::info!(%addr, "bridge host listening");
        Ok(Host {
            bridge: Bridge::hosting(Arc::clone(&registry)),
            registry,
            addr,
            shutdown,
            task,
        })
    }
}

fn router(registry: Arc<Registry>) -> Router {
    Router::new()
        .route("/v1/health", get(health))
        .route("/v1/plugin", get(plugin_socket))
        .layer(middleware::from_fn_with_state(Arc::clone(&registry), guard))
        .with_state(registry)
}

/// Refuses any request whose Host or Origin is not loopback, before routing or upgrade.
async fn guard(State(registry): State<Arc<Registry>>, request: Request, next: Next) -> Response {
    match origin::check(request.headers(), registry.port) {
        Ok(()) => next.run(request).await,
        Err(reason) => {
            tracing::warn!(%reason, path = %request.uri().path(), "refused a request");
            (StatusCode::FORBIDDEN, reason).into_response()
        }
    }
}

async fn health(State(registry): State<Arc<Registry>>) -> impl IntoResponse {
    axum::Json(serde_json::json!({
        "service": "studio-bridge",
        "version": SERVER_VERSION,
        "protocol": PROTOCOL_VERSION,
        "sessions": registry.session_count(),
    }))
}

async fn plugin_socket(State(registry): State<Arc<Registry>>, upgrade: WebSocketUpgrade) -> Response {
    // A base64 text frame may be 4/3 of the decoded limit; the decoded size is checked
    // again per frame.
    let wire_limit = registry.max_message_bytes / 3 * 4 + 16;
    upgrade
        .max_message_size(wire_limit)
        .max_frame_size(wire_limit)
        .on_upgrade(move |socket| connection::serve_plugin(socket, registry))
}

//! MCP over Streamable HTTP: `studio-bridge mcp --http 127.0.0.1:PORT` serves the same
//! tools and resources at `/mcp`, for clients and setups that prefer HTTP to stdio.
//!
//! rmcp's server transport (`StreamableHttpService`) on axum, the server the bridge host
//! already runs. Reaching it is reaching Studio, so it is guarded as the bridge is: it
//! binds loopback only; every request's `Host`/`Origin` are checked as on the bridge
//! (`bridge::origin`: a web page or a DNS-rebound name is refused with 403); and every
//! request must carry `Authorization: Bearer <token>` (401 without it), the bridge's peer
//! token from the per-user token file (or `--remote`'s token), which only this user can
//! read. The token file is read on each request, so a token a new host wrote after a
//! failover is the one asked for. The policy is the process's, as on stdio; each HTTP
//! session is its own MCP connection (its own default target and subscriptions), several
//! at once.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::Shared;
use crate::bridge::{Bridge, origin, token};
use crate::commands::Limits;
use crate::policy::Policy;

/// Where the bearer token comes from.
#[derive(Debug, Clone)]
pub enum TokenSource {
    /// The bridge's per-user token file, read on each request.
    File(PathBuf),
    /// A token given to this process (`--remote`'s).
    Fixed(String),
}

impl TokenSource {
    fn current(&self) -> Option<String> {
        match self {
            TokenSource::File(path) => std::fs::read_to_string(path).ok().map(|t| t.trim().to_owned()),
            TokenSource::Fixed(token) => Some(token.clone()),
        }
    }

    /// How the startup line names it.
    fn describe(&self) -> String {
        match self {
            TokenSource::File(path) => path.display().to_string(),
            TokenSource::Fixed(_) => "--token-file / STUDIO_BRIDGE_TOKEN".to_owned(),
        }
    }
}

/// Serves MCP over HTTP at `addr` (loopback only) until `stop` is cancelled.
pub async fn serve_http(
    bridge: Bridge,
    limits: Limits,
    policy: Policy,
    files: Arc<crate::sourcemap::Watched>,
    addr: SocketAddr,
    token: TokenSource,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    if !addr.ip().is_loopback() {
        anyhow::bail!(
            "--http {addr}: MCP over HTTP binds loopback only (127.0.0.1:PORT or [::1]:PORT); anything else would let other machines drive Studio"
        );
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("--http {addr}: cannot listen there ({e}); pick another port"))?;
    let bound = listener.local_addr()?;
    let shared = Shared::new(bridge, limits, policy, None, files);
    let mut config = StreamableHttpServerConfig::default();
    config.cancellation_token = stop.child_token();
    let service = StreamableHttpService::new(
        move || Ok(shared.connection()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let guard = Guard {
        port: bound.port(),
        token: token.clone(),
    };
    let router = axum::Router::new()
        .route_service("/mcp", service)
        .layer(axum::middleware::from_fn(move |request: Request, next: Next| {
            let guard = guard.clone();
            async move { guard.check(request, next).await }
        }));
    eprintln!(
        "MCP over HTTP at http://{bound}/mcp (bearer token in {})",
        token.describe()
    );
    // Without TCP_NODELAY every answer stalls ~40 ms: hyper writes an SSE response's head,
    // events and end as separate small writes, and Nagle holds each behind the client's
    // delayed ACK (B13 measured it).
    let listener = listener.tap_io(|tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "TCP_NODELAY on an MCP HTTP connection");
        }
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await?;
    Ok(())
}

/// The checks every request passes before rmcp sees it.
#[derive(Clone)]
struct Guard {
    port: u16,
    token: TokenSource,
}

impl Guard {
    async fn check(&self, request: Request, next: Next) -> Response {
        if let Err(reason) = origin::check(request.headers(), self.port) {
            tracing::warn!(%reason, "MCP over HTTP: request refused");
            return (StatusCode::FORBIDDEN, format!("studio-bridge: {reason}")).into_response();
        }
        let presented = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let authorized = self
            .token
            .current()
            .is_some_and(|expected| token::authorized(presented, &expected));
        if !authorized {
            let mut response = (
                StatusCode::UNAUTHORIZED,
                format!(
                    "studio-bridge: send Authorization: Bearer <token>, the token in {}",
                    self.token.describe()
                ),
            )
                .into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        }
        next.run(request).await
    }
}

//! MCP over Streamable HTTP: `studio-bridge mcp --http 127.0.0.1:PORT` serves the same
//! tools and resources at `/mcp`, for clients and setups that prefer HTTP to stdio.
//!
//! rmcp's server transport (`StreamableHttpService`) on axum, the server the bridge host
//! already runs. Reaching it is reaching Studio, so it is guarded as the bridge is: it
//! binds loopback only; every request's `Host`/`Origin` are checked as on the bridge
//! (`bridge::origin`: a web page or a DNS-rebound name is refused with 403); and every
//! request must carry `Authorization: Bearer <token>` (401 without it): HTTP's own token,
//! `mcp-http.token` beside the bridge's peer token in the per-user directory, which only
//! this user can read. It is made once and kept across restarts, so a client configured
//! with it keeps working after any host restart or failover (the peer token, which each
//! new host writes anew, is never accepted here, nor this one on `/v1/client`);
//! `mcp --http --rotate-token` makes a new one. The policy is the process's, as on stdio; each HTTP
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
use crate::bridge::{Bridge, origin, secret_file, token};
use crate::commands::Limits;
use crate::policy::Policy;

/// The largest request body taken: what stdio takes in one line, so that HTTP takes
/// whatever stdio takes (rmcp's own default is 4 MiB).
pub const MAX_BODY_BYTES: usize = crate::mcp::reader::MAX_LINE_BYTES;

/// How long an HTTP session lives without a request (rmcp's default is 5 minutes, after
/// which a client that came back from lunch found its session gone).
pub const SESSION_IDLE: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// The name of HTTP's own bearer token file, in the directory of the peer tokens.
pub const HTTP_TOKEN_FILE: &str = "mcp-http.token";

/// Where HTTP's bearer token lives: beside the peer token of `port`, in the per-user
/// directory (`bridge::token::token_path`).
pub fn http_token_path(port: u16) -> PathBuf {
    let peer = token::token_path(port);
    peer.with_file_name(HTTP_TOKEN_FILE)
}

/// HTTP's bearer token and the file it is kept in.
#[derive(Debug, Clone)]
pub struct HttpToken {
    pub value: String,
    pub path: PathBuf,
}

/// HTTP's bearer token: the one in `path`, made there first when there is none or when
/// `rotate` asks for a new one. Kept across restarts, so that a client configured once
/// keeps working.
pub fn http_token(path: PathBuf, rotate: bool) -> anyhow::Result<HttpToken> {
    let fresh = secret_file::generate()?;
    let written = if rotate {
        secret_file::write(&path, &fresh).map(|()| fresh)
    } else {
        secret_file::write_unless_present(&path, &fresh)
    };
    match written {
        Ok(value) => Ok(HttpToken { value, path }),
        Err(e) => Err(anyhow::anyhow!("cannot keep the HTTP token in {}: {e}", path.display())),
    }
}

/// Serves MCP over HTTP at `addr` (loopback only) until `stop` is cancelled.
pub async fn serve_http(
    bridge: Bridge,
    limits: Limits,
    policy: Policy,
    files: Arc<crate::sourcemap::Watched>,
    addr: SocketAddr,
    token: HttpToken,
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
    config.max_request_body_bytes = MAX_BODY_BYTES;
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(SESSION_IDLE);
    let service = StreamableHttpService::new(move || Ok(shared.connection()), Arc::new(sessions), config);
    let guard = Guard {
        port: bound.port(),
        token: Arc::new(token.value),
        token_path: Arc::new(token.path.clone()),
    };
    let router = axum::Router::new()
        .route_service("/mcp", service)
        .layer(axum::middleware::from_fn(move |request: Request, next: Next| {
            let guard = guard.clone();
            async move { guard.check(request, next).await }
        }));
    eprintln!(
        "MCP over HTTP at http://{bound}/mcp (bearer token in {}, kept across restarts)",
        token.path.display()
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
    token: Arc<String>,
    token_path: Arc<PathBuf>,
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
        let authorized = token::authorized(presented, &self.token);
        if !authorized {
            let mut response = (
                StatusCode::UNAUTHORIZED,
                format!(
                    "studio-bridge: send Authorization: Bearer <token>, the token in {}",
                    self.token_path.display()
                ),
            )
                .into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        }
        let declared = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        if declared.is_some_and(|length| length > MAX_BODY_BYTES) {
            return too_large();
        }
        in_json_rpc_terms(next.run(request).await).await
    }
}

/// rmcp's plain-text refusals as JSON-RPC errors that say what to do: a body over the
/// limit (413, found while reading a body of no declared length) and an unknown or
/// expired session (404, which tells a client to initialize again, so it stays 404).
async fn in_json_rpc_terms(response: Response) -> Response {
    match response.status() {
        StatusCode::PAYLOAD_TOO_LARGE => too_large(),
        StatusCode::NOT_FOUND => {
            let (parts, body) = response.into_parts();
            let text = match http_body_util::BodyExt::collect(body).await {
                Ok(collected) => collected.to_bytes(),
                Err(_) => return StatusCode::NOT_FOUND.into_response(),
            };
            if !text.windows(17).any(|w| w == b"Session not found") {
                return Response::from_parts(parts, axum::body::Body::from(text));
            }
            json_rpc_error(
                StatusCode::NOT_FOUND,
                "This MCP session is not known here: it expired after 24 hours without a request, or the server restarted. Initialize again (a new session, without the mcp-session-id header).",
            )
        }
        _ => response,
    }
}

fn too_large() -> Response {
    json_rpc_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!(
            "Request too large: the body is longer than the {} MiB ({MAX_BODY_BYTES} bytes) this server reads, so it was not read. Send less in one request (e.g. split a large script or source over several calls).",
            MAX_BODY_BYTES >> 20
        ),
    )
}

/// A JSON-RPC error with no request id (the request was not read), as MCP clients parse.
fn json_rpc_error(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32600, "message": message},
    });
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

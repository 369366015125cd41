//! Open Cloud (issue #45): Roblox's HTTP APIs, for what the open Studio cannot do: run Luau
//! on Roblox's servers (tests in CI), publish a place, read and fix data stores, tell live
//! servers about a change. One client with one key, a deadline on every request, and one
//! mapping from HTTP's answers to our error codes, so that every tool says what to do about
//! a 401, a 403, a 404 or a quota in the same words, and keeps the API's own message.
//!
//! The key goes only into the `x-api-key` header (marked sensitive), only over HTTPS: the
//! base URL is `https://apis.roblox.com`, or `STUDIO_BRIDGE_OPEN_CLOUD_URL` (for tests and
//! proxies), where `http://` is accepted for a loopback host only. Redirects are not
//! followed, since a custom header would follow one to any host. The key never reaches a
//! log line, a result or an error ([`key::ApiKey`]'s `Debug` names only its source).
//!
//! This module sits beside the bridge, below the commands: it knows HTTP and Open Cloud's
//! resources, not tools.

pub mod datastore;
pub mod key;
pub mod luau;
pub mod places;
pub mod universe;

use std::time::Duration;

use bytes::Bytes;
use reqwest::Method;
use reqwest::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use serde_json::Value as Json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::protocol::{ErrorCode, ToolError};

pub use key::ApiKey;

/// Open Cloud's own address.
pub const DEFAULT_BASE: &str = "https://apis.roblox.com";
/// Another address, for tests and proxies (`http://` only on loopback).
pub const BASE_ENV: &str = "STUDIO_BRIDGE_OPEN_CLOUD_URL";
/// A 5xx is tried again this many times, after 0.5 s, then 1 s.
const SERVER_ERROR_RETRIES: u32 = 2;
/// How long a 429 without `Retry-After` waits before trying again.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(2);
/// How much of an answer's text an error quotes when it is not Open Cloud's JSON.
const QUOTED_TEXT: usize = 300;

/// The client: where Open Cloud is, and the key.
#[derive(Debug, Clone)]
pub struct Cloud {
    http: reqwest::Client,
    base: String,
    /// The base is a loopback `http://` stand-in (tests, proxies): its upload URIs may be too.
    loopback_http: bool,
    key: ApiKey,
}

/// What the body of a request is.
#[derive(Debug, Clone)]
pub enum Body {
    Json(Json),
    Bytes { content_type: &'static str, bytes: Bytes },
}

/// One request: the path below the base URL, and what an error about it should say.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: Method,
    /// From the base URL's root, starting with `/`; its segments already escaped.
    pub path: String,
    pub query: Vec<(&'static str, String)>,
    pub body: Option<Body>,
    /// The scope the operation needs (its `x-roblox-scopes` in the OpenAPI), for a 403.
    pub scope: &'static str,
    /// What a 404 says was not found: "universe 1's place 2", "entry \"k\" in store \"s\"".
    pub what: String,
}

impl Request {
    pub fn new(method: Method, path: String, scope: &'static str, what: String) -> Request {
        Request {
            method,
            path,
            query: Vec::new(),
            body: None,
            scope,
            what,
        }
    }

    pub fn query(mut self, name: &'static str, value: impl Into<String>) -> Request {
        self.query.push((name, value.into()));
        self
    }

    pub fn json(mut self, body: Json) -> Request {
        self.body = Some(Body::Json(body));
        self
    }
}

/// A successful answer: its JSON (`Null` when the body was empty or not JSON) and text.
#[derive(Debug, Clone)]
pub struct Answer {
    pub json: Json,
    pub text: String,
}

/// Escapes one path segment (a data store's name, an entry's key) for a URL.
pub fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The base URL from `STUDIO_BRIDGE_OPEN_CLOUD_URL`, or Open Cloud's own; and whether it is
/// a loopback `http://` one.
pub fn base_url() -> Result<(String, bool), ToolError> {
    let Some(given) = std::env::var(BASE_ENV).ok().filter(|v| !v.trim().is_empty()) else {
        return Ok((DEFAULT_BASE.to_owned(), false));
    };
    let given = given.trim().trim_end_matches('/').to_owned();
    let refuse = |why: &str| {
        ToolError::invalid_args(format!(
            "{BASE_ENV}={given:?} {why}. It is for tests and proxies: an https:// URL, or http:// on a loopback host (127.0.0.1, [::1], localhost). Unset it to reach {DEFAULT_BASE}."
        ))
    };
    let url = reqwest::Url::parse(&given).map_err(|e| refuse(&format!("is not a URL ({e})")))?;
    match url.scheme() {
        "https" => Ok((given, false)),
        "http" => {
            if loopback_host(&url) {
                Ok((given, true))
            } else {
                Err(refuse(
                    "is http:// to a host that is not loopback, which would send the API key in the clear",
                ))
            }
        }
        _ => Err(refuse("is neither https:// nor http://")),
    }
}

/// Whether `url`'s host is this machine: `localhost`, or a loopback address.
fn loopback_host(url: &reqwest::Url) -> bool {
    let host = url.host_str().unwrap_or("");
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

impl Cloud {
    /// The client for the configured key and base URL. No key is `auth`, saying how to set one.
    pub fn configured() -> Result<Cloud, ToolError> {
        let key = key::find().ok_or_else(|| {
            ToolError::new(
                ErrorCode::Auth,
                format!(
                    "No Open Cloud API key is configured. Set {} or run `studio-bridge cloud login`; docs/cloud.md lists the scopes each tool needs.",
                    key::ENV
                ),
            )
        })?;
        let (base, loopback) = base_url()?;
        Cloud::new(base, loopback, key)
    }

    fn new(base: String, loopback_http: bool, key: ApiKey) -> Result<Cloud, ToolError> {
        // ring as rustls's provider (Cargo.toml); installing it twice is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .https_only(!loopback_http)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("studio-bridge/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ToolError::new(ErrorCode::PluginError, format!("the HTTPS client could not start: {e}")))?;
        Ok(Cloud {
            http,
            base,
            loopback_http,
            key,
        })
    }

    /// PUTs `bytes` to a presigned `uri` Open Cloud handed out (a binary input's
    /// `uploadUri`). The URI carries its own authorization: the API key is not sent, and
    /// the URI must be `https://` (or, with a loopback stand-in as the base, loopback
    /// `http://`).
    pub async fn upload(
        &self,
        uri: &str,
        bytes: Bytes,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<(), ToolError> {
        let url = reqwest::Url::parse(uri).map_err(|e| {
            ToolError::new(
                ErrorCode::PluginError,
                format!("Open Cloud's upload URI is not a URL ({e})."),
            )
        })?;
        if url.scheme() != "https" && !(self.loopback_http && loopback_host(&url) && url.scheme() == "http") {
            return Err(ToolError::new(
                ErrorCode::PluginError,
                format!(
                    "Open Cloud's upload URI is not https:// ({}); nothing was uploaded.",
                    url.scheme()
                ),
            ));
        }
        let send = self
            .http
            .put(url)
            .header(CONTENT_TYPE, "application/octet-stream")
            .body(bytes)
            .send();
        let response = tokio::select! {
            outcome = tokio::time::timeout_at(deadline, send) => match outcome {
                Ok(Ok(response)) => response,
                Ok(Err(error)) => return Err(unreachable("the upload URI", &error)),
                Err(_) => return Err(ToolError::new(ErrorCode::Timeout, "The binary input's upload did not finish within the call's deadline.")),
            },
            () = cancel.cancelled() => return Err(cancelled()),
        };
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let text = response.text().await.unwrap_or_default();
        Err(ToolError::new(
            ErrorCode::Busy,
            format!(
                "The binary input's upload failed ({status}: {}). Try again.",
                api_message(&text)
            ),
        ))
    }

    /// Where the key came from, for messages.
    pub fn key_source(&self) -> &key::Source {
        &self.key.source
    }

    /// Sends `request` until it has an answer within `deadline`: a 429 waits its
    /// `Retry-After` (when that fits before the deadline, else `busy` saying the wait), a 5xx
    /// is tried again twice with a backoff. Any other failure is the error that says what to
    /// do, with the API's own message. A cancel stops at once with `cancelled`.
    pub async fn send(
        &self,
        request: &Request,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<Answer, ToolError> {
        let mut server_errors = 0;
        loop {
            let (status, headers, text) = self.attempt(request, deadline, cancel).await?;
            if status.is_success() {
                let json = serde_json::from_str(&text).unwrap_or(Json::Null);
                return Ok(Answer { json, text });
            }
            let wait = if status.as_u16() == 429 {
                let wait = retry_after(headers.get(RETRY_AFTER)).unwrap_or(DEFAULT_RETRY_AFTER);
                if Instant::now() + wait > deadline {
                    return Err(ToolError::new(
                        ErrorCode::Busy,
                        format!(
                            "Open Cloud's quota for this operation is used up (429: {}); it asks to wait {} s, past this call's deadline. Try again after that, or with a longer timeoutMs.",
                            api_message(&text),
                            wait.as_secs().max(1)
                        ),
                    )
                    .with_details(serde_json::json!({ "retryAfterMs": wait.as_millis() as u64, "status": 429 })));
                }
                tracing::info!(path = %request.path, wait_ms = wait.as_millis() as u64, "Open Cloud answered 429; waiting");
                wait
            } else if status.is_server_error() && server_errors < SERVER_ERROR_RETRIES {
                server_errors += 1;
                tracing::info!(path = %request.path, status = status.as_u16(), "Open Cloud failed; trying again");
                Duration::from_millis(500 << (server_errors - 1))
            } else {
                return Err(self.refusal(request, status.as_u16(), &text, server_errors));
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = cancel.cancelled() => return Err(cancelled()),
            }
        }
    }

    async fn attempt(
        &self,
        request: &Request,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<(reqwest::StatusCode, reqwest::header::HeaderMap, String), ToolError> {
        let mut url = reqwest::Url::parse(&format!("{}{}", self.base, request.path)).map_err(|e| {
            ToolError::invalid_args(format!("the Open Cloud URL for {} is not valid: {e}", request.what))
        })?;
        if !request.query.is_empty() {
            url.query_pairs_mut()
                .extend_pairs(request.query.iter().map(|(k, v)| (*k, v.as_str())));
        }
        let mut key = HeaderValue::from_str(self.key.secret()).map_err(|_| {
            ToolError::new(
                ErrorCode::Auth,
                format!(
                    "The Open Cloud API key from {} is not a valid header value; set it again.",
                    self.key.source
                ),
            )
        })?;
        key.set_sensitive(true);
        let mut builder = self.http.request(request.method.clone(), url).header("x-api-key", key);
        match &request.body {
            Some(Body::Json(json)) => {
                builder = builder
                    .header(CONTENT_TYPE, "application/json")
                    .body(serde_json::to_vec(json).unwrap_or_default());
            }
            Some(Body::Bytes { content_type, bytes }) => {
                builder = builder.header(CONTENT_TYPE, *content_type).body(bytes.clone());
            }
            None => {}
        }
        let exchange = async {
            let response = builder.send().await?;
            let status = response.status();
            let headers = response.headers().clone();
            let text = response.text().await?;
            Ok::<_, reqwest::Error>((status, headers, text))
        };
        tokio::select! {
            outcome = tokio::time::timeout_at(deadline, exchange) => match outcome {
                Ok(Ok(answer)) => Ok(answer),
                Ok(Err(error)) => Err(unreachable(&self.base, &error)),
                Err(_) => Err(ToolError::new(
                    ErrorCode::Timeout,
                    format!("Open Cloud did not answer {} {} within the call's deadline.", request.method, request.path),
                )),
            },
            () = cancel.cancelled() => Err(cancelled()),
        }
    }

    /// The error for a final non-success answer.
    fn refusal(&self, request: &Request, status: u16, text: &str, retried: u32) -> ToolError {
        let message = api_message(text);
        let (code, said) = match status {
            401 => (
                ErrorCode::Auth,
                format!(
                    "Open Cloud refused the API key (401: {message}). It came from {}: it may be wrong, expired, or limited to other IP addresses. Create or regenerate it on the Creator Dashboard (Credentials), then set it again.",
                    self.key.source
                ),
            ),
            403 => (
                ErrorCode::Auth,
                format!(
                    "The API key lacks permission for {} (403: {message}). Add the scope `{}` for this experience to the key on the Creator Dashboard (Credentials); docs/cloud.md lists each tool's scopes.",
                    request.what, request.scope
                ),
            ),
            404 => (
                ErrorCode::NotFound,
                format!("Open Cloud found no {} (404: {message}).", request.what),
            ),
            409 | 412 => (
                ErrorCode::Conflict,
                format!(
                    "Open Cloud refused the change to {}: it changed meanwhile ({status}: {message}). Read it again before retrying.",
                    request.what
                ),
            ),
            400 | 413 | 422 => (
                ErrorCode::InvalidArgs,
                format!(
                    "Open Cloud refused the request for {} ({status}: {message}).",
                    request.what
                ),
            ),
            500..=599 => (
                ErrorCode::Busy,
                format!(
                    "Open Cloud failed {} times for {} ({status}: {message}). Try again later.",
                    retried + 1,
                    request.what
                ),
            ),
            _ => (
                ErrorCode::PluginError,
                format!("Open Cloud answered {status} for {} ({message}).", request.what),
            ),
        };
        ToolError::new(code, said).with_details(serde_json::json!({ "status": status, "api": message }))
    }
}

/// The API's own words from an error's body: v2's `message`, a gateway's `errors[0].message`,
/// a validation error's `title` and `errors`, else the text itself (cut).
pub fn api_message(text: &str) -> String {
    if let Ok(json) = serde_json::from_str::<Json>(text) {
        let code = json.get("code").or_else(|| json.get("error")).and_then(Json::as_str);
        let message = json
            .get("message")
            .and_then(Json::as_str)
            .or_else(|| json.pointer("/errors/0/message").and_then(Json::as_str))
            .or_else(|| json.get("title").and_then(Json::as_str));
        match (code, message) {
            (Some(code), Some(message)) => return format!("{code}: {message}"),
            (None, Some(message)) => return message.to_owned(),
            (Some(code), None) => return code.to_owned(),
            (None, None) => {}
        }
    }
    let text = text.trim();
    if text.is_empty() {
        return "no message".to_owned();
    }
    let mut cut: String = text.chars().take(QUOTED_TEXT).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

/// `Retry-After` in seconds, the form Open Cloud sends (an HTTP date is not read: the
/// default wait applies).
fn retry_after(value: Option<&HeaderValue>) -> Option<Duration> {
    let text = value?.to_str().ok()?.trim();
    text.parse::<u64>().ok().map(Duration::from_secs)
}

fn cancelled() -> ToolError {
    ToolError::new(ErrorCode::Cancelled, "The call was cancelled by the caller.")
}

/// A request that got no HTTP answer at all.
fn unreachable(base: &str, error: &reqwest::Error) -> ToolError {
    // reqwest's error names the URL (no key is in it) and the cause.
    let mut cause = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        cause.push_str(": ");
        cause.push_str(&inner.to_string());
        source = inner.source();
    }
    ToolError::new(
        ErrorCode::Busy,
        format!(
            "Open Cloud at {base} could not be reached ({cause}). Check the network (or {BASE_ENV}), then try again."
        ),
    )
}

/// A place or universe id as Open Cloud takes it: never 0, which is a place never
/// published. `what` is the argument's name (`universe`, `place`), which is also its flag.
pub fn published_id(id: i64, what: &str) -> Result<u64, ToolError> {
    u64::try_from(id).ok().filter(|id| *id > 0).ok_or_else(|| {
        ToolError::invalid_args(format!(
            "The {what} id is {id}: the place was never published, so Open Cloud cannot reach it. Publish it from Studio (File > Publish to Roblox), or pass `{what}` (--{what} on the command line)."
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_s_own_words_are_kept_from_each_error_shape() {
        assert_eq!(
            api_message(r#"{"code":"NOT_FOUND","message":"Entry not found."}"#),
            "NOT_FOUND: Entry not found."
        );
        assert_eq!(
            api_message(r#"{"errors":[{"code":0,"message":"Invalid API Key"}]}"#),
            "Invalid API Key"
        );
        assert_eq!(
            api_message(r#"{"error":"INVALID_ARGUMENT","message":"Invalid cursor."}"#),
            "INVALID_ARGUMENT: Invalid cursor."
        );
        assert_eq!(api_message("  "), "no message");
        assert_eq!(api_message(&"x".repeat(400)).chars().count(), QUOTED_TEXT + 1);
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        assert_eq!(
            retry_after(Some(&HeaderValue::from_static("7"))),
            Some(Duration::from_secs(7))
        );
        assert_eq!(retry_after(Some(&HeaderValue::from_static("soon"))), None);
        assert_eq!(retry_after(None), None);
    }

    #[test]
    fn path_segments_are_escaped() {
        assert_eq!(segment("Player_1"), "Player_1");
        assert_eq!(segment("a b/c@d"), "a%20b%2Fc%40d");
    }

    #[test]
    fn unpublished_ids_name_the_flag() {
        let error = published_id(0, "place").unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidArgs);
        assert!(
            error.message.contains("--place") && error.message.contains("never published"),
            "{}",
            error.message
        );
        assert_eq!(published_id(42, "place").unwrap(), 42);
    }
}

//! TEST-ONLY: a stand-in of the Open Cloud endpoints studio-bridge calls, on loopback,
//! written from Roblox's OpenAPI (creator-docs `content/en-us/reference/cloud/openapi.json`
//! and `universes-api/v1.json`). It checks requests strictly (paths, the `x-api-key`
//! header, content types, bodies and query parameters: anything unknown is a 400, as the
//! API's INVALID_ARGUMENT) and keeps what it was sent, for tests to read.
//!
//! What it models:
//! - Luau Execution: a task is QUEUED when created, PROCESSING at the first poll, and
//!   finished at the second; the script really runs, in mlua's Luau VM (the VM Roblox's
//!   servers run is the same language, not the same engine: `print` and `warn` are logged
//!   as OUTPUT and WARNING, `error` fails the task with SCRIPT_ERROR, returns become
//!   `output.results`). Logs are served one chunk of at most two messages a page, with
//!   `nextPageToken` (the API "might return fewer" than `maxPageSize`).
//! - Data stores: entries in memory with revisions, etags, users and attributes; PATCH with a
//!   stale `etag` is 409 ABORTED (the reference does not name the code; ABORTED is v2's
//!   409 in the errors page); a PATCH or increment without users or attributes clears them,
//!   as the reference says.
//! - Binary inputs: created with their `size`, uploaded by PUT to the `uploadUri` answered
//!   (this stand-in's `/upload/<id>`, which must come without the API key and with exactly
//!   `size` bytes), then named by a task, whose script gets them as `({...})[1].BinaryInput`,
//!   a buffer. An input never uploaded fails the task's creation (400), the stricter reading.
//! - Place publishing: the body must be a place in the format its content type names.
//! - `:publishMessage` and `:restartServers`.
//! - Errors: a wrong key is 401 in the gateway's shape; a scope the key lacks is 403; faults
//!   queued by a test (429 with `Retry-After`, 500) answer the next matching requests.

// An axum response is the error of the request checks here, as handlers return it.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value as Json, json};

/// The key the stand-in accepts.
pub const KEY: &str = "test-open-cloud-key-0123456789abcdefghij";

/// One request as the stand-in got it.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
    pub key: Option<String>,
}

/// A forced answer for the next request whose path contains `path`.
#[derive(Debug, Clone)]
pub struct Fault {
    pub path: String,
    pub status: u16,
    pub retry_after: Option<u64>,
}

#[derive(Debug, Clone)]
struct Task {
    path: String,
    script: String,
    input: Option<Vec<u8>>,
    polls: u32,
    state: &'static str,
    error: Option<(String, String)>,
    results: Vec<Json>,
    logs: Vec<(&'static str, String)>,
}

#[derive(Debug, Clone)]
struct StoredEntry {
    value: Json,
    revision: u64,
    users: Json,
    attributes: Json,
    created: String,
}

#[derive(Default)]
struct Inner {
    /// This stand-in's own address, for the upload URIs it hands out.
    url: String,
    /// Binary inputs by path: their declared size, and their bytes once uploaded.
    inputs: BTreeMap<String, (u64, Option<Vec<u8>>)>,
    received: Vec<Received>,
    faults: VecDeque<Fault>,
    /// None: the key has every scope.
    scopes: Option<HashSet<String>>,
    tasks: Vec<Task>,
    /// store -> scope -> key -> entry
    stores: BTreeMap<String, BTreeMap<String, BTreeMap<String, StoredEntry>>>,
    versions: u64,
    messages: Vec<(u64, String, String)>,
    restarts: Vec<u64>,
}

/// The running stand-in.
#[derive(Clone)]
pub struct OpenCloud {
    pub addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
}

impl OpenCloud {
    pub async fn start() -> OpenCloud {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = axum::Router::new().fallback(handle).with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the stand-in");
        let addr = listener.local_addr().expect("its address");
        inner.lock().unwrap().url = format!("http://{addr}");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        OpenCloud { addr, inner }
    }

    /// What `STUDIO_BRIDGE_OPEN_CLOUD_URL` is set to.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn received(&self) -> Vec<Received> {
        self.inner.lock().unwrap().received.clone()
    }

    pub fn fault(&self, path: &str, status: u16, retry_after: Option<u64>) {
        self.inner.lock().unwrap().faults.push_back(Fault {
            path: path.to_owned(),
            status,
            retry_after,
        });
    }

    /// Limits the key to `scopes`.
    pub fn scopes(&self, scopes: &[&str]) {
        self.inner.lock().unwrap().scopes = Some(scopes.iter().map(|s| (*s).to_owned()).collect());
    }

    /// An entry put there as a game server would have.
    pub fn put(&self, store: &str, key: &str, value: Json, users: Json, attributes: Json) {
        let mut inner = self.inner.lock().unwrap();
        inner
            .stores
            .entry(store.to_owned())
            .or_default()
            .entry("global".to_owned())
            .or_default()
            .insert(
                key.to_owned(),
                StoredEntry {
                    value,
                    revision: 1,
                    users,
                    attributes,
                    created: "2026-11-01T00:00:00Z".into(),
                },
            );
    }

    /// The value of an entry now, if it exists.
    pub fn value(&self, store: &str, key: &str) -> Option<Json> {
        let inner = self.inner.lock().unwrap();
        inner
            .stores
            .get(store)?
            .get("global")?
            .get(key)
            .map(|e| e.value.clone())
    }

    /// The whole stored entry as the API would show it.
    pub fn entry(&self, store: &str, key: &str) -> Option<Json> {
        let inner = self.inner.lock().unwrap();
        let entry = inner.stores.get(store)?.get("global")?.get(key)?;
        Some(
            json!({"value": entry.value, "users": entry.users, "attributes": entry.attributes, "revision": entry.revision}),
        )
    }

    pub fn versions(&self) -> u64 {
        self.inner.lock().unwrap().versions
    }

    pub fn messages(&self) -> Vec<(u64, String, String)> {
        self.inner.lock().unwrap().messages.clone()
    }

    pub fn restarts(&self) -> Vec<u64> {
        self.inner.lock().unwrap().restarts.clone()
    }
}

fn error(status: u16, code: &str, message: &str) -> Response {
    (
        StatusCode::from_u16(status).unwrap(),
        [("content-type", "application/json")],
        json!({ "code": code, "message": message }).to_string(),
    )
        .into_response()
}

fn ok(json: Json) -> Response {
    (StatusCode::OK, [("content-type", "application/json")], json.to_string()).into_response()
}

fn query_of(uri: &Uri) -> Vec<(String, String)> {
    uri.query()
        .map(|q| {
            q.split('&')
                .filter(|p| !p.is_empty())
                .map(|pair| {
                    let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                    (decode(k), decode(v))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("00");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(b'?'));
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Refuses query parameters other than `allowed`.
fn only_query(query: &[(String, String)], allowed: &[&str]) -> Result<(), Response> {
    match query.iter().find(|(k, _)| !allowed.contains(&k.as_str())) {
        Some((k, _)) => Err(error(400, "INVALID_ARGUMENT", &format!("unknown query parameter {k}"))),
        None => Ok(()),
    }
}

/// The JSON body, refusing a wrong content type or fields other than `allowed`.
fn json_body(headers: &HeaderMap, body: &[u8], allowed: &[&str]) -> Result<Map<String, Json>, Response> {
    let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
    if content_type != "application/json" {
        return Err(error(
            400,
            "INVALID_ARGUMENT",
            &format!("Content-Type must be application/json, not {content_type:?}"),
        ));
    }
    let Ok(Json::Object(map)) = serde_json::from_slice::<Json>(body) else {
        return Err(error(400, "INVALID_ARGUMENT", "the body is not a JSON object"));
    };
    if let Some(field) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(error(400, "INVALID_ARGUMENT", &format!("unknown field {field}")));
    }
    Ok(map)
}

fn query_value<'a>(query: &'a [(String, String)], name: &str) -> Option<&'a str> {
    query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

async fn handle(
    State(inner): State<Arc<Mutex<Inner>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let query = query_of(&uri);
    let key = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut inner = inner.lock().unwrap();
    inner.received.push(Received {
        method: method.to_string(),
        path: path.clone(),
        query: query.clone(),
        content_type: headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        body: body.to_vec(),
        key: key.clone(),
    });
    // A presigned upload: its URI is its authorization, and the API key must not come.
    if let (&Method::PUT, Some(id)) = (&method, path.strip_prefix("/upload/")) {
        if key.is_some() {
            return error(400, "INVALID_ARGUMENT", "an upload URI takes no x-api-key");
        }
        let Some((size, bytes)) = inner
            .inputs
            .iter_mut()
            .find(|(p, _)| p.ends_with(&format!("/{id}")))
            .map(|(_, v)| v)
        else {
            return error(404, "NOT_FOUND", "no such upload");
        };
        if body.len() as u64 != *size {
            return error(400, "INVALID_ARGUMENT", "the upload's size is not the declared size");
        }
        *bytes = Some(body.to_vec());
        return (StatusCode::OK, "").into_response();
    }
    if key.as_deref() != Some(KEY) {
        return (
            StatusCode::UNAUTHORIZED,
            [("content-type", "application/json")],
            json!({"errors": [{"code": 0, "message": "Invalid API Key"}]}).to_string(),
        )
            .into_response();
    }
    if let Some(at) = inner.faults.iter().position(|f| path.contains(&f.path)) {
        let fault = inner.faults.remove(at).unwrap();
        let mut response = error(
            fault.status,
            if fault.status == 429 {
                "RESOURCE_EXHAUSTED"
            } else {
                "INTERNAL"
            },
            if fault.status == 429 {
                "Too many requests."
            } else {
                "Internal server error."
            },
        );
        if let Some(seconds) = fault.retry_after {
            response
                .headers_mut()
                .insert("retry-after", seconds.to_string().parse().unwrap());
        }
        return response;
    }
    let segments: Vec<String> = path.trim_start_matches('/').split('/').map(decode).collect();
    let parts: Vec<&str> = segments.iter().map(String::as_str).collect();
    let need = |inner: &Inner, scope: &str| -> Result<(), Response> {
        match &inner.scopes {
            Some(scopes) if !scopes.contains(scope) => Err(error(
                403,
                "PERMISSION_DENIED",
                &format!("Insufficient scope. Required: {scope}"),
            )),
            _ => Ok(()),
        }
    };
    macro_rules! check {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(response) => return response,
            }
        };
    }
    match (method.as_str(), parts.as_slice()) {
        // Luau Execution: a binary input
        (
            "POST",
            [
                "cloud",
                "v2",
                "universes",
                u,
                "luau-execution-session-task-binary-inputs",
            ],
        ) => {
            check!(need(&inner, "universe.place.luau-execution-session:write"));
            check!(only_query(&query, &[]));
            let body = check!(json_body(&headers, &body, &["size"]));
            let Some(size) = body.get("size").and_then(Json::as_u64) else {
                return error(400, "INVALID_ARGUMENT", "size is required");
            };
            let id = format!("in{}", inner.inputs.len() + 1);
            let path = format!("universes/{u}/luau-execution-session-task-binary-inputs/{id}");
            let upload = format!("{}/upload/{id}", inner.url);
            inner.inputs.insert(path.clone(), (size, None));
            ok(json!({ "path": path, "size": size, "uploadUri": upload }))
        }
        // Luau Execution: create
        ("POST", ["cloud", "v2", "universes", u, "places", p, rest @ ..])
            if rest.last() == Some(&"luau-execution-session-tasks") =>
        {
            check!(need(&inner, "universe.place.luau-execution-session:write"));
            check!(only_query(&query, &[]));
            let body = check!(json_body(&headers, &body, &["script", "timeout", "binaryInput"]));
            let version = match rest {
                ["luau-execution-session-tasks"] => "7".to_owned(),
                ["versions", v, "luau-execution-session-tasks"] => (*v).to_owned(),
                _ => return error(404, "NOT_FOUND", "no such collection"),
            };
            let Some(script) = body.get("script").and_then(Json::as_str) else {
                return error(400, "INVALID_ARGUMENT", "script is required");
            };
            let timeout = body.get("timeout").and_then(Json::as_str).unwrap_or("");
            if !(timeout.ends_with('s') && timeout[..timeout.len() - 1].parse::<u64>().is_ok()) {
                return error(400, "INVALID_ARGUMENT", "timeout must be a duration such as \"300s\"");
            }
            let input = match body.get("binaryInput").and_then(Json::as_str) {
                None => None,
                Some(name) => match inner.inputs.get(name) {
                    Some((_, Some(bytes))) => Some(bytes.clone()),
                    _ => return error(400, "INVALID_ARGUMENT", "the binary input was not uploaded"),
                },
            };
            let n = inner.tasks.len() + 1;
            let task = Task {
                input,
                path: format!("universes/{u}/places/{p}/versions/{version}/luau-execution-sessions/s{n}/tasks/t{n}"),
                script: script.to_owned(),
                polls: 0,
                state: "QUEUED",
                error: None,
                results: Vec::new(),
                logs: Vec::new(),
            };
            let shown = task_json(&task);
            inner.tasks.push(task);
            ok(shown)
        }
        // Luau Execution: logs
        (
            "GET",
            [
                "cloud",
                "v2",
                "universes",
                _,
                "places",
                _,
                "versions",
                _,
                "luau-execution-sessions",
                _,
                "tasks",
                _,
                "logs",
            ],
        ) => {
            check!(need(&inner, "universe.place.luau-execution-session:read"));
            check!(only_query(&query, &["view", "maxPageSize", "pageToken"]));
            if query_value(&query, "view") != Some("STRUCTURED") {
                return error(400, "INVALID_ARGUMENT", "this stand-in serves the STRUCTURED view only");
            }
            let task_path = parts[2..parts.len() - 1].join("/");
            let Some(task) = inner.tasks.iter().find(|t| t.path == task_path) else {
                return error(404, "NOT_FOUND", "task not found");
            };
            let page: usize = query_value(&query, "pageToken")
                .and_then(|t| t.strip_prefix("page-"))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            let chunks: Vec<&[(&str, String)]> = task.logs.chunks(2).collect();
            let mut answer = json!({ "luauExecutionSessionTaskLogs": [] });
            if let Some(chunk) = chunks.get(page) {
                answer["luauExecutionSessionTaskLogs"] = json!([{
                    "path": format!("{task_path}/logs/{page}"),
                    "structuredMessages": chunk.iter().map(|(kind, message)| json!({
                        "message": message, "createTime": "2026-11-28T12:00:00Z", "messageType": kind,
                    })).collect::<Vec<_>>(),
                }]);
                if page + 1 < chunks.len() {
                    answer["nextPageToken"] = Json::String(format!("page-{}", page + 1));
                }
            }
            ok(answer)
        }
        // Luau Execution: get
        (
            "GET",
            [
                "cloud",
                "v2",
                "universes",
                _,
                "places",
                _,
                "versions",
                _,
                "luau-execution-sessions",
                _,
                "tasks",
                _,
            ],
        ) => {
            check!(need(&inner, "universe.place.luau-execution-session:read"));
            check!(only_query(&query, &["view"]));
            let task_path = parts[2..].join("/");
            let Some(task) = inner.tasks.iter_mut().find(|t| t.path == task_path) else {
                return error(404, "NOT_FOUND", "task not found");
            };
            task.polls += 1;
            match task.polls {
                1 => task.state = "PROCESSING",
                2 => run_task(task),
                _ => {}
            }
            ok(task_json(task))
        }
        // Data stores
        ("GET", ["cloud", "v2", "universes", _, "data-stores"]) => {
            check!(need(&inner, "universe-datastores.control:list"));
            check!(only_query(
                &query,
                &["maxPageSize", "pageToken", "filter", "showDeleted"]
            ));
            let prefix = check!(prefix_of(&query));
            let stores: Vec<Json> = inner
                .stores
                .keys()
                .filter(|s| s.starts_with(&prefix))
                .map(|s| json!({"path": format!("universes/1/data-stores/{s}"), "id": s, "createTime": "2026-11-01T00:00:00Z", "state": "ACTIVE"}))
                .collect();
            ok(json!({ "dataStores": stores }))
        }
        (
            "GET",
            [
                "cloud",
                "v2",
                "universes",
                _,
                "data-stores",
                store,
                "scopes",
                scope,
                "entries",
            ],
        ) => {
            check!(need(&inner, "universe-datastores.objects:list"));
            check!(only_query(
                &query,
                &["maxPageSize", "pageToken", "filter", "showDeleted"]
            ));
            let prefix = check!(prefix_of(&query));
            let mut keys: Vec<String> = Vec::new();
            if let Some(scopes) = inner.stores.get(*store) {
                for (name, entries) in scopes {
                    if *scope == "-" || name == scope {
                        keys.extend(entries.keys().filter(|k| k.starts_with(&prefix)).cloned());
                    }
                }
            }
            // Two a page, to make paging visible.
            let page: usize = query_value(&query, "pageToken")
                .and_then(|t| t.parse().ok())
                .unwrap_or(0);
            let shown: Vec<Json> = keys
                .iter()
                .skip(page * 2)
                .take(2)
                .map(|k| json!({"path": format!("x/entries/{k}"), "id": k}))
                .collect();
            let mut answer = json!({ "dataStoreEntries": shown });
            if keys.len() > (page + 1) * 2 {
                answer["nextPageToken"] = Json::String((page + 1).to_string());
            }
            ok(answer)
        }
        (
            verb,
            [
                "cloud",
                "v2",
                "universes",
                _,
                "data-stores",
                store,
                "scopes",
                scope,
                "entries",
                entry,
            ],
        ) => {
            let (store, scope) = ((*store).to_owned(), (*scope).to_owned());
            let (key, increment) = match entry.strip_suffix(":increment") {
                Some(key) => (key.to_owned(), true),
                None => ((*entry).to_owned(), false),
            };
            match (verb, increment) {
                ("GET", false) => {
                    check!(need(&inner, "universe-datastores.objects:read"));
                    check!(only_query(&query, &[]));
                    match inner
                        .stores
                        .get(&store)
                        .and_then(|s| s.get(&scope))
                        .and_then(|s| s.get(&key))
                    {
                        Some(stored) => ok(entry_json(&store, &scope, &key, stored)),
                        None => error(404, "NOT_FOUND", "Entry not found."),
                    }
                }
                ("PATCH", false) => {
                    check!(need(&inner, "universe-datastores.objects:update"));
                    check!(only_query(&query, &["allowMissing"]));
                    let body = check!(json_body(&headers, &body, &["value", "users", "attributes", "etag"]));
                    let allow_missing = query_value(&query, "allowMissing") == Some("true");
                    let entries = inner
                        .stores
                        .entry(store.clone())
                        .or_default()
                        .entry(scope.clone())
                        .or_default();
                    let existing = entries.get(&key).cloned();
                    if existing.is_none() && !allow_missing {
                        return error(404, "NOT_FOUND", "Entry not found.");
                    }
                    if let (Some(etag), Some(existing)) = (body.get("etag").and_then(Json::as_str), &existing)
                        && etag != etag_of(existing)
                    {
                        return error(409, "ABORTED", "The etag does not match the entry's.");
                    }
                    let Some(value) = body.get("value") else {
                        return error(400, "INVALID_ARGUMENT", "value is required");
                    };
                    let stored = StoredEntry {
                        value: value.clone(),
                        revision: existing.as_ref().map_or(1, |e| e.revision + 1),
                        users: body.get("users").cloned().unwrap_or(json!([])),
                        attributes: body.get("attributes").cloned().unwrap_or(json!({})),
                        created: existing.map_or("2026-11-28T12:00:00Z".into(), |e| e.created),
                    };
                    let shown = entry_json(&store, &scope, &key, &stored);
                    entries.insert(key, stored);
                    ok(shown)
                }
                ("POST", true) => {
                    check!(need(&inner, "universe-datastores.objects:update"));
                    check!(only_query(&query, &[]));
                    let body = check!(json_body(&headers, &body, &["amount", "users", "attributes"]));
                    let Some(amount) = body.get("amount").and_then(Json::as_i64) else {
                        return error(400, "INVALID_ARGUMENT", "amount must be a whole number");
                    };
                    let entries = inner
                        .stores
                        .entry(store.clone())
                        .or_default()
                        .entry(scope.clone())
                        .or_default();
                    let existing = entries.get(&key).cloned();
                    let before = match existing.as_ref().map(|e| &e.value) {
                        None => 0,
                        Some(value) => match value.as_i64() {
                            Some(n) => n,
                            None => return error(400, "INVALID_ARGUMENT", "The entry's value is not an integer."),
                        },
                    };
                    let stored = StoredEntry {
                        value: json!(before + amount),
                        revision: existing.as_ref().map_or(1, |e| e.revision + 1),
                        users: body.get("users").cloned().unwrap_or(json!([])),
                        attributes: body.get("attributes").cloned().unwrap_or(json!({})),
                        created: existing.map_or("2026-11-28T12:00:00Z".into(), |e| e.created),
                    };
                    let shown = entry_json(&store, &scope, &key, &stored);
                    entries.insert(key, stored);
                    ok(shown)
                }
                ("DELETE", false) => {
                    check!(need(&inner, "universe-datastores.objects:delete"));
                    check!(only_query(&query, &[]));
                    match inner
                        .stores
                        .get_mut(&store)
                        .and_then(|s| s.get_mut(&scope))
                        .and_then(|s| s.remove(&key))
                    {
                        Some(_) => ok(json!({})),
                        None => error(404, "NOT_FOUND", "Entry not found."),
                    }
                }
                _ => error(404, "NOT_FOUND", "no such method"),
            }
        }
        // Place publishing
        ("POST", ["universes", "v1", _, "places", _, "versions"]) => {
            check!(need(&inner, "universe-places:write"));
            check!(only_query(&query, &["versionType"]));
            if !matches!(query_value(&query, "versionType"), Some("Saved" | "Published")) {
                return error(400, "INVALID_ARGUMENT", "versionType must be Saved or Published");
            }
            let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
            let valid = match content_type {
                "application/octet-stream" => body.starts_with(b"<roblox!"),
                "application/xml" => body.starts_with(b"<roblox"),
                _ => false,
            };
            if !valid {
                return (StatusCode::BAD_REQUEST, "Invalid file content.").into_response();
            }
            inner.versions += 1;
            (
                StatusCode::OK,
                [("content-type", "text/plain")],
                format!("{{\"versionNumber\":{}}}", inner.versions),
            )
                .into_response()
        }
        // Messaging and restarts
        ("POST", ["cloud", "v2", "universes", universe]) if universe.ends_with(":publishMessage") => {
            check!(need(&inner, "universe-messaging-service:publish"));
            check!(only_query(&query, &[]));
            let body = check!(json_body(&headers, &body, &["topic", "message"]));
            let id = universe.trim_end_matches(":publishMessage").parse().unwrap_or(0);
            let text = |f: &str| body.get(f).and_then(Json::as_str).unwrap_or("").to_owned();
            inner.messages.push((id, text("topic"), text("message")));
            (StatusCode::OK, "").into_response()
        }
        ("POST", ["cloud", "v2", "universes", universe]) if universe.ends_with(":restartServers") => {
            check!(need(&inner, "universe:write"));
            check!(only_query(&query, &[]));
            check!(json_body(
                &headers,
                &body,
                &[
                    "placeIds",
                    "closeAllVersions",
                    "bleedOffServers",
                    "bleedOffDurationMinutes"
                ]
            ));
            inner
                .restarts
                .push(universe.trim_end_matches(":restartServers").parse().unwrap_or(0));
            ok(json!({}))
        }
        _ => error(404, "NOT_FOUND", &format!("the stand-in has no {method} {path}")),
    }
}

fn prefix_of(query: &[(String, String)]) -> Result<String, Response> {
    match query_value(query, "filter") {
        None => Ok(String::new()),
        Some(filter) => {
            let inner = filter
                .strip_prefix("id.startsWith(")
                .and_then(|f| f.strip_suffix(')'))
                .and_then(|literal| serde_json::from_str::<String>(literal).ok());
            inner.ok_or_else(|| error(400, "INVALID_ARGUMENT", "The provided filter is invalid."))
        }
    }
}

fn etag_of(entry: &StoredEntry) -> String {
    format!("etag-{}", entry.revision)
}

fn entry_json(store: &str, scope: &str, key: &str, entry: &StoredEntry) -> Json {
    json!({
        "path": format!("universes/1/data-stores/{store}/scopes/{scope}/entries/{key}"),
        "createTime": entry.created,
        "revisionId": format!("rev-{}", entry.revision),
        "revisionCreateTime": format!("2026-11-28T12:00:{:02}Z", entry.revision % 60),
        "state": "ACTIVE",
        "etag": etag_of(entry),
        "value": entry.value,
        "id": key,
        "users": entry.users,
        "attributes": entry.attributes,
    })
}

fn task_json(task: &Task) -> Json {
    let mut shown = json!({
        "path": task.path,
        "createTime": "2026-11-28T12:00:00Z",
        "updateTime": "2026-11-28T12:00:01Z",
        "user": "1",
        "state": task.state,
        "script": task.script,
    });
    if let Some((code, message)) = &task.error {
        shown["error"] = json!({ "code": code, "message": message });
    }
    if task.state == "COMPLETE" {
        shown["output"] = json!({ "results": task.results });
    }
    shown
}

/// Runs the task's script in Luau: prints and warnings are its logs, returns its results.
fn run_task(task: &mut Task) {
    let lua = mlua::Lua::new();
    let logs: Arc<Mutex<Vec<(&'static str, String)>>> = Arc::default();
    for (name, kind) in [("print", "OUTPUT"), ("warn", "WARNING")] {
        let logs = logs.clone();
        let function = lua
            .create_function(move |_, args: mlua::Variadic<mlua::Value>| {
                let words: Vec<String> = args.iter().map(|v| v.to_string().unwrap_or_default()).collect();
                logs.lock().unwrap().push((kind, words.join(" ")));
                Ok(())
            })
            .unwrap();
        lua.globals().set(name, function).unwrap();
    }
    // The task's input, the script's first argument: `{BinaryInput = buffer}` when given.
    let argument = lua.create_table().unwrap();
    if let Some(bytes) = &task.input {
        argument.set("BinaryInput", lua.create_buffer(bytes).unwrap()).unwrap();
    }
    let outcome = lua
        .load(task.script.as_str())
        .set_name("TaskScript")
        .into_function()
        .and_then(|chunk| chunk.call::<mlua::MultiValue>(argument));
    task.logs = logs.lock().unwrap().clone();
    match outcome {
        Ok(values) => {
            task.state = "COMPLETE";
            task.results = values.iter().map(to_json).collect();
        }
        Err(error) => {
            let message = match &error {
                mlua::Error::RuntimeError(message) => message.clone(),
                other => other.to_string(),
            };
            task.logs.push(("ERROR", message.clone()));
            task.state = "FAILED";
            task.error = Some(("SCRIPT_ERROR".into(), message));
        }
    }
}

fn to_json(value: &mlua::Value) -> Json {
    match value {
        mlua::Value::Nil => Json::Null,
        mlua::Value::Boolean(b) => Json::Bool(*b),
        mlua::Value::Integer(n) => json!(n),
        mlua::Value::Number(n) => json!(n),
        mlua::Value::String(s) => Json::String(s.to_string_lossy().to_string()),
        mlua::Value::Table(table) => {
            let len = table.raw_len();
            if len > 0 {
                Json::Array(
                    (1..=len)
                        .map(|i| to_json(&table.raw_get(i).unwrap_or(mlua::Value::Nil)))
                        .collect(),
                )
            } else {
                let mut map = Map::new();
                for (k, v) in table.pairs::<mlua::Value, mlua::Value>().flatten() {
                    map.insert(k.to_string().unwrap_or_default(), to_json(&v));
                }
                Json::Object(map)
            }
        }
        // Not JSON-serializable (functions, instances): null, as the API documents.
        _ => Json::Null,
    }
}

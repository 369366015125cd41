//! `studio-bridge mcp --http 127.0.0.1:PORT` (issue 31): MCP over Streamable HTTP is
//! guarded as the bridge is. Raw HTTP requests against the real binary: no token → 401,
//! a foreign Origin or Host → 403, a non-loopback address is refused at start, and with
//! the token an `initialize` is served. (The Inspector drives every tool over it in
//! tests/inspector.rs.)

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::Duration;

use support::free_port;
use support::mcp_client::{binary, empty_config_dir, unpaired_mcp_args};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

/// `mcp --http 127.0.0.1:<http>` on bridge port `port`, once it said where it serves;
/// returns the child and the bearer token, read from the file the startup line names.
/// Its per-user files (the HTTP and peer tokens) are the user's, where the other
/// processes of a test find them.
async fn start(port: u16, http: u16) -> (Child, String) {
    start_in(port, http, None, &[]).await
}

/// A runtime directory (`XDG_RUNTIME_DIR`) of a test's own, named by its bridge port.
fn runtime_dir(port: u16) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sb-http-run-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a runtime directory");
    dir
}

/// [`start`] with the per-user files under the runtime directory `run` (`XDG_RUNTIME_DIR`),
/// when given, and `extra` arguments.
async fn start_in(port: u16, http: u16, run: Option<&std::path::Path>, extra: &[&str]) -> (Child, String) {
    let mut command = Command::new(binary());
    if let Some(run) = run {
        command.env("XDG_RUNTIME_DIR", run);
    }
    let mut child = command
        .args(unpaired_mcp_args(port))
        .args(["--http", &format!("127.0.0.1:{http}")])
        .args(extra)
        .env("STUDIO_BRIDGE_LOG", "warn")
        .env("STUDIO_BRIDGE_CONFIG_DIR", empty_config_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn studio-bridge mcp --http");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.starts_with("MCP over HTTP at ") {
                return line;
            }
        }
        panic!("mcp --http ended without saying where it serves")
    })
    .await
    .expect("the startup line");
    let expected = format!("MCP over HTTP at http://127.0.0.1:{http}/mcp (bearer token in ");
    assert!(line.starts_with(&expected), "{line}");
    let file = line[expected.len()..]
        .strip_suffix(", kept across restarts)")
        .unwrap_or_else(|| panic!("the startup line says the token is kept: {line}"))
        .to_owned();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let token = std::fs::read_to_string(&file)
        .expect("the named token file")
        .trim()
        .to_owned();
    (child, token)
}

/// One raw POST of `body` to /mcp with `headers`; returns the status code and the response.
fn post(http: u16, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", http)).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("host: 127.0.0.1:{http}\r\n"));
    }
    for (key, value) in headers {
        request.push_str(&format!("{key}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = Vec::new();
    let mut buffer = [0u8; 4096];
    // Read until the status line and the first event or body are in (SSE stays open).
    loop {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => response.extend_from_slice(&buffer[..n]),
        }
        let text = String::from_utf8_lossy(&response);
        if text.contains("\"result\"") || (text.contains("\r\n\r\n") && !text.starts_with("HTTP/1.1 200")) {
            break;
        }
    }
    let text = String::from_utf8_lossy(&response).into_owned();
    let code = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, text)
}

#[tokio::test]
async fn http_refuses_without_the_token_and_from_a_foreign_origin_and_serves_with_it() {
    let (port, http) = (free_port(), free_port());
    let (_child, token) = start(port, http).await;
    let bearer = format!("Bearer {token}");

    let (code, text) = post(http, &[], INITIALIZE);
    assert_eq!(code, 401, "{text}");
    assert!(text.to_lowercase().contains("www-authenticate: bearer"), "{text}");
    let (code, text) = post(http, &[("authorization", "Bearer wrong")], INITIALIZE);
    assert_eq!(code, 401, "{text}");

    let (code, text) = post(
        http,
        &[("authorization", &bearer), ("origin", "https://evil.example")],
        INITIALIZE,
    );
    assert_eq!(code, 403, "{text}");
    let (code, text) = post(
        http,
        &[("authorization", &bearer), ("host", "evil.example")],
        INITIALIZE,
    );
    assert_eq!(code, 403, "a rebound name is refused: {text}");

    let (code, text) = post(
        http,
        &[
            ("authorization", &bearer),
            ("origin", &format!("http://127.0.0.1:{http}")),
        ],
        INITIALIZE,
    );
    assert_eq!(code, 200, "{text}");
    assert!(
        text.contains("\"serverInfo\"") && text.contains("studio-bridge"),
        "{text}"
    );
    assert!(text.to_lowercase().contains("mcp-session-id"), "{text}");
}

/// HTTP has a bearer token of its own, kept across restarts: a client configured with it
/// is still let in by the next host (before, `--http` checked the peer token, which every
/// new host writes anew, and a restart meant 401); `--rotate-token` makes a new one. The
/// peer token is refused on HTTP, and HTTP's token proves nothing on the peers' `/v1/client`.
#[tokio::test]
async fn the_http_token_survives_a_restart_and_is_for_http_only() {
    let (port, http) = (free_port(), free_port());
    let run = runtime_dir(port);
    let (child, token) = start_in(port, http, Some(&run), &[]).await;
    let peer_token = std::fs::read_to_string(run.join("studio-bridge").join(format!("{port}.token")))
        .expect("the host's peer token")
        .trim()
        .to_owned();
    assert_ne!(token, peer_token, "HTTP's token is not the peer token");
    let (code, text) = post(http, &[("authorization", &format!("Bearer {peer_token}"))], INITIALIZE);
    assert_eq!(code, 401, "the peer token is not for HTTP: {text}");
    // On the peers' socket, HTTP's token proves nothing (a peer proves the peer token).
    let (mut sink, mut stream) = support::raw_peer::open(port).await;
    let answer = support::raw_peer::handshake(&mut sink, &mut stream, &token).await;
    assert!(
        matches!(&answer, studio_bridge::bridge::peer_pairing::Step::Reject { code, .. } if code == "unauthorized"),
        "HTTP's token does not open /v1/client: {answer:?}"
    );
    let (mut sink, mut stream) = support::raw_peer::open(port).await;
    let answer = support::raw_peer::handshake(&mut sink, &mut stream, &peer_token).await;
    assert_eq!(
        answer,
        studio_bridge::bridge::peer_pairing::Step::Welcome,
        "the peer token does"
    );
    drop(child);

    let (port, http) = (free_port(), free_port());
    let (child, again) = start_in(port, http, Some(&run), &[]).await;
    assert_eq!(again, token, "a new host keeps HTTP's token");
    let (code, text) = post(http, &[("authorization", &format!("Bearer {token}"))], INITIALIZE);
    assert_eq!(code, 200, "a client configured before the restart is let in: {text}");
    drop(child);

    let (port, http) = (free_port(), free_port());
    let (_child, rotated) = start_in(port, http, Some(&run), &["--rotate-token"]).await;
    assert_ne!(rotated, token, "--rotate-token makes a new one");
    let (code, _) = post(http, &[("authorization", &format!("Bearer {token}"))], INITIALIZE);
    assert_eq!(code, 401, "the old token is refused after a rotation");
    let (code, text) = post(http, &[("authorization", &format!("Bearer {rotated}"))], INITIALIZE);
    assert_eq!(code, 200, "{text}");
}

/// HTTP takes what stdio takes: a 5 MiB body (over rmcp's own 4 MiB default) is served;
/// past the 16 MiB stdio line limit, the answer is a JSON-RPC error naming the limit; a
/// request in an unknown or expired session is a JSON-RPC error that says to initialize
/// again (404, which tells a client to do so).
#[tokio::test]
async fn http_takes_bodies_up_to_the_stdio_limit_and_says_so_in_json_rpc_past_it() {
    let (port, http) = (free_port(), free_port());
    let (_child, token) = start(port, http).await;
    let bearer = format!("Bearer {token}");
    let padded = |bytes: usize| {
        INITIALIZE.replace(
            r#""name":"raw""#,
            &format!(r#""name":"raw","padding":"{}""#, "x".repeat(bytes)),
        )
    };
    let (code, text) = post(http, &[("authorization", &bearer)], &padded(5 << 20));
    assert_eq!(code, 200, "{}", &text[..300.min(text.len())]);
    assert!(text.contains("\"serverInfo\""), "{}", &text[..300.min(text.len())]);

    // Past the limit: the declared length is refused before any of the body is read.
    let mut stream = TcpStream::connect(("127.0.0.1", http)).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{http}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nauthorization: {bearer}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        17 << 20
    )
    .unwrap();
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    let body = &text[text.find("\r\n\r\n").expect("a body") + 4..];
    let error: serde_json::Value = serde_json::from_str(body).expect("a JSON-RPC error");
    assert_eq!(error["jsonrpc"], "2.0", "{error}");
    let message = error["error"]["message"].as_str().expect("a message");
    assert!(message.contains("16 MiB"), "{message}");

    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let (code, text) = post(
        http,
        &[("authorization", &bearer), ("mcp-session-id", "no-such-session")],
        list,
    );
    assert_eq!(code, 404, "{text}");
    let body = &text[text.find("\r\n\r\n").expect("a body") + 4..];
    let error: serde_json::Value = serde_json::from_str(body).expect("a JSON-RPC error");
    let message = error["error"]["message"].as_str().expect("a message");
    assert!(message.contains("Initialize again"), "{message}");
}

#[tokio::test]
async fn http_binds_loopback_only() {
    let output = Command::new(binary())
        .args(["mcp", "--port", &free_port().to_string(), "--no-install-plugin"])
        .args(["--http", "0.0.0.0:0"])
        .env("STUDIO_BRIDGE_LOG", "warn")
        .env("STUDIO_BRIDGE_CONFIG_DIR", empty_config_dir())
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("loopback only"), "{stderr}");
}

/// rmcp's own client over Streamable HTTP: without the token it cannot initialize; two
/// clients at once, each with it, get the catalogue an stdio client gets, read the guide
/// and the sessions, and run `exec` in the same Studio side by side.
#[tokio::test]
async fn rmcp_clients_over_http_get_the_stdio_catalogue_the_resources_and_the_tools() {
    use rmcp::ServiceExt;
    use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams, ResourceContents};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use support::fake_plugin::{FakePlugin, Identity, studio_like};
    use support::mcp_client::Mcp;

    // reqwest is built with rustls and no default provider for Open Cloud (Cargo.toml), and
    // the test build shares that build: its client needs the provider the binary installs.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (port, http) = (free_port(), free_port());
    let (_child, token) = start(port, http).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), studio_like()).await;
    let url = format!("http://127.0.0.1:{http}/mcp");
    let connect = |token: Option<&str>| {
        let mut config = StreamableHttpClientTransportConfig::with_uri(url.clone());
        if let Some(token) = token {
            config = config.auth_header(token);
        }
        ().serve(StreamableHttpClientTransport::from_config(config))
    };

    assert!(
        connect(None).await.is_err(),
        "initialize without the bearer token is refused"
    );
    let (first, second) = tokio::join!(connect(Some(&token)), connect(Some(&token)));
    let (first, second) = (
        first.expect("initialize over HTTP"),
        second.expect("a second client at once"),
    );

    // The catalogue over HTTP is the one an stdio client of the same bridge gets.
    let stdio = Mcp::spawn(port, &[]).await;
    let catalogue = |tools: Vec<rmcp::model::Tool>| serde_json::to_value(tools).unwrap();
    let over_stdio = catalogue(stdio.client.list_all_tools().await.expect("tools/list over stdio"));
    assert_eq!(
        catalogue(first.list_all_tools().await.expect("tools/list over HTTP")),
        over_stdio
    );

    let resources = first.list_all_resources().await.expect("resources/list");
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert!(
        uris.contains(&"studio://guide") && uris.contains(&"studio://sessions"),
        "{uris:?}"
    );
    let templates = second
        .list_all_resource_templates()
        .await
        .expect("resources/templates/list");
    assert!(
        templates.iter().any(|t| t.uri_template == "studio://logs/{sessionId}"),
        "{templates:?}"
    );
    let text_of = |contents: Vec<ResourceContents>| match contents.into_iter().next() {
        Some(ResourceContents::TextResourceContents { text, .. }) => text,
        other => panic!("one text content, got {other:?}"),
    };
    let guide = second
        .read_resource(ReadResourceRequestParams::new("studio://guide"))
        .await
        .expect("read the guide");
    assert!(
        text_of(guide.contents).contains("undo"),
        "the guide covers writes and undo"
    );
    let sessions = first
        .read_resource(ReadResourceRequestParams::new("studio://sessions"))
        .await
        .expect("read the sessions");
    assert!(text_of(sessions.contents).contains(plugin.session_id()));

    let exec = || {
        CallToolRequestParams::new("studio_exec").with_arguments(
            serde_json::json!({"script": "return 2", "check": false})
                .as_object()
                .unwrap()
                .clone(),
        )
    };
    let (a, b) = tokio::join!(first.call_tool(exec()), second.call_tool(exec()));
    for result in [a.expect("exec over HTTP"), b.expect("exec over HTTP, side by side")] {
        assert_ne!(result.is_error, Some(true), "{result:?}");
        let structured = result.structured_content.expect("structured content");
        assert_eq!(structured["success"], true, "{structured}");
        assert_eq!(structured["sessionId"], plugin.session_id(), "{structured}");
    }
    assert_eq!(
        plugin
            .log()
            .requests
            .iter()
            .filter(|seen| seen.action == "exec")
            .count(),
        2,
        "each client's call reached Studio once"
    );
}

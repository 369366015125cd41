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
async fn start(port: u16, http: u16) -> (Child, String) {
    let mut child = Command::new(binary())
        .args(unpaired_mcp_args(port))
        .args(["--http", &format!("127.0.0.1:{http}")])
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
    let file = line[expected.len()..].trim_end_matches(')').to_owned();
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

//! `studio-bridge mcp --http 127.0.0.1:PORT` (issue 31): MCP over Streamable HTTP is
//! guarded as the bridge is. Raw HTTP requests against the real binary: no token → 401,
//! a foreign Origin or Host → 403, a non-loopback address is refused at start, and with
//! the token an `initialize` is served. (The Inspector drives every tool over it in
//! tests/inspector.rs.)

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::Duration;

use support::free_port;
use support::mcp_client::{binary, empty_config_dir};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

/// `mcp --http 127.0.0.1:<http>` on bridge port `port`, once it said where it serves;
/// returns the child and the token file the startup line names.
async fn start(port: u16, http: u16) -> (Child, String) {
    let mut child = Command::new(binary())
        .args([
            "mcp",
            "--port",
            &port.to_string(),
            "--no-install-plugin",
            "--allow-unpaired",
        ])
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
    (child, file)
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
    let (_child, token_file) = start(port, http).await;
    let token = std::fs::read_to_string(&token_file)
        .expect("the named token file")
        .trim()
        .to_owned();
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

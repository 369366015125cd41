//! The Host/Origin guard on the real binary: browsers and rebinding attacks are refused
//! before any upgrade; the health endpoint answers local tools.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::free_port;
use support::mcp_client::Mcp;

/// Sends a raw HTTP/1.1 request and returns the status line and body.
fn raw_request(port: u16, headers: &[&str], path: &str) -> (String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut request = format!("GET {path} HTTP/1.1\r\n");
    for header in headers {
        request.push_str(header);
        request.push_str("\r\n");
    }
    request.push_str("Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    // Read until the connection closes, or until the headers of a `101 Switching
    // Protocols` are complete (an upgraded connection stays open).
    let mut response = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => response.extend_from_slice(&chunk[..n]),
        }
        let text = String::from_utf8_lossy(&response);
        if text.starts_with("HTTP/1.1 101") && text.contains("\r\n\r\n") {
            break;
        }
    }
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response.lines().next().unwrap_or_default().to_owned();
    let body = response.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    (status, body)
}

const UPGRADE: [&str; 4] = [
    "Upgrade: websocket",
    "Connection: Upgrade",
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Version: 13",
];

#[tokio::test]
async fn health_answers_with_service_version_and_protocol() {
    let port = free_port();
    let _mcp = Mcp::spawn(port, &[]).await;
    let host = format!("Host: 127.0.0.1:{port}");
    let (status, body) = tokio::task::spawn_blocking(move || raw_request(port, &[&host], "/v1/health"))
        .await
        .unwrap();
    assert!(status.contains("200"), "{status}");
    let health: serde_json::Value = serde_json::from_str(body.trim()).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(health["service"], "studio-bridge");
    assert_eq!(health["protocol"], 1);
    assert_eq!(health["sessions"], 0);
}

#[tokio::test]
async fn a_browser_origin_is_refused_before_the_upgrade() {
    let port = free_port();
    let _mcp = Mcp::spawn(port, &[]).await;
    let host = format!("Host: 127.0.0.1:{port}");
    let cases = vec![
        (
            vec![host.clone(), "Origin: https://evil.example".into()],
            "/v1/plugin",
            true,
        ),
        (vec![host.clone(), "Origin: null".into()], "/v1/plugin", true),
        (vec![format!("Host: evil.example:{port}")], "/v1/plugin", true),
        (
            vec![host.clone(), "Origin: https://evil.example".into()],
            "/v1/health",
            false,
        ),
    ];
    for (headers, path, upgrade) in cases {
        let mut all: Vec<String> = headers.clone();
        if upgrade {
            all.extend(UPGRADE.iter().map(|h| h.to_string()));
        }
        let (status, _) = tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = all.iter().map(String::as_str).collect();
            raw_request(port, &refs, path)
        })
        .await
        .unwrap();
        assert!(status.contains("403"), "{headers:?} {path}: {status}");
    }
    // The same upgrade from a loopback origin (or none) is accepted.
    let mut all: Vec<String> = vec![host, "Origin: http://localhost:3000".into()];
    all.extend(UPGRADE.iter().map(|h| h.to_string()));
    let (status, _) = tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        raw_request(port, &refs, "/v1/plugin")
    })
    .await
    .unwrap();
    assert!(status.contains("101"), "{status}");
}

//! The Host/Origin guard on the real binary: browsers and rebinding attacks are refused
//! before any upgrade; the health endpoint answers local tools.

use crate::support;

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
async fn health_answers_with_service_version_protocol_and_the_host_pid() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let host = format!("Host: 127.0.0.1:{port}");
    let (status, body) = tokio::task::spawn_blocking(move || raw_request(port, &[&host], "/v1/health"))
        .await
        .unwrap();
    assert!(status.contains("200"), "{status}");
    let health: serde_json::Value = serde_json::from_str(body.trim()).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(health["service"], "studio-bridge");
    assert_eq!(health["protocol"], 1);
    assert_eq!(health["sessions"], 0);
    assert_eq!(health["pid"], mcp.pid, "the pid of the process hosting the bridge");
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

async fn plugin_socket(
    port: u16,
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    tokio_tungstenite::tungstenite::Error,
> {
    tokio_tungstenite::connect_async(format!("ws://127.0.0.1:{port}/v1/plugin"))
        .await
        .map(|(socket, _)| socket)
}

#[tokio::test]
async fn a_large_frame_before_hello_closes_the_connection_unread() {
    use futures_util::{SinkExt, StreamExt};
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let mut stranger = plugin_socket(port).await.expect("upgrade");
    // 8 MiB of msgpack nils would decode to hundreds of MiB of values.
    let _ = stranger
        .send(tokio_tungstenite::tungstenite::Message::Binary(
            vec![0xc0u8; 8 << 20].into(),
        ))
        .await;
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match stranger.next().await {
                None | Some(Err(_)) | Some(Ok(tokio_tungstenite::tungstenite::Message::Close(_))) => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the host kept the connection open");
    // The host is unharmed and a real plugin still gets in.
    let _plugin = support::fake_plugin::FakePlugin::connect(
        port,
        support::fake_plugin::Identity::edit("A"),
        support::fake_plugin::studio_like(),
    )
    .await;
    let state = mcp.ok("studio_state", serde_json::json!({})).await;
    assert_eq!(state["state"], "Edit");
}

#[tokio::test]
async fn connections_that_have_not_said_hello_are_capped_by_closing_the_oldest() {
    use futures_util::StreamExt;
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let mut waiting = Vec::new();
    for _ in 0..16 {
        waiting.push(plugin_socket(port).await.expect("one of the first 16"));
    }
    // A 17th is not refused (a Studio's plugin could be kept out): the oldest that has
    // said nothing is closed to make room.
    let _seventeenth = plugin_socket(port).await.expect("the 17th is accepted");
    let closed = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match waiting[0].next().await {
                None | Some(Err(_)) | Some(Ok(tokio_tungstenite::tungstenite::Message::Close(_))) => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the oldest silent connection was closed");
    drop(waiting);
    let _plugin = support::fake_plugin::FakePlugin::connect(
        port,
        support::fake_plugin::Identity::edit("A"),
        support::fake_plugin::studio_like(),
    )
    .await;
    assert_eq!(mcp.ok("studio_state", serde_json::json!({})).await["state"], "Edit");
}

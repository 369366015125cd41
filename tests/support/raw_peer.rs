//! A peer of a running host, speaking docs/protocol.md (Peers) directly: for tests that
//! need what a studio-bridge peer would never do (stop reading, flood, stop answering).

use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::{SplitSink, SplitStream};
use rmpv::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Joins the host on `port` with its token; the link's two halves.
pub async fn connect(port: u16) -> (SplitSink<Socket, Message>, SplitStream<Socket>) {
    let token = std::fs::read_to_string(studio_bridge::bridge::token::token_path(port)).expect("the host's token");
    let mut request = format!("ws://127.0.0.1:{port}/v1/client")
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {}", token.trim()).parse().unwrap());
    let (socket, _) = tokio_tungstenite::connect_async(request).await.expect("the peer joins");
    socket.split()
}

/// One peer-protocol message as a binary frame.
pub fn frame(value: &Value) -> Message {
    let mut bytes = Vec::new();
    rmpv::encode::write_value(&mut bytes, value).unwrap();
    Message::Binary(bytes.into())
}

/// The next peer-protocol message (pings and pongs skipped).
pub async fn next_frame(stream: &mut SplitStream<Socket>) -> Value {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(60), stream.next())
            .await
            .expect("the host answers")
            .expect("the link stays open")
            .expect("a frame");
        if let Message::Binary(bytes) = message {
            return rmpv::decode::read_value(&mut &bytes[..]).expect("msgpack");
        }
    }
}

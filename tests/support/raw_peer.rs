//! A peer of a running host, speaking docs/protocol.md (Peers) directly: for tests that
//! need what a studio-bridge peer would never do (stop reading, flood, stop answering).

use std::time::Duration;

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use rmpv::Value;
use studio_bridge::bridge::peer_pairing::{self, Step};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Joins the host on `port` with its token (the handshake done); the link's two halves.
pub async fn connect(port: u16) -> (SplitSink<Socket, Message>, SplitStream<Socket>) {
    let token = std::fs::read_to_string(studio_bridge::bridge::token::token_path(port)).expect("the host's token");
    let (mut sink, mut stream) = open(port).await;
    let answer = handshake(&mut sink, &mut stream, token.trim()).await;
    assert_eq!(answer, Step::Welcome, "the host welcomes a peer with its token");
    (sink, stream)
}

/// A WebSocket on `/v1/client`, before any handshake.
pub async fn open(port: u16) -> (SplitSink<Socket, Message>, SplitStream<Socket>) {
    let request = format!("ws://127.0.0.1:{port}/v1/client")
        .into_client_request()
        .unwrap();
    let (socket, _) = tokio_tungstenite::connect_async(request).await.expect("the upgrade");
    socket.split()
}

/// The peer handshake with `token` as the key, the host's proof checked: the host's last
/// word (`welcome`, or its `reject`).
pub async fn handshake(sink: &mut SplitSink<Socket, Message>, stream: &mut SplitStream<Socket>, token: &str) -> Step {
    let (hello, nonce) = peer_pairing::peer_hello().unwrap();
    sink.send(Message::Binary(hello.encode().into())).await.unwrap();
    let challenge = next_step(stream).await;
    let auth = match peer_pairing::peer_answer(token, &nonce, challenge.clone()) {
        Ok(auth) => auth,
        // A host that holds another token: its proof fails, and ours is made anyway
        // (the host must refuse it).
        Err(peer_pairing::Unproven::WrongProof) => {
            let Step::Challenge { host_nonce, .. } = challenge else {
                unreachable!()
            };
            Step::Auth {
                proof: studio_bridge::bridge::pairing::peer_proof(token, &host_nonce, &nonce),
            }
        }
        Err(other) => panic!("the host sent no challenge: {other:?}"),
    };
    sink.send(Message::Binary(auth.encode().into())).await.unwrap();
    next_step(stream).await
}

/// The host's next handshake message.
pub async fn next_step(stream: &mut SplitStream<Socket>) -> Step {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("the host answers the handshake")
            .expect("the link stays open")
            .expect("a frame");
        if let Message::Binary(bytes) = message {
            return Step::decode(&bytes).expect("a handshake message");
        }
    }
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

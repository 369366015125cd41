//! A port squatter: a local process that holds the bridge's port first and poses as
//! studio-bridge (its `/v1/health` says so) without holding the user's pairing secret
//! (PROTOCOL.md, "Pairing is mutual") or peer token. It records every frame a plugin or a
//! peer sends it, and every `Authorization` header, and tries to get work done: a
//! challenge with a made-up proof, or none at all, then a `request` and a `welcome`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use futures_util::{SinkExt as _, StreamExt as _};
use rmpv::Value;
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;

/// What the squatter does after a plugin's hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ploy {
    /// A challenge whose proof is made up, then (whatever the plugin says) a request and
    /// a welcome.
    ForgedChallenge,
    /// No challenge: a request, then a welcome, as a host from before mutual pairing would.
    NoChallenge,
}

/// Everything plugins sent the squatter, decoded to msgpack bytes, in order.
#[derive(Debug, Default)]
pub struct Seen {
    pub frames: Vec<Vec<u8>>,
    pub connections: usize,
    /// Every `Authorization` header an upgrade request carried.
    pub authorizations: Vec<String>,
}

impl Seen {
    /// The `t` of every message received, in order.
    pub fn kinds(&self) -> Vec<String> {
        self.frames
            .iter()
            .filter_map(|bytes| rmpv::decode::read_value(&mut &bytes[..]).ok())
            .filter_map(|value| value["t"].as_str().map(str::to_owned))
            .collect()
    }
}

pub struct Squatter {
    pub port: u16,
    pub seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Squatter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Squatter {
    /// Binds 127.0.0.1:`port` and serves every connection with `ploy`.
    pub async fn start(port: u16, ploy: Ploy) -> Squatter {
        let listener = TcpListener::bind(("127.0.0.1", port)).await.expect("bind the squatter");
        let seen = Arc::new(Mutex::new(Seen::default()));
        let shared = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, ploy, Arc::clone(&shared)));
            }
        });
        Squatter { port, seen, task }
    }
}

async fn serve(mut stream: TcpStream, ploy: Ploy, seen: Arc<Mutex<Seen>>) {
    let mut head = [0u8; 64];
    let Ok(read) = stream.peek(&mut head).await else { return };
    if head[..read].starts_with(b"GET /v1/health") {
        let body = format!(
            r#"{{"service":"studio-bridge","version":"{}","protocol":1,"sessions":0,"pairing":"required"}}"#,
            studio_bridge::protocol::SERVER_VERSION
        );
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(response.as_bytes()).await;
        return;
    }
    let headers_seen = Arc::clone(&seen);
    // The signature is tungstenite's `Callback`, whose error is a whole HTTP response.
    #[allow(clippy::result_large_err)]
    let record = move |request: &tokio_tungstenite::tungstenite::handshake::server::Request,
                       response: tokio_tungstenite::tungstenite::handshake::server::Response| {
        if let Some(value) = request.headers().get("authorization") {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            headers_seen.lock().unwrap().authorizations.push(value);
        }
        Ok(response)
    };
    let Ok(mut socket) = tokio_tungstenite::accept_hdr_async(stream, record).await else {
        return;
    };
    seen.lock().unwrap().connections += 1;
    let mut said_hello = false;
    while let Some(Ok(message)) = socket.next().await {
        let (bytes, text) = match &message {
            Message::Binary(bytes) => (bytes.to_vec(), false),
            Message::Text(text) => match BASE64.decode(text.as_bytes()) {
                Ok(bytes) => (bytes, true),
                Err(_) => continue,
            },
            Message::Close(_) => break,
            _ => continue,
        };
        let session_id = rmpv::decode::read_value(&mut &bytes[..])
            .ok()
            .and_then(|hello| hello["sessionId"].as_str().map(str::to_owned))
            .unwrap_or_default();
        seen.lock().unwrap().frames.push(bytes);
        if said_hello {
            continue;
        }
        said_hello = true;
        let frame = |value: Value| {
            let mut out = Vec::new();
            rmpv::encode::write_value(&mut out, &value).expect("encode");
            if text {
                Message::Text(BASE64.encode(out).into())
            } else {
                Message::Binary(out.into())
            }
        };
        let map =
            |entries: Vec<(&str, Value)>| Value::Map(entries.into_iter().map(|(k, v)| (Value::from(k), v)).collect());
        if ploy == Ploy::ForgedChallenge {
            let challenge = map(vec![
                ("t", "challenge".into()),
                ("hostNonce", BASE64.encode([7u8; 16]).into()),
                ("proof", BASE64.encode([9u8; 32]).into()),
            ]);
            if socket.send(frame(challenge)).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let request = map(vec![
            ("t", "request".into()),
            ("id", 1.into()),
            ("action", "exec".into()),
            (
                "args",
                map(vec![(
                    "script",
                    "workspace:SetAttribute('Squatted', true) return 'owned'".into(),
                )]),
            ),
            ("timeoutMs", 5000.into()),
        ]);
        let welcome = map(vec![
            ("t", "welcome".into()),
            ("protocol", 1.into()),
            ("serverVersion", "9.9.9".into()),
            ("sessionId", session_id.into()),
            ("multiplex", true.into()),
        ]);
        if socket.send(frame(request)).await.is_err() || socket.send(frame(welcome)).await.is_err() {
            break;
        }
    }
}

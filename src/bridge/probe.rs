//! Who holds the bridge port: asks `GET /v1/health` when binding fails, so that a second
//! studio-bridge joins the first as a peer, and anything else gets a clear error instead
//! of a port fight.

use std::time::Duration;

use http_body_util::{BodyExt as _, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::protocol::PROTOCOL_VERSION;

/// What answered on the port.
#[derive(Debug, Clone, PartialEq)]
pub enum Owner {
    /// A compatible studio-bridge host, its process id (absent from hosts built before
    /// `/v1/health` carried it), and whether it accepts unpaired plugins
    /// (`--allow-unpaired`).
    Bridge {
        version: String,
        pid: Option<u32>,
        pairing_off: bool,
    },
    /// A studio-bridge speaking another protocol version, and its process id if it says.
    IncompatibleBridge {
        version: String,
        protocol: u64,
        pid: Option<u32>,
    },
    /// Something else: what it said, for the error message.
    Other(String),
    /// Nothing accepted the connection (the owner just went away).
    Nobody,
}

pub async fn probe(port: u16) -> Owner {
    match tokio::time::timeout(Duration::from_secs(2), health(port)).await {
        Ok(owner) => owner,
        Err(_) => Owner::Other("it accepted a connection but did not answer GET /v1/health within 2 s".into()),
    }
}

async fn health(port: u16) -> Owner {
    let stream = match TcpStream::connect(("127.0.0.1", port)).await {
        Ok(stream) => stream,
        Err(_) => return Owner::Nobody,
    };
    let (mut sender, connection) = match hyper::client::conn::http1::handshake(TokioIo::new(stream)).await {
        Ok(pair) => pair,
        Err(error) => return Owner::Other(format!("it does not speak HTTP ({error})")),
    };
    tokio::spawn(connection);
    let request = match hyper::Request::get("/v1/health")
        .header("host", format!("127.0.0.1:{port}"))
        .body(Empty::<Bytes>::new())
    {
        Ok(request) => request,
        Err(error) => return Owner::Other(error.to_string()),
    };
    let response = match sender.send_request(request).await {
        Ok(response) => response,
        Err(error) => return Owner::Other(format!("it does not speak HTTP ({error})")),
    };
    let status = response.status();
    let body = match response.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(error) => return Owner::Other(format!("HTTP {status}, unreadable body ({error})")),
    };
    let Ok(health) = serde_json::from_slice::<serde_json::Value>(&body) else {
        let preview: String = String::from_utf8_lossy(&body).chars().take(80).collect();
        return Owner::Other(format!("HTTP {status}: {preview:?}"));
    };
    if health["service"] != "studio-bridge" {
        return Owner::Other(format!("HTTP {status}: {health}"));
    }
    let version = health["version"].as_str().unwrap_or("unknown").to_owned();
    let pid = health["pid"].as_u64().and_then(|pid| u32::try_from(pid).ok());
    match health["protocol"].as_u64() {
        Some(PROTOCOL_VERSION) => Owner::Bridge {
            version,
            pid,
            pairing_off: health["pairing"].as_str() == Some("off"),
        },
        protocol => Owner::IncompatibleBridge {
            version,
            protocol: protocol.unwrap_or(0),
            pid,
        },
    }
}

/// Whether the process on the port proved it holds this user's pairing secret, as the
/// plugin checks it (PROTOCOL.md, "Pairing is mutual"): what `doctor` reports, since a
/// plugin serves nothing to a host that cannot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostProof {
    /// It answered the nonce with the right proof.
    Proven,
    /// It could not prove itself: what it did instead.
    Unproven(String),
}

/// Says `hello` with a fresh nonce on `/v1/plugin`, as a paired plugin does, checks the
/// `challenge`, and closes before answering it (so no session is registered).
pub async fn host_proof(port: u16, secret: &str) -> HostProof {
    match tokio::time::timeout(Duration::from_secs(5), challenge(port, secret)).await {
        Ok(proof) => proof,
        Err(_) => HostProof::Unproven("it sent no pairing challenge within 5 s".into()),
    }
}

async fn challenge(port: u16, secret: &str) -> HostProof {
    use base64_simd::STANDARD as BASE64;
    use futures_util::{SinkExt as _, StreamExt as _};
    use tokio_tungstenite::tungstenite::Message;

    use crate::protocol::messages::Framing;

    let nonce = match super::pairing::nonce() {
        Ok(nonce) => nonce,
        Err(error) => return HostProof::Unproven(error.to_string()),
    };
    let url = format!("ws://127.0.0.1:{port}/v1/plugin");
    let mut socket = match tokio_tungstenite::connect_async(url.as_str()).await {
        Ok((socket, _)) => socket,
        Err(error) => return HostProof::Unproven(format!("it refused a plugin connection ({error})")),
    };
    let hello = rmpv::Value::Map(
        [
            ("t", rmpv::Value::from("hello")),
            ("protocol", PROTOCOL_VERSION.into()),
            ("pluginVersion", "doctor".into()),
            ("sessionId", format!("doctor-{}", std::process::id()).into()),
            ("instanceId", "doctor".into()),
            ("context", "edit".into()),
            ("state", "Edit".into()),
            ("actions", rmpv::Value::Array(Vec::new())),
            ("nonce", BASE64.encode_to_string(nonce).into()),
        ]
        .into_iter()
        .map(|(key, value)| (rmpv::Value::from(key), value))
        .collect(),
    );
    let mut bytes = Vec::new();
    if rmpv::encode::write_value(&mut bytes, &hello).is_err() || socket.send(Message::binary(bytes)).await.is_err() {
        return HostProof::Unproven("it closed the connection before the hello".into());
    }
    let answer = loop {
        match socket.next().await {
            Some(Ok(Message::Binary(payload))) => break payload,
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Ok(_)) | Some(Err(_)) | None => {
                return HostProof::Unproven("it closed the connection instead of proving itself".into());
            }
        }
    };
    let _ = socket.close(None).await;
    let message = crate::protocol::messages::decode_frame(&answer, Framing::Binary, 1 << 20);
    let fields = match message {
        Ok(rmpv::Value::Map(fields)) => fields,
        _ => return HostProof::Unproven("it answered with something that is not a protocol message".into()),
    };
    let take = |key: &str| {
        fields
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .and_then(|(_, value)| value.as_str().map(str::to_owned))
    };
    let kind = take("t").unwrap_or_default();
    if kind != "challenge" {
        let code = take("code").map(|code| format!(" `{code}`")).unwrap_or_default();
        return HostProof::Unproven(format!(
            "it answered a paired hello with `{kind}`{code}, not a challenge"
        ));
    }
    let decoded = |text: Option<String>| {
        text.and_then(|text| BASE64.decode_to_vec(text).ok())
            .unwrap_or_default()
    };
    let host_nonce = decoded(take("hostNonce"));
    let proof = decoded(take("proof"));
    if super::pairing::host_proof_matches(secret, &nonce, &host_nonce, &proof) {
        HostProof::Proven
    } else {
        HostProof::Unproven("its proof is wrong: it does not hold this user's pairing secret".into())
    }
}

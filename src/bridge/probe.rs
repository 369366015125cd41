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

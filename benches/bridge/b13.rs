//! B13: sequential `studio_exec` round trips over MCP Streamable HTTP (`mcp --http`).

use super::*;

use http_body_util::{BodyExt as _, Full};
use hyper::Request;
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;

/// One MCP client over HTTP: a kept-alive connection, the session and the token.
struct HttpClient {
    sender: SendRequest<Full<Bytes>>,
    url: String,
    token: String,
    session: Option<String>,
}

impl HttpClient {
    /// POSTs one JSON-RPC message; returns the response's body (the SSE stream, which
    /// ends after the answer) and the session header if any.
    async fn post(&mut self, body: &Json) -> anyhow::Result<(String, Option<String>)> {
        let mut request = Request::post(&self.url)
            .header(
                "host",
                self.url.trim_start_matches("http://").split('/').next().unwrap_or(""),
            )
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("authorization", format!("Bearer {}", self.token));
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        let request = request.body(Full::new(Bytes::from(serde_json::to_vec(body)?)))?;
        self.sender.ready().await?;
        let response = self.sender.send_request(request).await?;
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if !response.status().is_success() {
            bail!("HTTP {}", response.status());
        }
        let bytes = response.into_body().collect().await?.to_bytes();
        Ok((String::from_utf8_lossy(&bytes).into_owned(), session))
    }
}

/// B13: what B1 measures, through `mcp --http` instead of stdio.
pub(super) async fn b13(plan: &Plan, report: &mut Report) -> anyhow::Result<()> {
    eprintln!("B13: sequential exec round trips over Streamable HTTP");
    let port = free_port();
    let http = free_port();
    let log = std::fs::File::create(target_dir().join("bench/logs/b13.log"))?;
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
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()?;
    let _plugin = fast_plugin(port, Identity::edit("B13"), exec_handler()).await;
    let token_file = studio_bridge::bridge::token::token_path(port);
    let started = Instant::now();
    let stream = loop {
        if let (Ok(token), Ok(stream)) = (
            std::fs::read_to_string(&token_file),
            tokio::net::TcpStream::connect(("127.0.0.1", http)).await,
        ) {
            break (token.trim().to_owned(), stream);
        }
        if started.elapsed() > Duration::from_secs(20) {
            bail!("mcp --http did not start (stderr in b13.log)");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let (token, stream) = stream;
    stream.set_nodelay(true)?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let mut client = HttpClient {
        sender,
        url: format!("http://127.0.0.1:{http}/mcp"),
        token,
        session: None,
    };
    let (_, session) = client
        .post(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "b13", "version": "0"}}}))
        .await?;
    client.session = session;
    client
        .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await?;
    let call = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "studio_exec", "arguments": {"script": "print('hello') return 2, nil, 'ok'"}}})
    };
    let mut id = 1;
    for _ in 0..200 {
        let (body, _) = client.post(&call(id)).await?;
        id += 1;
        if !body.contains("\"returns\"") {
            bail!("exec over HTTP failed: {body}");
        }
    }
    let (mut p50, mut p99) = (Vec::new(), Vec::new());
    for _ in 0..plan.runs {
        let mut times = Vec::with_capacity(plan.b1_calls);
        for _ in 0..plan.b1_calls {
            let started = Instant::now();
            let (body, _) = client.post(&call(id)).await?;
            times.push(started.elapsed());
            id += 1;
            if !body.contains("\"returns\"") {
                bail!("exec over HTTP failed: {body}");
            }
        }
        let times = micros(times);
        p50.push(percentile(&times, 0.50));
        p99.push(percentile(&times, 0.99));
    }
    report.row("B13", "exec round trip over HTTP p50", p50, Unit::Micros, Target::None);
    report.row("B13", "exec round trip over HTTP p99", p99, Unit::Micros, Target::None);
    let _ = child.kill().await;
    Ok(())
}

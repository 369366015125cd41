//! B11: a quiet session's exec during a log flood.

use super::*;

/// B11: B1 on a quiet session, first alone, then while another Studio floods the host
/// (issue #16): its plugin pushes log events at 100,000 a second without pause, and a
/// peer keeps 10,000 calls to it coming (all answered `busy` past the session's cap).
/// Both run on a thread of their own, as they would be other processes. The figure
/// that matters is the ratio of the two p50s, measured in one sitting.
pub(super) async fn b11(plan: &Plan, report: &mut Report) -> anyhow::Result<()> {
    eprintln!("B11: exec round trips on one session, alone and while another floods the host");
    let port = free_port();
    let host = Server::spawn("b11-host", port, &[], true).await?;
    let quiet = fast_plugin(port, Identity::edit("B11-quiet"), exec_handler()).await;
    let (alone_p50, alone_p99, _) = sequential_exec_on(host.client.peer(), plan, Some(quiet.session_id())).await?;

    let stop = tokio_util::sync::CancellationToken::new();
    let (started_tx, started) = tokio::sync::oneshot::channel();
    let flood = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime.block_on(flood_the_host(port, stop, started_tx))
        })
    };
    started.await?;
    let measured = sequential_exec_on(host.client.peer(), plan, Some(quiet.session_id())).await;
    stop.cancel();
    let (events, busy) = flood
        .join()
        .map_err(|_| anyhow::anyhow!("the flood thread panicked"))??;
    let (p50, p99, max) = measured?;
    let ratio: Vec<f64> = p50
        .iter()
        .zip(&alone_p50)
        .map(|(loaded, alone)| loaded / alone)
        .collect();
    report.row(
        "B11",
        "exec round trip p50, alone",
        alone_p50,
        Unit::Micros,
        Target::None,
    );
    report.row(
        "B11",
        "exec round trip p99, alone",
        alone_p99,
        Unit::Micros,
        Target::None,
    );
    report.row(
        "B11",
        "exec round trip p50 during the flood",
        p50,
        Unit::Micros,
        Target::None,
    );
    report.row(
        "B11",
        "exec round trip p99 during the flood",
        p99,
        Unit::Micros,
        Target::None,
    );
    report.row(
        "B11",
        "exec round trip max during the flood",
        max,
        Unit::Micros,
        Target::None,
    );
    report.row(
        "B11",
        "p50 during the flood ÷ p50 alone (run by run)",
        ratio,
        Unit::Times,
        Target::AtMost(2.0),
    );
    report.note(format!(
        "B11: during the measurement the flooding plugin sent {events} log events and its peer got {busy} answers to its calls (`busy` past the session's cap)."
    ));
    if let Some(rss) = host.rss_kib() {
        report.row(
            "B11",
            "host RSS after the flood",
            vec![rss as f64 / 1024.0],
            Unit::MiB,
            Target::None,
        );
    }
    host.stop().await;
    Ok(())
}

/// B11's flood, until `stop`: a plugin pushing 100,000 log events a second, and a peer
/// sending calls to that plugin's session in bursts of 10,000, each burst sent once the
/// last is answered. Returns the events sent and the `busy` answers received.
async fn flood_the_host(
    port: u16,
    stop: tokio_util::sync::CancellationToken,
    started: tokio::sync::oneshot::Sender<()>,
) -> anyhow::Result<(u64, u64)> {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;

    const BURST: u64 = 10_000;
    let plugin = fast_plugin(port, Identity::edit("B11-flood"), exec_handler()).await;
    let session = plugin.session_id().to_owned();
    let token = std::fs::read_to_string(studio_bridge::bridge::token::token_path(port))?;
    let mut request = format!("ws://127.0.0.1:{port}/v1/client").into_client_request()?;
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {}", token.trim()).parse()?);
    let (socket, _) = tokio_tungstenite::connect_async(request).await?;
    let (mut sink, mut stream) = socket.split();
    let calls = async {
        let (mut id, mut busy) = (0u64, 0u64);
        while !stop.is_cancelled() {
            for _ in 0..BURST {
                id += 1;
                let call = value_map(vec![
                    ("t", "call".into()),
                    ("id", id.into()),
                    ("target", value_map(vec![("sessionId", session.as_str().into())])),
                    ("action", "exec".into()),
                    ("args", value_map(vec![("script", "return 1".into())])),
                    ("timeoutMs", 600_000.into()),
                ]);
                let mut bytes = Vec::new();
                rmpv::encode::write_value(&mut bytes, &call)?;
                sink.feed(Message::Binary(bytes.into())).await?;
            }
            sink.flush().await?;
            // The flooding plugin reads no requests while it floods: past its 256 in
            // flight, every call is answered `busy`; wait for those before the next burst.
            let mut answered = 0;
            while answered < BURST - 256 && !stop.is_cancelled() {
                let next = tokio::select! {
                    next = stream.next() => next,
                    () = stop.cancelled() => break,
                };
                match next {
                    Some(Ok(Message::Binary(_))) => answered += 1,
                    Some(Ok(_)) => {}
                    _ => bail!("B11: the host closed the flooding peer's link"),
                }
            }
            busy += answered;
        }
        anyhow::Ok(busy)
    };
    let events = async {
        let _ = started.send(());
        let mut sent = 0;
        while !stop.is_cancelled() {
            plugin.flood_logs(20_000, 100_000, 200).await;
            sent += 20_000;
        }
        sent
    };
    let (busy, events) = tokio::join!(calls, events);
    Ok((events, busy?))
}

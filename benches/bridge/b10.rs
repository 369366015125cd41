//! B10: exec p99 while 10 MB results run on another session.

use super::*;
use b3::{check_query, query_result};

/// B10: B1 on a quiet session while B3-sized results run on another, without pause:
/// the quiet caller's latency must not wait behind the megabytes. The load comes from a
/// second agent (a peer process, whose own stdout carries its results), querying
/// another Studio through the same host, so the host decodes, routes and forwards 10 MB
/// frames while it serves the quiet calls.
pub(super) async fn b10(plan: &Plan, report: &mut Report) -> anyhow::Result<()> {
    eprintln!("B10: exec round trips on one session while 10 MB query results run on another");
    let port = free_port();
    let host = Server::spawn("b10-host", port, &[], true).await?;
    let quiet = fast_plugin(port, Identity::edit("B10-quiet"), exec_handler()).await;
    let result = Arc::new(query_result());
    let loaded = {
        let raw = Arc::clone(&result);
        fast_plugin(
            port,
            Identity::edit("B10-load"),
            handler(move |_, _| Reply::Raw(Arc::clone(&raw))),
        )
        .await
    };
    let loaded_session = loaded.session_id().to_owned();
    let call = CallToolRequestParams::new("studio_query").with_arguments(object(json!({
        "path": "game.Workspace", "depth": 2, "properties": ["Anchored"], "sessionId": loaded_session
    })));
    // The second agent runs on a thread of its own, as the process of its own it models:
    // parsing its results must not share a thread with the measured client.
    let stop = tokio_util::sync::CancellationToken::new();
    let (ready_tx, ready) = tokio::sync::oneshot::channel();
    let load = {
        let stop = stop.clone();
        own_thread("b10-agent").spawn(async move {
            let agent = Server::spawn("b10-peer", port, &[], false).await?;
            let _ = ready_tx.send(());
            let peer = agent.client.peer().clone();
            let mut results = 0usize;
            while !stop.is_cancelled() {
                let text = ok(peer.call_tool(call.clone()).await?)?;
                check_query(&text, true)?;
                results += 1;
            }
            agent.stop().await;
            anyhow::Ok(results)
        })
    };
    ready.await?;
    let started = Instant::now();
    let measured = sequential_exec_on(host.client.peer(), plan, Some(quiet.session_id())).await;
    let elapsed = started.elapsed();
    stop.cancel();
    let results = load.await??;
    let (p50, p99, max) = measured?;
    if results == 0 {
        bail!("B10: no query result completed during the measurement");
    }
    report.row(
        "B10",
        "exec round trip p50 under that load",
        p50,
        Unit::Micros,
        Target::None,
    );
    report.row(
        "B10",
        "exec round trip p99 under that load",
        p99,
        Unit::Micros,
        Target::AtMost(2000.0),
    );
    report.row(
        "B10",
        "exec round trip max under that load",
        max,
        Unit::Micros,
        Target::None,
    );
    report.note(format!(
        "B10: {results} query results of {} bytes of msgpack went through the host while the exec calls ran ({:.1} s).",
        result.len(),
        elapsed.as_secs_f64()
    ));
    drop(loaded);
    drop(quiet);
    host.stop().await;
    Ok(())
}

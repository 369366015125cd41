//! B6 and B7: a second process (bridge client) in the path, and the host SIGKILLed.

use super::*;

/// B6 (B1 through a second process, a bridge client of the first) and B7 (the host
/// SIGKILLed: a survivor becomes host, the plugin comes back, a call succeeds). Both are
/// reported n/a when a second `mcp` on a taken port does not become a peer (the peer
/// link is not built in this binary).
pub(super) async fn peers(plan: &Plan, report: &mut Report, do_b6: bool, do_b7: bool) -> anyhow::Result<()> {
    eprintln!("B6/B7: a second process on the same port");
    let port = free_port();
    let host = Server::spawn("b6-host", port, &[], true).await?;
    let plugin = fast_plugin(port, Identity::edit("B6"), exec_handler()).await;
    let client = match Server::spawn("b6-client", port, &[], false).await {
        Ok(client) => client,
        Err(error) => {
            let why = format!("n/a (peer link not built: a second `mcp` on a taken port did not start: {error:#})");
            if do_b6 {
                report.unavailable("B6", "exec round trip through a bridge client", &why);
            }
            if do_b7 {
                report.unavailable("B7", "host SIGKILLed → call succeeds via survivor", &why);
            }
            host.stop().await;
            return Ok(());
        }
    };
    let probe = client.client.call_tool(exec_call(None)).await;
    if let Err(why) = probe.map_err(anyhow::Error::from).and_then(ok) {
        let why = format!("n/a (peer link not built: a call through the second process failed: {why:#})");
        if do_b6 {
            report.unavailable("B6", "exec round trip through a bridge client", &why);
        }
        if do_b7 {
            report.unavailable("B7", "host SIGKILLed → call succeeds via survivor", &why);
        }
        client.stop().await;
        host.stop().await;
        return Ok(());
    }
    if do_b6 {
        let before = plugin.log().answered;
        let (p50, p99, max) = sequential_exec(client.client.peer(), plan).await?;
        if plugin.log().answered == before {
            bail!("B6 calls did not reach the plugin");
        }
        let b1 = report.median_of("B1", "exec round trip p50");
        let target = b1.map_or(Target::None, |b1| Target::AtMost(b1 + 100.0));
        report.row("B6", "exec round trip via bridge client p50", p50, Unit::Micros, target);
        report.row(
            "B6",
            "exec round trip via bridge client p99",
            p99,
            Unit::Micros,
            Target::None,
        );
        report.row(
            "B6",
            "exec round trip via bridge client max",
            max,
            Unit::Micros,
            Target::None,
        );
    }
    client.stop().await;
    host.stop().await;
    drop(plugin);
    if do_b7 {
        let mut times = Vec::new();
        for run in 0..plan.b7_runs {
            times.push(failover(run).await?.as_secs_f64() * 1e3);
        }
        report.row(
            "B7",
            "host SIGKILLed → call succeeds via survivor",
            times,
            Unit::Millis,
            Target::AtMost(2000.0),
        );
        report.note(
            "B7: the fake plugin reconnects 50 ms after a close and retries every 25 ms; the real plugin backs off 0.25–1 s."
                .into(),
        );
    }
    Ok(())
}

/// One failover: host + plugin + one bridge client; SIGKILL the host; time until a call
/// through the client succeeds.
async fn failover(run: usize) -> anyhow::Result<Duration> {
    let port = free_port();
    let mut host = Server::spawn(&format!("b7-host-{run}"), port, &[], false).await?;
    let plugin = fast_plugin(port, Identity::edit("B7"), exec_handler()).await;
    let survivor = Server::spawn(&format!("b7-client-{run}"), port, &[], false).await?;
    ok(survivor.client.call_tool(exec_call(None)).await?)?;
    let before = plugin.log().welcomes;
    host.child.start_kill()?;
    let killed = Instant::now();
    let call = CallToolRequestParams::new("studio_exec")
        .with_arguments(object(json!({ "script": "return 1", "timeoutMs": 2000 })));
    let elapsed = loop {
        let outcome = survivor.client.call_tool(call.clone()).await;
        if let Ok(result) = outcome
            && ok(result).is_ok()
        {
            break killed.elapsed();
        }
        if killed.elapsed() > Duration::from_secs(20) {
            bail!("B7: no call succeeded within 20 s of the host's SIGKILL");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    if plugin.log().welcomes <= before {
        bail!("B7: the plugin did not reconnect, yet the call succeeded");
    }
    let _ = host.child.wait().await;
    survivor.stop().await;
    Ok(elapsed)
}

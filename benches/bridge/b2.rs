//! B2: 8 plugins, 64 calls in flight.

use super::*;

/// B2: 8 plugins (8 instances), 64 calls in flight, each naming its sessionId.
pub(super) async fn b2(plan: &Plan, report: &mut Report) -> anyhow::Result<()> {
    const PLUGINS: usize = 8;
    const IN_FLIGHT: usize = 64;
    eprintln!("B2: {PLUGINS} plugins, {IN_FLIGHT} calls in flight");
    let port = free_port();
    let server = Server::spawn("b2", port, &[], true).await?;
    let mut plugins = Vec::new();
    for i in 0..PLUGINS {
        plugins.push(fast_plugin(port, Identity::edit(&format!("B2-{i}")), exec_handler()).await);
    }
    let sessions: Vec<String> = plugins.iter().map(|p| p.session_id().to_owned()).collect();
    let peer = server.client.peer().clone();
    let mut rates = Vec::new();
    let mut p50s = Vec::new();
    let mut p99s = Vec::new();
    // The first run warms up and is not counted.
    for run in 0..=plan.runs {
        let calls = if run == 0 { plan.b2_calls / 4 } else { plan.b2_calls };
        let started = Instant::now();
        let mut workers = Vec::new();
        for w in 0..IN_FLIGHT {
            let peer = peer.clone();
            let call = exec_call(Some(&sessions[w % PLUGINS]));
            let count = calls / IN_FLIGHT + usize::from(w < calls % IN_FLIGHT);
            workers.push(tokio::spawn(async move {
                let mut times = Vec::with_capacity(count);
                for _ in 0..count {
                    let t = Instant::now();
                    let result = peer.call_tool(call.clone()).await?;
                    times.push(t.elapsed());
                    ok(result)?;
                }
                anyhow::Ok(times)
            }));
        }
        let mut times = Vec::with_capacity(calls);
        for worker in workers {
            times.extend(worker.await??);
        }
        let elapsed = started.elapsed();
        if run > 0 {
            rates.push(calls as f64 / elapsed.as_secs_f64());
            let times = micros(times);
            p50s.push(percentile(&times, 0.50));
            p99s.push(percentile(&times, 0.99));
        }
    }
    report.row(
        "B2",
        "calls/s, 8 plugins × 64 in flight",
        rates,
        Unit::PerSec,
        Target::AtLeast(20_000.0),
    );
    report.row("B2", "latency under that load p50", p50s, Unit::Micros, Target::None);
    report.row("B2", "latency under that load p99", p99s, Unit::Micros, Target::None);
    server.stop().await;
    Ok(())
}

//! B1: sequential `studio_exec` round trips, and the MCP hop alone.

use super::*;

/// B1: sequential `studio_exec` round trips.
pub(super) async fn b1(plan: &Plan, report: &mut Report) -> anyhow::Result<()> {
    eprintln!("B1: sequential exec round trips");
    let port = free_port();
    let server = Server::spawn("b1", port, &[], true).await?;
    let _plugin = fast_plugin(port, Identity::edit("B1"), exec_handler()).await;
    let peer = server.client.peer().clone();
    let (p50, p99, max) = sequential_exec(&peer, plan).await?;
    // The same client and server, a tool that needs no plugin (`studio_sessions` reads
    // the host's own table): the MCP hop alone, what B1 costs before the WebSocket hop to
    // Studio and back. The difference between the two p50s is that hop.
    let (floor_p50, _, _) = sequential_calls(&peer, plan, CallToolRequestParams::new("studio_sessions")).await?;
    // Issue #14 lowered TESTING.md's 150 µs to 120 µs.
    report.row("B1", "exec round trip p50", p50, Unit::Micros, Target::AtMost(120.0));
    report.row("B1", "exec round trip p99", p99, Unit::Micros, Target::AtMost(500.0));
    report.row("B1", "exec round trip max", max, Unit::Micros, Target::None);
    report.row(
        "B1",
        "the MCP hop alone (studio_sessions, no plugin) p50",
        floor_p50,
        Unit::Micros,
        Target::None,
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    if let Some(rss) = server.rss_kib() {
        report.row(
            "B5",
            "RSS, idle after B1 (1 plugin, warm)",
            vec![rss as f64 / 1024.0],
            Unit::MiB,
            Target::AtMost(12.0),
        );
    }
    server.stop().await;
    Ok(())
}

//! B14: what cut results cost the host's memory (issue #38: the result store's bound holds
//! in memory, not only in name).

use super::*;

/// Calls per run, as the issue measured them (646 MB before the store counted what it
/// held).
const B14_CALLS: usize = 60;

/// Log lines in each answer, and the bytes of each line's body.
const B14_LINES: u64 = 10_000;
const B14_BODY: usize = 300;

/// B14: the host's peak RSS after 60 `studio_logs {count: 10000}` against a plugin
/// holding 10,000 lines of about 320 bytes (each answer a 3.5 MB frame, cut at the default
/// bound, its rest kept); then its RSS growth over 2,000 small calls after that.
pub(super) async fn b14(plan: &Plan, report: &mut Report) -> anyhow::Result<()> {
    eprintln!("B14: peak RSS after {B14_CALLS} cut logs results");
    let entries: Vec<Value> = (0..B14_LINES)
        .map(|seq| {
            value_map(vec![
                ("seq", seq.into()),
                ("level", "output".into()),
                ("body", format!("line {seq:05} {}", "x".repeat(B14_BODY)).into()),
                ("timestamp", Value::F64(1.7e12)),
            ])
        })
        .collect();
    let logs = value_map(vec![
        ("entries", Value::Array(entries)),
        ("total", B14_LINES.into()),
        ("bufferCapacity", B14_LINES.into()),
        ("nextSince", B14_LINES.into()),
    ]);
    let (mut peaks, mut growth) = (Vec::new(), Vec::new());
    for _ in 0..plan.runs.min(3) {
        let port = free_port();
        let server = Server::spawn("b14", port, &[], true).await?;
        let answer = logs.clone();
        let _plugin = fast_plugin(
            port,
            Identity::edit("B14"),
            handler(move |action, _| match action {
                "logs" => Reply::Ok(answer.clone()),
                _ => Reply::Ok(value_map(vec![("state", "Edit".into())])),
            }),
        )
        .await;
        let call = CallToolRequestParams::new("studio_logs").with_arguments(object(json!({"count": B14_LINES})));
        for _ in 0..B14_CALLS {
            ok(server.client.call_tool(call.clone()).await?)?;
        }
        peaks.push(server.status_kib("VmHWM").unwrap_or(0) as f64 / 1024.0);
        let before = server.status_kib("VmRSS").unwrap_or(0);
        let small = CallToolRequestParams::new("studio_state").with_arguments(object(json!({})));
        for _ in 0..2_000 {
            ok(server.client.call_tool(small.clone()).await?)?;
        }
        let after = server.status_kib("VmRSS").unwrap_or(0);
        growth.push(after.saturating_sub(before) as f64 / 1024.0);
        server.stop().await;
    }
    report.row(
        "B14",
        "peak RSS after 60 cut logs results (10,000 lines each)",
        peaks,
        Unit::MiB,
        Target::AtMost(160.0),
    );
    report.row(
        "B14",
        "RSS growth over 2,000 small calls after them",
        growth,
        Unit::MiB,
        Target::AtMost(8.0),
    );
    Ok(())
}

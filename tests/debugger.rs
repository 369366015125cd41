//! The debugger (#48) against the real plugin under Lune, whose test Studio models
//! ScriptDebuggerService and stops its game Scripts at breakpoints (tests/lune/lib/
//! ScriptDebugger.luau): the workflow of one MCP conversation (break, play, hits with a
//! wait in the host, stop), what is left after, and `test_run {coverage: true}`.

use serde_json::json;

use crate::support::studio::{edit_studio, exchange};

const LOOP: &str =
    "local total = 0\nfor i = 1, 3 do\n\ttotal += i\n\tlocal label = \"step\" .. i\nend\nprint(\"done\", total)\n";

#[tokio::test]
async fn break_play_hits_stop_then_nothing_is_left() {
    let (rbxm, mcp, _studio) = edit_studio().await;
    mcp.ok(
        "studio_create",
        json!({"items": [{"className": "Script", "parent": "ServerScriptService", "name": "Loop", "source": LOOP}]}),
    )
    .await;

    // Nothing yet: a hits call with a wait answers empty when the time is up.
    let none = mcp.ok("studio_debug", json!({"action": "hits", "waitMs": 300})).await;
    assert_eq!(none["hits"], json!([]), "{none}");

    let placed = exchange(
        &mcp,
        "studio_debug",
        json!({"action": "break", "path": "ServerScriptService.Loop", "line": 4,
               "capture": {"expressions": ["total * 10"], "depth": 1}, "hits": 2}),
    )
    .await;
    assert_eq!(placed["verified"], true, "{placed}");
    assert_eq!(placed["line"], 4);

    mcp.ok("studio_play", json!({"mode": "start"})).await;
    let first = exchange(&mcp, "studio_debug", json!({"action": "hits", "waitMs": 15000})).await;
    let hits = first["hits"].as_array().expect("hits");
    assert!(!hits.is_empty(), "the wait ends with a capture: {first}");
    let hit = &hits[0];
    assert_eq!(hit["context"], "server", "{hit}");
    assert_eq!(hit["reason"], "breakpoint", "{hit}");
    assert_eq!(hit["line"], 4, "{hit}");
    assert_eq!(hit["expressions"][0]["expression"], "total * 10", "{hit}");
    assert_eq!(
        hit["expressions"][0]["value"], "10",
        "total is 1 on the first pass: {hit}"
    );
    let names: Vec<&str> = hit["variables"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert!(names.contains(&"total"), "{names:?}");

    // The second capture, read after the first's `next`; then the breakpoint is spent.
    let mut seen = hits.len();
    let mut since = first["next"].as_u64().unwrap();
    while seen < 2 {
        let more = mcp
            .ok(
                "studio_debug",
                json!({"action": "hits", "since": since, "waitMs": 15000}),
            )
            .await;
        let got = more["hits"].as_array().unwrap();
        assert!(!got.is_empty(), "a second capture: {more}");
        seen += got.len();
        since = more["next"].as_u64().unwrap();
    }
    assert_eq!(seen, 2, "hits: 2 captures twice, then turns itself off");
    let listed = mcp.ok("studio_debug", json!({"action": "breakpoints"})).await;
    assert_eq!(listed["breakpoints"][0]["hits"], 2, "{listed}");
    assert_eq!(listed["breakpoints"][0]["remaining"], 0, "{listed}");
    mcp.ok("studio_play", json!({"mode": "stop"})).await;

    let cleared = mcp.ok("studio_debug", json!({"action": "clear"})).await;
    assert_eq!(cleared["removed"], 1, "{cleared}");
    let after = mcp.ok("studio_debug", json!({"action": "breakpoints"})).await;
    assert_eq!(after["breakpoints"], json!([]), "{after}");

    // Arguments that cannot work are named before anything is set.
    let bad = mcp
        .err(
            "studio_debug",
            json!({"action": "break", "path": "ServerScriptService.Loop", "line": 2, "waitMs": 5}),
        )
        .await;
    assert_eq!(bad["code"], "invalid_args", "{bad}");
    let missing = mcp
        .err(
            "studio_debug",
            json!({"action": "break", "path": "ServerScriptService.Nowhere", "line": 2}),
        )
        .await;
    assert_eq!(missing["code"], "not_found", "{missing}");
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

#[tokio::test]
async fn test_run_with_coverage_lists_the_lines_that_ran() {
    let (rbxm, mcp, _studio) = edit_studio().await;
    mcp.ok(
        "studio_create",
        json!({"items": [{"className": "Script", "parent": "ServerScriptService", "name": "Loop", "source": LOOP}]}),
    )
    .await;
    let run = exchange(
        &mcp,
        "studio_test_run",
        json!({"script": "task.wait(0.3) return 1", "coverage": true}),
    )
    .await;
    assert_eq!(run["success"], true, "{run}");
    let scripts = run["coverage"]["scripts"].as_array().expect("coverage.scripts");
    let ours = scripts
        .iter()
        .find(|s| {
            s["path"]
                .as_str()
                .is_some_and(|p| p.ends_with("ServerScriptService.Loop"))
        })
        .unwrap_or_else(|| panic!("the game's script is covered: {run}"));
    let covered: Vec<u64> = ours["covered"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_u64())
        .collect();
    assert!(covered.contains(&1) && covered.contains(&6), "{covered:?}");
    let plain = mcp.ok("studio_test_run", json!({"script": "return 1"})).await;
    assert!(plain.get("coverage").is_none(), "no coverage unless asked: {plain}");
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

/// studio-bridge gone for good (no host welcomes the session again within 15 s): the
/// plugin removes the breakpoints it set, as `clear` would.
#[tokio::test]
async fn breakpoints_go_when_studio_bridge_is_gone() {
    use crate::support::free_port;
    use crate::support::lune::HeadlessStudio;
    use crate::support::mcp_client::Mcp;
    use crate::support::studio::installed_plugin;
    use std::time::Duration;

    let rbxm = installed_plugin().await;
    let port = free_port();
    let first = Mcp::spawn_paired(port, &[]).await;
    let mut studio = HeadlessStudio::start(port, &rbxm, "edit");
    studio
        .wait_for_line("[harness] connected context=edit", Duration::from_secs(30))
        .await;
    first
        .ok(
            "studio_create",
            json!({"items": [{"className": "Script", "parent": "ServerScriptService", "name": "Loop", "source": LOOP}]}),
        )
        .await;
    first
        .ok(
            "studio_debug",
            json!({"action": "break", "path": "ServerScriptService.Loop", "line": 3}),
        )
        .await;
    // The host goes away (killed, as a crash or a closed agent would leave it).
    let killed = std::process::Command::new("kill")
        .args(["-9", &first.pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    drop(first);
    tokio::time::sleep(Duration::from_secs(17)).await;
    let second = Mcp::spawn_paired(port, &[]).await;
    studio
        .wait_for_line("[harness] connected context=edit", Duration::from_secs(30))
        .await;
    let listed = second.ok("studio_debug", json!({"action": "breakpoints"})).await;
    assert_eq!(listed["breakpoints"], json!([]), "{listed}");
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

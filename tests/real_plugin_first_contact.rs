//! First contact (issue #40): the real plugin under Lune in a Studio that lacks engine
//! members, as an older Studio, or one with a feature switched off, presents them. It pairs
//! without the engine's SHA-256, a tool whose member is missing answers `unsupported` naming
//! it while the rest work, and `doctor --studio` names what is missing.

use crate::support;

use std::time::Duration;

use serde_json::{Value as Json, json};
use support::free_port;
use support::lune::HeadlessStudio;
use support::mcp_client::{Mcp, binary, paired_config_dir};
use support::studio::{exchange, installed_plugin, run_luau};

const MULTIPLAYER: &str = "StudioTestService.ExecuteMultiplayerTestAsync";
const HASH: &str = "EncodingService.ComputeBufferHash";

/// The installed plugin, in Edit, in a Studio without `missing`, connected to a paired host.
async fn lacking(missing: &[&str]) -> (Mcp, HeadlessStudio, u16) {
    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn_paired(port, &[]).await;
    let mut studio = HeadlessStudio::start_lacking(port, &rbxm, "edit", &[], missing);
    studio
        .wait_for_line("[harness] connected context=edit", Duration::from_secs(30))
        .await;
    (mcp, studio, port)
}

/// `studio-bridge doctor --studio --json [extra]` beside the host on `port`: its exit code
/// and JSON.
async fn doctor_studio(port: u16, extra: &[&str]) -> (Option<i32>, Json) {
    let output = tokio::time::timeout(
        Duration::from_secs(90),
        tokio::process::Command::new(binary())
            .args(["doctor", "--studio", "--json", "--port", &port.to_string()])
            .args(extra)
            .env("STUDIO_BRIDGE_CONFIG_DIR", paired_config_dir())
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null())
            .output(),
    )
    .await
    .expect("doctor finished")
    .expect("doctor ran");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "doctor --studio --json printed no JSON ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.code(), report)
}

fn probe<'a>(report: &'a Json, name: &str) -> &'a Json {
    report["probes"]
        .as_array()
        .expect("probes")
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no probe {name}: {report}"))
}

#[tokio::test]
async fn the_plugin_pairs_and_serves_without_the_engines_sha256() {
    let (mcp, _studio, _) = lacking(&[HASH]).await;
    assert_eq!(run_luau(&mcp, "return 40 + 2").await, 42);
    let listed = exchange(&mcp, "studio_sessions", json!({})).await;
    let session = &listed["sessions"][0];
    assert!(
        session["missing"]
            .as_array()
            .is_some_and(|m| m.iter().any(|n| n == HASH)),
        "the session says what this Studio lacks: {listed}"
    );
    assert!(session["studioVersion"].is_string(), "{listed}");
}

#[tokio::test]
async fn a_tool_whose_member_is_missing_answers_unsupported_and_the_rest_work() {
    let (mcp, _studio, _) = lacking(&[MULTIPLAYER]).await;
    let error = mcp.err("studio_play", json!({"mode": "start", "players": 2})).await;
    eprintln!("<-- {error}");
    assert_eq!(error["code"], "unsupported", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains(MULTIPLAYER), "names the member: {message}");
    assert!(message.contains("studio-bridge doctor --studio"), "{message}");
    assert_eq!(error["details"]["member"], MULTIPLAYER, "{error}");
    // Nothing was attempted: no test runs, and every other tool works.
    assert_eq!(mcp.ok("studio_state", json!({})).await["state"], "Edit");
    assert_eq!(run_luau(&mcp, "return 'still here'").await, "still here");
}

#[tokio::test]
async fn doctor_studio_names_what_is_missing_and_passes_on_a_complete_studio() {
    let (_mcp, _studio, port) = lacking(&[MULTIPLAYER]).await;
    let (code, report) = doctor_studio(port, &[]).await;
    assert_eq!(code, Some(1), "a failed probe exits 1: {report}");
    let multiplayer = probe(&report, MULTIPLAYER);
    assert_eq!(multiplayer["status"], "failed", "{multiplayer}");
    assert!(
        multiplayer["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t == "play")),
        "{multiplayer}"
    );
    assert_eq!(report["plugin"]["sha256"], "engine", "{report}");
    assert!(report["studio"]["version"].is_string(), "{report}");

    let (mcp, _studio, port) = lacking(&[]).await;
    let (code, report) = doctor_studio(port, &[]).await;
    let failed: Vec<&Json> = report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["status"] == "failed")
        .collect();
    assert_eq!(
        (code, failed.len()),
        (Some(0), 0),
        "a complete Studio passes: {failed:?}"
    );
    assert_eq!(probe(&report, MULTIPLAYER)["status"], "ok", "{report}");
    // Which way screenshots go (#46): Studio's own capture is there, its permission not
    // yet asked (a probe never asks), and no test capture made without it.
    let capture = &report["captures"][0];
    assert_eq!(capture["context"], "edit", "{report}");
    assert_eq!(capture["service"], true, "{capture}");
    assert_eq!(capture["permission"], "unasked", "{capture}");
    assert!(capture.get("tiny").is_none(), "{capture}");
    // Once a screenshot asked and was allowed, the probe's tiny capture runs.
    assert_eq!(
        mcp.ok("studio_screenshot", json!({"maxWidth": 16})).await["source"],
        "studio"
    );
    let (_, report) = doctor_studio(port, &[]).await;
    let capture = &report["captures"][0];
    assert_eq!(
        (capture["path"].as_str(), capture["permission"].as_str()),
        (Some("studio"), Some("granted")),
        "{capture}"
    );
    assert_eq!(capture["tiny"]["ok"], true, "{capture}");

    // --play: the probes again in a Play test's server and client, started and stopped by
    // doctor; the client's input and GUI members are checked there.
    let (code, report) = doctor_studio(port, &["--play"]).await;
    assert_eq!(code, Some(0), "{report}");
    let status_in = |context: &str, name: &str| {
        report["probes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["context"] == context && p["name"] == name)
            .map(|p| p["status"].clone())
    };
    assert_eq!(
        status_in("server", "StudioTestService.EndTest"),
        Some(json!("ok")),
        "{report}"
    );
    assert_eq!(
        status_in("client", "UserInputService.CreateVirtualInput"),
        Some(json!("ok")),
        "the client's members are probed in the client: {report}"
    );
    let contexts: Vec<&str> = report["captures"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["context"].as_str())
        .collect();
    assert_eq!(contexts, ["edit", "server", "client"], "{report}");
    assert_eq!(
        mcp.ok("studio_state", json!({})).await["state"],
        "Edit",
        "the test was stopped"
    );
}

//! The command line over the same command table: human output by default, the MCP
//! tool's JSON with `--json`, exit code 1 on error.

mod support;

use std::time::Duration;

use serde_json::json;
use support::fake_plugin::{FakePlugin, Identity, studio_like};
use support::free_port;
use support::mcp_client::binary;

async fn run(args: &[&str]) -> std::process::Output {
    let mut command = tokio::process::Command::new(binary());
    command.args(args).env_remove("STUDIO_BRIDGE_PORT");
    tokio::time::timeout(Duration::from_secs(20), command.output())
        .await
        .expect("CLI finished")
        .expect("CLI ran")
}

#[tokio::test]
async fn exec_prints_the_mcp_json_and_hosts_just_long_enough() {
    let port = free_port();
    let port_text = port.to_string();
    // The plugin keeps retrying until the CLI's short-lived host is up.
    let plugin = FakePlugin::start(port, Identity::edit("A"), studio_like());
    let output = run(&["exec", "--port", &port_text, "return 2, nil, 'ok'", "--json"]).await;
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed["returns"], json!([2, null, "ok"]));
    assert_eq!(
        plugin.log().requests[0].args["script"].as_str(),
        Some("return 2, nil, 'ok'")
    );
}

#[tokio::test]
async fn human_output_is_readable_and_errors_exit_1() {
    let port = free_port();
    let port_text = port.to_string();
    let _plugin = FakePlugin::start(port, Identity::edit("A"), studio_like());
    let output = run(&["state", "--port", &port_text]).await;
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(
        text.contains("state: Edit\n") && text.contains("placeName: Place A\n"),
        "{text}"
    );

    let output = run(&["state", "--port", &port_text, "--session", "nope", "--json"]).await;
    assert_eq!(output.status.code(), Some(1));
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed["error"]["code"], "session_not_found");
}

#[tokio::test]
async fn sessions_waits_for_a_plugin_that_connects_within_the_startup_grace() {
    let port = free_port();
    let port_text = port.to_string();
    let cli = tokio::spawn(async move { run(&["sessions", "--port", &port_text, "--json"]).await });
    // The CLI is the host; a Studio's plugin reconnects to it a moment later.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let _plugin = FakePlugin::start(port, Identity::edit("A"), studio_like());
    let output = cli.await.unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed["sessions"][0]["sessionId"], "A-edit", "{printed}");
}

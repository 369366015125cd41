//! The real plugin in playtests (TESTING.md layer 5; issue 25, items 5 and 6): the embedded
//! .rbxm, installed by the binary's own `install-plugin`, in a headless Studio under Lune
//! (StudioTestService and PluginConnectionService as tests/lune/lib models them), driven over
//! MCP by the real `studio-bridge mcp`.
//!
//! - A `test_run` that is cancelled ends the test it started: no test DataModel is left, and
//!   the next `test_run` runs instead of answering `busy`.
//! - A `test_run`'s logs hold what the game's scripts printed when the test's DataModels
//!   started, before their PluginConnection to the edit plugin was up, exactly once.

mod support;

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientRequest, Request};
use rmcp::service::PeerRequestOptions;
use serde_json::json;
use support::lune::HeadlessStudio;
use support::studio::{edit_studio, wait_for_contexts};

/// The harness's lines about tests starting and ending, in order.
fn test_lines(studio: &mut HeadlessStudio) -> Vec<String> {
    studio
        .lines_so_far()
        .iter()
        .filter(|l| l.starts_with("[harness] test "))
        .map(|l| {
            if l.starts_with("[harness] test started") {
                "started".to_owned()
            } else {
                "ended".to_owned()
            }
        })
        .collect()
}

#[tokio::test]
async fn a_cancelled_test_run_leaves_no_test_running_and_the_next_test_run_works() {
    let (rbxm, mcp, mut studio) = edit_studio().await;
    let Ok(serde_json::Value::Object(arguments)) =
        serde_json::to_value(json!({"script": "while true do task.wait() end", "timeoutMs": 60000}))
    else {
        unreachable!()
    };
    let request = ClientRequest::CallToolRequest(Request::new(
        CallToolRequestParams::new("studio_test_run").with_arguments(arguments),
    ));
    let handle = mcp
        .client
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .expect("send test_run");
    studio
        .wait_for_line("[harness] test started", Duration::from_secs(30))
        .await;
    // The script runs in the test's server and its client is there.
    wait_for_contexts(&mcp, &["edit", "server", "client"], "the test came up").await;
    handle
        .cancel(Some("the agent gave up".into()))
        .await
        .expect("cancel test_run");

    // The cancelled call's test ends (the old plugin left it running until the script's own
    // 60 s timeout, and the next test_run answered `busy`).
    studio
        .wait_for_line("[harness] test ended", Duration::from_secs(30))
        .await;
    wait_for_contexts(&mcp, &["edit"], "no test is left running").await;
    let next = mcp.ok("studio_test_run", json!({"script": "return 'next'"})).await;
    assert_eq!(next["success"], true, "{next}");
    assert_eq!(next["returns"], json!(["next"]));
    assert_eq!(next["timedOut"], false);
    studio
        .wait_for_line("[harness] test ended", Duration::from_secs(30))
        .await;
    assert_eq!(
        test_lines(&mut studio),
        ["started", "ended", "started", "ended"],
        "the cancelled test ended before the next one started"
    );
    wait_for_contexts(&mcp, &["edit"], "back in Edit").await;
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

#[tokio::test]
async fn a_game_scripts_startup_print_appears_in_test_run_logs_exactly_once() {
    let (rbxm, mcp, _studio) = edit_studio().await;
    // Game scripts made in Edit: the test's DataModels are copies, and each runs its own.
    let made = mcp
        .ok(
            "studio_exec",
            json!({"script": r#"
                local s = Instance.new("Script")
                s.Name = "Greeter"
                s.Source = "print('the server script started')"
                s.Parent = game:GetService("ServerScriptService")
                local c = Instance.new("Script")
                c.Name = "ClientGreeter"
                c.RunContext = Enum.RunContext.Client
                c.Source = "print('the client script started')"
                c.Parent = game:GetService("ReplicatedStorage")
            "#}),
        )
        .await;
    assert_eq!(made["success"], true, "{made}");

    let ran = mcp
        .ok(
            "studio_test_run",
            json!({"script": "print('the test script runs') task.wait(1) return 1"}),
        )
        .await;
    assert_eq!(ran["success"], true, "{ran}");
    let logs = ran["logs"].as_array().expect("logs");
    let count = |context: &str, body: &str| {
        logs.iter()
            .filter(|l| l["context"] == context && l["body"] == body)
            .count()
    };
    assert_eq!(count("server", "the server script started"), 1, "{logs:?}");
    assert_eq!(count("client", "the client script started"), 1, "{logs:?}");
    assert_eq!(count("server", "the test script runs"), 1, "{logs:?}");
    let server: Vec<&str> = logs
        .iter()
        .filter(|l| l["context"] == "server")
        .filter_map(|l| l["body"].as_str())
        .filter(|body| body.starts_with("the "))
        .collect();
    assert_eq!(
        server,
        ["the server script started", "the test script runs"],
        "the server's lines in the order it printed them"
    );
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

//! No exec in edit while a person's Play is starting (issue 25, item 7; PROTOCOL.md,
//! Sessions). The edit DataModel stays in Edit during a test, and the host and the plugin
//! learn of a starting test at different moments: a call whose context the host defaulted
//! and that it sends to the edit session carries `defaulted: true`; an edit plugin that
//! sees a test starting answers `context_changed` without running it, and the host
//! resolves the call again, waiting for the test's server. It never falls back to edit.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::fake_plugin::{FakePlugin, Identity, Reply, handler, studio_like};
use support::free_port;
use support::mcp_client::Mcp;

/// Past the host's startup grace, so that resolution acts on what it knows.
const PAST_GRACE: Duration = Duration::from_millis(3100);

#[tokio::test]
async fn a_defaulted_exec_refused_by_an_edit_plugin_whose_test_starts_runs_in_the_server() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    // The edit plugin of a Studio where F5 was just pressed: it still says Edit (its
    // DataModel stays in Edit), and answers a defaulted request `context_changed`.
    let healthy = studio_like();
    let edit = FakePlugin::connect(
        port,
        Identity::play("A", "edit"),
        handler(move |action, args| match action {
            "exec" => Reply::Err("context_changed", "a playtest is starting".into()),
            _ => healthy(action, args),
        }),
    )
    .await;
    tokio::time::sleep(PAST_GRACE).await;

    let call = mcp.ok("studio_exec", json!({"script": "workspace.Baseplate:Destroy()"}));
    let server = async {
        edit.wait("the defaulted request", Duration::from_secs(10), |log| {
            !log.requests.is_empty()
        })
        .await;
        FakePlugin::connect(port, Identity::play("A", "server"), studio_like()).await
    };
    let (result, server) = tokio::join!(call, server);
    assert_eq!(result["context"], "server", "{result}");
    assert_eq!(result["sessionId"], "A-server");

    let asked = edit.log().requests;
    assert_eq!(asked.len(), 1, "the edit plugin was asked once, then never again");
    assert!(asked[0].defaulted, "the request to edit says its context was defaulted");
    let ran = server.log().requests;
    assert_eq!(ran.len(), 1);
    assert!(!ran[0].defaulted, "the server was chosen for itself");
}

#[tokio::test]
async fn only_a_defaulted_context_is_marked() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let edit = FakePlugin::connect(port, Identity::edit("A"), studio_like()).await;
    tokio::time::sleep(PAST_GRACE).await;
    // exec defaults to server: in Edit it goes to edit, marked.
    mcp.ok("studio_exec", json!({"script": "return 1"})).await;
    // Named edit, and a command whose default is edit: not marked.
    mcp.ok("studio_exec", json!({"script": "return 2", "context": "edit"}))
        .await;
    mcp.ok("studio_state", json!({})).await;
    let marks: Vec<(String, bool)> = edit
        .log()
        .requests
        .iter()
        .map(|r| (r.action.clone(), r.defaulted))
        .collect();
    assert_eq!(
        marks,
        [("exec".into(), true), ("exec".into(), false), ("state".into(), false)]
    );
}

//! A write whose answer never came, asked after by its `operationId` (issue 31), against the
//! real plugin (the .rbxm the binary installs) in the headless Studio under Lune, through the
//! real `studio-bridge mcp`: Studio is busy (a script that does not yield) past a clone's
//! deadline, so the clone times out on the host while it still waits, unread, in the plugin;
//! once Studio is free it runs, and `state {operationId}` reports it done.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::mcp_client::error_of;
use support::studio::{edit_studio, exchange, run_luau};

#[tokio::test]
async fn a_clone_that_times_out_names_an_operation_whose_outcome_state_later_reports_done() {
    let (_rbxm, mcp, _studio) = edit_studio().await;
    run_luau(
        &mcp,
        "local p = Instance.new('Part') p.Name = 'Source' p.Parent = workspace return p.Name",
    )
    .await;

    // Studio busy for longer than clone's 10 s deadline: the script never yields.
    let busy = mcp.call(
        "studio_exec",
        json!({"script": "local t = os.clock() while os.clock() - t < 12 do end return 'free'", "timeoutMs": 30000}),
    );
    let clone = async {
        // The exec goes first, so the clone waits behind it in the plugin.
        tokio::time::sleep(Duration::from_millis(500)).await;
        mcp.call(
            "studio_clone",
            json!({"path": "Workspace.Source", "parent": "Workspace"}),
        )
        .await
    };
    let (busy, clone) = tokio::join!(busy, clone);
    assert_ne!(busy.is_error, Some(true), "{busy:?}");

    assert_eq!(clone.is_error, Some(true), "the clone timed out: {clone:?}");
    let error = error_of(&clone);
    eprintln!("<-- clone: {error}");
    assert_eq!(error["code"], "timeout", "{error}");
    let operation_id = error["details"]["operationId"]
        .as_str()
        .unwrap_or_else(|| panic!("a write's timeout names its operation: {error}"))
        .to_owned();
    assert!(error["message"].as_str().unwrap().contains(&operation_id), "{error}");

    let outcome = exchange(&mcp, "studio_state", json!({"operationId": operation_id})).await;
    let operation = &outcome["operation"];
    assert_eq!(operation["id"], operation_id.as_str(), "{outcome}");
    assert_eq!(operation["command"], "clone", "{outcome}");
    assert_eq!(operation["status"], "done", "{outcome}");
    assert_eq!(
        operation["result"]["created"][0], "game.Workspace.Source[2]",
        "{outcome}"
    );
    // It did happen: two parts named Source.
    let count = run_luau(
        &mcp,
        "local n = 0 for _, c in workspace:GetChildren() do if c.Name == 'Source' then n += 1 end end return n",
    )
    .await;
    assert_eq!(count, 2);

    let unknown = exchange(&mcp, "studio_state", json!({"operationId": "0000"})).await;
    assert_eq!(unknown["operation"], json!({"id": "0000", "status": "unknown"}));
    // A plain `state` still answers the run state.
    let state = exchange(&mcp, "studio_state", json!({})).await;
    assert_eq!(state["state"], "Edit", "{state}");
}

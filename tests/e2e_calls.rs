//! End to end over stdio (TESTING.md layer 3), a call's life: a plugin that vanishes
//! mid-call or reconnects, one that never answers (timeout and cancel), cancellation and
//! progress between client and plugin, and the process ending with its client. The built
//! binary as an MCP server, rmcp's client, fake plugins.

use crate::support;

use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, ClientRequest, Request};
use rmcp::service::PeerRequestOptions;
use serde_json::json;
use support::fake_plugin::{FakePlugin, Identity, Reply, handler, studio_like};
use support::free_port;
use support::mcp_client::Mcp;

#[tokio::test]
async fn a_plugin_vanishing_mid_call_fails_the_call_within_a_second() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), handler(|_, _| Reply::Drop(None))).await;
    let started = Instant::now();
    // context: edit, so that the call is not held by the startup grace (an exec with no
    // context waits it out in case a playtest's server is still reconnecting).
    let error = mcp
        .err("studio_exec", json!({"script": "while true do end", "context": "edit"}))
        .await;
    assert_eq!(error["code"], "session_lost");
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    assert!(error["message"].as_str().unwrap().contains("not re-sent"));
    let sessions = mcp.ok("studio_sessions", json!({})).await;
    assert_eq!(sessions["sessions"][0]["status"], "reconnecting");
    assert_eq!(plugin.log().requests.len(), 1, "never re-sent");
}

#[tokio::test]
async fn a_reconnect_inside_the_grace_period_completes_the_next_call() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(
        port,
        Identity::edit("A"),
        handler(|action, args| match action {
            "exec" if args["script"].as_str() == Some("drop()") => Reply::Drop(Some(Duration::from_millis(400))),
            _ => studio_like()(action, args),
        }),
    )
    .await;
    let error = mcp.err("studio_exec", json!({"script": "drop()"})).await;
    assert_eq!(error["code"], "session_lost");
    // Sent while the plugin is away: waits for its new hello, then runs once.
    let state = mcp.ok("studio_state", json!({})).await;
    assert_eq!(state["state"], "Edit");
    let log = plugin.log();
    assert_eq!(log.welcomes, 2);
    assert_eq!(
        log.requests.iter().filter(|r| r.action == "exec").count(),
        1,
        "the dropped call was not re-sent"
    );
    let ids: std::collections::HashSet<u64> = log.requests.iter().map(|r| r.id).collect();
    assert_eq!(ids.len(), log.requests.len(), "request ids are never reused");
}

#[tokio::test]
async fn a_plugin_that_never_answers_times_out_and_is_told_to_cancel() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), handler(|_, _| Reply::Never)).await;
    let started = Instant::now();
    let error = mcp
        .err("studio_exec", json!({"script": "while true do end", "timeoutMs": 100}))
        .await;
    assert_eq!(error["code"], "timeout");
    // timeoutMs + the host's 5 s grace, and not much more.
    assert!(started.elapsed() < Duration::from_secs(7), "{:?}", started.elapsed());
    let id = plugin.log().requests[0].id;
    plugin
        .wait("cancel after timeout", Duration::from_secs(2), |log| {
            log.cancels.contains(&id)
        })
        .await;
}

#[tokio::test]
async fn cancellation_reaches_the_plugin() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), handler(|_, _| Reply::Never)).await;
    let Ok(serde_json::Value::Object(arguments)) = serde_json::to_value(json!({"script": "task.wait(60)"})) else {
        unreachable!()
    };
    let request = ClientRequest::CallToolRequest(Request::new(
        CallToolRequestParams::new("studio_exec").with_arguments(arguments),
    ));
    let handle = mcp
        .client
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .unwrap();
    let log = plugin
        .wait("the request", Duration::from_secs(5), |log| !log.requests.is_empty())
        .await;
    let id = log.requests[0].id;
    handle.cancel(Some("user pressed stop".into())).await.unwrap();
    plugin
        .wait("cancel", Duration::from_secs(2), |log| log.cancels.contains(&id))
        .await;
    // The bridge is still healthy afterwards.
    let sessions = mcp.ok("studio_sessions", json!({})).await;
    assert_eq!(sessions["sessions"][0]["status"], "connected");
}

#[tokio::test]
async fn progress_from_the_plugin_reaches_the_client() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let _plugin = FakePlugin::connect(
        port,
        Identity::edit("A"),
        handler(|action, args| Reply::Progress(vec![1.0, 2.0, 3.0], Box::new(studio_like()(action, args)))),
    )
    .await;
    let Ok(serde_json::Value::Object(arguments)) = serde_json::to_value(json!({"script": "return 1"})) else {
        unreachable!()
    };
    let mut params = CallToolRequestParams::new("studio_exec").with_arguments(arguments);
    let token = rmcp::model::ProgressToken(rmcp::model::NumberOrString::String("p1".into()));
    let mut meta = rmcp::model::RequestMetaObject::default();
    meta.set_progress_token(token);
    params.meta = Some(meta);
    let result = mcp.client.call_tool(params).await.unwrap();
    assert_ne!(result.is_error, Some(true));
    support::wait_for("progress notifications", Duration::from_secs(2), || {
        mcp.recorder.progress.lock().unwrap().len() >= 3
    })
    .await;
    let progress = mcp.recorder.progress.lock().unwrap();
    let steps: Vec<f64> = progress.iter().map(|p| p.progress).collect();
    assert_eq!(steps, [1.0, 2.0, 3.0]);
    assert_eq!(progress[0].total, Some(3.0));
}

#[tokio::test]
async fn the_mcp_process_exits_when_its_client_goes_away() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    mcp.client.cancel().await.unwrap();
    // The port is free again once the process is gone.
    support::wait_for("the port to be released", Duration::from_secs(5), || {
        std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
    })
    .await;
}

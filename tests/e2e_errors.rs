//! End to end over stdio (TESTING.md layer 3), errors: the plugin's error codes, invalid
//! arguments and unknown tools, garbage frames, and requests too deep to parse. The built
//! binary as an MCP server, rmcp's client, fake plugins.

use crate::support;

use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use serde_json::json;
use support::fake_plugin::{FakePlugin, Identity, Reply, handler, studio_like};
use support::free_port;
use support::mcp_client::Mcp;

#[tokio::test]
async fn plugin_errors_keep_their_code_and_unknown_codes_become_plugin_error() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let _plugin = FakePlugin::connect(
        port,
        Identity::edit("A"),
        handler(|action, args| match action {
            "query" => Reply::Err("not_found", "No instance at game.Workspace.Nope".into()),
            "state" => Reply::Err("exploded", "something odd".into()),
            "exec" if args["script"].as_str() == Some("busy()") => Reply::Err("busy", "Studio is busy; retry".into()),
            "exec" => Reply::Err("permission_denied", "Script injection is disabled".into()),
            _ => Reply::Err("unknown_action", "The plugin has no action logs; update it.".into()),
        }),
    )
    .await;
    let error = mcp.err("studio_query", json!({"path": "Workspace.Nope"})).await;
    assert_eq!(error["code"], "not_found");
    assert_eq!(error["message"], "No instance at game.Workspace.Nope");
    let error = mcp.err("studio_state", json!({})).await;
    assert_eq!(error["code"], "plugin_error");
    assert_eq!(error["details"]["pluginCode"], "exploded");
    let error = mcp.err("studio_logs", json!({})).await;
    assert_eq!(error["code"], "unknown_action");
    let error = mcp.err("studio_exec", json!({"script": "busy()"})).await;
    assert_eq!(error["code"], "busy");
    let error = mcp.err("studio_exec", json!({"script": "x()"})).await;
    assert_eq!(error["code"], "permission_denied");
}

#[tokio::test]
async fn invalid_arguments_name_the_field_and_unknown_tools_are_protocol_errors() {
    let mcp = Mcp::spawn(free_port(), &[]).await;
    let error = mcp.err("studio_exec", json!({"script": 42})).await;
    assert_eq!(error["code"], "invalid_args");
    assert!(error["message"].as_str().unwrap().contains("`script`"), "{error}");
    let error = mcp.err("studio_exec", json!({})).await;
    assert!(error["message"].as_str().unwrap().contains("script"), "{error}");
    let error = mcp.err("studio_logs", json!({"count": 0})).await;
    assert!(error["message"].as_str().unwrap().contains("count"), "{error}");
    let error = mcp.err("studio_screenshot", json!({"maxWidht": 100})).await;
    assert!(error["message"].as_str().unwrap().contains("maxWidht"), "{error}");

    let failure = mcp
        .client
        .call_tool(CallToolRequestParams::new("studio_teleport"))
        .await
        .unwrap_err();
    let text = format!("{failure:?}");
    assert!(
        text.contains("-32602") || text.contains("InvalidParams") || text.contains("INVALID_PARAMS"),
        "{text}"
    );
}

#[tokio::test]
async fn garbage_frames_are_rejected_without_dropping_the_session() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let _plugin = FakePlugin::connect(
        port,
        Identity::edit("A"),
        handler(|action, args| Reply::GarbageFirst(Box::new(studio_like()(action, args)))),
    )
    .await;
    let state = mcp.ok("studio_state", json!({})).await;
    assert_eq!(state["state"], "Edit");
}

#[tokio::test]
async fn a_request_nested_too_deep_to_parse_still_gets_an_answer_for_its_id() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let mut child = tokio::process::Command::new(support::mcp_client::binary())
        .args(["mcp", "--no-install-plugin", "--port", &free_port().to_string()])
        .env("STUDIO_BRIDGE_LOG", "error")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    let deep = format!("{}1{}", "[".repeat(150), "]".repeat(150));
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"studio_exec","arguments":{{"script":"return 1","x":{deep}}}}}}}"#
    );
    let after = r#"{"jsonrpc":"2.0","id":6,"method":"tools/list"}"#;
    let input =
        format!("{initialize}\n{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}}\n{call}\n{after}\n");
    stdin.write_all(input.as_bytes()).await.unwrap();
    let mut answers = std::collections::HashMap::new();
    while answers.len() < 3 {
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("every request is answered")
            .unwrap()
            .expect("a line");
        let message: serde_json::Value = serde_json::from_str(&line).unwrap();
        answers.insert(message["id"].as_i64().unwrap(), message);
    }
    assert_eq!(answers[&5]["error"]["code"], -32700, "{}", answers[&5]);
    assert!(
        answers[&5]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("deeper than")
    );
    assert!(answers[&6]["result"]["tools"].is_array(), "the server carries on");
}

//! End to end over stdio (TESTING.md layer 3), sizes and bounds: messages over the limits,
//! results nested too deep for strict parsers, and large results bounded and marked. The
//! built binary as an MCP server, rmcp's client, fake plugins.

use crate::support;

use std::time::Duration;

use rmpv::Value;
use serde_json::json;
use support::fake_plugin::{FakePlugin, Framing, Identity, Reply, handler, studio_like, value_map};
use support::free_port;
use support::mcp_client::Mcp;

/// Starts a bridge that accepts 1 MiB messages and a plugin that answers with `bytes`
/// of binary; returns the error of a call and the plugin.
async fn answer_with(bytes: usize) -> (serde_json::Value, FakePlugin, Mcp) {
    let port = free_port();
    let mcp = Mcp::spawn(port, &["--max-message-mib", "1"]).await;
    let identity = Identity {
        framing: Framing::Binary,
        ..Identity::edit("A")
    };
    let plugin = FakePlugin::connect(
        port,
        identity,
        handler(move |_, _| Reply::Ok(Value::Binary(vec![7u8; bytes]))),
    )
    .await;
    let error = mcp.err("studio_state", json!({})).await;
    (error, plugin, mcp)
}

/// A message over the decoded limit (but within the WebSocket frame limit, which allows
/// for base64) is refused by the host's own check: the call fails with
/// `message_too_large` and the plugin is told why with close code 1009.
#[tokio::test]
async fn an_oversized_message_fails_the_call_with_message_too_large() {
    let (error, plugin, _mcp) = answer_with(1200 * 1024).await;
    assert_eq!(error["code"], "message_too_large");
    assert!(error["message"].as_str().unwrap().contains("--max-message-mib"));
    plugin
        .wait("close 1009", Duration::from_secs(2), |log| {
            log.closes.contains(&Some(1009))
        })
        .await;
}

/// A frame beyond even the WebSocket limit is cut off by the socket layer: the call
/// still fails with `message_too_large`, not a generic loss.
#[tokio::test]
async fn a_frame_over_the_socket_limit_also_fails_with_message_too_large() {
    let (error, _plugin, _mcp) = answer_with(3 * 1024 * 1024).await;
    assert_eq!(error["code"], "message_too_large");
}

/// A table nested 150 levels deep (Studio's plugin encodes up to 200): the answer must
/// still parse in a client using serde_json (rmcp's own client, as here), which refuses
/// JSON nested deeper than 128; without the bound this call would never be answered.
#[tokio::test]
async fn a_result_nested_too_deep_for_strict_parsers_arrives_flattened_and_marked() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let _plugin = FakePlugin::connect(
        port,
        Identity::edit("A"),
        handler(|action, args| match action {
            "exec" => {
                let mut deep = Value::from("bottom");
                for _ in 0..150 {
                    deep = Value::Array(vec![deep]);
                }
                Reply::Ok(value_map(vec![
                    ("success", true.into()),
                    ("returns", Value::Array(vec![deep])),
                    ("logs", Value::Array(vec![])),
                ]))
            }
            _ => studio_like()(action, args),
        }),
    )
    .await;
    let result = tokio::time::timeout(
        Duration::from_secs(30),
        mcp.ok("studio_exec", json!({"script": "return deep"})),
    )
    .await
    .expect("the answer arrived and parsed");
    assert_eq!(result["success"], true);
    assert_eq!(result["truncated"], true, "{result}");
    assert!(
        result["truncatedHint"]
            .as_str()
            .unwrap()
            .contains("nested deeper than 100 levels"),
        "{result}"
    );
}

#[tokio::test]
async fn large_results_are_bounded_and_marked_truncated() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &["--max-result-kib", "16"]).await;
    let _plugin = FakePlugin::connect(
        port,
        Identity::edit("A"),
        handler(|_, _| {
            let entries: Vec<Value> = (0..2000)
                .map(|i| {
                    value_map(vec![
                        ("seq", i.into()),
                        ("level", "Print".into()),
                        ("body", "x".repeat(40).into()),
                        ("timestamp", 0.into()),
                    ])
                })
                .collect();
            Reply::Ok(value_map(vec![
                ("entries", Value::Array(entries)),
                ("total", 2000.into()),
                ("bufferCapacity", 10000.into()),
                ("nextSince", 2000.into()),
            ]))
        }),
    )
    .await;
    let logs = mcp.ok("studio_logs", json!({"count": 2000})).await;
    assert_eq!(logs["truncated"], true);
    assert!(logs["truncatedHint"].as_str().unwrap().contains("since"));
    let kept = logs["entries"].as_array().unwrap().len();
    assert!(kept > 10 && kept < 2000, "{kept}");
    assert!(logs.to_string().len() <= 16 * 1024);
}

#[tokio::test]
async fn a_huge_map_is_cut_and_text_plus_structured_content_stay_within_the_bound() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &["--max-result-kib", "64"]).await;
    let _plugin = FakePlugin::connect(
        port,
        Identity::edit("A"),
        handler(|_, _| {
            // An exec returning a 100,000-key table.
            let table: Vec<(Value, Value)> = (0..100_000).map(|i| (format!("k{i}").into(), i.into())).collect();
            Reply::Ok(value_map(vec![
                ("success", true.into()),
                ("returns", Value::Array(vec![Value::Map(table)])),
                ("logs", Value::Array(vec![])),
            ]))
        }),
    )
    .await;
    let result = mcp
        .call("studio_exec", json!({"script": "return big", "context": "edit"}))
        .await;
    let text: usize = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.len()))
        .sum();
    let structured = serde_json::to_string(result.structured_content.as_ref().unwrap())
        .unwrap()
        .len();
    assert!(
        text + structured <= 64 * 1024,
        "text {text} + structuredContent {structured}"
    );
    let json = result.structured_content.unwrap();
    assert_eq!(json["truncated"], true);
    let kept = json["returns"][0].as_object().unwrap();
    assert!(kept.len() > 100 && kept.len() < 100_000, "{}", kept.len());
}

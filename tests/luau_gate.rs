//! The Luau syntax gate end to end (issue 29): the built binary over MCP, a fake Studio on
//! the bridge port. A broken script is answered `syntax_error` with Luau's line, and the
//! fake plugin receives no request at all; valid Luau still goes through.

use crate::support;

use rmpv::Value;
use serde_json::json;
use support::fake_plugin::{FakePlugin, Identity, Reply, handler, studio_like, value_map};
use support::free_port;
use support::mcp_client::Mcp;

/// Answers `create` with one path an item and everything else as `studio_like` does.
fn studio() -> support::fake_plugin::Handler {
    handler(|action, args| match action {
        "create" => {
            let count = match &args["items"] {
                Value::Array(items) => items.len(),
                _ => 0,
            };
            let created = (0..count)
                .map(|i| Value::from(format!("game.Workspace.Made{i}")))
                .collect();
            Reply::Ok(value_map(vec![("created", Value::Array(created))]))
        }
        "script_edit" => Reply::Ok(value_map(vec![
            ("hash", "0123abcd-4".into()),
            ("lineCount", 1.into()),
            ("path", args["path"].clone()),
        ])),
        "test_run" => Reply::Ok(value_map(vec![
            ("success", true.into()),
            ("returns", Value::Array(vec![])),
            ("logs", Value::Array(vec![])),
            ("durationMs", 5.into()),
            ("timedOut", false.into()),
        ])),
        other => studio_like()(other, args),
    })
}

fn actions(plugin: &FakePlugin) -> Vec<String> {
    plugin.log().requests.iter().map(|r| r.action.clone()).collect()
}

const MODERN: &str = "--!strict\n\
type Point = { x: number, y: number }\n\
local function lerp<T>(a: T, b: T, t: number): T\n\
\treturn if t < 0.5 then a else b\n\
end\n\
@native\n\
local function sum(list: { number }): number\n\
\tlocal total = 0\n\
\tfor _, v in list do\n\
\t\tif v < 0 then\n\
\t\t\tcontinue\n\
\t\tend\n\
\t\ttotal += v\n\
\tend\n\
\treturn total\n\
end\n\
print(`sum {sum({ 1, 2, 3 })}`, lerp(1, 2, 0.25), 0b1010, 1_000)\n";

#[tokio::test]
async fn a_broken_create_source_is_refused_with_its_line_and_nothing_reaches_studio() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), studio()).await;

    let items = json!([
        {"className": "Folder", "parent": "Workspace", "name": "Kept"},
        {"className": "Script", "parent": "ServerScriptService", "source": "print(1)\nlocal x = \nlocal function f()\nend"},
    ]);
    let error = mcp.err("studio_create", json!({ "items": items })).await;
    assert_eq!(error["code"], "syntax_error", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.starts_with("item 2: source: line 3: "), "{message}");
    assert!(message.contains("check: false"), "says how to skip it: {message}");
    let errors = error["details"]["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{error}");
    assert_eq!(errors[0]["line"], 3, "{error}");
    assert!(errors[0]["message"].as_str().is_some_and(|m| !m.is_empty()), "{error}");

    let property = json!([{"className": "ModuleScript", "parent": "Workspace", "properties": {"Source": "return {"}}]);
    let error = mcp.err("studio_create", json!({ "items": property })).await;
    assert_eq!(error["code"], "syntax_error", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .starts_with("item 1: properties.Source: line 1: "),
        "{error}"
    );
    assert!(
        actions(&plugin).is_empty(),
        "nothing reached Studio: {:?}",
        actions(&plugin)
    );

    // Valid modern Luau goes through, and `check` itself never reaches the plugin.
    let made = mcp
        .ok(
            "studio_create",
            json!({"items": [{"className": "Script", "parent": "ServerScriptService", "source": MODERN}]}),
        )
        .await;
    assert_eq!(made["created"], json!(["game.Workspace.Made0"]), "{made}");
    // check: false sends the broken source on as it is.
    mcp.ok("studio_create", json!({ "items": items, "check": false })).await;
    let log = plugin.log();
    assert_eq!(actions(&plugin), ["create", "create"]);
    assert_eq!(log.requests[0].args["items"][0]["source"].as_str(), Some(MODERN));
    for request in &log.requests {
        assert!(
            request.args["check"].is_nil(),
            "check is the host's: {:?}",
            request.args
        );
    }
}

#[tokio::test]
async fn exec_and_test_run_answer_a_syntax_error_without_a_round_trip() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), studio()).await;

    let broken = "local a = 1\nlocal b = = 2\nreturn a + b";
    let error = mcp.err("studio_exec", json!({"script": broken})).await;
    assert_eq!(error["code"], "syntax_error", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.starts_with("[string \"exec\"]:2: "),
        "the plugin's form: {message}"
    );
    assert_eq!(error["details"]["errors"][0]["line"], 2, "{error}");

    let error = mcp.err("studio_test_run", json!({"script": "return ("})).await;
    assert_eq!(error["code"], "syntax_error", "{error}");
    assert!(
        error["message"].as_str().unwrap().starts_with("[string \"exec\"]:1: "),
        "{error}"
    );
    assert!(
        actions(&plugin).is_empty(),
        "nothing reached Studio: {:?}",
        actions(&plugin)
    );

    assert!(message.contains("check: false"), "names the way past it: {message}");

    // Valid Luau runs as before; with `check: false`, a broken chunk is the plugin's to
    // answer (as `success: false`), as it always was.
    let ran = mcp.ok("studio_exec", json!({"script": MODERN})).await;
    assert_eq!(ran["success"], true, "{ran}");
    mcp.ok("studio_exec", json!({"script": broken, "check": false})).await;
    mcp.ok("studio_test_run", json!({"script": MODERN})).await;
    assert_eq!(actions(&plugin), ["exec", "exec", "test_run"]);
    assert_eq!(plugin.log().requests[1].args["script"].as_str(), Some(broken));
    assert!(plugin.log().requests[0].args["check"].is_nil(), "check is the host's");
}

#[tokio::test]
async fn a_broken_whole_source_edit_is_refused_and_nothing_is_written() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), studio()).await;

    let path = "ServerScriptService.Main";
    let broken = "local function f()\n\treturn 1\n";
    let error = mcp
        .err(
            "studio_script_edit",
            json!({"path": path, "source": broken, "expectedHash": "h"}),
        )
        .await;
    assert_eq!(error["code"], "syntax_error", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.starts_with("source: line 3: "), "{message}");
    assert!(message.contains("check: false"), "{message}");
    assert_eq!(error["details"]["errors"][0]["line"], 3, "{error}");
    assert!(
        actions(&plugin).is_empty(),
        "nothing reached Studio: {:?}",
        actions(&plugin)
    );

    mcp.ok("studio_script_edit", json!({"path": path, "source": MODERN}))
        .await;
    mcp.ok(
        "studio_script_edit",
        json!({"path": path, "source": broken, "check": false}),
    )
    .await;
    let log = plugin.log();
    assert_eq!(actions(&plugin), ["script_edit", "script_edit"]);
    assert_eq!(log.requests[1].args["source"].as_str(), Some(broken));
    assert!(log.requests[1].args["check"].is_nil(), "check is the host's");
}

#[tokio::test]
async fn check_is_in_every_schema_that_takes_it() {
    // A client that validates arguments must accept the fix the error names (#41): every
    // argument the server takes is in the schema, `check` on by default.
    let mcp = Mcp::spawn(free_port(), &[]).await;
    let tools = mcp.client.list_all_tools().await.unwrap();
    for name in ["studio_create", "studio_exec", "studio_test_run", "studio_script_edit"] {
        let tool = tools.iter().find(|t| t.name == name).expect(name);
        let check = &tool.input_schema["properties"]["check"];
        assert_eq!(check["type"], "boolean", "{name}: {check}");
        assert_eq!(check["default"], true, "{name}: {check}");
    }
    let exec = tools.iter().find(|t| t.name == "studio_exec").unwrap();
    assert_eq!(exec.input_schema["properties"]["env"]["type"], "string");
    let edit = tools.iter().find(|t| t.name == "studio_script_edit").unwrap();
    assert_eq!(edit.input_schema["properties"]["force"]["type"], "boolean");
}

#[test]
fn version_names_the_bundled_luau() {
    let output = std::process::Command::new(support::mcp_client::binary())
        .arg("--version")
        .output()
        .expect("run studio-bridge --version");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("(Luau 0."), "{text}");
}

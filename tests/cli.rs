//! The command line over the same command table: human output by default, the MCP
//! tool's JSON with `--json`, exit code 1 on error.

use crate::support;

use std::time::Duration;

use rmpv::Value;
use serde_json::json;
use support::fake_plugin::{FakePlugin, Identity, Reply, handler, studio_like, value_map};
use support::free_port;
use support::mcp_client::binary;

async fn run(args: &[&str]) -> std::process::Output {
    let mut command = tokio::process::Command::new(binary());
    // Colour is off when stdout is piped anyway; NO_COLOR says so twice.
    // The CLI hosts for the length of a call, and its plugins here are fakes (no secret).
    command.args(&args[..1]).arg("--allow-unpaired").args(&args[1..]);
    command.env_remove("STUDIO_BRIDGE_PORT").env("NO_COLOR", "1");
    // The CLI reads the config file's policy: never the developer's own.
    command.env("STUDIO_BRIDGE_CONFIG_DIR", support::mcp_client::empty_config_dir());
    tokio::time::timeout(Duration::from_secs(20), command.output())
        .await
        .expect("CLI finished")
        .expect("CLI ran")
}

/// A syntax error's fix, in the words of the surface: a flag on the command line, an
/// argument in the JSON an MCP client gets.
#[tokio::test]
async fn a_syntax_error_names_the_flag_that_skips_the_check() {
    let port = free_port();
    let port_text = port.to_string();
    let output = run(&["exec", "--port", &port_text, "return +"]).await;
    assert_eq!(output.status.code(), Some(1));
    let said = text(&output.stderr);
    assert!(said.starts_with("error[syntax_error]: "), "{said}");
    assert!(said.contains("or pass `--no-check` for syntax newer"), "{said}");
    let output = run(&["exec", "--port", &port_text, "return +", "--json"]).await;
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let message = printed["error"]["message"].as_str().unwrap();
    assert!(message.contains("or pass `check: false` for syntax newer"), "{message}");
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
    // The place's ids where it has them (an unpublished place's game id is 0).
    assert_eq!(text, "Edit · Place A (place 1818)\n");

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

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Answers `action` with `result`, everything else as a healthy Studio would.
fn answering(action: &'static str, result: Value) -> support::fake_plugin::Handler {
    handler(move |asked, args| {
        if asked == action {
            Reply::Ok(result.clone())
        } else {
            studio_like()(asked, args)
        }
    })
}

fn typed(kind: &str, value: Value) -> Value {
    value_map(vec![("type", kind.into()), ("value", value)])
}

#[tokio::test]
async fn a_script_error_is_shown_on_stderr_and_exits_1() {
    let port = free_port();
    let port_text = port.to_string();
    let failure = value_map(vec![
        ("success", false.into()),
        ("error", "[string \"exec\"]:1: x".into()),
        ("returns", Value::Array(vec![])),
        ("logs", Value::Array(vec![])),
    ]);
    let _plugin = FakePlugin::start(port, Identity::edit("A"), answering("exec", failure));
    let output = run(&["exec", "--port", &port_text, "error(\"x\")"]).await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "");
    assert!(
        text(&output.stderr).contains("error: [string \"exec\"]:1: x\n"),
        "{}",
        text(&output.stderr)
    );

    // `--json` still prints the exact MCP JSON, and the exit code still says it failed.
    let output = run(&["exec", "--port", &port_text, "error(\"x\")", "--json"]).await;
    assert_eq!(output.status.code(), Some(1));
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed["success"], false);
    assert_eq!(printed["error"], "[string \"exec\"]:1: x");
}

#[tokio::test]
async fn exec_prints_the_output_then_the_returns_as_luau() {
    let port = free_port();
    let port_text = port.to_string();
    let result = value_map(vec![
        ("success", true.into()),
        (
            "returns",
            Value::Array(vec![
                typed(
                    "Instance",
                    value_map(vec![
                        ("path", "game.Workspace.Baseplate".into()),
                        ("className", "Part".into()),
                    ]),
                ),
                // As a Luau msgpack encoder sends math.huge; the host makes it {"type":"number"}.
                Value::F64(f64::INFINITY),
                Value::Nil,
                Value::Array(vec![1.into(), 2.into(), 3.into()]),
            ]),
        ),
        (
            "logs",
            Value::Array(vec![
                value_map(vec![("level", "Print".into()), ("body", "hello".into())]),
                value_map(vec![("level", "Warning".into()), ("body", "careful".into())]),
            ]),
        ),
    ]);
    let _plugin = FakePlugin::start(port, Identity::edit("A"), answering("exec", result));
    let output = run(&[
        "exec",
        "--port",
        &port_text,
        "print('hello') warn('careful') return ...",
    ])
    .await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(
        text(&output.stdout),
        "hello\nwarning: careful\nWorkspace.Baseplate (Part), inf, nil, {1, 2, 3}\n"
    );
}

#[tokio::test]
async fn sessions_are_an_aligned_table() {
    let port = free_port();
    let port_text = port.to_string();
    let _plugin = FakePlugin::start(port, Identity::edit("A"), studio_like());
    let output = run(&["sessions", "--port", &port_text]).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    let header = lines[0];
    assert!(
        header.starts_with("SESSION  CONTEXT  STATE  STATUS     PLACE    UPTIME"),
        "{stdout}"
    );
    let row = lines[1];
    assert!(
        row.starts_with("A-edit   edit     Edit   connected  Place A  "),
        "{stdout}"
    );
    assert!(row.ends_with('s'), "uptime in seconds: {stdout}");
}

#[tokio::test]
async fn query_prints_an_indented_tree() {
    let port = free_port();
    let port_text = port.to_string();
    let result = value_map(vec![(
        "instance",
        value_map(vec![
            ("name", "Workspace".into()),
            ("className", "Workspace".into()),
            ("path", "game.Workspace".into()),
            (
                "properties",
                value_map(vec![
                    ("ClassName", "Workspace".into()),
                    ("Gravity", Value::F64(196.2)),
                    ("Name", "Workspace".into()),
                ]),
            ),
            ("tags", Value::Array(vec!["Map".into()])),
            ("childCount", 2.into()),
            (
                "children",
                Value::Array(vec![
                    value_map(vec![
                        ("name", "Baseplate".into()),
                        ("className", "Part".into()),
                        ("path", "game.Workspace.Baseplate".into()),
                        (
                            "properties",
                            value_map(vec![(
                                "Size",
                                typed("Vector3", Value::Array(vec![2048.into(), 16.into(), 2048.into()])),
                            )]),
                        ),
                        ("tags", Value::Array(vec![])),
                        ("childCount", 0.into()),
                    ]),
                    value_map(vec![
                        ("name", "Model".into()),
                        ("className", "Model".into()),
                        ("path", "game.Workspace.Model".into()),
                        ("childCount", 3.into()),
                    ]),
                ]),
            ),
        ]),
    )]);
    let plugin = FakePlugin::start(port, Identity::edit("A"), answering("query", result));
    let output = run(&["query", "--port", &port_text, "Workspace", "--depth", "1"]).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(
        text(&output.stdout),
        "Workspace (Workspace)\n  Gravity = 196.2\n  tags: Map\n  Baseplate (Part)\n    Size = Vector3.new(2048, 16, 2048)\n  Model (Model)  [3 children]\n"
    );
    assert_eq!(plugin.log().requests[0].args["path"].as_str(), Some("Workspace"));
}

#[tokio::test]
async fn logs_print_level_and_body() {
    let port = free_port();
    let port_text = port.to_string();
    let entry = |seq: u64, level: &str, body: &str| {
        value_map(vec![
            ("seq", seq.into()),
            ("level", level.into()),
            ("body", body.into()),
            ("timestamp", Value::F64(1.7e12)),
        ])
    };
    let result = value_map(vec![
        (
            "entries",
            Value::Array(vec![
                entry(1, "Print", "hello"),
                entry(2, "Warning", "careful"),
                entry(3, "Error", "boom"),
            ]),
        ),
        ("total", 3.into()),
        ("bufferCapacity", 10000.into()),
        ("nextSince", 3.into()),
    ]);
    let _plugin = FakePlugin::start(port, Identity::edit("A"), answering("logs", result));
    let output = run(&["logs", "--port", &port_text]).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "[Print] hello\n[Warning] careful\n[Error] boom\n");
}

#[tokio::test]
async fn completions_are_generated_from_the_command_line() {
    let output = run(&["completions", "bash"]).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let script = text(&output.stdout);
    assert!(script.contains("studio-bridge"), "{script}");
    // Every table command is in it, with its own flags.
    assert!(script.contains("exec") && script.contains("--timeout-ms"), "{script}");

    let output = run(&["completions", "tcsh"]).await;
    assert_eq!(output.status.code(), Some(2), "an unknown shell is a usage error");
}

#[tokio::test]
async fn commands_with_underscores_are_kebab_case_on_the_command_line() {
    use support::fake_plugin::{Reply, handler, value_map};
    let port = free_port();
    let port_text = port.to_string();
    let plugin = FakePlugin::start(
        port,
        Identity::edit("A"),
        handler(|_, _| {
            Reply::Ok(value_map(vec![
                ("source", "print(1)".into()),
                ("lineCount", 1.into()),
                ("hash", "h".into()),
                ("path", "game.Workspace.S".into()),
            ]))
        }),
    );
    let output = run(&["script-read", "--port", &port_text, "Workspace.S", "--json"]).await;
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed["source"], "print(1)");
    assert_eq!(plugin.log().requests[0].action, "script_read");
}

#[tokio::test]
async fn api_needs_no_studio_and_prints_a_class_enum_and_search() {
    let port_text = free_port().to_string();
    let output = run(&["api", "--class", "Part", "--port", &port_text]).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    let mut lines = stdout.lines();
    assert_eq!(
        lines.next(),
        Some("Part : FormFactorPart : BasePart : PVInstance : Instance : Object"),
        "{stdout}"
    );
    let shape = lines.next().unwrap();
    assert!(
        shape.starts_with("  Shape ") && shape.trim_end().ends_with("Enum.PartType"),
        "{stdout}"
    );
    let color = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("Color "))
        .expect("Color listed");
    assert!(color.contains("Color3") && color.ends_with("from BasePart"), "{color}");
    let class_name = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("ClassName "))
        .unwrap();
    assert!(class_name.ends_with("from Object, readOnly"), "{class_name}");

    let output = run(&["api", "--enum", "Material", "--port", &port_text]).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(stdout.starts_with("Enum.Material\n  Plastic = 256\n"), "{stdout}");
    assert!(stdout.contains("\n  Neon = 288\n"), "{stdout}");

    let output = run(&["api", "--search", "neon", "--port", &port_text]).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(
        text(&output.stdout).lines().next(),
        Some("enumItem  Enum.Material.Neon")
    );

    let output = run(&["api", "--class", "Part", "--member", "Colour", "--port", &port_text]).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("did you mean `Color`?"),
        "{}",
        text(&output.stderr)
    );

    let output = run(&[
        "api", "--class", "Part", "--member", "Color", "--json", "--port", &port_text,
    ])
    .await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        printed["properties"],
        json!([{"name": "Color", "type": "Color3", "from": "BasePart"}])
    );
}

/// What a game script could print to take over the terminal that shows it: a screen
/// clear (CSI), an OSC 52 clipboard write ended by BEL, a title change, and a C1 CSI
/// (U+009B) that some terminals act on like ESC [.
const HOSTILE: &str = "x\u{1b}[2J\u{1b}]52;c;cHduZWQ=\u{7}\u{1b}]0;owned\u{7}\u{9b}31my";
/// The same, as human output shows it.
const SHOWN: &str = "x\\u{1b}[2J\\u{1b}]52;c;cHduZWQ=\\u{7}\\u{1b}]0;owned\\u{7}\\u{9b}31my";

fn has_controls(text: &str) -> bool {
    text.chars().any(|c| c.is_control() && c != '\n' && c != '\t')
}

#[tokio::test]
async fn studio_text_reaches_the_terminal_with_its_controls_escaped() {
    let port = free_port();
    let port_text = port.to_string();
    let log = value_map(vec![
        ("seq", 1.into()),
        ("level", "Print".into()),
        ("body", HOSTILE.into()),
        ("timestamp", Value::F64(1.7e12)),
    ]);
    let logs = value_map(vec![
        ("entries", Value::Array(vec![log])),
        ("total", 1.into()),
        ("bufferCapacity", 10000.into()),
        ("nextSince", 1.into()),
    ]);
    let exec = value_map(vec![
        ("success", true.into()),
        ("returns", Value::Array(vec![HOSTILE.into()])),
        (
            "logs",
            Value::Array(vec![value_map(vec![
                ("level", "Print".into()),
                ("body", HOSTILE.into()),
            ])]),
        ),
    ]);
    let _plugin = FakePlugin::start(
        port,
        Identity::edit("A"),
        handler(move |asked, args| match asked {
            "logs" => Reply::Ok(logs.clone()),
            "exec" => Reply::Ok(exec.clone()),
            // A plugin error carries Studio text too (an instance's name, say).
            "query" => Reply::Err("not_found", format!("no instance {HOSTILE}")),
            _ => studio_like()(asked, args),
        }),
    );

    let output = run(&["query", "--port", &port_text, "Workspace"]).await;
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(stderr.contains(&format!("no instance {SHOWN}")), "{stderr:?}");
    assert!(
        !has_controls(&stderr),
        "an error's Studio text is escaped too: {stderr:?}"
    );

    let output = run(&["logs", "--port", &port_text]).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert_eq!(stdout, format!("[Print] {SHOWN}\n"));
    assert!(!has_controls(&stdout) && !has_controls(&text(&output.stderr)));

    let output = run(&["exec", "--port", &port_text, "print(...)"]).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    // The print as it is (escaped); the return as a Luau literal (which escapes too).
    assert!(stdout.starts_with(&format!("{SHOWN}\n")), "{stdout:?}");
    assert!(
        !has_controls(&stdout) && !has_controls(&text(&output.stderr)),
        "{stdout:?}"
    );
    assert!(!stdout.contains('\u{1b}') && !stdout.contains('\u{9b}'), "{stdout:?}");

    // `--json` is the MCP JSON, unchanged: the same text once decoded.
    let output = run(&["logs", "--port", &port_text, "--json"]).await;
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed["entries"][0]["body"], HOSTILE);
}

/// A write whose Studio drops the connection mid-call may have run: its error says so and
/// to check before retrying. A read's error does not.
#[tokio::test]
async fn a_write_that_lost_its_session_says_it_may_have_completed_and_a_read_does_not() {
    let port = free_port();
    let port_text = port.to_string();
    // Drops the connection on delete and query (and comes back for the next call).
    let _plugin = FakePlugin::start(
        port,
        Identity::edit("A"),
        handler(|asked, args| match asked {
            "delete" | "query" => Reply::Drop(Some(Duration::from_millis(50))),
            _ => studio_like()(asked, args),
        }),
    );
    let error_of = |output: &std::process::Output| -> serde_json::Value {
        assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
        let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        printed["error"].clone()
    };
    let write = error_of(&run(&["delete", "--port", &port_text, "Workspace.Part", "--json"]).await);
    assert_eq!(write["code"], "session_lost", "{write}");
    let message = write["message"].as_str().unwrap();
    assert!(
        message
            .contains("This write (`delete`) may have completed in Studio before this failure: check with a read tool"),
        "{message}"
    );
    assert!(message.contains("before retrying"), "{message}");
    assert!(message.contains("`studio_state {operationId: \""), "{message}");

    // The same error for a person, in the command line's words (#41).
    let output = run(&["delete", "--port", &port_text, "Workspace.Part"]).await;
    assert_eq!(output.status.code(), Some(1));
    let said = text(&output.stderr);
    assert!(said.starts_with("error[session_lost]: "), "{said}");
    assert!(
        said.contains("(e.g. studio-bridge query, studio-bridge script-read, studio-bridge logs)"),
        "{said}"
    );
    assert!(said.contains("`studio-bridge state --operation-id "), "{said}");
    assert!(!said.contains("studio_") && !said.contains("operationId"), "{said}");

    let read = error_of(&run(&["query", "--port", &port_text, "Workspace", "--json"]).await);
    assert_eq!(read["code"], "session_lost", "{read}");
    let message = read["message"].as_str().unwrap();
    assert!(!message.contains("may have completed"), "{message}");
    assert!(!message.contains("This write"), "{message}");
}

/// `mcp` through one MCP handshake with its stdin, stdout and stderr piped: what it logs.
async fn mcp_stderr(extra: &[&str]) -> String {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let port = free_port().to_string();
    let mut child = tokio::process::Command::new(binary())
        .args(["mcp", "--port", &port])
        .args(extra)
        .env_remove("NO_COLOR")
        .env("STUDIO_BRIDGE_CONFIG_DIR", support::mcp_client::empty_config_dir())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    stdin.write_all(format!("{initialize}\n").as_bytes()).await.unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let answer = tokio::time::timeout(Duration::from_secs(20), stdout.next_line())
        .await
        .unwrap()
        .unwrap();
    assert!(answer.is_some_and(|line| line.contains("\"result\"")), "initialized");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    stdin.write_all(format!("{initialized}\n").as_bytes()).await.unwrap();
    drop(stdin);
    let output = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Logs carry colour only on a terminal, and rmcp's own lines only at debug (#41).
#[tokio::test]
async fn logs_off_a_terminal_are_plain_and_rmcp_speaks_at_debug() {
    let quiet = mcp_stderr(&["--no-install-plugin"]).await;
    assert!(quiet.contains("INFO"), "{quiet}");
    assert!(!quiet.contains('\u{1b}'), "no colour into a pipe: {quiet:?}");
    assert!(!quiet.contains("Service initialized"), "{quiet}");
    let debug = mcp_stderr(&["--no-install-plugin", "--log-level", "debug"]).await;
    assert!(debug.contains("Service initialized"), "rmcp's line, at debug: {debug}");
}

/// Where Studio cannot run (Linux), its absence is said once, at info: expected, not a
/// warning on every start (#41).
#[cfg(target_os = "linux")]
#[tokio::test]
async fn no_studio_on_linux_is_said_once_at_info() {
    let said = mcp_stderr(&[]).await;
    let lines: Vec<&str> = said.lines().filter(|l| l.contains("Roblox Studio")).collect();
    assert_eq!(lines.len(), 1, "{said}");
    assert!(lines[0].contains(" INFO Roblox Studio does not run on Linux"), "{said}");
    assert!(!said.contains("WARN"), "{said}");
}

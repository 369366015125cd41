//! The policy by capability, on every surface (TOOLS.md, "Policy by capability"): what
//! `--deny-capability` and the config file's `deny_capabilities` refuse over MCP, and that
//! the config file's policy binds the CLI and the terminal too, unless `--ignore-config`.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rmpv::Value;
use serde_json::{Value as Json, json};
use support::fake_plugin::{FakePlugin, Identity, Reply, handler, studio_like, value_map};
use support::free_port;
use support::mcp_client::{Mcp, binary};
use tokio::io::AsyncWriteExt as _;

/// A Studio that answers exec and state as `studio_like` does, `create` with the paths it
/// would make, and anything else with an error of its own (never `permission_denied`).
fn plugin_handler() -> support::fake_plugin::Handler {
    handler(|action, args| match action {
        "create" => Reply::Ok(value_map(vec![(
            "created",
            Value::Array(vec!["Workspace.Part".into()]),
        )])),
        "test_run" => Reply::Err("plugin_error", "the fake Studio runs no tests".into()),
        _ => studio_like()(action, args),
    })
}

async fn listed(mcp: &Mcp) -> Vec<String> {
    let tools = mcp.client.list_all_tools().await.expect("tools/list");
    tools.into_iter().map(|t| t.name.to_string()).collect()
}

fn actions(plugin: &FakePlugin) -> Vec<String> {
    plugin.log().requests.iter().map(|r| r.action.clone()).collect()
}

/// A fresh config directory holding `config.toml` with `text`; returns it and the file.
fn config_dir(name: &str, text: &str) -> (PathBuf, PathBuf) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("policy-{name}-{}", free_port()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config.toml");
    std::fs::write(&file, text).unwrap();
    (dir, file)
}

const PART: &str = r#"{"className": "Part", "parent": "Workspace"}"#;

fn part() -> Json {
    serde_json::from_str(PART).unwrap()
}

fn script() -> Json {
    json!({"className": "Script", "parent": "ServerScriptService", "source": "print('hi')"})
}

#[tokio::test]
async fn deny_capability_code_refuses_every_way_to_run_code_and_hides_the_tools_that_only_do() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &["--deny-capability", "code"]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), plugin_handler()).await;

    let names = listed(&mcp).await;
    for hidden in ["studio_exec", "studio_test_run", "studio_script_edit"] {
        assert!(!names.iter().any(|n| n == hidden), "{hidden} listed: {names:?}");
    }
    for shown in ["studio_create", "studio_play", "studio_query", "studio_selection"] {
        assert!(names.iter().any(|n| n == shown), "{shown} missing: {names:?}");
    }

    for (tool, args) in [
        ("studio_exec", json!({"script": "return 1"})),
        (
            "studio_exec",
            json!({"script": "return 1", "runtime": "game", "context": "server"}),
        ),
        ("studio_test_run", json!({"script": "return 1"})),
        ("studio_create", json!({"items": [part(), script()]})),
    ] {
        let error = mcp.err(tool, args.clone()).await;
        assert_eq!(error["code"], "permission_denied", "{tool} {args}: {error}");
        assert_eq!(error["details"]["rule"], "denied by --deny-capability code", "{error}");
        assert_eq!(error["details"]["capability"], "code", "{error}");
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{tool} is refused")),
            "{error}"
        );
    }
    // create without a source is not code: it reaches Studio.
    let created = mcp.ok("studio_create", json!({"items": [part()]})).await;
    assert_eq!(created["created"], json!(["Workspace.Part"]));
    mcp.ok("studio_state", json!({})).await;
    assert_eq!(actions(&plugin), ["create", "state"], "no refused call reached Studio");

    let sessions = mcp.ok("studio_sessions", json!({})).await;
    assert_eq!(
        sessions["policy"],
        json!({"readOnly": false, "allow": [], "deny": [], "denyCapabilities": ["code"], "source": "flags"})
    );
}

#[tokio::test]
async fn capabilities_are_comma_separated_or_repeated_and_a_tool_glob_still_denies_by_name() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &["--deny-capability", "play,assets", "--deny", "studio_exec"]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), plugin_handler()).await;
    let names = listed(&mcp).await;
    for hidden in ["studio_exec", "studio_play", "studio_test_run", "studio_insert_asset"] {
        assert!(!names.iter().any(|n| n == hidden), "{hidden} listed: {names:?}");
    }
    let error = mcp.err("studio_exec", json!({"script": "return 1"})).await;
    assert_eq!(error["details"]["rule"], "denied by --deny studio_exec");
    let error = mcp.err("studio_play", json!({"mode": "start"})).await;
    assert_eq!(error["details"]["rule"], "denied by --deny-capability play");
    assert_eq!(error["details"]["capability"], "play");
    // Code that is not exec still runs here: create with a source reaches Studio.
    mcp.ok("studio_create", json!({"items": [script()]})).await;
    assert_eq!(actions(&plugin), ["create"]);

    // `--deny studio_exec` alone refuses exec by name, and names its rule.
    let port = free_port();
    let mcp = Mcp::spawn(port, &["--deny", "studio_exec"]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), plugin_handler()).await;
    assert!(!listed(&mcp).await.iter().any(|n| n == "studio_exec"));
    let error = mcp.err("studio_exec", json!({"script": "return 1"})).await;
    assert_eq!(error["code"], "permission_denied");
    assert_eq!(error["details"]["rule"], "denied by --deny studio_exec");
    // A glob names tools: test_run is not exec, and goes to Studio.
    let error = mcp.err("studio_test_run", json!({"script": "return 1"})).await;
    assert_ne!(error["code"], "permission_denied", "{error}");
    assert_eq!(actions(&plugin), ["test_run"]);
}

#[tokio::test]
async fn the_config_files_deny_capabilities_bind_mcp_and_name_the_file() {
    let (dir, file) = config_dir(
        "mcp",
        "# the user's policy\ndeny_capabilities = [\"code\", \"assets\"]\n",
    );
    let port = free_port();
    let mcp = Mcp::spawn_with_config_dir(port, &["--allow-unpaired", "--deny-capability", "play"], &dir).await;
    let _plugin = FakePlugin::connect(port, Identity::edit("A"), plugin_handler()).await;
    let names = listed(&mcp).await;
    for hidden in ["studio_exec", "studio_play", "studio_insert_asset"] {
        assert!(!names.iter().any(|n| n == hidden), "{hidden} listed: {names:?}");
    }
    let error = mcp.err("studio_create", json!({"items": [script()]})).await;
    assert_eq!(
        error["details"]["rule"],
        format!("denied by deny_capabilities \"code\" in {}", file.display())
    );
    let sessions = mcp.ok("studio_sessions", json!({})).await;
    assert_eq!(
        sessions["policy"]["denyCapabilities"],
        json!(["code", "play", "assets"])
    );
    assert_eq!(sessions["policy"]["source"], format!("flags + {}", file.display()));
}

#[tokio::test]
async fn an_unknown_capability_stops_at_start_naming_the_valid_ones() {
    let (dir, file) = config_dir("unknown", "deny_capabilities = [\n  \"code\",\n  \"scripts\",\n]\n");
    let start = |subcommand: &[&str], extra: &[&str]| {
        std::process::Command::new(binary())
            .args(subcommand)
            .args(["--port", &free_port().to_string()])
            .args(extra)
            .env("STUDIO_BRIDGE_CONFIG_DIR", &dir)
            .stdin(Stdio::null())
            .output()
            .expect("run studio-bridge")
    };
    let valid = "read, write, code, play, assets";

    let output = start(
        &["mcp", "--no-install-plugin"],
        &["--config", "/dev/null", "--deny-capability", "exec"],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(output.stdout.is_empty(), "nothing on the MCP channel");
    assert!(
        stderr.contains("--deny-capability exec") && stderr.contains(valid),
        "{stderr}"
    );

    // The file's unknown name stops mcp and the CLI alike, naming the file and line.
    for subcommand in [&["mcp", "--no-install-plugin"][..], &["exec", "return 1"][..]] {
        let output = start(subcommand, &[]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{subcommand:?}: {stderr}");
        assert!(
            stderr.contains(&format!("deny_capabilities \"scripts\" in {} line 3", file.display())),
            "{subcommand:?}: {stderr}"
        );
        assert!(stderr.contains(valid), "{stderr}");
    }
}

/// Runs `studio-bridge <args>` with `STUDIO_BRIDGE_CONFIG_DIR=dir`, as a person or an
/// agent with a shell would, against fake plugins (no pairing secret).
async fn cli(dir: &Path, args: &[&str]) -> std::process::Output {
    let mut command = tokio::process::Command::new(binary());
    command.args(&args[..1]).arg("--allow-unpaired").args(&args[1..]);
    command
        .env_remove("STUDIO_BRIDGE_PORT")
        .env("NO_COLOR", "1")
        .env("STUDIO_BRIDGE_CONFIG_DIR", dir);
    tokio::time::timeout(Duration::from_secs(20), command.output())
        .await
        .expect("CLI finished")
        .expect("CLI ran")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn the_config_file_binds_the_cli_and_ignore_config_gets_through() {
    let (dir, file) = config_dir("cli", "deny_capabilities = [\"code\"]\n");
    let port = free_port();
    let port_text = port.to_string();
    let plugin = FakePlugin::start(port, Identity::edit("A"), plugin_handler());

    let output = cli(&dir, &["exec", "--port", &port_text, "return 2"]).await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("permission_denied"), "{stderr}");
    assert!(
        stderr.contains(&format!("denied by deny_capabilities \"code\" in {}", file.display())),
        "{stderr}"
    );
    let output = cli(&dir, &["exec", "--port", &port_text, "return 2", "--json"]).await;
    assert_eq!(output.status.code(), Some(1));
    let printed: Json = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed["error"]["code"], "permission_denied", "{printed}");
    // Reading goes through, and `sessions` shows the policy.
    let output = cli(&dir, &["state", "--port", &port_text]).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let output = cli(&dir, &["sessions", "--port", &port_text, "--json"]).await;
    let printed: Json = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed["policy"]["denyCapabilities"], json!(["code"]), "{printed}");
    assert_eq!(actions(&plugin), ["state"], "the refused exec never reached Studio");

    // The person's way around it.
    let output = cli(
        &dir,
        &["exec", "--port", &port_text, "return 2", "--ignore-config", "--json"],
    )
    .await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let printed: Json = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed["returns"], json!([2, null, "ok"]));
    assert_eq!(actions(&plugin), ["state", "exec"]);
}

#[tokio::test]
async fn read_only_in_the_config_file_refuses_the_clis_writes() {
    let (dir, file) = config_dir("cli-read-only", "read_only = true\n");
    let port = free_port();
    let port_text = port.to_string();
    let plugin = FakePlugin::start(port, Identity::edit("A"), plugin_handler());
    let items = format!("[{PART}]");
    let output = cli(&dir, &["create", "--port", &port_text, "--items", &items, "--json"]).await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let printed: Json = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed["error"]["code"], "permission_denied", "{printed}");
    assert_eq!(
        printed["error"]["details"]["rule"],
        format!("read-only mode ({})", file.display())
    );
    let output = cli(&dir, &["state", "--port", &port_text]).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(actions(&plugin), ["state"]);
}

/// Runs `studio-bridge terminal` with `lines` piped in; returns its output once stdin ends.
async fn terminal(dir: &Path, port: u16, extra: &[&str], lines: &str) -> std::process::Output {
    let mut child = tokio::process::Command::new(binary())
        .args(["terminal", "--allow-unpaired", "--port", &port.to_string()])
        .args(extra)
        .env("STUDIO_BRIDGE_CONFIG_DIR", dir)
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn studio-bridge terminal");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(lines.as_bytes()).await.unwrap();
    drop(stdin);
    tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("terminal finished")
        .expect("terminal ran")
}

#[tokio::test]
async fn the_config_file_binds_the_terminal_and_ignore_config_gets_through() {
    let (dir, file) = config_dir("terminal", "deny_capabilities = [\"code\"]\n");
    let port = free_port();
    let plugin = FakePlugin::start(port, Identity::edit("A"), plugin_handler());

    let output = terminal(&dir, port, &[], "return 2\n.state\n").await;
    let stderr = text(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(1),
        "a refused line fails the script: {stderr}"
    );
    assert!(
        stderr.contains("error[permission_denied]: .exec is refused"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("denied by deny_capabilities \"code\" in {}", file.display())),
        "{stderr}"
    );
    assert!(text(&output.stdout).starts_with("Edit · "), "{}", text(&output.stdout));
    assert_eq!(actions(&plugin), ["state"], "the Luau line never reached Studio");

    let output = terminal(&dir, port, &["--ignore-config"], "return 2\n").await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(actions(&plugin), ["state", "exec"]);
}

#[tokio::test]
async fn the_terminal_follows_logs_only_where_the_policy_lets_logs_read() {
    let (dir, file) = config_dir("terminal-read", "deny_capabilities = [\"read\"]\n");
    let port = free_port();
    let plugin = FakePlugin::start(port, Identity::edit("A"), plugin_handler());
    let output = terminal(&dir, port, &[], ".follow on\n.state\n").await;
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "error[permission_denied]: .logs is refused by this studio-bridge's policy: denied by deny_capabilities \"read\" in {}",
            file.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("error[permission_denied]: .state is refused"),
        "{stderr}"
    );
    assert!(actions(&plugin).is_empty(), "{:?}", actions(&plugin));
}

//! End to end over stdio (TESTING.md layer 3), the policy: read-only mode, allow and deny
//! rules, and the config file, over MCP. The built binary as an MCP server, rmcp's client,
//! fake plugins.

use crate::support;

use rmpv::Value;
use serde_json::json;
use support::fake_plugin::{FakePlugin, Identity, Reply, handler, studio_like, value_map};
use support::free_port;
use support::mcp_client::Mcp;

use support::TOOLS;

/// The plugin side of the policy tests: answers `selection` and what `studio_like` does.
fn selection_plugin() -> support::fake_plugin::Handler {
    handler(|action, args| match action {
        "selection" => Reply::Ok(value_map(vec![(
            "selection",
            Value::Array(vec!["Workspace.Part".into()]),
        )])),
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

#[tokio::test]
async fn read_only_offers_only_reads_and_a_refused_call_never_reaches_studio() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &["--read-only"]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), selection_plugin()).await;

    let writes = [
        "studio_exec",
        "studio_script_edit",
        "studio_play",
        "studio_test_run",
        "studio_delete",
        "studio_clone",
        "studio_undo",
        "studio_redo",
        "studio_create",
        "studio_update",
        "studio_insert_asset",
        "studio_input",
        "studio_character",
        "studio_open",
        "studio_run",
        "studio_close",
    ];
    let expected: Vec<&str> = TOOLS.iter().copied().filter(|t| !writes.contains(t)).collect();
    assert_eq!(
        listed(&mcp).await,
        expected,
        "selection and debug stay: they have reading forms"
    );

    let error = mcp.err("studio_exec", json!({"script": "return 1"})).await;
    assert_eq!(error["code"], "permission_denied");
    assert_eq!(error["details"]["rule"], "read-only mode (--read-only)");
    assert!(
        error["message"].as_str().unwrap().starts_with("studio_exec is refused"),
        "{error}"
    );
    let error = mcp.err("studio_delete", json!({"paths": ["Workspace.Part"]})).await;
    assert_eq!(error["code"], "permission_denied");
    // debug reads its hits, but may not set a breakpoint (its Luau: a condition, expressions).
    let error = mcp
        .err(
            "studio_debug",
            json!({"action": "break", "path": "Workspace.Script", "line": 1}),
        )
        .await;
    assert_eq!(error["code"], "permission_denied");

    let selection = mcp.ok("studio_selection", json!({})).await;
    assert_eq!(selection["selection"], json!(["Workspace.Part"]));
    let error = mcp.err("studio_selection", json!({"set": ["Workspace"]})).await;
    assert_eq!(error["code"], "permission_denied");
    assert!(error["message"].as_str().unwrap().contains("changes Studio"), "{error}");
    mcp.ok("studio_state", json!({})).await;

    // Only the reading calls reached the plugin, in order; the reading selection had no `set`.
    assert_eq!(actions(&plugin), ["selection", "state"]);
    assert_eq!(plugin.log().requests[0].args, value_map(vec![]));

    let sessions = mcp.ok("studio_sessions", json!({})).await;
    assert_eq!(
        sessions["policy"],
        json!({"readOnly": true, "allow": [], "deny": [], "source": "flags"})
    );
}

#[tokio::test]
async fn deny_wins_over_allow_and_each_refusal_names_its_rule() {
    let port = free_port();
    let mcp = Mcp::spawn(
        port,
        &[
            "--allow",
            "studio_s*",
            "--allow",
            "studio_exec",
            "--deny",
            "studio_exec",
            "--deny",
            "studio_script_*",
        ],
    )
    .await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), selection_plugin()).await;
    assert_eq!(
        listed(&mcp).await,
        [
            "studio_sessions",
            "studio_state",
            "studio_stats",
            "studio_screenshot",
            "studio_selection"
        ]
    );

    let error = mcp.err("studio_exec", json!({"script": "return 1"})).await;
    assert_eq!(error["code"], "permission_denied");
    assert_eq!(error["details"]["rule"], "denied by --deny studio_exec");
    let error = mcp
        .err("studio_script_read", json!({"path": "ServerScriptService.Main"}))
        .await;
    assert_eq!(error["details"]["rule"], "denied by --deny studio_script_*");
    let error = mcp.err("studio_query", json!({"path": "Workspace"})).await;
    assert_eq!(
        error["details"]["rule"],
        "matched by no allow rule (--allow studio_s*, --allow studio_exec)"
    );
    // Not read-only: an allowed tool's writing form goes through.
    mcp.ok("studio_selection", json!({"set": ["Workspace.Part"]})).await;
    assert_eq!(actions(&plugin), ["selection"]);

    let sessions = mcp.ok("studio_sessions", json!({})).await;
    assert_eq!(
        sessions["policy"],
        json!({
            "readOnly": false,
            "allow": ["studio_s*", "studio_exec"],
            "deny": ["studio_exec", "studio_script_*"],
            "source": "flags"
        })
    );
}

#[tokio::test]
async fn the_config_file_sets_the_policy_and_flags_add_to_it() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("policy-config-{}", free_port()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config.toml");
    std::fs::write(
        &file,
        "# the user's policy\nread_only = true\ndeny = [\"studio_logs\"]\n",
    )
    .unwrap();

    // The default file, found in the config directory.
    let port = free_port();
    let mcp = Mcp::spawn_with_config_dir(port, &["--deny", "studio_screenshot"], &dir).await;
    let names = listed(&mcp).await;
    for hidden in ["studio_logs", "studio_screenshot", "studio_exec"] {
        assert!(!names.iter().any(|n| n == hidden), "{hidden} listed: {names:?}");
    }
    assert!(names.iter().any(|n| n == "studio_query"), "{names:?}");
    let error = mcp.err("studio_logs", json!({})).await;
    assert_eq!(
        error["details"]["rule"],
        format!("denied by deny \"studio_logs\" in {}", file.display())
    );
    let error = mcp.err("studio_exec", json!({"script": "return 1"})).await;
    assert_eq!(error["details"]["rule"], format!("read-only mode ({})", file.display()));
    let sessions = mcp.ok("studio_sessions", json!({})).await;
    assert_eq!(
        sessions["policy"],
        json!({
            "readOnly": true,
            "allow": [],
            "deny": ["studio_screenshot", "studio_logs"],
            "source": format!("flags + {}", file.display())
        })
    );

    // The same file named by --config, with the default directory empty.
    let other = Mcp::spawn(free_port(), &["--config", file.to_str().unwrap()]).await;
    let error = other.err("studio_logs", json!({})).await;
    assert_eq!(
        error["details"]["rule"],
        format!("denied by deny \"studio_logs\" in {}", file.display())
    );
    let sessions = other.ok("studio_sessions", json!({})).await;
    assert_eq!(sessions["policy"]["source"], file.display().to_string());
}

#[tokio::test]
async fn a_bad_config_file_or_glob_stops_mcp_at_start_naming_the_place_and_the_fix() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("policy-bad-{}", free_port()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config.toml");
    std::fs::write(&file, "read_only = true\ndney = [\"studio_exec\"]\n").unwrap();
    let start = |extra: &[&str]| {
        std::process::Command::new(support::mcp_client::binary())
            .args(["mcp", "--port", &free_port().to_string(), "--no-install-plugin"])
            .args(extra)
            .env("STUDIO_BRIDGE_CONFIG_DIR", &dir)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run studio-bridge mcp")
    };

    let output = start(&[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        output.stdout.is_empty(),
        "nothing on the MCP channel: {:?}",
        output.stdout
    );
    assert!(stderr.contains(&file.display().to_string()), "{stderr}");
    assert!(stderr.contains("line 2") && stderr.contains("dney"), "{stderr}");
    assert!(stderr.contains("deny = ["), "the fix names the keys: {stderr}");

    std::fs::write(&file, "deny = [\"studio_[\"]\n").unwrap();
    let output = start(&[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("line 1") && stderr.contains("not a valid glob"),
        "{stderr}"
    );

    std::fs::remove_file(&file).unwrap();
    let output = start(&["--deny", "exec"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("--deny exec") && stderr.contains("studio_exec"),
        "{stderr}"
    );

    let output = start(&["--config", dir.join("missing.toml").to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("missing.toml"), "{stderr}");
}

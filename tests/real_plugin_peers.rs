//! The real plugin with more than one studio-bridge process (TESTING.md layers 4 and 5): two
//! hosts in turn on one port, and a read-only peer beside the host, against the embedded
//! .rbxm in a headless Studio under Lune.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::free_port;
use support::lune::HeadlessStudio;
use support::mcp_client::{Mcp, binary, paired_config_dir};
use support::studio::{edit_studio, exchange, installed_plugin, run_luau};

/// Issue #17: two hosts in turn on one port. Host A (`serve`) carries a slow exec from a peer
/// MCP process when it is SIGKILLed; the peer takes over as host B, the real plugin reconnects
/// and, while the old exec would still be running, calls through B each get exactly their own
/// result: never the lost call's, never one another's.
#[tokio::test]
async fn two_hosts_in_turn_on_one_port_never_hand_a_call_another_calls_result() {
    const WAIT: Duration = Duration::from_secs(60);
    const BURST: usize = 6;
    let rbxm = installed_plugin().await;
    let port = free_port();
    // Host A: a bare host, so the MCP process below is its peer and survives it.
    let mut host_a = tokio::process::Command::new(binary())
        .args(["serve", "--port", &port.to_string(), "--no-install-plugin"])
        .env("STUDIO_BRIDGE_CONFIG_DIR", paired_config_dir())
        .env("STUDIO_BRIDGE_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("start studio-bridge serve");
    let mut studio = HeadlessStudio::start(port, &rbxm, "edit");
    let first = studio.wait_for_line("[harness] connected context=edit", WAIT).await;
    let session_id = first
        .split("sessionId=")
        .nth(1)
        .expect("the harness names the sessionId")
        .trim()
        .to_owned();
    // The plugin is connected, so A holds the port: this MCP process joins it as a peer.
    let mcp = Mcp::spawn_paired(port, &[]).await;
    let through_a = mcp.ok("studio_exec", json!({"script": "return 'A0'"})).await;
    assert_eq!(through_a["returns"], json!(["A0"]), "{through_a}");
    assert_eq!(through_a["sessionId"], session_id.as_str(), "{through_a}");
    assert_eq!(through_a["context"], "edit", "{through_a}");

    // A slow call is running in Studio, carried by A, when A dies without a goodbye. It
    // would finish only once every call of the burst below is running in Studio, so that
    // its reply, were it ever sent on the new connection, would meet host B with all of
    // those calls waiting (one of them may have the lost call's request id).
    let slow = mcp.call(
        "studio_exec",
        json!({"script": format!(
            "print('sb-slow-started')\n\
             local started = os.clock()\n\
             repeat\n\
             \ttask.wait(0.05)\n\
             \tlocal calls = workspace:FindFirstChild('HostBCalls')\n\
             until (calls and #calls:GetChildren() >= {BURST}) or os.clock() - started > 60\n\
             return 'from host A'"
        )}),
    );
    let kill = async {
        studio.wait_for_line("sb-slow-started", WAIT).await;
        assert!(host_a.try_wait().unwrap().is_none(), "host A is still running");
        let pid = host_a.id().expect("host A's pid");
        let status = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    };
    let (lost, ()) = tokio::time::timeout(WAIT, async { tokio::join!(slow, kill) })
        .await
        .expect("the in-flight call ends once its host is gone");
    assert_eq!(
        lost.is_error,
        Some(true),
        "the call in flight when host A died must fail, not take another result: {lost:?}"
    );
    let error = support::mcp_client::error_of(&lost);
    assert!(
        error["code"] == "host_lost" || error["code"] == "session_lost",
        "{error}"
    );
    eprintln!("the call in flight when host A died failed with {}", error["code"]);
    let _ = host_a.wait().await;

    // The peer becomes host B on the same port and the plugin reconnects to it (same session).
    let again = studio.wait_for_line("[harness] connected context=edit", WAIT).await;
    assert!(again.ends_with(&format!("sessionId={session_id}")), "{again}");

    // At once, a burst of calls side by side: each checks in, waits until the whole burst
    // is running in Studio, then stays a while longer before returning its own value.
    let scripts: Vec<(String, String)> = (0..BURST)
        .map(|i| {
            let script = format!(
                "local calls = workspace:FindFirstChild('HostBCalls')\n\
                 if not calls then\n\
                 \tcalls = Instance.new('Folder')\n\
                 \tcalls.Name = 'HostBCalls'\n\
                 \tcalls.Parent = workspace\n\
                 end\n\
                 Instance.new('Folder').Parent = calls\n\
                 local started = os.clock()\n\
                 repeat task.wait(0.05) until #calls:GetChildren() >= {BURST} or os.clock() - started > 30\n\
                 task.wait(1)\n\
                 return 'B' .. {i}"
            );
            (script, format!("B{i}"))
        })
        .collect();
    let calls = scripts
        .iter()
        .map(|(script, _)| mcp.call("studio_exec", json!({"script": script})));
    let results = tokio::time::timeout(WAIT, futures_util::future::join_all(calls))
        .await
        .expect("the calls through host B finish");
    for ((script, expected), result) in scripts.iter().zip(&results) {
        assert_ne!(result.is_error, Some(true), "{script:?} failed: {result:?}");
        let out = result.structured_content.clone().expect("structuredContent");
        assert_eq!(
            out["returns"],
            json!([expected]),
            "{script:?} must return its own value, not another call's: {out}"
        );
        assert_eq!(out["success"], true, "{script:?}: {out}");
        assert_eq!(out["sessionId"], session_id.as_str(), "{out}");
        assert_eq!(out["context"], "edit", "{out}");
    }
    // And quick ones, one after another, still get their own.
    for i in BURST..BURST + 3 {
        let out = mcp
            .ok("studio_exec", json!({"script": format!("return 'B' .. {i}")}))
            .await;
        assert_eq!(out["returns"], json!([format!("B{i}")]), "{out}");
        assert_eq!(out["sessionId"], session_id.as_str(), "{out}");
        assert_eq!(out["context"], "edit", "{out}");
    }
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

/// Calls `tool`, which must be refused, and prints the MCP exchange; returns `error`.
async fn refused_exchange(mcp: &Mcp, tool: &str, args: serde_json::Value) -> serde_json::Value {
    let result = mcp.call(tool, args.clone()).await;
    eprintln!(
        "--> {}\n<-- {}",
        json!({"method": "tools/call", "params": {"name": tool, "arguments": args}}),
        serde_json::to_string(&result).unwrap()
    );
    assert_eq!(
        result.is_error,
        Some(true),
        "{tool} should have been refused: {result:?}"
    );
    support::mcp_client::error_of(&result)
}

#[tokio::test]
async fn a_read_only_peer_reads_the_real_studio_and_changes_nothing() {
    let (rbxm, host, _studio) = edit_studio().await;
    let peer = Mcp::spawn_paired(host.port, &["--read-only"]).await;

    // The host's agent (no policy) makes a part and selects it: one undo step.
    run_luau(
        &host,
        "local p = Instance.new('Part')\np.Name = 'Watched'\np.Parent = workspace\nreturn true",
    )
    .await;
    let set = host.ok("studio_selection", json!({"set": ["Workspace.Watched"]})).await;
    assert_eq!(set["selection"], json!(["game.Workspace.Watched"]));

    // The read-only peer reads what Studio holds…
    let sessions = exchange(&peer, "studio_sessions", json!({})).await;
    assert_eq!(
        sessions["policy"],
        json!({"readOnly": true, "allow": [], "deny": [], "source": "flags"})
    );
    assert_eq!(sessions["sessions"][0]["context"], "edit");
    let read = exchange(&peer, "studio_selection", json!({})).await;
    assert_eq!(read["selection"], json!(["game.Workspace.Watched"]));
    let part = exchange(&peer, "studio_query", json!({"path": "Workspace.Watched"})).await;
    assert_eq!(part["instance"]["className"], "Part", "{part}");

    // …and every write it tries is refused before reaching Studio.
    let error = refused_exchange(&peer, "studio_selection", json!({"set": []})).await;
    assert_eq!(error["code"], "permission_denied");
    assert_eq!(error["details"]["rule"], "read-only mode (--read-only)");
    let error = refused_exchange(&peer, "studio_exec", json!({"script": "workspace.Watched:Destroy()"})).await;
    assert_eq!(error["code"], "permission_denied");
    let error = peer.err("studio_undo", json!({})).await;
    assert_eq!(error["code"], "permission_denied");

    // Studio is as the host left it: the part, the selection, and the host's set as the
    // newest undo step.
    let kept = host.ok("studio_selection", json!({})).await;
    assert_eq!(kept["selection"], json!(["game.Workspace.Watched"]));
    assert_eq!(
        run_luau(&host, "return workspace:FindFirstChild('Watched') ~= nil").await,
        true
    );
    let undone = host.ok("studio_undo", json!({})).await;
    assert_eq!(undone["waypoint"], "studio-bridge: selection", "{undone}");
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

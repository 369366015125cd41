//! The real plugin (TESTING.md layer 5): the embedded .rbxm, installed by the binary's own
//! `install-plugin`, running unchanged in a headless Studio under Lune, connected to the
//! real `studio-bridge mcp`, and every tool called over MCP.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use serde_json::json;
use support::free_port;
use support::lune::HeadlessStudio;
use support::mcp_client::{Mcp, binary};

/// Installs the plugin with the binary itself, into a fresh folder.
async fn installed_plugin() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sb-real-plugin-{}-{}", std::process::id(), free_port()));
    let output = tokio::process::Command::new(binary())
        .arg("install-plugin")
        .arg("--out")
        .arg(&dir)
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let file = dir.join("StudioBridge.rbxm");
    assert_eq!(
        std::fs::read(&file).unwrap(),
        studio_bridge::plugin_install::PLUGIN_RBXM
    );
    file
}

#[tokio::test]
async fn every_tool_is_answered_by_the_real_plugin_in_edit() {
    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let mut studio = HeadlessStudio::start(port, &rbxm, "edit");
    studio
        .wait_for_line("[harness] connected context=edit", Duration::from_secs(30))
        .await;

    let sessions = mcp.ok("studio_sessions", json!({})).await;
    let session = &sessions["sessions"][0];
    assert_eq!(session["context"], "edit");
    assert_eq!(session["state"], "Edit");
    assert_eq!(session["status"], "connected");
    assert_eq!(sessions["sessions"].as_array().unwrap().len(), 1);

    let state = mcp.ok("studio_state", json!({})).await;
    assert_eq!(state["state"], "Edit");
    assert!(state["placeName"].is_string());

    let exec = mcp
        .ok(
            "studio_exec",
            json!({"script": "print('hello from exec')\nwarn('careful')\nreturn 1 + 1, nil, 'x'"}),
        )
        .await;
    assert_eq!(exec["success"], true, "{exec}");
    assert_eq!(exec["returns"], json!([2, null, "x"]));
    assert_eq!(
        exec["logs"],
        json!([{"level": "Print", "body": "hello from exec"}, {"level": "Warning", "body": "careful"}])
    );

    let failed = mcp
        .ok(
            "studio_exec",
            json!({"script": "local a = 1\nlocal t = nil\nreturn t.field"}),
        )
        .await;
    assert_eq!(failed["success"], false);
    let message = failed["error"].as_str().unwrap();
    assert!(message.contains(":3:"), "the runtime error keeps its line: {message}");
    let syntax = mcp.ok("studio_exec", json!({"script": "return +"})).await;
    assert_eq!(syntax["success"], false);
    assert!(syntax["error"].as_str().unwrap().contains(":1:"), "{syntax}");

    let logs = mcp.ok("studio_logs", json!({"count": 20})).await;
    let bodies: Vec<&str> = logs["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["body"].as_str())
        .collect();
    assert!(bodies.contains(&"hello from exec"), "{bodies:?}");
    let since = logs["nextSince"].clone();
    mcp.ok("studio_exec", json!({"script": "print('after the cursor')"}))
        .await;
    let newer = mcp.ok("studio_logs", json!({"since": since})).await;
    let bodies: Vec<&str> = newer["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["body"].as_str())
        .collect();
    assert_eq!(bodies, ["after the cursor"]);

    // A part with an awkward name round-trips through exec's Instance value and query.
    let made = mcp
        .ok(
            "studio_exec",
            json!({"script": "local p = Instance.new('Part')\np.Name = 'My.Part'\np.Position = Vector3.new(1, 2, 3)\np.Parent = workspace\nreturn p, #workspace:GetChildren()"}),
        )
        .await;
    assert_eq!(made["returns"][0]["type"], "Instance", "{made}");
    let path = made["returns"][0]["value"]["path"].as_str().unwrap().to_owned();
    assert!(path.contains("[\"My.Part\"]"), "{path}");
    let count = made["returns"][1].as_u64().unwrap();
    let part = mcp
        .ok(
            "studio_query",
            json!({"path": path, "properties": ["Position", "Name"]}),
        )
        .await;
    assert_eq!(part["instance"]["className"], "Part");
    assert_eq!(
        part["instance"]["properties"]["Position"],
        json!({"type": "Vector3", "value": [1, 2, 3]})
    );
    assert_eq!(part["instance"]["properties"]["Name"], "My.Part");
    let workspace = mcp
        .ok("studio_query", json!({"path": "Workspace", "children": true}))
        .await;
    assert_eq!(workspace["instance"]["childCount"].as_u64(), Some(count));
    assert_eq!(
        workspace["instance"]["children"].as_array().unwrap().len() as u64,
        count
    );

    let missing = mcp.err("studio_query", json!({"path": "Workspace.Nope"})).await;
    assert_eq!(missing["code"], "not_found");

    let shot = mcp.call("studio_screenshot", json!({"maxWidth": 64})).await;
    assert_ne!(shot.is_error, Some(true), "{shot:?}");
    let size = shot.structured_content.clone().unwrap();
    assert!(size["width"].as_u64().unwrap() <= 64);
    let image = shot.content.iter().find_map(|c| c.as_image()).expect("an image block");
    let png = base64::engine::general_purpose::STANDARD.decode(&image.data).unwrap();
    let reader = png::Decoder::new(std::io::Cursor::new(png)).read_info().unwrap();
    assert_eq!(u64::from(reader.info().width), size["width"].as_u64().unwrap());
    assert_eq!(u64::from(reader.info().height), size["height"].as_u64().unwrap());

    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

#[tokio::test]
async fn play_routes_exec_to_the_server_and_context_to_the_client() {
    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let mut studio = HeadlessStudio::start(port, &rbxm, "play");
    for context in ["edit", "server", "client"] {
        studio
            .wait_for_line(
                &format!("[harness] connected context={context}"),
                Duration::from_secs(30),
            )
            .await;
    }
    let sessions = mcp.ok("studio_sessions", json!({})).await;
    let sessions = sessions["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 3);
    let instance = &sessions[0]["instanceId"];
    assert!(
        sessions.iter().all(|s| &s["instanceId"] == instance),
        "one instance: {sessions:?}"
    );

    let script = "local rs = game:GetService('RunService') return rs:IsServer(), rs:IsClient()";
    let server = mcp.ok("studio_exec", json!({"script": script})).await;
    assert_eq!(
        server["returns"],
        json!([true, false]),
        "exec defaults to the server in Play"
    );
    let client = mcp
        .ok("studio_exec", json!({"script": script, "context": "client"}))
        .await;
    assert_eq!(
        client["returns"],
        json!([false, true]),
        "context: client reaches the brokered client"
    );
    let state = mcp.ok("studio_state", json!({})).await;
    assert_eq!(state["state"], "Edit", "state defaults to the edit DataModel");
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

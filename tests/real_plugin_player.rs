//! Playing like a player (issue 27; TOOLS.md, "Play like a player"): `input`, `ui` and
//! `character` in the real plugin, installed by the binary's own `install-plugin`, in a Play
//! client DataModel of the headless Studio under Lune, whose VirtualInput, GUI layout,
//! TextBox focus and Humanoid are modelled on the engine reference (tests/lune/lib/Gui.luau,
//! VirtualInput.luau, Characters.luau, PlayClient.luau), driven over MCP by the real
//! `studio-bridge mcp`. What the client saw is read back with `exec` in the same client.

mod support;

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientRequest, Request};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value as Json, json};
use support::free_port;
use support::lune::HeadlessStudio;
use support::mcp_client::Mcp;
use support::studio::{installed_plugin, wait_for_contexts};

/// A playtest a person started (F5) with one client: edit, server and client sessions.
async fn play_studio() -> (std::path::PathBuf, Mcp, HeadlessStudio) {
    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn_paired(port, &[]).await;
    let studio = HeadlessStudio::start(port, &rbxm, "play");
    wait_for_contexts(&mcp, &["edit", "server", "client"], "the playtest came up").await;
    (rbxm, mcp, studio)
}

/// Runs `script` in the client with `exec`; returns its returns.
async fn in_client(mcp: &Mcp, script: &str) -> Json {
    let out = mcp
        .ok("studio_exec", json!({"script": script, "context": "client"}))
        .await;
    assert_eq!(out["success"], true, "{out}");
    out["returns"].clone()
}

const HELD: &str = "local uis = game:GetService('UserInputService')
    return uis:IsKeyDown(Enum.KeyCode.W), uis:IsKeyDown(Enum.KeyCode.LeftShift),
        uis:IsMouseButtonPressed(Enum.UserInputType.MouseButton1)";

const ROOT: &str =
    "local p = game.Players.LocalPlayer.Character.HumanoidRootPart.CFrame.Position return {p.X, p.Y, p.Z}";

fn xyz(value: &Json) -> (f64, f64, f64) {
    let n = |i: usize| value[i].as_f64().unwrap_or_else(|| panic!("a number at {i}: {value}"));
    (n(0), n(1), n(2))
}

#[tokio::test]
async fn holding_w_walks_the_character_forward_and_releases_w() {
    let (rbxm, mcp, _studio) = play_studio().await;
    let before = xyz(&in_client(&mcp, ROOT).await[0]);
    let out = mcp
        .ok(
            "studio_input",
            json!({"steps": [{"type": "key", "key": "W", "action": "down", "holdMs": 600}]}),
        )
        .await;
    assert_eq!(out["context"], "client", "input defaults to the client in Play: {out}");
    assert_eq!(
        out["steps"],
        json!([{"type": "key", "ok": true, "began": true, "gameProcessed": false}]),
        "{out}"
    );
    let after = xyz(&in_client(&mcp, ROOT).await[0]);
    assert!(after.2 < before.2 - 2.0, "W walks towards -Z: {before:?} -> {after:?}");
    assert_eq!(
        in_client(&mcp, HELD).await,
        json!([false, false, false]),
        "a `down` without its `up` is released when the call ends"
    );
    // Released: the character stays where it stopped.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(xyz(&in_client(&mcp, ROOT).await[0]), after, "nothing holds W any more");
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

#[tokio::test]
async fn a_refused_step_names_its_index_and_releases_every_held_key() {
    let (rbxm, mcp, _studio) = play_studio().await;
    // Step 3 clicks into the top bar, which is CoreGui: the engine throws.
    let err = mcp
        .err(
            "studio_input",
            json!({"steps": [
                {"type": "key", "key": "W", "action": "down"},
                {"type": "key", "key": "LeftShift", "action": "down"},
                {"type": "mouse", "action": "click", "x": 400, "y": 10},
                {"type": "key", "key": "Space"},
            ]}),
        )
        .await;
    assert_eq!(err["code"], "input_refused", "{err}");
    assert_eq!(err["details"]["step"], 3, "{err}");
    let message = err["message"].as_str().unwrap();
    assert!(message.starts_with("Step 3 (mouse click at (400, 10))"), "{message}");
    assert!(message.contains("CoreGui"), "the engine's message: {message}");
    assert_eq!(err["details"]["steps"].as_array().map(Vec::len), Some(2), "{err}");
    assert_eq!(
        in_client(&mcp, HELD).await,
        json!([false, false, false]),
        "all released"
    );

    // A key bound to a core action: refused at step 1, nothing held.
    let err = mcp
        .err("studio_input", json!({"steps": [{"type": "key", "key": "Escape"}]}))
        .await;
    assert_eq!(err["code"], "input_refused", "{err}");
    assert_eq!(err["details"]["step"], 1, "{err}");

    // A KeyCode that does not exist is refused before anything is sent (W stays up).
    let stopped = xyz(&in_client(&mcp, ROOT).await[0]);
    let err = mcp
        .err(
            "studio_input",
            json!({"steps": [{"type": "key", "key": "W", "action": "down"}, {"type": "key", "key": "Jump"}]}),
        )
        .await;
    assert_eq!(err["code"], "invalid_args", "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .starts_with("steps[2]: no KeyCode named \"Jump\""),
        "{err}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(xyz(&in_client(&mcp, ROOT).await[0]), stopped, "W was never pressed");
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

#[tokio::test]
async fn input_outside_a_play_client_is_not_in_play() {
    let (rbxm, mcp, _studio) = play_studio().await;
    for context in ["edit", "server"] {
        for (tool, args) in [(
            "studio_input",
            json!({"steps": [{"type": "key", "key": "W"}], "context": context}),
        )] {
            let err = mcp.err(tool, args).await;
            assert_eq!(err["code"], "not_in_play", "{tool} in {context}: {err}");
            assert!(err["message"].as_str().unwrap().contains("studio_play"), "{err}");
        }
    }
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

#[tokio::test]
async fn a_cancelled_input_releases_what_it_held() {
    let (rbxm, mcp, _studio) = play_studio().await;
    let Ok(Json::Object(arguments)) = serde_json::to_value(json!({"steps": [
        {"type": "key", "key": "W", "action": "down"},
        {"type": "mouse", "action": "down", "x": 400, "y": 300},
        {"type": "wait", "ms": 5000},
    ]})) else {
        unreachable!()
    };
    let request = ClientRequest::CallToolRequest(Request::new(
        CallToolRequestParams::new("studio_input").with_arguments(arguments),
    ));
    let handle = mcp
        .client
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .expect("send input");
    // Wait until the client holds both, then cancel.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while in_client(&mcp, HELD).await != json!([true, false, true]) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "W and the mouse were never held"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    handle.cancel(Some("the agent gave up".into())).await.expect("cancel");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while in_client(&mcp, HELD).await != json!([false, false, false]) {
        assert!(tokio::time::Instant::now() < deadline, "the cancel released nothing");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

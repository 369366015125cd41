//! Playing like a player (issue 27; TOOLS.md, "Play like a player"): `input`, `ui` and
//! `character` in the real plugin, installed by the binary's own `install-plugin`, in a Play
//! client DataModel of the headless Studio under Lune, whose VirtualInput, GUI layout,
//! TextBox focus and Humanoid are modelled on the engine reference (tests/lune/lib/Gui.luau,
//! VirtualInput.luau, Characters.luau, PlayClient.luau), driven over MCP by the real
//! `studio-bridge mcp`. What the client saw is read back with `exec` in the same client.

use crate::support;

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

/// A menu in the client's PlayerGui: a Play button, a button covered by an Active frame, a
/// hidden one, two with the same text, and a TextBox; each counts what reached it.
const MENU: &str = r#"
    local gui = game.Players.LocalPlayer.PlayerGui
    local menu = Instance.new("ScreenGui") menu.Name = "Menu" menu.Parent = gui
    local function button(name, text, x, y)
        local b = Instance.new("TextButton") b.Name = name b.Text = text
        b.Size = UDim2.fromOffset(120, 40) b.Position = UDim2.fromOffset(x, y) b.Parent = menu
        b.Activated:Connect(function() b:SetAttribute("activated", (b:GetAttribute("activated") or 0) + 1) end)
        return b
    end
    local play = button("Play", "Play", 340, 176) play.Size = UDim2.fromOffset(120, 40)
    button("Covered", "Shop", 20, 20)
    local cover = Instance.new("Frame") cover.Name = "Cover" cover.Active = true cover.ZIndex = 2
    cover.Size = UDim2.fromOffset(200, 100) cover.Position = UDim2.fromOffset(0, 0) cover.Parent = menu
    button("Hidden", "Secret", 600, 20).Visible = false
    button("Dup", "Again", 600, 100) button("Dup2", "Again", 600, 150)
    local box = Instance.new("TextBox") box.Name = "Name" box.Text = "old"
    box.Size = UDim2.fromOffset(200, 30) box.Position = UDim2.fromOffset(300, 300) box.Parent = menu
    box.FocusLost:Connect(function(enter) box:SetAttribute("enter", enter) box:SetAttribute("lostWith", box.Text) end)
    game:GetService("UserInputService").InputBegan:Connect(function()
        menu:SetAttribute("inputs", (menu:GetAttribute("inputs") or 0) + 1)
    end)
    -- A frame passes, so the layout has run: Studio would answer a read before it with the
    -- old (zero) layout, the test Studio's DOM with no value at all.
    task.wait(0.1)
    return true
"#;

const COUNTS: &str = r#"local menu = game.Players.LocalPlayer.PlayerGui.Menu
    return menu.Play:GetAttribute("activated") or 0, menu.Covered:GetAttribute("activated") or 0,
        menu:GetAttribute("inputs") or 0"#;

#[tokio::test]
async fn ui_clicks_by_path_and_text_refuses_what_a_player_could_not_click_and_types() {
    let (rbxm, mcp, _studio) = play_studio().await;
    assert_eq!(in_client(&mcp, MENU).await, json!([true]));

    let listed = mcp.ok("studio_ui", json!({"action": "inspect"})).await;
    assert_eq!(listed["viewport"], json!([800, 450]), "{listed}");
    assert_eq!(listed["inset"], json!([0, 58]), "{listed}");
    let play = listed["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"].as_str().is_some_and(|p| p.ends_with("Menu.Play")))
        .unwrap_or_else(|| panic!("Play is listed: {listed}"));
    // AbsolutePosition (340, 176) + half its size (60, 20) + the inset (0, 58).
    assert_eq!(play["center"], json!([400, 254]), "{play}");
    assert_eq!(play["active"], true);
    assert!(
        !listed.to_string().contains("Secret"),
        "a hidden element is not listed: {listed}"
    );

    let by_path = mcp
        .ok("studio_ui", json!({"action": "click", "target": "PlayerGui.Menu.Play"}))
        .await;
    assert_eq!(by_path["activated"], true, "{by_path}");
    assert_eq!(by_path["at"], json!([400, 254]), "{by_path}");
    assert!(
        by_path["clicked"].as_str().unwrap().ends_with("PlayerGui.Menu.Play"),
        "{by_path}"
    );
    assert_eq!(in_client(&mcp, COUNTS).await[0], 1, "Activated fired once");
    let by_text = mcp
        .ok("studio_ui", json!({"action": "click", "target": {"text": "Play"}}))
        .await;
    assert_eq!(by_text["activated"], true, "{by_text}");
    assert_eq!(in_client(&mcp, COUNTS).await[0], 2, "once more");

    let before = in_client(&mcp, COUNTS).await;
    let covered = mcp
        .err(
            "studio_ui",
            json!({"action": "click", "target": "PlayerGui.Menu.Covered"}),
        )
        .await;
    assert_eq!(covered["code"], "not_clickable", "{covered}");
    assert!(
        covered["message"].as_str().unwrap().contains("Menu.Cover"),
        "names the cover: {covered}"
    );
    let hidden = mcp
        .err("studio_ui", json!({"action": "click", "target": {"text": "Secret"}}))
        .await;
    assert_eq!(hidden["code"], "not_clickable", "{hidden}");
    assert!(
        hidden["message"].as_str().unwrap().contains("Visible is false"),
        "{hidden}"
    );
    let twice = mcp
        .err("studio_ui", json!({"action": "click", "target": {"text": "Again"}}))
        .await;
    assert_eq!(twice["code"], "ambiguous", "{twice}");
    assert_eq!(
        twice["details"]["candidates"].as_array().map(Vec::len),
        Some(2),
        "{twice}"
    );
    let missing = mcp
        .err("studio_ui", json!({"action": "click", "target": {"name": "Nope"}}))
        .await;
    assert_eq!(missing["code"], "not_found", "{missing}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(in_client(&mcp, COUNTS).await, before, "nothing was sent for a refusal");

    let typed = mcp
        .ok(
            "studio_ui",
            json!({"action": "type", "target": "PlayerGui.Menu.Name", "text": "hello", "submit": true}),
        )
        .await;
    assert_eq!(
        typed,
        json!({"path": typed["path"], "text": "hello", "focused": true, "submitted": true,
               "sessionId": typed["sessionId"], "context": "client"}),
        "{typed}"
    );
    assert_eq!(
        in_client(
            &mcp,
            "local b = game.Players.LocalPlayer.PlayerGui.Menu:FindFirstChild('Name') return b:GetAttribute('enter'), b:GetAttribute('lostWith'), b:IsFocused()"
        )
        .await,
        json!([true, "hello", false]),
        "FocusLost(true) with the text"
    );
    let not_a_box = mcp
        .err(
            "studio_ui",
            json!({"action": "type", "target": "PlayerGui.Menu.Play", "text": "x"}),
        )
        .await;
    assert_eq!(not_a_box["code"], "invalid_args", "{not_a_box}");
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

#[tokio::test]
async fn ui_and_character_outside_a_play_client_are_not_in_play() {
    let (rbxm, mcp, _studio) = play_studio().await;
    for (tool, args) in [
        ("studio_ui", json!({"action": "inspect", "context": "server"})),
        ("studio_character", json!({"action": "jump", "context": "edit"})),
    ] {
        let err = mcp.err(tool, args).await;
        assert_eq!(err["code"], "not_in_play", "{tool}: {err}");
    }
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

#[tokio::test]
async fn move_to_arrives_within_two_studs_and_a_far_target_is_not_reached_at_the_timeout() {
    let (rbxm, mcp, _studio) = play_studio().await;
    let near = mcp
        .ok("studio_character", json!({"action": "moveTo", "to": [10, 3, 6]}))
        .await;
    assert_eq!(near["arrived"], true, "{near}");
    assert!(near["distance"].as_f64().unwrap() <= 2.0, "{near}");
    assert!(
        near.get("pathStatus").is_none(),
        "a path computed on the baseplate: {near}"
    );
    let (x, _, z) = xyz(&in_client(&mcp, ROOT).await[0]);
    assert!(
        ((x - 10.0).powi(2) + (z - 6.0).powi(2)).sqrt() <= 2.0,
        "the character is there: {x}, {z}"
    );

    let far = mcp
        .ok(
            "studio_character",
            json!({"action": "moveTo", "to": [200, 3, 6], "timeoutMs": 2000}),
        )
        .await;
    assert_eq!(far["arrived"], false, "{far}");
    assert!(far["distance"].as_f64().unwrap() > 100.0, "{far}");
    // Stopped at the timeout: it does not walk on after the call.
    let stopped = xyz(&in_client(&mcp, ROOT).await[0]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        xyz(&in_client(&mcp, ROOT).await[0]),
        stopped,
        "the walk ended with the call"
    );

    let jumped = mcp.ok("studio_character", json!({"action": "jump"})).await;
    assert_eq!(jumped["jumped"], true, "{jumped}");
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

#[tokio::test]
async fn a_walk_longer_than_movetos_eight_seconds_arrives_because_moveto_is_issued_again() {
    let (rbxm, mcp, _studio) = play_studio().await;
    // Off the baseplate (no path: straight), at 2 studs/s: 10 s for 20 studs, past MoveTo's 8 s.
    in_client(
        &mcp,
        "local c = game.Players.LocalPlayer.Character
         c.Humanoid.WalkSpeed = 2
         c.HumanoidRootPart.CFrame = CFrame.new(250, 3, 0) c.HumanoidRootPart.Position = Vector3.new(250, 3, 0)",
    )
    .await;
    let out = mcp
        .ok(
            "studio_character",
            json!({"action": "moveTo", "to": [270, 3, 0], "timeoutMs": 20000}),
        )
        .await;
    assert_eq!(out["pathStatus"], "NoPath", "{out}");
    assert_eq!(out["arrived"], true, "{out}");
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

// Several players (TOOLS.md, "Play like a player": `play` with `players`, `add_players`, client
// sessions that carry `player`), on StudioTestService's ExecuteMultiplayerTestAsync and
// AddPlayers as tests/lune/lib/StudioTests.luau models them.

/// Counts, in the client it runs in, every InputBegan its UserInputService fires.
const COUNT_INPUTS: &str = r#"local me = game.Players.LocalPlayer
    me:SetAttribute("inputs", 0)
    game:GetService("UserInputService").InputBegan:Connect(function()
        me:SetAttribute("inputs", me:GetAttribute("inputs") + 1)
    end)
    return me.Name"#;

/// The client sessions `sessions` lists, as (sessionId, player), in its order.
async fn client_sessions(mcp: &Mcp) -> Vec<(String, Option<String>)> {
    let listed = mcp.ok("studio_sessions", json!({})).await;
    let sessions = listed["sessions"].as_array().unwrap();
    for session in sessions.iter().filter(|s| s["context"] != "client") {
        assert!(session.get("player").is_none(), "only clients have players: {session}");
    }
    sessions
        .iter()
        .filter(|s| s["context"] == "client")
        .map(|s| {
            (
                s["sessionId"].as_str().unwrap().to_owned(),
                s["player"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

fn players_of(clients: &Json) -> Vec<&str> {
    clients
        .as_array()
        .unwrap_or_else(|| panic!("clients: {clients}"))
        .iter()
        .map(|c| c["player"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn a_three_player_test_lists_its_clients_input_reaches_only_the_second_and_add_players_brings_a_fourth() {
    let (rbxm, mcp, _studio) = support::studio::edit_studio().await;
    let started = mcp.ok("studio_play", json!({"mode": "start", "players": 3})).await;
    assert_eq!(started["state"], "Play", "{started}");
    assert_eq!(
        players_of(&started["clients"]),
        ["Player1", "Player2", "Player3"],
        "{started}"
    );

    // `sessions` lists the same three clients, in the order they joined, each with its player.
    let clients = client_sessions(&mcp).await;
    let answered: Vec<(String, Option<String>)> = started["clients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["sessionId"].as_str().unwrap().to_owned(),
                c["player"].as_str().map(str::to_owned),
            )
        })
        .collect();
    assert_eq!(clients, answered);

    // Each client is its player's DataModel; `context: client` is the first to join.
    for (session, player) in &clients {
        let ran = mcp
            .ok("studio_exec", json!({"script": COUNT_INPUTS, "sessionId": session}))
            .await;
        assert_eq!(ran["returns"][0].as_str(), player.as_deref(), "{ran}");
    }
    let first = mcp
        .ok(
            "studio_exec",
            json!({"script": "return game.Players.LocalPlayer.Name", "context": "client"}),
        )
        .await;
    assert_eq!(first["returns"], json!(["Player1"]), "{first}");

    // Input sent to the second client reaches it, and only it.
    let second = &clients[1].0;
    let sent = mcp
        .ok(
            "studio_input",
            json!({"steps": [{"type": "key", "key": "E"}], "sessionId": second}),
        )
        .await;
    assert_eq!(sent["sessionId"], second.as_str(), "{sent}");
    assert_eq!(sent["steps"][0]["began"], true, "{sent}");
    let mut counts = Vec::new();
    for (session, _) in &clients {
        let ran = mcp
            .ok(
                "studio_exec",
                json!({"script": "return game.Players.LocalPlayer:GetAttribute('inputs')", "sessionId": session}),
            )
            .await;
        counts.push(ran["returns"][0].as_i64().unwrap());
    }
    assert_eq!(counts, [0, 1, 0], "one key press, in the second client only");

    // add_players brings a fourth, listed last.
    let added = mcp
        .ok("studio_play", json!({"mode": "add_players", "players": 1}))
        .await;
    assert_eq!(added["state"], "Play", "{added}");
    assert_eq!(
        players_of(&added["clients"]),
        ["Player1", "Player2", "Player3", "Player4"],
        "{added}"
    );
    let now = client_sessions(&mcp).await;
    assert_eq!(now.len(), 4);
    assert_eq!(now[..3], clients[..], "the first three are unchanged");
    assert_eq!(now[3].1.as_deref(), Some("Player4"));
    let fourth = mcp
        .ok(
            "studio_exec",
            json!({"script": "return game.Players.LocalPlayer.Name", "sessionId": now[3].0}),
        )
        .await;
    assert_eq!(fourth["returns"], json!(["Player4"]));
    // The new player joins the server too (a moment after its client said hello: joining
    // is a round trip of its own).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let on_server = mcp
            .ok("studio_exec", json!({"script": "return #game.Players:GetPlayers()"}))
            .await;
        if on_server["returns"] == json!([4]) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server never had the four players: {on_server}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Past eight in all: refused before AddPlayers is called, naming the field and the fix.
    let err = mcp
        .err("studio_play", json!({"mode": "add_players", "players": 5}))
        .await;
    assert_eq!(err["code"], "invalid_args", "{err}");
    assert_eq!(
        err["message"], "players: the test has 4 clients and a test has at most 8, so add 1 to 4.",
        "{err}"
    );
    assert_eq!(client_sessions(&mcp).await.len(), 4, "nothing was added");

    let stopped = mcp.ok("studio_play", json!({"mode": "stop"})).await;
    assert_eq!(stopped["state"], "Edit");
    assert!(stopped.get("clients").is_none(), "{stopped}");
    assert_eq!(support::studio::contexts(&mcp).await, ["edit"]);

    // With no test running there is nothing to add to.
    let err = mcp
        .err("studio_play", json!({"mode": "add_players", "players": 1}))
        .await;
    assert_eq!(err["code"], "not_in_play", "{err}");
    let message = err["message"].as_str().unwrap();
    assert!(
        message.starts_with("mode add_players needs a multiplayer test running")
            && message.contains("{mode: \"start\", players: 2..8}"),
        "{message}"
    );
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

#[tokio::test]
async fn players_out_of_range_and_add_players_in_a_solo_test_are_refused_with_the_fix() {
    let (rbxm, mcp, mut studio) = support::studio::edit_studio().await;
    for (args, start) in [
        (json!({"mode": "start", "players": 9}), "`players` must be 1 to 8"),
        (json!({"mode": "start", "players": 0}), "`players` must be 1 to 8"),
        (json!({"mode": "add_players"}), "mode add_players needs `players`"),
        (json!({"mode": "add_players", "players": 8}), "`players` must be 1 to 7"),
        (
            json!({"mode": "run", "players": 2}),
            "`players` goes with mode start or add_players, not run",
        ),
    ] {
        let err = mcp.err("studio_play", args.clone()).await;
        assert_eq!(err["code"], "invalid_args", "{args}: {err}");
        assert!(err["message"].as_str().unwrap().starts_with(start), "{args}: {err}");
    }
    assert!(
        !studio
            .lines_so_far()
            .iter()
            .any(|l| l.starts_with("[harness] test started")),
        "no test was started"
    );

    // A solo Play test (one client): AddPlayers needs a multiplayer test.
    let solo = mcp.ok("studio_play", json!({"mode": "start"})).await;
    assert_eq!(players_of(&solo["clients"]), ["Player1"], "{solo}");
    let err = mcp
        .err("studio_play", json!({"mode": "add_players", "players": 1}))
        .await;
    assert_eq!(err["code"], "invalid_args", "{err}");
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("this one is a solo Play test") && message.contains("stop it with mode stop"),
        "{message}"
    );
    assert_eq!(client_sessions(&mcp).await.len(), 1, "nothing was added");
    assert_eq!(mcp.ok("studio_play", json!({"mode": "stop"})).await["state"], "Edit");
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

/// A test a person started with Play is not a multiplayer test: this plugin did not start it,
/// so it asks the test's server, and the engine's refusal comes back with the fix.
#[tokio::test]
async fn add_players_in_a_test_a_person_started_passes_on_the_engines_refusal() {
    let (rbxm, mcp, mut studio) = play_studio().await;
    let err = mcp
        .err("studio_play", json!({"mode": "add_players", "players": 2}))
        .await;
    assert_eq!(err["code"], "plugin_error", "{err}");
    let message = err["message"].as_str().unwrap();
    assert!(
        message.starts_with("Studio refused AddPlayers:") && message.contains("multiplayer test"),
        "{message}"
    );
    assert!(message.contains("players: 2..8"), "the fix: {message}");
    assert!(
        !studio
            .lines_so_far()
            .iter()
            .any(|l| l.starts_with("[harness] players added")),
        "no players were added"
    );
    assert_eq!(client_sessions(&mcp).await.len(), 1);
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

//! The real plugin in playtests (TESTING.md layer 5; issue 25, items 5 and 6): the embedded
//! .rbxm, installed by the binary's own `install-plugin`, in a headless Studio under Lune
//! (StudioTestService and PluginConnectionService as tests/lune/lib models them), driven over
//! MCP by the real `studio-bridge mcp`.
//!
//! - A `test_run` that is cancelled ends the test it started: no test DataModel is left, and
//!   the next `test_run` runs instead of answering `busy`.
//! - A `test_run`'s logs hold what the game's scripts printed when the test's DataModels
//!   started, before their PluginConnection to the edit plugin was up, exactly once.

use crate::support;

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientRequest, Request};
use rmcp::service::PeerRequestOptions;
use serde_json::json;
use support::free_port;
use support::lune::HeadlessStudio;
use support::mcp_client::Mcp;
use support::studio::{contexts, edit_studio, exchange, installed_plugin, wait_for_contexts};

/// The harness's lines about tests starting and ending, in order.
fn test_lines(studio: &mut HeadlessStudio) -> Vec<String> {
    studio
        .lines_so_far()
        .iter()
        .filter(|l| l.starts_with("[harness] test "))
        .map(|l| {
            if l.starts_with("[harness] test started") {
                "started".to_owned()
            } else {
                "ended".to_owned()
            }
        })
        .collect()
}

#[tokio::test]
async fn a_cancelled_test_run_leaves_no_test_running_and_the_next_test_run_works() {
    let (rbxm, mcp, mut studio) = edit_studio().await;
    let Ok(serde_json::Value::Object(arguments)) =
        serde_json::to_value(json!({"script": "while true do task.wait() end", "timeoutMs": 60000}))
    else {
        unreachable!()
    };
    let request = ClientRequest::CallToolRequest(Request::new(
        CallToolRequestParams::new("studio_test_run").with_arguments(arguments),
    ));
    let handle = mcp
        .client
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .expect("send test_run");
    studio
        .wait_for_line("[harness] test started", Duration::from_secs(30))
        .await;
    // The script runs in the test's server and its client is there.
    wait_for_contexts(&mcp, &["edit", "server", "client"], "the test came up").await;
    handle
        .cancel(Some("the agent gave up".into()))
        .await
        .expect("cancel test_run");

    // The cancelled call's test ends (the old plugin left it running until the script's own
    // 60 s timeout, and the next test_run answered `busy`).
    studio
        .wait_for_line("[harness] test ended", Duration::from_secs(30))
        .await;
    wait_for_contexts(&mcp, &["edit"], "no test is left running").await;
    let next = mcp.ok("studio_test_run", json!({"script": "return 'next'"})).await;
    assert_eq!(next["success"], true, "{next}");
    assert_eq!(next["returns"], json!(["next"]));
    assert_eq!(next["timedOut"], false);
    studio
        .wait_for_line("[harness] test ended", Duration::from_secs(30))
        .await;
    assert_eq!(
        test_lines(&mut studio),
        ["started", "ended", "started", "ended"],
        "the cancelled test ended before the next one started"
    );
    wait_for_contexts(&mcp, &["edit"], "back in Edit").await;
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

#[tokio::test]
async fn a_game_scripts_startup_print_appears_in_test_run_logs_exactly_once() {
    let (rbxm, mcp, _studio) = edit_studio().await;
    // Game scripts made in Edit: the test's DataModels are copies, and each runs its own.
    let made = mcp
        .ok(
            "studio_exec",
            json!({"script": r#"
                local s = Instance.new("Script")
                s.Name = "Greeter"
                s.Source = "print('the server script started')"
                s.Parent = game:GetService("ServerScriptService")
                local c = Instance.new("Script")
                c.Name = "ClientGreeter"
                c.RunContext = Enum.RunContext.Client
                c.Source = "print('the client script started')"
                c.Parent = game:GetService("ReplicatedStorage")
            "#}),
        )
        .await;
    assert_eq!(made["success"], true, "{made}");

    let ran = mcp
        .ok(
            "studio_test_run",
            json!({"script": "print('the test script runs') task.wait(1) return 1"}),
        )
        .await;
    assert_eq!(ran["success"], true, "{ran}");
    let logs = ran["logs"].as_array().expect("logs");
    let count = |context: &str, body: &str| {
        logs.iter()
            .filter(|l| l["context"] == context && l["body"] == body)
            .count()
    };
    assert_eq!(count("server", "the server script started"), 1, "{logs:?}");
    assert_eq!(count("client", "the client script started"), 1, "{logs:?}");
    assert_eq!(count("server", "the test script runs"), 1, "{logs:?}");
    let server: Vec<&str> = logs
        .iter()
        .filter(|l| l["context"] == "server")
        .filter_map(|l| l["body"].as_str())
        .filter(|body| body.starts_with("the "))
        .collect();
    assert_eq!(
        server,
        ["the server script started", "the test script runs"],
        "the server's lines in the order it printed them"
    );
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

// Playtests as they run to the end: Play with three clients carried over the one web stream,
// exec in Play and with `runtime: "game"`, `play` start and stop, and `test_run` with its
// result, logs and progress.

/// Issue #9: a Play test with three clients is carried over the edit plugin's one web stream
/// (PluginConnectionService between the DataModels): every context is listed and reachable,
/// exec runs where it is sent, and nothing is added to the playtest's DataModels.
#[tokio::test]
async fn play_with_three_clients_is_carried_over_one_web_stream() {
    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn_paired(port, &[]).await;
    let mut studio = HeadlessStudio::start_with(port, &rbxm, "play", &["--clients", "3"]);
    studio
        .wait_connected(&["edit", "server", "client", "client", "client"])
        .await;
    let sessions = mcp.ok("studio_sessions", json!({})).await;
    let sessions = sessions["sessions"].as_array().unwrap();
    let contexts: Vec<&str> = sessions.iter().map(|s| s["context"].as_str().unwrap()).collect();
    assert_eq!(contexts, ["edit", "server", "client", "client", "client"]);
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
    assert_eq!(server["context"], "server");
    let mut players = Vec::new();
    for client in sessions.iter().filter(|s| s["context"] == "client") {
        let ran = mcp
            .ok(
                "studio_exec",
                json!({"script": "return game:GetService('RunService'):IsClient(), game.Players:GetPlayers()[1].Name", "sessionId": client["sessionId"]}),
            )
            .await;
        assert_eq!(ran["returns"][0], true);
        assert_eq!(ran["sessionId"], client["sessionId"]);
        players.push(ran["returns"][1].as_str().unwrap().to_owned());
    }
    players.sort();
    assert_eq!(
        players,
        ["Player1", "Player2", "Player3"],
        "each client ran its own call"
    );
    let state = mcp.ok("studio_state", json!({})).await;
    assert_eq!(state["state"], "Edit", "state defaults to the edit DataModel");

    // The harness checks the playtest DataModels once a second: let it look once more.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let lines = studio.lines_so_far();
    let streams: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("[harness] web streams open="))
        .collect();
    assert!(!streams.is_empty(), "the harness reports its web streams");
    assert!(
        streams.iter().all(|l| l.ends_with("open=1")),
        "one web stream for the whole Studio: {streams:?}"
    );
    let changed: Vec<&String> = lines.iter().filter(|l| l.contains("datamodel changed")).collect();
    assert!(
        changed.is_empty(),
        "the plugin added something to a playtest DataModel: {changed:?}"
    );
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

/// Issue #9 item 3: Play DataModels refuse `loadstring` (the shim as the reference says), so
/// exec there compiles through a ModuleScript outside the DataModel, with output captured and
/// the user's line numbers kept; edit still uses loadstring.
#[tokio::test]
async fn exec_in_play_compiles_through_a_module_script_outside_the_data_model() {
    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn_paired(port, &[]).await;
    let mut studio = HeadlessStudio::start(port, &rbxm, "play");
    studio.wait_connected(&["edit", "server", "client"]).await;
    let script = "print('in play', 1)\nwarn('careful')\nreturn game:GetService('RunService'):IsServer(), script.Parent, script.ClassName";
    for (context, is_server) in [("server", true), ("client", false)] {
        let out = exchange(&mcp, "studio_exec", json!({"script": script, "context": context})).await;
        assert_eq!(out["success"], true, "{out}");
        assert_eq!(out["compiledWith"], "module", "{out}");
        assert_eq!(out["context"], context, "{out}");
        assert_eq!(
            out["returns"],
            json!([is_server, null, "ModuleScript"]),
            "ran in the {context}, from a ModuleScript with no parent: {out}"
        );
        assert_eq!(
            out["logs"],
            json!([{"level": "Print", "body": "in play 1"}, {"level": "Warning", "body": "careful"}])
        );
    }
    let syntax = exchange(
        &mcp,
        "studio_exec",
        json!({"script": "local a = 1\nlocal b = = 2", "check": false}),
    )
    .await;
    assert_eq!(syntax["success"], false);
    assert_eq!(syntax["compiledWith"], "module");
    let message = syntax["error"].as_str().unwrap();
    assert!(message.starts_with("[string \"exec\"]:2:"), "{message}");
    let runtime = mcp.ok("studio_exec", json!({"script": "\n\nerror('boom')"})).await;
    assert_eq!(runtime["error"], "[string \"exec\"]:3: boom", "{runtime}");
    let edit = mcp
        .ok("studio_exec", json!({"script": "return 1", "context": "edit"}))
        .await;
    assert_eq!(edit["compiledWith"], "loadstring", "{edit}");
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

/// Issue #12: `play` starts and stops a playtest on Studio's real state (StudioTestService in
/// the Lune Studio, modelled on its reference page), and refuses what the state forbids.
#[tokio::test]
async fn play_starts_and_stops_a_playtest_and_refuses_what_the_state_forbids() {
    let (rbxm, mcp, _studio) = edit_studio().await;
    let stop_in_edit = mcp.err("studio_play", json!({"mode": "stop"})).await;
    assert_eq!(stop_in_edit["code"], "invalid_args");
    assert!(
        stop_in_edit["message"].as_str().unwrap().contains("Studio is in Edit"),
        "{stop_in_edit}"
    );

    // Something made in Edit is in the test: the server DataModel is a copy of the edit one.
    mcp.ok(
        "studio_exec",
        json!({"script": "local m = Instance.new('Folder') m.Name = 'Marker' m.Parent = workspace"}),
    )
    .await;
    let started = mcp.ok("studio_play", json!({"mode": "start"})).await;
    assert_eq!(started["state"], "Play");
    assert_eq!(started["context"], "edit");
    assert_eq!(contexts(&mcp).await, ["edit", "server", "client"]);
    let ran = mcp
        .ok("studio_exec", json!({"script": "return game:GetService('RunService'):IsServer(), workspace:FindFirstChild('Marker') ~= nil"}))
        .await;
    assert_eq!(
        (ran["context"].as_str(), &ran["returns"]),
        (Some("server"), &json!([true, true]))
    );

    let again = mcp.err("studio_play", json!({"mode": "run"})).await;
    assert_eq!(again["code"], "busy");
    assert!(again["message"].as_str().unwrap().contains("(Play)"), "{again}");

    let stopped = mcp.ok("studio_play", json!({"mode": "stop"})).await;
    assert_eq!(stopped["state"], "Edit");
    let sessions = mcp.ok("studio_sessions", json!({})).await;
    assert_eq!(sessions["sessions"].as_array().unwrap().len(), 1, "{sessions}");

    // Run: a server and no client.
    let run = mcp.ok("studio_play", json!({"mode": "run"})).await;
    assert_eq!(run["state"], "Run");
    assert_eq!(contexts(&mcp).await, ["edit", "server"]);
    assert_eq!(mcp.ok("studio_play", json!({"mode": "stop"})).await["state"], "Edit");
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

/// A playtest a person started (F5) is stopped the same way.
#[tokio::test]
async fn play_stop_ends_a_playtest_a_person_started() {
    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn_paired(port, &[]).await;
    let mut studio = HeadlessStudio::start(port, &rbxm, "play");
    studio
        .wait_for_line("[harness] connected context=client", Duration::from_secs(30))
        .await;
    let stopped = mcp.ok("studio_play", json!({"mode": "stop"})).await;
    assert_eq!(stopped["state"], "Edit");
    studio
        .wait_for_line("[harness] test ended", Duration::from_secs(5))
        .await;
    assert_eq!(contexts(&mcp).await, ["edit"]);
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

/// Issue #12: `test_run` starts a test, runs the script in its server, ends the test with the
/// result and reports the output of the server and the client; Studio is in Edit afterwards.
#[tokio::test]
async fn test_run_runs_a_script_in_a_fresh_playtest_and_returns_to_edit() {
    let (rbxm, mcp, _studio) = edit_studio().await;
    let script =
        "print('from the server') local rs = game:GetService('RunService') return rs:IsServer(), nil, rs:IsClient()";
    let ran = mcp.ok("studio_test_run", json!({"script": script})).await;
    assert_eq!(ran["success"], true, "{ran}");
    assert_eq!(ran["returns"], json!([true, null, false]));
    assert_eq!(ran["timedOut"], false);
    assert_eq!(ran["context"], "edit");
    let logs = ran["logs"].as_array().unwrap();
    assert!(
        logs.iter()
            .any(|l| l["body"] == "from the server" && l["context"] == "server"),
        "{logs:?}"
    );
    let sessions = mcp.ok("studio_sessions", json!({})).await;
    assert_eq!(
        sessions["sessions"].as_array().unwrap().len(),
        1,
        "back in Edit: {sessions}"
    );

    // A script error is a result with its line; Run mode has no client.
    let failed = mcp
        .ok(
            "studio_test_run",
            json!({"script": "local x = 1\nerror('broken')", "mode": "run"}),
        )
        .await;
    assert_eq!(failed["success"], false);
    assert!(failed["error"].as_str().unwrap().contains(":2:"), "{failed}");

    // Past timeoutMs where the script yields: stopped, timedOut, the output so far kept.
    // The issue's case: a loop that yields, past a 2 s timeoutMs.
    let spin = mcp
        .ok(
            "studio_test_run",
            json!({"script": "while true do task.wait() end", "timeoutMs": 2000}),
        )
        .await;
    assert_eq!(spin["timedOut"], true, "{spin}");
    assert!(spin["durationMs"].as_u64().unwrap() >= 2000, "{spin}");
    eprintln!("test_run with timeoutMs 2000 answered after {} ms", spin["durationMs"]);
    let slow = mcp
        .ok(
            "studio_test_run",
            json!({"script": "print('started') task.wait(30)", "timeoutMs": 500}),
        )
        .await;
    assert_eq!(slow["timedOut"], true, "{slow}");
    assert!(
        slow["logs"].as_array().unwrap().iter().any(|l| l["body"] == "started"),
        "{slow}"
    );
    let sessions = mcp.ok("studio_sessions", json!({})).await;
    assert_eq!(
        sessions["sessions"].as_array().unwrap().len(),
        1,
        "back in Edit: {sessions}"
    );

    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

/// TOOLS.md, "Play like a player": `test_run` with `players` starts a multiplayer test whose
/// server runs the script once that many players have joined; every client's output is in
/// the logs; Studio is in Edit afterwards. A Run test has no clients: `players` with mode run
/// is refused before anything starts.
#[tokio::test]
async fn test_run_with_players_runs_the_script_once_they_joined() {
    let (rbxm, mcp, mut studio) = edit_studio().await;
    let script = "local names = {} for _, p in game.Players:GetPlayers() do table.insert(names, p.Name) end table.sort(names) return table.concat(names, ',')";
    let ran = exchange(&mcp, "studio_test_run", json!({"script": script, "players": 3})).await;
    assert_eq!(ran["success"], true, "{ran}");
    assert_eq!(ran["returns"], json!(["Player1,Player2,Player3"]), "{ran}");
    assert_eq!(contexts(&mcp).await, ["edit"], "back in Edit");

    let err = mcp
        .err(
            "studio_test_run",
            json!({"script": "return 1", "players": 2, "mode": "run"}),
        )
        .await;
    assert_eq!(err["code"], "invalid_args", "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .starts_with("`players` needs mode play"),
        "{err}"
    );
    let err = mcp
        .err("studio_test_run", json!({"script": "return 1", "players": 9}))
        .await;
    assert_eq!(err["code"], "invalid_args", "{err}");
    assert!(
        err["message"].as_str().unwrap().starts_with("`players` must be 1 to 8"),
        "{err}"
    );
    let started = test_lines(&mut studio).iter().filter(|l| *l == "started").count();
    assert_eq!(started, 1, "the refused calls started no test");
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

/// Issue #12: `runtime: "game"` runs a chunk in the playtest's own script VM, where
/// `require` returns the module table the running game holds (the plugin's VM has its own).
#[tokio::test]
async fn exec_with_runtime_game_sees_the_games_own_module_tables() {
    let (rbxm, mcp, _studio) = edit_studio().await;
    // A game Script that marks the shared module's table, made in Edit: the test copies it.
    mcp.ok(
        "studio_exec",
        json!({"script": "local s = Instance.new('Script') s.Name = 'Marks' s.Source = \"require(game.ReplicatedStorage.Shared).setBy = 'game script'\" s.Parent = game.ServerScriptService"}),
    )
    .await;
    let in_edit = mcp
        .err("studio_exec", json!({"script": "return 1", "runtime": "game"}))
        .await;
    assert_eq!(in_edit["code"], "invalid_args", "{in_edit}");
    assert_eq!(mcp.ok("studio_play", json!({"mode": "start"})).await["state"], "Play");

    let read = "return require(game.ReplicatedStorage.Shared).setBy";
    let game = mcp
        .ok(
            "studio_exec",
            json!({"script": read, "runtime": "game", "context": "server"}),
        )
        .await;
    assert_eq!(game["returns"], json!(["game script"]), "{game}");
    assert_eq!(game["compiledWith"], "game");
    let plugin = mcp
        .ok("studio_exec", json!({"script": read, "context": "server"}))
        .await;
    assert_eq!(
        plugin["returns"],
        json!([null]),
        "the plugin's VM has its own copy: {plugin}"
    );

    // Output is captured, nil holes kept, and errors keep their line.
    let printed = mcp
        .ok(
            "studio_exec",
            json!({"script": "print('from the game', 1)\nreturn nil, 2", "runtime": "game", "context": "server"}),
        )
        .await;
    assert_eq!(printed["returns"], json!([null, 2]), "{printed}");
    assert_eq!(printed["logs"][0]["body"], "from the game 1", "{printed}");
    let failed = mcp
        .ok(
            "studio_exec",
            json!({"script": "local x = 1\nerror('boom')", "runtime": "game", "context": "server"}),
        )
        .await;
    assert_eq!(failed["success"], false);
    assert!(failed["error"].as_str().unwrap().contains(":2:"), "{failed}");
    assert_eq!(failed["stage"], "run", "which stage failed, as exec says it: {failed}");

    // A client's game VM too.
    let client = mcp
        .ok(
            "studio_exec",
            json!({"script": "return game:GetService('RunService'):IsClient()", "runtime": "game", "context": "client"}),
        )
        .await;
    assert_eq!(client["returns"], json!([true]), "{client}");
    assert_eq!(mcp.ok("studio_play", json!({"mode": "stop"})).await["state"], "Edit");
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

/// Issue #12: a `test_run` reports progress while the test runs (when the caller asked for it).
#[tokio::test]
async fn test_run_reports_progress_while_the_test_runs() {
    let (rbxm, mcp, _studio) = edit_studio().await;
    let Ok(serde_json::Value::Object(arguments)) =
        serde_json::to_value(json!({"script": "task.wait(2.5) return 'late'", "timeoutMs": 10000}))
    else {
        unreachable!()
    };
    let mut params = rmcp::model::CallToolRequestParams::new("studio_test_run").with_arguments(arguments);
    let token = rmcp::model::ProgressToken(rmcp::model::NumberOrString::String("t1".into()));
    let mut meta = rmcp::model::RequestMetaObject::default();
    meta.set_progress_token(token);
    params.meta = Some(meta);
    let result = mcp.client.call_tool(params).await.unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(result.structured_content.as_ref().unwrap()["returns"], json!(["late"]));
    support::wait_for("progress notifications", Duration::from_secs(10), || {
        mcp.recorder.progress.lock().unwrap().len() >= 2
    })
    .await;
    let progress = mcp.recorder.progress.lock().unwrap().clone();
    let steps: Vec<f64> = progress.iter().map(|p| p.progress).collect();
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "progress only grows: {steps:?}");
    assert!(progress.iter().all(|p| p.total == Some(10.0)), "{progress:?}");
    assert!(
        progress
            .iter()
            .any(|p| p.message.as_deref().is_some_and(|m| m.contains("runs in the test"))),
        "{progress:?}"
    );
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

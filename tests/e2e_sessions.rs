//! End to end over stdio (TESTING.md layer 3), sessions: which Studio session a call goes to
//! (defaults in Play, explicit contexts, resolution errors), waiting for plugins during the
//! startup grace, hellos that replace or are refused, and playtest sessions carried over the
//! edit plugin's socket. The built binary as an MCP server, rmcp's client, fake plugins.

use crate::support;

use std::time::{Duration, Instant};

use rmpv::Value;
use serde_json::json;
use support::fake_plugin::{FakePlugin, Identity, Reply, handler, studio_like, value_map};
use support::free_port;
use support::mcp_client::Mcp;

#[tokio::test]
async fn sessions_lists_every_datamodel_of_a_play_instance() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let _edit = FakePlugin::connect(port, Identity::play("A", "edit"), studio_like()).await;
    let _server = FakePlugin::connect(port, Identity::play("A", "server"), studio_like()).await;
    let _client = FakePlugin::connect(port, Identity::play("A", "client"), studio_like()).await;
    let result = mcp.ok("studio_sessions", json!({})).await;
    let sessions = result["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 3);
    let contexts: Vec<&str> = sessions.iter().map(|s| s["context"].as_str().unwrap()).collect();
    assert_eq!(contexts, ["edit", "server", "client"]);
    for session in sessions {
        assert_eq!(session["instanceId"], "A");
        assert_eq!(session["status"], "connected");
        assert_eq!(session["placeId"], 1818, "a whole float from Luau is an integer");
        assert_eq!(session["pluginVersion"], "fake-0.0.1");
    }
}

#[tokio::test]
async fn exec_defaults_to_the_server_during_play_and_context_picks_another() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let edit = FakePlugin::connect(port, Identity::play("A", "edit"), studio_like()).await;
    let server = FakePlugin::connect(port, Identity::play("A", "server"), studio_like()).await;
    let client = FakePlugin::connect(port, Identity::play("A", "client"), studio_like()).await;
    mcp.ok("studio_exec", json!({"script": "return 1"})).await;
    mcp.ok("studio_exec", json!({"script": "return 1", "context": "client"}))
        .await;
    mcp.ok("studio_state", json!({})).await;
    assert_eq!(server.log().requests.len(), 1, "exec defaults to server in Play");
    assert_eq!(client.log().requests.len(), 1, "context: client");
    assert_eq!(edit.log().requests.len(), 1, "state defaults to edit");
    assert_eq!(edit.log().requests[0].action, "state");
}

#[tokio::test]
async fn resolution_errors_name_the_fix_and_list_the_sessions() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let a = FakePlugin::connect(port, Identity::edit("A"), studio_like()).await;

    let error = mcp.err("studio_state", json!({"context": "server"})).await;
    assert_eq!(error["code"], "context_unavailable");
    assert!(error["message"].as_str().unwrap().contains("Edit mode"));

    let error = mcp.err("studio_state", json!({"sessionId": "nope"})).await;
    assert_eq!(error["code"], "session_not_found");
    assert_eq!(error["details"]["sessions"][0]["sessionId"], a.session_id());

    let _b = FakePlugin::connect(port, Identity::edit("B"), studio_like()).await;
    let error = mcp.err("studio_state", json!({})).await;
    assert_eq!(error["code"], "ambiguous_instance");
    assert_eq!(error["details"]["sessions"].as_array().unwrap().len(), 2);
    assert!(error["message"].as_str().unwrap().contains("studio_target"));

    // A default target settles it for this connection.
    mcp.ok("studio_target", json!({"set": {"instanceId": "A"}})).await;
    mcp.ok("studio_state", json!({})).await;
    assert_eq!(a.log().requests.len(), 1);
}

#[tokio::test]
async fn a_call_with_no_plugin_fails_with_no_sessions_within_its_deadline() {
    let mcp = Mcp::spawn(free_port(), &[]).await;
    let started = Instant::now();
    let error = mcp.err("studio_state", json!({})).await;
    assert_eq!(error["code"], "no_sessions");
    assert!(error["message"].as_str().unwrap().contains("plugin"));
    // The startup grace is 3 s; the state deadline is 5 s.
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
}

#[tokio::test]
async fn a_plugin_that_connects_during_the_startup_grace_is_waited_for() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let call = mcp.call("studio_state", json!({}));
    let connect = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        FakePlugin::connect(port, Identity::edit("A"), studio_like()).await
    };
    let (result, _plugin) = tokio::join!(call, connect);
    assert_ne!(result.is_error, Some(true), "{result:?}");
}

#[tokio::test]
async fn a_second_hello_with_the_same_session_id_replaces_the_first() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let old = FakePlugin::connect(port, Identity::edit("A"), handler(|_, _| Reply::Never)).await;
    let new = FakePlugin::connect(port, Identity::edit("A"), studio_like()).await;
    old.wait("close 4001", Duration::from_secs(2), |log| {
        log.closes.contains(&Some(4001))
    })
    .await;
    drop(old);
    let state = mcp.ok("studio_state", json!({})).await;
    assert_eq!(state["state"], "Edit");
    assert_eq!(new.log().requests.len(), 1);
}

#[tokio::test]
async fn a_plugin_with_another_protocol_version_is_rejected_with_the_fix() {
    let port = free_port();
    let _mcp = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::start(
        port,
        Identity {
            protocol: 99,
            ..Identity::edit("A")
        },
        studio_like(),
    );
    let log = plugin
        .wait("reject", Duration::from_secs(10), |log| !log.rejects.is_empty())
        .await;
    assert_eq!(log.rejects[0].0, "protocol_mismatch");
    assert!(
        log.rejects[0].1.contains("studio-bridge install-plugin"),
        "{}",
        log.rejects[0].1
    );
    assert_eq!(log.welcomes, 0);
}

#[tokio::test]
async fn exec_right_after_a_host_starts_waits_for_the_play_server_instead_of_running_in_edit() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    // Only the edit DataModel has said hello to this new host; the Play server is still
    // reconnecting. An exec with no context must not run in edit (its changes persist).
    let edit = FakePlugin::connect(port, Identity::play("A", "edit"), studio_like()).await;
    let call = mcp.ok("studio_exec", json!({"script": "workspace.Baseplate:Destroy()"}));
    let late_server = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        FakePlugin::connect(port, Identity::play("A", "server"), studio_like()).await
    };
    let (result, server) = tokio::join!(call, late_server);
    assert_eq!(result["context"], "server", "{result}");
    assert_eq!(result["sessionId"], "A-server");
    assert_eq!(server.log().requests.len(), 1);
    assert!(
        edit.log().requests.is_empty(),
        "the edit DataModel must not have run it"
    );
}

#[tokio::test]
async fn an_edit_session_reporting_play_holds_exec_for_the_server_never_edit() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    // As the real plugin does (Playtest.luau): its hello says Edit (the edit DataModel stays
    // in Edit during a test), and a `state` event says Play once it sees the test.
    let edit = FakePlugin::connect(port, Identity::play("A", "edit"), studio_like()).await;
    edit.send_event("state", support::fake_plugin::value_map(vec![("state", "Play".into())]));
    // Past any startup grace: it is the reported state that holds the call.
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let call = mcp.ok("studio_exec", json!({"script": "return 1"}));
    let late_server = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        FakePlugin::connect(port, Identity::play("A", "server"), studio_like()).await
    };
    let (result, server) = tokio::join!(call, late_server);
    assert_eq!(result["context"], "server", "{result}");
    assert_eq!(server.log().requests.len(), 1);
    assert!(edit.log().requests.is_empty());
    // Past its deadline with no server, it says why, and edit is still untouched.
    drop(server);
}

#[tokio::test]
async fn an_explicit_context_chooses_within_the_default_target() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let edit = FakePlugin::connect(port, Identity::play("A", "edit"), studio_like()).await;
    let server = FakePlugin::connect(port, Identity::play("A", "server"), studio_like()).await;
    let _other = FakePlugin::connect(port, Identity::edit("B"), studio_like()).await;
    mcp.ok("studio_target", json!({"set": {"sessionId": "A-edit"}})).await;
    // The default names instance A; context: server chooses A's server.
    let result = mcp
        .ok("studio_exec", json!({"script": "return 1", "context": "server"}))
        .await;
    assert_eq!(
        (result["sessionId"].as_str(), result["context"].as_str()),
        (Some("A-server"), Some("server"))
    );
    // With no context, exec's own default (server during Play) applies within A.
    let result = mcp.ok("studio_exec", json!({"script": "return 2"})).await;
    assert_eq!(result["context"], "server");
    // A sessionId with another context also chooses within its instance.
    let result = mcp
        .ok("studio_state", json!({"sessionId": "A-server", "context": "edit"}))
        .await;
    assert_eq!(result["sessionId"], "A-edit");
    // instanceId is in every schema and accepted.
    let result = mcp.ok("studio_state", json!({"instanceId": "B"})).await;
    assert_eq!(result["sessionId"], "B-edit");
    assert_eq!(server.log().requests.len(), 2);
    assert_eq!(edit.log().requests.len(), 1);
}

#[tokio::test]
async fn a_session_id_not_seen_yet_is_waited_for_during_the_startup_grace() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let call = mcp.ok("studio_state", json!({"sessionId": "A-edit"}));
    let plugin = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        FakePlugin::connect(port, Identity::edit("A"), studio_like()).await
    };
    let (result, _plugin) = tokio::join!(call, plugin);
    assert_eq!(result["sessionId"], "A-edit");
}

/// PROTOCOL.md, Sessions: the edit plugin holds its Studio's one socket and carries the
/// playtest's server and clients over it, each still a session of its own.
#[tokio::test]
async fn playtest_sessions_carried_over_the_edit_socket_are_routed_by_session() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let edit = FakePlugin::connect(
        port,
        Identity::edit("A"),
        handler(|action, args| match action {
            "exec" => Reply::Progress(
                vec![1.0, 2.0],
                Box::new(Reply::Ok(value_map(vec![
                    ("success", true.into()),
                    ("returns", Value::Array(vec![args["script"].clone()])),
                    ("logs", Value::Array(vec![])),
                ]))),
            ),
            _ => studio_like()(action, args),
        }),
    )
    .await;
    edit.carry(Identity::play("A", "server"));
    edit.carry(Identity::play("A", "client"));
    edit.carry(Identity {
        session_id: "A-client2".into(),
        ..Identity::play("A", "client")
    });
    edit.wait("three carried welcomes", Duration::from_secs(5), |log| {
        log.carried_welcomes.len() == 3
    })
    .await;
    let listed = mcp.ok("studio_sessions", json!({})).await;
    let contexts: Vec<(&str, &str)> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["sessionId"].as_str().unwrap(), s["context"].as_str().unwrap()))
        .collect();
    assert_eq!(
        contexts,
        [
            ("A-edit", "edit"),
            ("A-server", "server"),
            ("A-client", "client"),
            ("A-client2", "client")
        ]
    );

    // exec defaults to the server: the request goes out tagged for the carried server.
    let ran = mcp.ok("studio_exec", json!({"script": "on_the_server()"})).await;
    assert_eq!(ran["returns"], json!(["on_the_server()"]));
    assert_eq!(
        (ran["sessionId"].as_str(), ran["context"].as_str()),
        (Some("A-server"), Some("server"))
    );
    let ran = mcp
        .ok(
            "studio_exec",
            json!({"script": "on_client_2()", "sessionId": "A-client2"}),
        )
        .await;
    assert_eq!(ran["returns"], json!(["on_client_2()"]));
    let state = mcp.ok("studio_state", json!({})).await;
    assert_eq!(state["sessionId"], "A-edit", "the socket's own session is untagged");
    let sessions: Vec<Option<String>> = edit.log().requests.iter().map(|r| r.session.clone()).collect();
    assert_eq!(
        sessions,
        [Some("A-server".to_owned()), Some("A-client2".to_owned()), None],
        "each request names the carried session it is for"
    );

    // `bye`: that DataModel closed; its session goes at once, the others stay.
    edit.bye("A-client2");
    let mut listed;
    loop {
        listed = mcp.ok("studio_sessions", json!({})).await;
        if listed["sessions"].as_array().unwrap().len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for session in listed["sessions"].as_array().unwrap() {
        assert_eq!(session["status"], "connected", "{session}");
        assert_ne!(session["sessionId"], "A-client2");
    }
    let gone = mcp.err("studio_state", json!({"sessionId": "A-client2"})).await;
    assert_eq!(gone["code"], "session_not_found");
}

/// TOOLS.md, "Play like a player": a client session in `sessions` carries `player`, its
/// LocalPlayer's Name, as its hello said; `context: "client"` is the client that joined first.
#[tokio::test]
async fn client_sessions_carry_their_player_and_context_client_is_the_first_to_join() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let edit = FakePlugin::connect(port, Identity::edit("A"), studio_like()).await;
    edit.carry(Identity::play("A", "server"));
    let client = |n: u8| Identity {
        session_id: format!("A-client{n}"),
        player: Some(format!("Player{n}")),
        ..Identity::play("A", "client")
    };
    for n in 1..=3 {
        edit.carry(client(n));
        edit.wait("the client's welcome", Duration::from_secs(5), |log| {
            log.carried_welcomes.len() == usize::from(n) + 1
        })
        .await;
    }
    let listed = mcp.ok("studio_sessions", json!({})).await;
    let players: Vec<(&str, Option<&str>)> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["sessionId"].as_str().unwrap(), s["player"].as_str()))
        .collect();
    assert_eq!(
        players,
        [
            ("A-edit", None),
            ("A-server", None),
            ("A-client1", Some("Player1")),
            ("A-client2", Some("Player2")),
            ("A-client3", Some("Player3")),
        ],
        "{listed}"
    );
    assert!(
        listed["sessions"][0].get("player").is_none(),
        "no `player` key where there is none: {listed}"
    );
    let state = mcp.ok("studio_state", json!({"context": "client"})).await;
    assert_eq!(state["sessionId"], "A-client1", "the client that joined first");
}

#[tokio::test]
async fn carried_sessions_reconnect_with_their_socket_and_strangers_are_refused() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let edit = FakePlugin::connect(
        port,
        Identity::edit("A"),
        handler(|action, args| match action {
            "exec" if args["script"].as_str() == Some("drop()") => Reply::Drop(Some(Duration::from_millis(300))),
            _ => studio_like()(action, args),
        }),
    )
    .await;
    edit.carry(Identity::play("A", "server"));
    // Not of this instance, and an edit DataModel: neither may ride this socket.
    edit.carry(Identity::play("B", "server"));
    edit.carry(Identity {
        session_id: "A-edit-2".into(),
        ..Identity::play("A", "edit")
    });
    let log = edit
        .wait("two refusals", Duration::from_secs(5), |log| log.rejects.len() == 2)
        .await;
    assert_eq!(log.carried_welcomes, ["A-server"]);
    assert!(
        log.rejects.iter().all(|(code, _)| code == "bad_hello"),
        "{:?}",
        log.rejects
    );
    assert!(
        log.closes.is_empty(),
        "a refused carried session does not close the socket"
    );

    // The socket drops mid-call: the call on the carried server fails, and the session
    // comes back when the edit plugin reconnects and says hello for it again.
    let error = mcp.err("studio_exec", json!({"script": "drop()"})).await;
    assert_eq!(error["code"], "session_lost");
    let ran = mcp.ok("studio_exec", json!({"script": "after()"})).await;
    assert_eq!(ran["sessionId"], "A-server");
    let log = edit.log();
    assert_eq!(log.welcomes, 2);
    assert_eq!(log.carried_welcomes.iter().filter(|s| *s == "A-server").count(), 2);
}

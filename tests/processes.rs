//! Processes together (TESTING.md layer 4): several real `studio-bridge` processes on one
//! port, one host and its peers, the host killed mid-call, and the rules on who may join.

use crate::support;

use std::io::{Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use rmpv::Value;
use serde_json::json;
use support::fake_plugin::{FakePlugin, Identity, Reply, handler, studio_like};
use support::free_port;
use support::mcp_client::{Mcp, binary, empty_config_dir, unpaired_mcp_args};

/// Whether something answers `/v1/health` on `port` as a studio-bridge host.
fn host_is_up(port: u16) -> bool {
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let request = format!("GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.contains("studio-bridge")
}

fn exec_counting(counter: &'static str) -> support::fake_plugin::Handler {
    handler(move |action, args| match action {
        "exec" if args["script"].as_str() == Some("slow()") => {
            Reply::After(Duration::from_secs(5), Box::new(Reply::Ok(Value::from(counter))))
        }
        _ => studio_like()(action, args),
    })
}

#[tokio::test]
async fn three_mcp_processes_and_a_cli_command_share_one_bridge() {
    let port = free_port();
    let first = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), studio_like()).await;
    let second = Mcp::spawn(port, &[]).await;
    let third = Mcp::spawn(port, &[]).await;
    let plugin_b = FakePlugin::connect(port, Identity::edit("B"), studio_like()).await;

    for mcp in [&first, &second, &third] {
        let sessions = mcp.ok("studio_sessions", json!({})).await;
        let ids: Vec<&str> = sessions["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["sessionId"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["A-edit", "B-edit"], "every process lists the same sessions");
        let result = mcp
            .ok("studio_exec", json!({"script": "return 1", "sessionId": "A-edit"}))
            .await;
        assert_eq!(result["success"], true);
    }
    // Resolution happens in the host: a peer gets the same ambiguity error with the list.
    let error = second.err("studio_state", json!({})).await;
    assert_eq!(error["code"], "ambiguous_instance");
    assert_eq!(error["details"]["sessions"].as_array().unwrap().len(), 2);

    let output = tokio::process::Command::new(binary())
        .args([
            "exec",
            "--allow-unpaired",
            "--port",
            &port.to_string(),
            "--session",
            "B-edit",
            "return 1",
            "--json",
        ])
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed["success"], true);

    let log = plugin.log();
    assert_eq!(log.requests.len(), 3, "each call reached Studio exactly once");
    let ids: std::collections::HashSet<u64> = log.requests.iter().map(|r| r.id).collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(plugin_b.log().requests.len(), 1);
    // The CLI command was a peer: the host is still the first process.
    assert!(host_is_up(port));
}

#[tokio::test]
async fn when_the_host_is_killed_a_survivor_takes_over_and_nothing_runs_twice() {
    let port = free_port();
    let host = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), exec_counting("done")).await;
    let survivor = Mcp::spawn(port, &[]).await;
    let other = Mcp::spawn(port, &[]).await;
    survivor.ok("studio_state", json!({})).await;

    // A slow call from a peer is in flight through the host when the host dies.
    let slow = survivor.call("studio_exec", json!({"script": "slow()"}));
    let kill = async {
        plugin
            .wait("the slow request", Duration::from_secs(5), |log| {
                log.requests.iter().any(|r| r.args["script"].as_str() == Some("slow()"))
            })
            .await;
        let pid = host.pid;
        let killed_at = Instant::now();
        // SIGKILL: no chance to say goodbye.
        let status = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        killed_at
    };
    let (result, killed_at) = tokio::join!(slow, kill);
    let lost_after = killed_at.elapsed();
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let error = &support::mcp_client::error_of(&result);
    assert_eq!(error["code"], "host_lost", "{error}");
    assert!(lost_after < Duration::from_secs(1), "host_lost took {lost_after:?}");

    // A survivor binds the port within 2 s.
    support::wait_for("a new host", Duration::from_secs(2), || host_is_up(port)).await;
    // The plugin reconnects by itself and every survivor is served again.
    plugin
        .wait("the plugin's reconnect", Duration::from_secs(5), |log| {
            log.welcomes >= 2
        })
        .await;
    for mcp in [&survivor, &other] {
        let state = mcp.ok("studio_state", json!({})).await;
        assert_eq!(state["state"], "Edit");
    }
    let next_call_at = killed_at.elapsed();
    eprintln!("failover: host killed → next successful call from a survivor in {next_call_at:?}");
    let log = plugin.log();
    let slow_runs = log
        .requests
        .iter()
        .filter(|r| r.args["script"].as_str() == Some("slow()"))
        .count();
    assert_eq!(slow_runs, 1, "the lost call was not re-sent");
}

#[tokio::test]
async fn a_clean_host_exit_hands_over_at_once() {
    let port = free_port();
    let host = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), studio_like()).await;
    let peer = Mcp::spawn(port, &[]).await;
    peer.ok("studio_state", json!({})).await;
    let closed_at = Instant::now();
    host.client.cancel().await.unwrap();
    plugin
        .wait("the plugin's reconnect", Duration::from_secs(5), |log| {
            log.welcomes >= 2
        })
        .await;
    let state = peer.ok("studio_state", json!({})).await;
    assert_eq!(state["state"], "Edit");
    assert!(
        closed_at.elapsed() < Duration::from_secs(3),
        "{:?}",
        closed_at.elapsed()
    );
}

#[tokio::test]
async fn peers_need_the_token_and_a_loopback_origin() {
    let port = free_port();
    let _host = Mcp::spawn(port, &[]).await;
    let token_path = studio_bridge::bridge::token::token_path(port);
    let token = std::fs::read_to_string(&token_path).expect("the host wrote its token");
    assert_eq!(token.trim().len(), 64);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            std::fs::metadata(&token_path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    // A web page is refused before any upgrade.
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    write!(
        stream,
        "GET /v1/client HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: https://evil.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .unwrap();
    let mut buffer = [0u8; 256];
    let n = stream.read(&mut buffer).unwrap_or(0);
    let status = String::from_utf8_lossy(&buffer[..n])
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    assert!(status.contains("403"), "{status}");

    // The token never crosses the wire: a peer proves it holds it, after the host did.
    let (mut sink, mut stream) = support::raw_peer::open(port).await;
    let answer = support::raw_peer::handshake(&mut sink, &mut stream, &"0".repeat(64)).await;
    let studio_bridge::bridge::peer_pairing::Step::Reject { code, .. } = answer else {
        panic!("a wrong token is refused: {answer:?}")
    };
    assert_eq!(code, "unauthorized");
    let (mut sink, mut stream) = support::raw_peer::open(port).await;
    let answer = support::raw_peer::handshake(&mut sink, &mut stream, token.trim()).await;
    assert_eq!(answer, studio_bridge::bridge::peer_pairing::Step::Welcome);

    // A call before the handshake is never served: the host wanted a hello.
    let (mut sink, mut stream) = support::raw_peer::open(port).await;
    let call = rmpv::Value::Map(vec![("t".into(), "sessions".into()), ("id".into(), 1.into())]);
    futures_util::SinkExt::send(&mut sink, support::raw_peer::frame(&call))
        .await
        .unwrap();
    let answer = support::raw_peer::next_step(&mut stream).await;
    assert!(
        matches!(&answer, studio_bridge::bridge::peer_pairing::Step::Reject { code, .. } if code == "bad_hello"),
        "{answer:?}"
    );
}

#[tokio::test]
async fn mcp_exits_on_stdin_eof_as_host_and_as_peer() {
    let port = free_port();
    let spawn = || {
        std::process::Command::new(binary())
            .args(unpaired_mcp_args(port))
            .env("STUDIO_BRIDGE_CONFIG_DIR", empty_config_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut host = spawn();
    support::wait_for("the host", Duration::from_secs(5), || host_is_up(port)).await;
    let mut peer = spawn();
    // Give the peer time to join, then close both stdins.
    let mcp = Mcp::spawn(port, &[]).await;
    mcp.ok("studio_sessions", json!({})).await;
    for child in [&mut peer, &mut host] {
        drop(child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            assert!(Instant::now() < deadline, "studio-bridge mcp did not exit on stdin EOF");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test]
async fn another_program_on_the_port_gets_a_clear_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().take(4).flatten() {
            let _ = stream.write_all(b"SSH-2.0-OpenSSH_9.2\r\n");
        }
    });
    let output = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::process::Command::new(binary())
            .args(["mcp", "--port", &port.to_string()])
            .env("STUDIO_BRIDGE_CONFIG_DIR", empty_config_dir())
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("exits promptly")
    .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&port.to_string()) && stderr.contains("--port") && stderr.contains("another program"),
        "{stderr}"
    );
}

#[tokio::test]
async fn mcp_remote_joins_a_host_with_its_token_and_never_hosts() {
    let port = free_port();
    let _host = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), studio_like()).await;
    let token_file = studio_bridge::bridge::token::token_path(port);
    let token_arg = token_file.to_str().unwrap().to_owned();
    let remote = Mcp::spawn(
        free_port(),
        &["--remote", &format!("127.0.0.1:{port}"), "--token-file", &token_arg],
    )
    .await;
    let sessions = remote.ok("studio_sessions", json!({})).await;
    assert_eq!(sessions["sessions"][0]["sessionId"], "A-edit");
    remote.ok("studio_exec", json!({"script": "return 1"})).await;
    assert_eq!(plugin.log().requests.len(), 1);

    // Without a token it says how to get one.
    let output = tokio::process::Command::new(binary())
        .args(["mcp", "--remote", &format!("127.0.0.1:{port}")])
        .env_remove("STUDIO_BRIDGE_TOKEN")
        .env("STUDIO_BRIDGE_CONFIG_DIR", empty_config_dir())
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--token-file") && stderr.contains("STUDIO_BRIDGE_TOKEN"),
        "{stderr}"
    );
}

#[tokio::test]
async fn logs_follow_streams_log_events_through_the_host() {
    let port = free_port();
    let _host = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), empty_logs()).await;
    let mut follower = tokio::process::Command::new(binary())
        .args(["logs", "--allow-unpaired", "--port", &port.to_string(), "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = follower.stdout.take().unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
    // The follower has subscribed once its logs call reached the plugin.
    plugin
        .wait("the follower's logs call", Duration::from_secs(10), |log| {
            log.requests.iter().any(|r| r.action == "logs")
        })
        .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut seq = 0;
    let line = loop {
        seq += 1;
        plugin.send_event(
            "log",
            support::fake_plugin::value_map(vec![
                ("seq", seq.into()),
                ("level", "Warning".into()),
                ("body", "streamed line".into()),
                ("timestamp", 0.into()),
            ]),
        );
        match tokio::time::timeout(Duration::from_millis(500), lines.next_line()).await {
            Ok(Ok(Some(line))) if line.contains("streamed line") => break line,
            Ok(Ok(Some(_))) | Err(_) => assert!(tokio::time::Instant::now() < deadline, "no streamed line"),
            Ok(other) => panic!("the follower ended: {other:?}"),
        }
    };
    assert_eq!(line, "[Warning] streamed line");
    let _ = follower.kill().await;
}

fn empty_logs() -> support::fake_plugin::Handler {
    handler(|action, args| match action {
        "logs" => Reply::Ok(support::fake_plugin::value_map(vec![
            ("entries", Value::Array(vec![])),
            ("total", 0.into()),
            ("bufferCapacity", 10000.into()),
            ("nextSince", 0.into()),
        ])),
        _ => studio_like()(action, args),
    })
}

fn log_line(seq: u64, body: &str) -> Value {
    support::fake_plugin::value_map(vec![
        ("seq", seq.into()),
        ("level", "Print".into()),
        ("body", body.into()),
        ("timestamp", 0.into()),
    ])
}

#[tokio::test]
async fn logs_follow_as_the_host_survives_a_burst_and_keeps_to_its_context() {
    let port = free_port();
    // The follower is the host itself (no other studio-bridge runs).
    let mut follower = tokio::process::Command::new(binary())
        .args([
            "logs",
            "--allow-unpaired",
            "--port",
            &port.to_string(),
            "--follow",
            "--context",
            "edit",
        ])
        .env("STUDIO_BRIDGE_LOG", "error")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let edit = FakePlugin::start(port, Identity::play("A", "edit"), empty_logs());
    let server = FakePlugin::start(port, Identity::play("A", "server"), empty_logs());
    edit.wait("the follower's logs call", Duration::from_secs(10), |log| {
        log.requests.iter().any(|r| r.action == "logs")
    })
    .await;
    server
        .wait("the server's welcome", Duration::from_secs(10), |log| log.welcomes > 0)
        .await;
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(follower.stdout.take().unwrap()));
    server.send_event("log", log_line(1, "from the server"));
    // More than the host's event buffer (1024) at once.
    for seq in 1..=3000 {
        edit.send_event("log", log_line(seq, &format!("burst {seq}")));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut seq = 3000;
    loop {
        seq += 1;
        edit.send_event("log", log_line(seq, "after the burst"));
        match tokio::time::timeout(Duration::from_millis(500), lines.next_line()).await {
            Ok(Ok(Some(line))) => {
                assert!(
                    !line.contains("from the server"),
                    "--context edit must not show the server's lines"
                );
                if line.contains("after the burst") {
                    break;
                }
            }
            Err(_) => {}
            Ok(other) => panic!("the follower ended after the burst: {other:?}"),
        }
        assert!(tokio::time::Instant::now() < deadline, "no line after the burst");
    }
    let _ = follower.kill().await;
}

#[tokio::test]
async fn a_peer_with_a_stricter_policy_refuses_what_its_host_serves() {
    let port = free_port();
    let host = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), studio_like()).await;
    let peer = Mcp::spawn(port, &["--read-only", "--deny", "studio_logs"]).await;
    assert!(host_is_up(port));

    let peer_tools: Vec<String> = peer
        .client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(
        !peer_tools.iter().any(|n| n == "studio_exec" || n == "studio_logs"),
        "{peer_tools:?}"
    );
    let host_tools = host.client.list_all_tools().await.unwrap();
    assert!(host_tools.iter().any(|t| t.name == "studio_exec"));

    let error = peer.err("studio_exec", json!({"script": "return 1"})).await;
    assert_eq!(error["code"], "permission_denied");
    assert_eq!(error["details"]["rule"], "read-only mode (--read-only)");
    let error = peer.err("studio_logs", json!({})).await;
    assert_eq!(error["details"]["rule"], "denied by --deny studio_logs");
    // What the peer's policy allows still runs through the host.
    let state = peer.ok("studio_state", json!({})).await;
    assert_eq!(state["sessionId"], "A-edit");
    // The host's own agent is not bound by its peer's policy.
    let result = host.ok("studio_exec", json!({"script": "return 1"})).await;
    assert_eq!(result["success"], true);

    let actions: Vec<String> = plugin.log().requests.iter().map(|r| r.action.clone()).collect();
    assert_eq!(actions, ["state", "exec"], "the refused calls never reached Studio");
    let peer_sessions = peer.ok("studio_sessions", json!({})).await;
    assert_eq!(
        peer_sessions["policy"],
        json!({"readOnly": true, "allow": [], "deny": ["studio_logs"], "source": "flags"})
    );
    let host_sessions = host.ok("studio_sessions", json!({})).await;
    assert_eq!(host_sessions["policy"]["readOnly"], false);
    let ids = |sessions: &serde_json::Value| sessions["sessions"][0]["sessionId"].clone();
    assert_eq!(ids(&host_sessions), ids(&peer_sessions));
}

//! The peer link under faults (issue #16, Peers): a half-open link is noticed by pings on
//! both ends, and a `logs --follow` subscription outlives the host it started on. Real
//! `studio-bridge` processes, stopped and killed with signals; fake plugins.

use crate::support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use rmpv::Value;
use serde_json::json;
use support::fake_plugin::{FakePlugin, Identity, Reply, handler, studio_like, value_map};
use support::free_port;
use support::mcp_client::{Mcp, binary, error_of};
use support::raw_peer;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};
use tokio_tungstenite::tungstenite::Message;

fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} {pid}");
}

/// `exec "slow"` is never answered; everything else as Studio would.
fn slow_never_answers() -> support::fake_plugin::Handler {
    handler(|action, args| match action {
        "exec" if args["script"].as_str() == Some("slow()") => Reply::Never,
        _ => studio_like()(action, args),
    })
}

#[tokio::test]
async fn a_peer_whose_host_is_stopped_fails_its_call_with_host_lost_then_fails_over() {
    let port = free_port();
    let host = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), slow_never_answers()).await;
    let peer = Mcp::spawn(port, &[]).await;
    peer.ok("studio_state", json!({})).await;

    let slow = peer.call("studio_exec", json!({"script": "slow()"}));
    let stop = async {
        plugin
            .wait("the slow request", Duration::from_secs(10), |log| {
                log.requests.iter().any(|r| r.args["script"].as_str() == Some("slow()"))
            })
            .await;
        // SIGSTOP: the host's sockets stay open, it just stops answering.
        signal(host.pid, "STOP");
        Instant::now()
    };
    let (result, stopped_at) = tokio::time::timeout(Duration::from_secs(60), async { tokio::join!(slow, stop) })
        .await
        .expect("the peer answered its in-flight call while its host was stopped");
    eprintln!("host stopped → host_lost in {:?}", stopped_at.elapsed());
    // The host is still stopped here (nothing closed the link): only the pings can have
    // told the peer.
    let error = error_of(&result);
    assert_eq!(error["code"], "host_lost", "{error}");

    // The stopped host still holds the port; once it is gone, the peer takes over, the
    // plugin reconnects to it, and the next call succeeds.
    signal(host.pid, "KILL");
    plugin
        .wait("the plugin's reconnect", Duration::from_secs(30), |log| {
            log.welcomes >= 2
        })
        .await;
    let state = peer.ok("studio_state", json!({})).await;
    assert_eq!(state["sessionId"], "A-edit");
    let slow_runs = plugin
        .log()
        .requests
        .iter()
        .filter(|r| r.args["script"].as_str() == Some("slow()"))
        .count();
    assert_eq!(slow_runs, 1, "the lost call was not re-sent");
}

#[tokio::test]
async fn a_host_drops_a_peer_that_stops_answering_pings_and_cancels_its_calls() {
    let port = free_port();
    let _host = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), slow_never_answers()).await;

    // A raw peer: the token and one `call`, written against docs/protocol.md.
    let (mut sink, mut stream) = raw_peer::connect(port).await;
    let call = value_map(vec![
        ("t", "call".into()),
        ("id", 7.into()),
        ("target", value_map(vec![])),
        ("action", "exec".into()),
        ("args", value_map(vec![("script", "slow()".into())])),
        ("timeoutMs", 120_000.into()),
    ]);
    sink.send(raw_peer::frame(&call)).await.unwrap();
    plugin
        .wait("the raw peer's call", Duration::from_secs(10), |log| {
            log.requests.iter().any(|r| r.args["script"].as_str() == Some("slow()"))
        })
        .await;

    // While it reads (tungstenite answers each ping as it reads), the host keeps it: more
    // pings than fit in the silence limit go by and its call is still running.
    let mut pings = 0;
    while pings < 6 {
        let message = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .expect("the host pings its peers")
            .expect("the link stays open")
            .expect("a frame");
        if matches!(message, Message::Ping(_)) {
            pings += 1;
        }
    }
    assert!(plugin.log().cancels.is_empty(), "a peer that answers pings is kept");

    // Now it stops reading, so stops answering, without closing: the host drops it and
    // cancels the call it had in flight.
    let request_id = plugin.log().requests.last().unwrap().id;
    plugin
        .wait("the dropped peer's call cancelled", Duration::from_secs(60), |log| {
            log.cancels.contains(&request_id)
        })
        .await;
    // And its socket is closed: reading again finds the pings it missed, then the end.
    let ended = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match stream.next().await {
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(other)) => return Some(other),
                Some(Err(_)) | None => return None,
            }
        }
    })
    .await
    .expect("the host closed the silent peer's socket");
    assert!(ended.is_none() || matches!(ended, Some(Message::Close(_))), "{ended:?}");
}

fn empty_logs() -> support::fake_plugin::Handler {
    handler(|action, args| match action {
        "logs" => Reply::Ok(value_map(vec![
            ("entries", Value::Array(vec![])),
            ("total", 0.into()),
            ("bufferCapacity", 10000.into()),
            ("nextSince", 0.into()),
        ])),
        _ => studio_like()(action, args),
    })
}

fn log_line(seq: u64, body: &str) -> Value {
    value_map(vec![
        ("seq", seq.into()),
        ("level", "Print".into()),
        ("body", body.into()),
        ("timestamp", 0.into()),
    ])
}

/// `studio-bridge logs --follow --json` on `port`, and its stdout's lines.
async fn follower(port: u16, plugin: &FakePlugin) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mut child = tokio::process::Command::new(binary())
        .args([
            "logs",
            "--allow-unpaired",
            "--port",
            &port.to_string(),
            "--follow",
            "--json",
        ])
        .env("STUDIO_BRIDGE_CONFIG_DIR", support::mcp_client::empty_config_dir())
        .env("STUDIO_BRIDGE_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    plugin
        .wait("the follower's logs call", Duration::from_secs(20), |log| {
            log.requests.iter().any(|r| r.action == "logs")
        })
        .await;
    // First the `logs` result, then the stream.
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("the logs result")
        .unwrap()
        .expect("a line");
    let result: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(result["entries"], json!([]), "{result}");
    (child, lines)
}

/// Sends `body #n` log events until the follower prints one; returns the lines it printed
/// up to and including it, parsed.
async fn stream_until_seen(
    plugin: &FakePlugin,
    lines: &mut Lines<BufReader<ChildStdout>>,
    body: &str,
) -> Vec<serde_json::Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut printed = Vec::new();
    let mut seq = 0;
    loop {
        seq += 1;
        plugin.send_event("log", log_line(seq, &format!("{body} #{seq}")));
        match tokio::time::timeout(Duration::from_millis(300), lines.next_line()).await {
            Ok(Ok(Some(line))) => {
                let parsed: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
                let done = parsed["data"]["body"].as_str().is_some_and(|b| b.starts_with(body));
                printed.push(parsed);
                if done {
                    return printed;
                }
            }
            Err(_) => {}
            Ok(other) => panic!("the follower ended: {other:?}"),
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no `{body}` line reached the follower"
        );
    }
}

/// After `stream_until_seen`, every event the plugin sends reaches the follower, in order.
async fn all_of_a_burst_arrive_in_order(plugin: &FakePlugin, lines: &mut Lines<BufReader<ChildStdout>>) {
    for n in 1..=5 {
        plugin.send_event("log", log_line(1000 + n, &format!("final {n}")));
    }
    let mut bodies = Vec::new();
    while bodies.len() < 5 {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the burst reached the follower")
            .unwrap()
            .expect("the follower keeps running");
        let parsed: serde_json::Value = serde_json::from_str(&line).unwrap();
        let body = parsed["data"]["body"].as_str().unwrap_or_default().to_owned();
        if body.starts_with("final") {
            bodies.push(body);
        }
    }
    assert_eq!(bodies, ["final 1", "final 2", "final 3", "final 4", "final 5"]);
}

/// The lines printed across a failover: no gap notice before it, exactly one after, and
/// it comes before the first event through the new host.
fn assert_one_gap_notice_first(printed: &[serde_json::Value]) {
    let gaps: Vec<usize> = printed
        .iter()
        .enumerate()
        .filter(|(_, line)| line["event"] == "gap")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(gaps.len(), 1, "one gap notice per failover: {printed:#?}");
    let first_after = printed
        .iter()
        .position(|line| line["data"]["body"].as_str().is_some_and(|b| b.starts_with("after")))
        .expect("an event through the new host");
    assert!(gaps[0] < first_after, "{printed:#?}");
    assert!(
        printed[gaps[0]]["data"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("may be missing")),
        "{printed:#?}"
    );
}

#[tokio::test]
async fn logs_follow_continues_after_its_host_is_killed_on_the_follower_promoted_to_host() {
    let port = free_port();
    let host = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), empty_logs()).await;
    let (mut child, mut lines) = follower(port, &plugin).await;
    let before = stream_until_seen(&plugin, &mut lines, "before").await;
    assert!(before.iter().all(|line| line["event"] == "log"), "{before:#?}");

    // The follower is the only other studio-bridge: it becomes the host.
    signal(host.pid, "KILL");
    plugin
        .wait("the plugin's reconnect", Duration::from_secs(30), |log| {
            log.welcomes >= 2
        })
        .await;
    let after = stream_until_seen(&plugin, &mut lines, "after").await;
    assert_one_gap_notice_first(&after);
    all_of_a_burst_arrive_in_order(&plugin, &mut lines).await;
    let _ = child.kill().await;
}

#[tokio::test]
async fn logs_follow_resubscribes_through_a_new_host_as_a_peer() {
    let port = free_port();
    let host = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), empty_logs()).await;
    let (mut child, mut lines) = follower(port, &plugin).await;
    stream_until_seen(&plugin, &mut lines, "before").await;

    // The follower is held still while its host dies and another process takes the
    // port, so that it comes back as that host's peer rather than racing for the port.
    let follower_pid = child.id().expect("the follower's pid");
    signal(follower_pid, "STOP");
    signal(host.pid, "KILL");
    let successor = Mcp::spawn(port, &[]).await;
    plugin
        .wait("the plugin's reconnect", Duration::from_secs(30), |log| {
            log.welcomes >= 2
        })
        .await;
    signal(follower_pid, "CONT");

    let after = stream_until_seen(&plugin, &mut lines, "after").await;
    assert_one_gap_notice_first(&after);
    all_of_a_burst_arrive_in_order(&plugin, &mut lines).await;
    // The successor is still the host: the follower went through it as a peer.
    let sessions = successor.ok("studio_sessions", json!({})).await;
    assert_eq!(sessions["sessions"][0]["sessionId"], "A-edit");
    let _ = child.kill().await;
}

/// A peer proves the host before it sends anything: a squatter that holds the port and
/// answers `/v1/health` as studio-bridge gets each peer's `hello` and nothing else (no
/// bearer, no call), whether it forges a challenge or sends none, with a stale token file
/// of a dead host on disk or none; and the CLI exits 1 saying the port's holder did not
/// prove itself, naming `studio-bridge doctor`.
#[tokio::test]
async fn a_squatter_holding_the_port_gets_no_token_and_no_call_from_a_peer() {
    use support::squatter::{Ploy, Squatter};
    for (ploy, stale_token) in [(Ploy::ForgedChallenge, true), (Ploy::NoChallenge, false)] {
        let port = free_port();
        let squatter = Squatter::start(port, ploy).await;
        let token_path = studio_bridge::bridge::token::token_path(port);
        if stale_token {
            studio_bridge::bridge::secret_file::write(&token_path, &"ab".repeat(32)).unwrap();
        } else {
            let _ = std::fs::remove_file(&token_path);
        }
        let output = tokio::process::Command::new(binary())
            .args(["exec", "--port", &port.to_string(), "print('secret work')"])
            .env("STUDIO_BRIDGE_CONFIG_DIR", support::mcp_client::empty_config_dir())
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{ploy:?}: {stderr}");
        assert!(stderr.contains("did not prove itself"), "{ploy:?}: {stderr}");
        assert!(stderr.contains("studio-bridge doctor"), "{ploy:?}: {stderr}");
        let seen = squatter.seen.lock().unwrap();
        assert!(
            seen.authorizations.is_empty(),
            "{ploy:?}: a bearer was sent: {:?}",
            seen.authorizations
        );
        let kinds = seen.kinds();
        assert!(
            kinds.iter().all(|t| t == "hello"),
            "{ploy:?}: the squatter got more than hellos: {kinds:?}"
        );
        if stale_token {
            assert!(!kinds.is_empty(), "{ploy:?}: the peer tried, with its hello alone");
        }
        let _ = std::fs::remove_file(&token_path);
    }
}

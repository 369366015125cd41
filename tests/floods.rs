//! Floods (issue #16): a plugin pushing 100,000 events a second, a peer opening 10,000
//! calls, an MCP client pipelining 10,000 calls. Each runs against a real `studio-bridge
//! mcp` host and asserts that every caller got an answer (or `busy`), that nothing was
//! lost without being counted, that another session kept answering meanwhile, and that
//! the host's peak memory (VmHWM) stayed under a bound the unbounded queues overran.
//! The bounds themselves are in docs/protocol.md (Floods).

use crate::support;

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use rmpv::Value;
use serde_json::{Value as Json, json};
use studio_bridge::bridge::liveness::SILENCE_LIMIT;
use support::fake_plugin::{FakePlugin, Identity, Reply, handler, studio_like, value_map};
use support::free_port;
use support::mcp_client::{Mcp, binary, empty_config_dir, unpaired_mcp_args};
use support::raw_peer::{self, frame, next_frame};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_tungstenite::tungstenite::Message;

/// The most memory a flooded host may reach. Idle it holds about 10 MiB; each flood
/// below, unbounded, queues over 100 MiB.
const PEAK_RSS_LIMIT_MIB: f64 = 64.0;

/// The peak resident memory of process `pid` so far, in MiB.
fn peak_rss_mib(pid: u32) -> f64 {
    support::memory_mib(pid, "VmHWM")
}

fn field<'a>(value: &'a Value, key: &str) -> &'a Value {
    value
        .as_map()
        .and_then(|m| m.iter().find(|(k, _)| k.as_str() == Some(key)))
        .map_or(&Value::Nil, |(_, v)| v)
}

fn subscribe(id: u64, target: Value) -> Message {
    frame(&value_map(vec![
        ("t", "subscribe".into()),
        ("id", id.into()),
        ("target", target),
        ("events", Value::Array(vec!["log".into()])),
    ]))
}

/// `exec` of this script on `session`, through the MCP host, succeeds.
async fn quiet_call_succeeds(mcp: &Mcp, session: &str) {
    let result = mcp
        .ok("studio_exec", json!({"script": "return 1", "sessionId": session}))
        .await;
    assert_eq!(result["sessionId"], session, "{result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_flooding_events_is_bounded_and_every_dropped_event_is_counted() {
    const FLOOD: u64 = 200_000;
    let port = free_port();
    let host = Mcp::spawn(port, &[]).await;
    let flooder = FakePlugin::connect(port, Identity::edit("F"), studio_like()).await;
    let _quiet = FakePlugin::connect(port, Identity::edit("Q"), studio_like()).await;

    // One subscriber that reads, and one that stops reading after its subscription is
    // acknowledged (the host must not queue the flood for it).
    let (mut reader_sink, mut reader) = raw_peer::connect(port).await;
    reader_sink
        .send(subscribe(1, value_map(vec![("sessionId", "F-edit".into())])))
        .await
        .unwrap();
    assert_eq!(field(&next_frame(&mut reader).await, "ok"), &Value::from(true));
    let (mut stalled_sink, mut stalled) = raw_peer::connect(port).await;
    stalled_sink.send(subscribe(1, value_map(vec![]))).await.unwrap();
    assert_eq!(field(&next_frame(&mut stalled).await, "ok"), &Value::from(true));

    let reading = tokio::spawn(async move {
        // Every log line received (by seq, in order) and every drop reported, until the
        // books balance: every line of the flood delivered or counted as dropped. Nothing
        // follows the flood, so every count must come without a later line to carry it.
        let mut seqs = Vec::new();
        let mut dropped = 0u64;
        let mut gaps = 0usize;
        while seqs.len() as u64 + dropped < FLOOD {
            let message = next_frame(&mut reader).await;
            let data = field(&message, "data");
            match field(&message, "event").as_str() {
                Some("log") => seqs.push(field(data, "seq").as_u64().expect("seq")),
                Some("gap") => {
                    gaps += 1;
                    dropped += field(data, "dropped").as_u64().expect("a gap from a drop counts it");
                }
                other => panic!("unexpected event {other:?}: {message}"),
            }
        }
        (seqs, dropped, gaps)
    });

    // 100,000 events a second for two seconds, 512-byte lines; meanwhile the other
    // Studio answers call after call.
    let started = std::time::Instant::now();
    let flood = async {
        flooder.flood_logs(FLOOD, 100_000, 512).await;
        started.elapsed()
    };
    let calls = async {
        let mut answered = 0;
        for _ in 0..20 {
            quiet_call_succeeds(&host, "Q-edit").await;
            answered += 1;
        }
        answered
    };
    let (flooded_in, answered) = tokio::join!(flood, calls);
    assert_eq!(answered, 20);

    let (seqs, dropped, gaps) = tokio::time::timeout(Duration::from_secs(60), reading)
        .await
        .expect("the reading subscriber's books balanced after the flood")
        .unwrap();
    let peak = peak_rss_mib(host.pid);
    eprintln!(
        "event flood: {FLOOD} sent in {flooded_in:.1?} ({:.0}/s); {} delivered, {dropped} dropped in {gaps} gaps; host peak RSS {peak:.1} MiB",
        FLOOD as f64 / flooded_in.as_secs_f64(),
        seqs.len()
    );
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "lines arrive in order");
    assert_eq!(
        seqs.len() as u64 + dropped,
        FLOOD,
        "every line delivered or counted once"
    );
    // Past the budget it must drop, and say so. Whether the flood went past the budget
    // depends on how fast it arrived, which a loaded machine decides: only one that came
    // slower than the budget (a burst, then its rate) may go through whole.
    use studio_bridge::bridge::events::{EVENT_BURST, EVENTS_PER_SECOND};
    let within_budget = (FLOOD - u64::from(EVENT_BURST)) as f64 / f64::from(EVENTS_PER_SECOND);
    if flooded_in.as_secs_f64() < within_budget {
        assert!(dropped > 0 && gaps > 0, "a flood past the budget drops, and says so");
    } else {
        assert_eq!(dropped > 0, gaps > 0, "every drop is said in a gap");
    }
    assert!(peak < PEAK_RSS_LIMIT_MIB, "host peak RSS {peak:.1} MiB");
    drop(stalled);
    drop(stalled_sink);
}

/// A peer that asks for large results and never reads them is disconnected once more
/// than its limit is queued for it (here, with `--max-message-mib 1`, about 3 MiB),
/// rather than having the host hold every result it asked for: 100 results of 900 KB
/// would be 90 MB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_never_reads_its_large_results_is_disconnected_before_they_pile_up() {
    const CALLS: u64 = 100;
    let port = free_port();
    let host = Mcp::spawn(port, &["--max-message-mib", "1"]).await;
    let mut encoded = Vec::new();
    rmpv::encode::write_value(&mut encoded, &Value::from("r".repeat(900 * 1024))).unwrap();
    let result = std::sync::Arc::new(encoded);
    let _studio = FakePlugin::connect(
        port,
        Identity {
            framing: support::fake_plugin::Framing::Binary,
            ..Identity::edit("A")
        },
        handler(move |action, args| match action {
            "exec" => Reply::Raw(std::sync::Arc::clone(&result)),
            _ => studio_like()(action, args),
        }),
    )
    .await;

    let (mut sink, mut stream) = raw_peer::connect(port).await;
    for id in 1..=CALLS {
        let call = value_map(vec![
            ("t", "call".into()),
            ("id", id.into()),
            ("target", value_map(vec![])),
            ("action", "exec".into()),
            ("args", value_map(vec![("script", "big".into())])),
            ("timeoutMs", 60_000.into()),
        ]);
        sink.feed(frame(&call)).await.unwrap();
    }
    sink.flush().await.unwrap();
    // Not reading: the host answers into its queue for this peer until the limit.
    support::wait_for("the Studio to answer every call", Duration::from_secs(60), || {
        _studio.log().answered >= CALLS
    })
    .await;
    // The Studio has queued its answers, but the host may still be taking them from its
    // socket: were the peer to read now, the host would hand them on as it takes them and
    // never overflow. A call of the host's own comes back on that socket after all of
    // them, so once it is answered the host has taken every result for the peer.
    host.ok("studio_state", json!({})).await;
    // Reading now finds what the sockets held, then the end: the host let the peer go.
    let mut results = 0u64;
    let ended = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            match stream.next().await {
                Some(Ok(Message::Binary(_))) => results += 1,
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return,
            }
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "the host closed the link of a peer that did not read ({results} results arrived)"
    );
    assert!(
        results < CALLS,
        "the host did not keep all {CALLS} results for it ({results} arrived)"
    );
    let peak = peak_rss_mib(host.pid);
    eprintln!("unread results: {CALLS} asked, {results} arrived before the host let go; host peak RSS {peak:.1} MiB");
    assert!(peak < PEAK_RSS_LIMIT_MIB, "host peak RSS {peak:.1} MiB");
    // The host is still fine for everyone else.
    host.ok("studio_state", json!({})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_opening_ten_thousand_calls_gets_an_answer_or_busy_for_each() {
    const CALLS: u64 = 10_000;
    const STUDIOS: u64 = 5;
    let port = free_port();
    let host = Mcp::spawn(port, &[]).await;
    let holds = handler(|action, args| match action {
        "exec" if args["script"].as_str() == Some("hold") => Reply::Never,
        _ => studio_like()(action, args),
    });
    let mut held = Vec::new();
    for n in 0..STUDIOS {
        held.push(FakePlugin::connect(port, Identity::edit(&format!("H{n}")), holds.clone()).await);
    }
    let _quiet = FakePlugin::connect(port, Identity::edit("Q"), studio_like()).await;

    // 10,000 calls in one burst, round-robin over five Studios that never answer them.
    let (mut sink, mut stream) = raw_peer::connect(port).await;
    for id in 1..=CALLS {
        let call = value_map(vec![
            ("t", "call".into()),
            ("id", id.into()),
            (
                "target",
                value_map(vec![("sessionId", format!("H{}-edit", id % STUDIOS).into())]),
            ),
            ("action", "exec".into()),
            ("args", value_map(vec![("script", "hold".into())])),
            ("timeoutMs", 120_000.into()),
        ]);
        sink.feed(frame(&call)).await.unwrap();
    }
    sink.flush().await.unwrap();

    // The first 1,024 (the peer's cap) are open; every other one is answered `busy`.
    let open = studio_bridge::bridge::peer_server::PEER_MAX_IN_FLIGHT as u64;
    let mut busy = BTreeSet::new();
    while (busy.len() as u64) < CALLS - open {
        let answer = next_frame(&mut stream).await;
        assert_eq!(field(&answer, "t").as_str(), Some("result"), "{answer}");
        assert_eq!(field(&answer, "ok"), &Value::from(false), "{answer}");
        assert_eq!(
            field(field(&answer, "error"), "code").as_str(),
            Some("busy"),
            "{answer}"
        );
        busy.insert(field(&answer, "id").as_u64().expect("id"));
    }
    assert_eq!(
        busy.first(),
        Some(&(open + 1)),
        "the calls past the cap are the busy ones"
    );
    assert_eq!(busy.last(), Some(&CALLS));
    let requests = || held.iter().map(|p| p.log().requests.len()).sum::<usize>();
    support::wait_for("the open calls to reach the Studios", Duration::from_secs(30), || {
        requests() == open as usize
    })
    .await;

    // Another Studio answers meanwhile, through the same host.
    quiet_call_succeeds(&host, "Q-edit").await;
    let peak = peak_rss_mib(host.pid);

    // The peer leaves: every call it had open is cancelled in its Studio.
    drop(sink);
    drop(stream);
    let cancels = || held.iter().map(|p| p.log().cancels.len()).sum::<usize>();
    support::wait_for("the open calls cancelled", Duration::from_secs(30), || {
        cancels() == open as usize
    })
    .await;
    assert_eq!(requests(), open as usize, "nothing past the cap reached a Studio");
    eprintln!(
        "peer flood: {CALLS} calls, {open} open, {} busy; host peak RSS {peak:.1} MiB",
        busy.len()
    );
    assert!(peak < PEAK_RSS_LIMIT_MIB, "host peak RSS {peak:.1} MiB");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_pipelining_ten_thousand_calls_gets_ten_thousand_answers() {
    const CALLS: u64 = 10_000;
    let port = free_port();
    let mut child = tokio::process::Command::new(binary())
        .args(unpaired_mcp_args(port))
        .env("STUDIO_BRIDGE_LOG", "warn")
        .env("STUDIO_BRIDGE_CONFIG_DIR", empty_config_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn studio-bridge mcp");
    let pid = child.id().expect("pid");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let _plugin = FakePlugin::connect(port, Identity::edit("A"), studio_like()).await;

    let initialize = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"flood","version":"0"}}}"#;
    stdin.write_all(format!("{initialize}\n").as_bytes()).await.unwrap();
    let reply: Json = serde_json::from_str(&lines.next_line().await.unwrap().expect("initialize reply")).unwrap();
    assert_eq!(reply["id"], 0, "{reply}");
    let mut burst = String::from("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    for id in 1..=CALLS {
        burst.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"studio_exec\",\"arguments\":{{\"script\":\"return {id}\"}}}}}}\n"
        ));
    }
    // Written from a task: the server answers while it is still reading.
    let writer = tokio::spawn(async move {
        stdin.write_all(burst.as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
        stdin
    });

    let (mut ok, mut busy) = (0u64, 0u64);
    let mut ids = BTreeSet::new();
    while (ids.len() as u64) < CALLS {
        let line = tokio::time::timeout(Duration::from_secs(120), lines.next_line())
            .await
            .expect("the server keeps answering")
            .unwrap()
            .expect("stdout stays open");
        let reply: Json = serde_json::from_str(&line).expect("a JSON-RPC line");
        let Some(id) = reply["id"].as_u64() else { continue };
        assert!(ids.insert(id), "id {id} answered twice");
        let result = &reply["result"];
        if result["isError"] == true {
            let text = result["content"][0]["text"].as_str().expect("an error text block");
            let error: Json = serde_json::from_str(text).expect("the error text is JSON");
            assert_eq!(error["error"]["code"], "busy", "{reply}");
            busy += 1;
        } else {
            assert_eq!(result["structuredContent"]["success"], true, "{reply}");
            ok += 1;
        }
    }
    let _stdin = writer.await.unwrap();
    let peak = peak_rss_mib(pid);
    eprintln!("MCP flood: {CALLS} pipelined calls, {ok} ok, {busy} busy; host peak RSS {peak:.1} MiB");
    assert_eq!(ids.len() as u64, CALLS);
    assert_eq!((ids.first(), ids.last()), (Some(&1), Some(&CALLS)));
    assert!(ok > 0, "calls within the cap ran");
    assert!(peak < PEAK_RSS_LIMIT_MIB, "host peak RSS {peak:.1} MiB");
}

/// A `state` event sent while the plugin is over its event budget is not published to
/// subscribers, but the session's run state still changes: `studio_sessions` must not
/// report a stale state because the Studio also printed a lot.
#[tokio::test]
async fn a_state_change_during_a_flood_still_updates_the_session() {
    let port = free_port();
    let host = Mcp::spawn(port, &[]).await;
    let studio = FakePlugin::connect(port, Identity::edit("S"), studio_like()).await;
    // Twice the burst, as fast as the socket takes it: the budget is spent.
    let burst = u64::from(studio_bridge::bridge::events::EVENT_BURST) * 2;
    studio.flood_logs(burst, 10_000_000, 16).await;
    studio.send_event("state", value_map(vec![("state", "Run".into())]));
    let state = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let sessions = host.ok("studio_sessions", json!({})).await;
            let state = sessions["sessions"][0]["state"].clone();
            if state == "Run" {
                return state;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(
        state.ok(),
        Some(Json::from("Run")),
        "the session's state follows Studio"
    );
}

/// A peer subscriber that stops reading for a moment (its socket fills, the host's queue
/// for it passes 1 MiB) falls behind without the host's memory growing, and once it
/// reads again the stream goes on: what it missed is counted in a gap of its own stream
/// (sessionId ""), and the books balance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_subscriber_that_pauses_falls_behind_then_catches_up_with_a_count() {
    const FLOOD: u64 = 30_000;
    let port = free_port();
    let _host = Mcp::spawn(port, &[]).await;
    let flooder = FakePlugin::connect(port, Identity::edit("F"), studio_like()).await;
    let (mut sink, mut stream) = raw_peer::connect(port).await;
    sink.send(subscribe(1, value_map(vec![]))).await.unwrap();
    assert_eq!(field(&next_frame(&mut stream).await, "ok"), &Value::from(true));

    // Not reading while 30,000 lines of 2 KB go by (the budget passes about 10,000-20,000
    // of them: more than the sockets and the host's 1 MiB hold), for at most half the
    // silence the host allows a peer: the flood takes 2.5 s here, over 4 s on a loaded
    // machine, and a peer that stays silent past SILENCE_LIMIT is rightly dropped. The
    // flood goes on while the subscriber reads.
    let flood = flooder.start_flood_logs(FLOOD, 100_000, 2048);
    let _ = tokio::time::timeout(SILENCE_LIMIT / 2, flood).await;
    let (mut delivered, mut dropped, mut behind) = (0u64, 0u64, 0u64);
    tokio::time::timeout(Duration::from_secs(60), async {
        while delivered + dropped < FLOOD {
            let message = next_frame(&mut stream).await;
            let data = field(&message, "data");
            match field(&message, "event").as_str() {
                Some("log") => delivered += 1,
                Some("gap") => {
                    let count = field(data, "dropped").as_u64().expect("a count");
                    dropped += count;
                    if field(&message, "sessionId").as_str() == Some("") {
                        behind += count;
                    }
                }
                other => panic!("unexpected event {other:?}"),
            }
        }
    })
    .await
    .expect("the subscriber caught up and its books balanced");
    eprintln!("paused subscriber: {delivered} delivered, {dropped} dropped ({behind} while it did not read)");
    assert_eq!(delivered + dropped, FLOOD);
    assert!(
        behind > 0,
        "the subscriber's own stream fell behind while it did not read"
    );
}

/// Waits for the host to close `socket` (its close frame, an error or the end); a guard
/// against hanging, not a bound on speed.
async fn closed_by_the_host(
    socket: &mut tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
) {
    tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            match socket.next().await {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await
    .expect("the host closed the connection");
}

/// WebSocket upgrades to /v1/plugin that never say hello, twice as many as may wait at
/// once and renewed, cannot keep a Studio's plugin out: every upgrade is accepted (none
/// refused with 503), each one past the cap takes the place of the oldest silent one,
/// which the host closes, and a plugin that connects behind sixteen of them becomes a
/// session.
#[tokio::test]
async fn silent_plugin_upgrades_cannot_lock_a_plugin_out() {
    use studio_bridge::bridge::budget::MAX_UNIDENTIFIED_PLUGINS as SLOTS;
    let port = free_port();
    let host = Mcp::spawn(port, &[]).await;
    let url = format!("ws://127.0.0.1:{port}/v1/plugin");
    let mut silent = std::collections::VecDeque::new();
    for n in 0..2 * SLOTS {
        let (socket, _) = tokio_tungstenite::connect_async(&url)
            .await
            .unwrap_or_else(|error| panic!("silent upgrade {n} was refused: {error}"));
        silent.push_back(socket);
    }
    // The first sixteen made room for the next sixteen, oldest first.
    for _ in 0..SLOTS {
        closed_by_the_host(&mut silent.pop_front().unwrap()).await;
    }
    assert_eq!(silent.len(), SLOTS, "sixteen silent upgrades are held now");

    let _plugin = FakePlugin::connect(port, Identity::edit("A"), studio_like()).await;
    let sessions = host.ok("studio_sessions", json!({})).await;
    assert_eq!(sessions["sessions"][0]["sessionId"], "A-edit", "{sessions}");
    assert_eq!(host.ok("studio_state", json!({})).await["state"], "Edit");
    // The plugin took the place of the oldest silent upgrade.
    closed_by_the_host(&mut silent.pop_front().unwrap()).await;
}

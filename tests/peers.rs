//! The peer link under faults (issue #16, Peers): a half-open link is noticed by pings on
//! both ends. Real `studio-bridge` processes, stopped and killed with signals; fake
//! plugins.

mod support;

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use support::fake_plugin::{FakePlugin, Identity, Reply, handler, studio_like, value_map};
use support::free_port;
use support::mcp_client::{Mcp, error_of};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

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
        "exec" if args["script"].as_str() == Some("slow") => Reply::Never,
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

    let slow = peer.call("studio_exec", json!({"script": "slow"}));
    let stop = async {
        plugin
            .wait("the slow request", Duration::from_secs(10), |log| {
                log.requests.iter().any(|r| r.args["script"].as_str() == Some("slow"))
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
        .filter(|r| r.args["script"].as_str() == Some("slow"))
        .count();
    assert_eq!(slow_runs, 1, "the lost call was not re-sent");
}

#[tokio::test]
async fn a_host_drops_a_peer_that_stops_answering_pings_and_cancels_its_calls() {
    let port = free_port();
    let _host = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), slow_never_answers()).await;

    // A raw peer: the token and one `call`, written against docs/protocol.md.
    let token = std::fs::read_to_string(studio_bridge::bridge::token::token_path(port)).expect("the host's token");
    let mut request = format!("ws://127.0.0.1:{port}/v1/client")
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {}", token.trim()).parse().unwrap());
    let (socket, _) = tokio_tungstenite::connect_async(request).await.expect("the peer joins");
    let (mut sink, mut stream) = socket.split();
    let call = value_map(vec![
        ("t", "call".into()),
        ("id", 7.into()),
        ("target", value_map(vec![])),
        ("action", "exec".into()),
        ("args", value_map(vec![("script", "slow".into())])),
        ("timeoutMs", 120_000.into()),
    ]);
    let mut bytes = Vec::new();
    rmpv::encode::write_value(&mut bytes, &call).unwrap();
    sink.send(Message::Binary(bytes.into())).await.unwrap();
    plugin
        .wait("the raw peer's call", Duration::from_secs(10), |log| {
            log.requests.iter().any(|r| r.args["script"].as_str() == Some("slow"))
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

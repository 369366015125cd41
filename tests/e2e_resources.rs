//! End to end over stdio (TESTING.md layer 3), resources: the guide, the live session list
//! and a session's output, listed, read and subscribed to with rmcp's client; the built
//! binary as the MCP server, fake plugins as Studio.

// resources/subscribe is what clients on protocol 2025-11-25 (the Inspector, Claude Code)
// send; rmcp marks it legacy next to 2026-07-28's subscriptions/listen.
#![allow(deprecated)]

use crate::support;

use std::time::Duration;

use rmcp::model::{ReadResourceRequestParams, ResourceContents, SubscribeRequestParams};
use rmpv::Value;
use serde_json::{Value as Json, json};
use support::fake_plugin::{FakePlugin, Identity, Reply, handler, value_map};
use support::mcp_client::Mcp;
use support::{free_port, wait_for};

/// The text of a resource read's one content.
async fn read(mcp: &Mcp, uri: &str) -> Result<(String, Option<String>), rmcp::ServiceError> {
    let result = mcp.client.read_resource(ReadResourceRequestParams::new(uri)).await?;
    assert_eq!(result.contents.len(), 1, "{uri}: {result:?}");
    match &result.contents[0] {
        ResourceContents::TextResourceContents {
            uri: got,
            mime_type,
            text,
            ..
        } => {
            assert_eq!(got, uri);
            Ok((text.clone(), mime_type.clone()))
        }
        other => panic!("{uri}: not text: {other:?}"),
    }
}

/// A plugin that serves `logs` with one line, as a Studio that printed once would.
fn with_logs() -> support::fake_plugin::Handler {
    handler(|action, _args| match action {
        "logs" => Reply::Ok(value_map(vec![
            (
                "entries",
                Value::Array(vec![value_map(vec![
                    ("seq", 1.into()),
                    ("level", "Print".into()),
                    ("body", "hello from Studio".into()),
                    ("timestamp", Value::F64(0.0)),
                ])]),
            ),
            ("total", 1.into()),
            ("bufferCapacity", 1000.into()),
            ("nextSince", 1.into()),
        ])),
        other => Reply::Err("unknown_action", format!("no action {other}")),
    })
}

#[tokio::test]
async fn resources_and_templates_are_listed_and_the_guide_read() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let info = mcp.client.peer_info().expect("initialized");
    let resources = info.capabilities.resources.as_ref().expect("resources capability");
    assert_eq!(resources.subscribe, Some(true));

    let listed = mcp.client.list_all_resources().await.expect("resources/list");
    let uris: Vec<&str> = listed.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["studio://guide", "studio://sessions"]);
    let templates = mcp
        .client
        .list_all_resource_templates()
        .await
        .expect("resources/templates/list");
    let templates: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    assert_eq!(templates, ["studio://logs/{sessionId}", "studio://results/{id}{?page}"]);

    let (guide, mime) = read(&mcp, "studio://guide").await.expect("read the guide");
    assert_eq!(mime.as_deref(), Some("text/markdown"));
    for topic in ["Sessions", "Contexts", "Paths", "Writes and undo", "Playtests"] {
        assert!(guide.contains(&format!("## {topic}")), "the guide covers {topic}");
    }
    // The instructions point at the guide instead of repeating it.
    let instructions = info.instructions.as_deref().unwrap_or_default();
    assert!(instructions.contains("studio://guide"), "{instructions}");

    let error = read(&mcp, "studio://nothing").await.expect_err("an unknown uri");
    assert!(error.to_string().contains("studio://logs/{sessionId}"), "{error}");
}

#[tokio::test]
async fn sessions_and_logs_read_as_their_tools_answer() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), with_logs()).await;

    let (text, mime) = read(&mcp, "studio://sessions").await.expect("read sessions");
    assert_eq!(mime.as_deref(), Some("application/json"));
    let sessions: Json = serde_json::from_str(&text).unwrap();
    assert_eq!(sessions["sessions"][0]["sessionId"], plugin.session_id());
    // The same answer as the tool's, but for the clock.
    let without_uptime = |mut v: Json| {
        for session in v["sessions"].as_array_mut().unwrap() {
            session.as_object_mut().unwrap().remove("uptimeMs");
        }
        v
    };
    assert_eq!(
        without_uptime(sessions),
        without_uptime(mcp.ok("studio_sessions", json!({})).await)
    );

    let uri = format!("studio://logs/{}", plugin.session_id());
    let (text, _) = read(&mcp, &uri).await.expect("read logs");
    let logs: Json = serde_json::from_str(&text).unwrap();
    assert_eq!(logs["entries"][0]["body"], "hello from Studio");
    assert_eq!(logs["sessionId"], plugin.session_id());
    assert_eq!(plugin.log().requests.last().map(|r| r.action.as_str()), Some("logs"));

    let error = read(&mcp, "studio://logs/no-such-session")
        .await
        .expect_err("an unknown session");
    assert!(error.to_string().contains("session"), "{error}");
}

#[tokio::test]
async fn a_subscription_is_told_when_a_plugin_connects_and_when_a_session_prints() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    mcp.client
        .subscribe(SubscribeRequestParams::new("studio://sessions"))
        .await
        .expect("subscribe to sessions");
    assert!(mcp.recorder.updated.lock().unwrap().is_empty());

    let plugin = FakePlugin::connect(port, Identity::edit("A"), with_logs()).await;
    wait_for("a sessions update", Duration::from_secs(10), || {
        mcp.recorder
            .updated
            .lock()
            .unwrap()
            .iter()
            .any(|u| u == "studio://sessions")
    })
    .await;

    let logs_uri = format!("studio://logs/{}", plugin.session_id());
    mcp.client
        .subscribe(SubscribeRequestParams::new(logs_uri.as_str()))
        .await
        .expect("subscribe to logs");
    let before = mcp.recorder.updated.lock().unwrap().len();
    plugin.send_event(
        "log",
        value_map(vec![
            ("seq", 2.into()),
            ("level", "Print".into()),
            ("body", "printed".into()),
        ]),
    );
    wait_for("a logs update", Duration::from_secs(10), || {
        mcp.recorder.updated.lock().unwrap()[before..]
            .iter()
            .any(|u| u == &logs_uri)
    })
    .await;

    // Unsubscribed, a print tells nothing more; a plugin leaving still updates sessions.
    mcp.client
        .unsubscribe(rmcp::model::UnsubscribeRequestParams::new(logs_uri.as_str()))
        .await
        .expect("unsubscribe");
    let after = mcp.recorder.updated.lock().unwrap().len();
    plugin.send_event("log", value_map(vec![("seq", 3.into()), ("body", "again".into())]));
    plugin.stop().await;
    wait_for("a sessions update on disconnect", Duration::from_secs(10), || {
        mcp.recorder.updated.lock().unwrap()[after..]
            .iter()
            .any(|u| u == "studio://sessions")
    })
    .await;
    let later: Vec<String> = mcp.recorder.updated.lock().unwrap()[after..].to_vec();
    assert!(
        !later.contains(&logs_uri),
        "no logs update after unsubscribe: {later:?}"
    );
}

/// Subscriptions to one URI sent at once leave one notifier, which one unsubscribe stops:
/// a second one raced past the first's check used to replace its entry and leave its
/// notifier running for the rest of the connection.
#[tokio::test]
async fn subscribing_twice_at_once_leaves_one_notifier_that_unsubscribe_stops() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), with_logs()).await;
    let logs_uri = format!("studio://logs/{}", plugin.session_id());
    for round in 0..5 {
        let subscribe = || mcp.client.subscribe(SubscribeRequestParams::new(logs_uri.as_str()));
        let (first, second, third) = tokio::join!(subscribe(), subscribe(), subscribe());
        first.and(second).and(third).expect("subscribed");
        mcp.client
            .unsubscribe(rmcp::model::UnsubscribeRequestParams::new(logs_uri.as_str()))
            .await
            .expect("unsubscribe");
        mcp.client
            .subscribe(SubscribeRequestParams::new("studio://sessions"))
            .await
            .expect("subscribe to sessions");
        let after = mcp.recorder.updated.lock().unwrap().len();
        plugin.send_event(
            "log",
            value_map(vec![("seq", (10 + round).into()), ("body", "printed".into())]),
        );
        // A session change after the print: its update comes after any the print caused.
        let other = FakePlugin::connect(port, Identity::edit(&format!("B{round}")), with_logs()).await;
        wait_for("a sessions update", Duration::from_secs(10), || {
            mcp.recorder.updated.lock().unwrap()[after..]
                .iter()
                .any(|u| u == "studio://sessions")
        })
        .await;
        other.stop().await;
        let later: Vec<String> = mcp.recorder.updated.lock().unwrap()[after..].to_vec();
        assert!(
            !later.contains(&logs_uri),
            "round {round}: a logs update after the unsubscribe: {later:?}"
        );
        mcp.client
            .unsubscribe(rmcp::model::UnsubscribeRequestParams::new("studio://sessions"))
            .await
            .expect("unsubscribe sessions");
    }
}

/// A `find` answer of `n` matches, as the plugin would send it.
fn many_matches(n: usize) -> Value {
    let matches = (0..n)
        .map(|i| {
            value_map(vec![
                ("path", format!("game.Workspace.Model.Part{i}").into()),
                ("className", "Part".into()),
            ])
        })
        .collect();
    value_map(vec![("matches", Value::Array(matches)), ("truncated", false.into())])
}

#[tokio::test]
async fn a_cut_result_links_to_pages_whose_union_is_the_whole_result() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &["--max-result-kib", "16"]).await;
    let _plugin = FakePlugin::connect(
        port,
        Identity::edit("A"),
        handler(|action, _| match action {
            "find" => Reply::Ok(many_matches(2000)),
            other => Reply::Err("unknown_action", other.to_owned()),
        }),
    )
    .await;
    let result = mcp.call("studio_find", json!({"className": "Part"})).await;
    let kept = support::mcp_client::structured(&result);
    assert_eq!(kept["truncated"], true, "{kept}");
    let kept_matches = kept["matches"].as_array().unwrap().clone();
    assert!(kept_matches.len() < 2000);
    let link = result
        .content
        .iter()
        .find_map(|c| c.as_resource_link())
        .unwrap_or_else(|| panic!("a cut result links to its rest: {result:?}"));
    assert!(link.uri.starts_with("studio://results/"), "{}", link.uri);

    // Page after page, until a page past the end says how many there are.
    let mut all = kept_matches;
    let mut page = 1;
    let pages = loop {
        let uri = format!("{}?page={page}", link.uri);
        match mcp
            .client
            .read_resource(ReadResourceRequestParams::new(uri.as_str()))
            .await
        {
            Ok(read) => {
                let ResourceContents::TextResourceContents { text, meta, .. } = &read.contents[0] else {
                    panic!("{uri}: not text")
                };
                let meta = &meta.as_ref().expect("a page says where it belongs").0;
                assert_eq!(meta["pointer"], "/matches");
                assert_eq!(meta["from"], all.len(), "pages come in order");
                assert_eq!(meta["page"], page);
                let more: Vec<Json> = serde_json::from_str(text).expect("a page is a JSON array of matches");
                assert!(text.len() <= 16 * 1024, "a page fits the bound: {}", text.len());
                all.extend(more);
                page += 1;
            }
            Err(error) => break (page - 1, error.to_string()),
        }
    };
    let (count, past_the_end) = pages;
    assert!(count >= 2, "{count} pages");
    assert!(past_the_end.contains(&format!("has {count} page(s)")), "{past_the_end}");
    let expected: Vec<Json> = (0..2000)
        .map(|i| json!({"path": format!("game.Workspace.Model.Part{i}"), "className": "Part"}))
        .collect();
    assert_eq!(all, expected, "the kept result and its pages are the whole result");

    let error = read(&mcp, "studio://results/0123abcd")
        .await
        .expect_err("an unknown id");
    assert!(error.to_string().contains("is not kept"), "{error}");
    // A result within the bound links to nothing.
    let small = mcp.call("studio_sessions", json!({})).await;
    assert!(small.content.iter().all(|c| c.as_resource_link().is_none()));
}

/// The rest of cut results is bounded in memory, not only in name: 60 calls for 10,000
/// log lines of about 320 bytes (each a 3.5 MB frame cut at the default bound, and read as
/// a tree to add the files its lines name) keep the host's peak RSS within 160 MiB; the
/// newest cut result stays readable and the oldest went first; 2,000 small calls after
/// that grow the host by less than 8 MiB. Before the store counted what it held, the
/// same calls took it past 600 MiB.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn cut_results_are_held_within_the_stores_bound_in_memory() {
    const CALLS: usize = 60;
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let entries: Vec<Value> = (0..10_000u64)
        .map(|seq| {
            value_map(vec![
                ("seq", seq.into()),
                ("level", "output".into()),
                ("body", format!("line {seq:05} {}", "x".repeat(300)).into()),
                ("timestamp", Value::F64(1.7e12)),
            ])
        })
        .collect();
    let logs = value_map(vec![
        ("entries", Value::Array(entries)),
        ("total", 10_000u64.into()),
        ("bufferCapacity", 10_000u64.into()),
        ("nextSince", 10_000u64.into()),
    ]);
    let studio = support::fake_plugin::studio_like();
    let _plugin = FakePlugin::connect(
        port,
        Identity::edit("A"),
        handler(move |action, args| match action {
            "logs" => Reply::Ok(logs.clone()),
            other => studio(other, args),
        }),
    )
    .await;
    let mut links = Vec::new();
    for _ in 0..CALLS {
        let result = mcp.call("studio_logs", json!({"count": 10_000})).await;
        let link = result
            .content
            .iter()
            .find_map(|c| c.as_resource_link())
            .unwrap_or_else(|| panic!("10,000 lines are cut at the default bound: {result:?}"));
        links.push(link.uri.clone());
    }
    let newest = read(&mcp, &format!("{}?page=1", links[CALLS - 1]))
        .await
        .expect("the newest cut result stays readable");
    assert!(newest.0.contains("line "), "{}", &newest.0[..200.min(newest.0.len())]);
    let oldest = read(&mcp, &format!("{}?page=1", links[0]))
        .await
        .map(|(page, _)| format!("a page of {} bytes", page.len()))
        .expect_err("the oldest cut result went first");
    assert!(oldest.to_string().contains("is not kept"), "{oldest}");
    let peak = support::memory_mib(mcp.pid, "VmHWM");
    assert!(
        peak <= 160.0,
        "the host's peak RSS after {CALLS} cut results: {peak:.1} MiB"
    );

    let before = support::memory_mib(mcp.pid, "VmRSS");
    for _ in 0..2_000 {
        mcp.ok("studio_state", json!({})).await;
    }
    let after = support::memory_mib(mcp.pid, "VmRSS");
    eprintln!(
        "host RSS: peak {peak:.1} MiB after {CALLS} cut results; {before:.1} → {after:.1} MiB over 2,000 small calls"
    );
    assert!(
        after - before < 8.0,
        "2,000 small calls grew the host from {before:.1} to {after:.1} MiB"
    );
}

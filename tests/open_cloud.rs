//! Open Cloud (issue #45) against the loopback stand-in (`support::open_cloud`): each tool's
//! requests as the OpenAPI shapes them, the task's states and paged logs, data-store
//! revisions, publishing, errors and quotas, the key's reach, and the CLI's exit codes that
//! CI relies on.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value as Json, json};
use support::fake_plugin::{FakePlugin, Identity, studio_like};
use support::free_port;
use support::mcp_client::{Mcp, binary, empty_config_dir, error_of, structured};
use support::open_cloud::{KEY, OpenCloud};

/// `studio-bridge cloud <args>` with the stand-in's URL and `key` (None: no key at all).
async fn cloud(stand_in: &OpenCloud, key: Option<&str>, args: &[&str]) -> std::process::Output {
    cloud_in(stand_in, key, &empty_config_dir(), args).await
}

async fn cloud_in(stand_in: &OpenCloud, key: Option<&str>, config_dir: &Path, args: &[&str]) -> std::process::Output {
    cloud_at(stand_in, key, config_dir, free_port(), args).await
}

/// [`cloud_in`] hosting (or joining) the bridge on `port`, where a Studio may be connected.
async fn cloud_at(
    stand_in: &OpenCloud,
    key: Option<&str>,
    config_dir: &Path,
    port: u16,
    args: &[&str],
) -> std::process::Output {
    let port = port.to_string();
    let mut command = tokio::process::Command::new(binary());
    command
        .arg("cloud")
        .args(args)
        .args(["--port", &port, "--allow-unpaired"])
        .env("NO_COLOR", "1")
        .env("STUDIO_BRIDGE_CONFIG_DIR", config_dir)
        .env("STUDIO_BRIDGE_OPEN_CLOUD_URL", stand_in.url())
        .env_remove("STUDIO_BRIDGE_PORT");
    match key {
        Some(key) => command.env("ROBLOX_API_KEY", key),
        None => command.env_remove("ROBLOX_API_KEY"),
    };
    tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("the CLI finished")
        .expect("the CLI ran")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn json_of(output: &std::process::Output) -> Json {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} / {}", text(&output.stdout), text(&output.stderr)))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sb-cloud-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test]
async fn cloud_exec_runs_a_task_to_its_end_and_reads_every_page_of_its_logs() {
    let stand_in = OpenCloud::start().await;
    let script = "print('one') print('two') warn('three') print('four', 5) return 1 + 1, {a = true}";
    let output = cloud(
        &stand_in,
        Some(KEY),
        &[
            "exec",
            script,
            "--universe",
            "11",
            "--place",
            "22",
            "--timeout-ms",
            "90000",
            "--json",
        ],
    )
    .await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let result = json_of(&output);
    assert_eq!(result["state"], "COMPLETE");
    assert_eq!(result["results"], json!([2, {"a": true}]));
    let logs: Vec<(String, String)> = result["logs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["level"].as_str().unwrap().to_owned(),
                l["body"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        logs,
        [
            ("Output".to_owned(), "one".to_owned()),
            ("Output".to_owned(), "two".to_owned()),
            ("Warning".to_owned(), "three".to_owned()),
            ("Output".to_owned(), "four 5".to_owned()),
        ]
    );
    let task = result["task"].as_str().unwrap();
    assert!(task.starts_with("universes/11/places/22/"), "{task}");

    // The requests, in order: create, two polls, two pages of logs; each with the key.
    let received = stand_in.received();
    let shape: Vec<String> = received.iter().map(|r| format!("{} {}", r.method, r.path)).collect();
    assert_eq!(
        shape,
        [
            "POST /cloud/v2/universes/11/places/22/luau-execution-session-tasks".to_owned(),
            format!("GET /cloud/v2/{task}"),
            format!("GET /cloud/v2/{task}"),
            format!("GET /cloud/v2/{task}/logs"),
            format!("GET /cloud/v2/{task}/logs"),
        ]
    );
    assert!(received.iter().all(|r| r.key.as_deref() == Some(KEY)));
    let created: Json = serde_json::from_slice(&received[0].body).unwrap();
    assert_eq!(created, json!({"script": script, "timeout": "90s"}));
    assert_eq!(received[0].content_type.as_deref(), Some("application/json"));
    let first_page = &received[3].query;
    assert!(
        first_page.contains(&("view".into(), "STRUCTURED".into())),
        "{first_page:?}"
    );
    assert!(!first_page.iter().any(|(k, _)| k == "pageToken"));
    assert!(
        received[4].query.contains(&("pageToken".into(), "page-1".into())),
        "{:?}",
        received[4].query
    );
}

#[tokio::test]
async fn cloud_exec_from_a_file_exits_1_on_a_script_error_with_its_logs() {
    let stand_in = OpenCloud::start().await;
    let dir = scratch("exec-file");
    let file = dir.join("run.luau");
    std::fs::write(&file, "print('before')\nerror('boom')\n").unwrap();
    let file_text = file.to_string_lossy().into_owned();
    let args = ["exec", "--file", &file_text, "--universe", "1", "--place", "2"];
    let output = cloud(&stand_in, Some(KEY), &args).await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let said = text(&output.stderr);
    assert!(said.starts_with("error[script_error]: "), "{said}");
    assert!(said.contains("boom"), "{said}");

    let mut with_json = args.to_vec();
    with_json.push("--json");
    let output = cloud(&stand_in, Some(KEY), &with_json).await;
    assert_eq!(output.status.code(), Some(1));
    let error = &json_of(&output)["error"];
    assert_eq!(error["code"], "script_error");
    assert_eq!(error["details"]["state"], "FAILED");
    assert_eq!(error["details"]["error"]["code"], "SCRIPT_ERROR");
    assert_eq!(error["details"]["logs"][0]["body"], "before");
    assert_eq!(error["details"]["logs"][1]["level"], "Error");

    // A script that passes: exit 0.
    std::fs::write(&file, "return 'ok'\n").unwrap();
    let output = cloud(&stand_in, Some(KEY), &args).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "[\"ok\"]\n");
}

#[tokio::test]
async fn a_syntax_error_or_an_unpublished_place_sends_nothing() {
    let stand_in = OpenCloud::start().await;
    let output = cloud(
        &stand_in,
        Some(KEY),
        &["exec", "return +", "--universe", "1", "--place", "2"],
    )
    .await;
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).starts_with("error[syntax_error]"),
        "{}",
        text(&output.stderr)
    );

    // The place defaults to the open Studio's, whose universe (gameId 0) was never published.
    let port = free_port();
    let plugin = FakePlugin::start(port, Identity::edit("A"), studio_like());
    let config = empty_config_dir();
    let output = cloud_at(&stand_in, Some(KEY), &config, port, &["exec", "return 1", "--json"]).await;
    assert_eq!(output.status.code(), Some(1));
    let error = &json_of(&output)["error"];
    assert_eq!(error["code"], "invalid_args");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("never published") && message.contains("--universe"),
        "{message}"
    );

    // With the universe given, the place is the open Studio's (1818).
    let args = ["exec", "return 1", "--universe", "9", "--json"];
    let output = cloud_at(&stand_in, Some(KEY), &config, port, &args).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        json_of(&output)["task"]
            .as_str()
            .unwrap()
            .starts_with("universes/9/places/1818/")
    );
    assert_eq!(
        stand_in.received().first().map(|r| r.path.clone()).as_deref(),
        Some("/cloud/v2/universes/9/places/1818/luau-execution-session-tasks"),
        "nothing was sent for the refused calls"
    );
    plugin.stop().await;
}

#[tokio::test]
async fn http_errors_say_what_to_do_and_keep_the_api_s_words() {
    let stand_in = OpenCloud::start().await;
    let exec = ["exec", "return 1", "--universe", "1", "--place", "2", "--json"];

    // 401: the key, and where it came from.
    let output = cloud(&stand_in, Some("wrong-key-0123456789abcdefghijklmn"), &exec).await;
    let error = &json_of(&output)["error"];
    assert_eq!(error["code"], "auth");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("ROBLOX_API_KEY") && message.contains("Invalid API Key"),
        "{message}"
    );

    // 403: the missing scope, by its OpenAPI name.
    stand_in.scopes(&["universe-datastores.objects:read"]);
    let output = cloud(&stand_in, Some(KEY), &exec).await;
    let error = &json_of(&output)["error"];
    assert_eq!(error["code"], "auth");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("`universe.place.luau-execution-session:write`"),
        "{message}"
    );
    assert!(message.contains("PERMISSION_DENIED"), "{message}");

    // 404: what was not found.
    let output = cloud(
        &stand_in,
        Some(KEY),
        &[
            "datastore",
            "get",
            "--store",
            "S",
            "--key",
            "nobody",
            "--universe",
            "3",
            "--json",
        ],
    )
    .await;
    let error = &json_of(&output)["error"];
    assert_eq!(error["code"], "not_found");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("entry \"nobody\" in data store \"S\""),
        "{error}"
    );
}

#[tokio::test]
async fn quotas_and_server_errors_are_waited_out_within_the_deadline() {
    let stand_in = OpenCloud::start().await;
    let exec = ["exec", "return 7", "--universe", "1", "--place", "2", "--json"];

    // 429 with Retry-After: 1, then accepted.
    stand_in.fault("luau-execution-session-tasks", 429, Some(1));
    // 500 twice, then the poll answers.
    stand_in.fault("/tasks/", 500, None);
    stand_in.fault("/tasks/", 500, None);
    let output = cloud(&stand_in, Some(KEY), &exec).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(json_of(&output)["results"], json!([7]));
    let creates = stand_in.received().iter().filter(|r| r.method == "POST").count();
    assert_eq!(creates, 2, "the 429 was tried again once");

    // A wait past the deadline is `busy`, saying the wait, without waiting it.
    stand_in.fault("luau-execution-session-tasks", 429, Some(3600));
    let output = cloud(&stand_in, Some(KEY), &exec).await;
    let error = &json_of(&output)["error"];
    assert_eq!(error["code"], "busy");
    assert_eq!(error["details"]["retryAfterMs"], 3_600_000);
    assert!(error["message"].as_str().unwrap().contains("3600 s"), "{error}");

    // Three 500s: `busy`, after the two retries.
    for _ in 0..3 {
        stand_in.fault("data-stores", 500, None);
    }
    let before = stand_in.received().len();
    let output = cloud(
        &stand_in,
        Some(KEY),
        &["datastore", "list-stores", "--universe", "1", "--json"],
    )
    .await;
    let error = &json_of(&output)["error"];
    assert_eq!(error["code"], "busy");
    assert!(error["message"].as_str().unwrap().contains("failed 3 times"), "{error}");
    assert_eq!(stand_in.received().len() - before, 3);
}

#[tokio::test]
async fn datastore_reads_and_writes_entries_and_refuses_a_stale_revision() {
    let stand_in = OpenCloud::start().await;
    stand_in.put(
        "PlayerData",
        "user_1",
        json!({"coins": 5}),
        json!(["users/1"]),
        json!({"v": 2}),
    );
    stand_in.put("PlayerData", "user_2", json!(3), json!([]), json!({}));
    stand_in.put("PlayerData", "guild_1", json!(1), json!([]), json!({}));
    let ds = |rest: &[&str]| {
        let mut args = vec!["datastore"];
        args.extend_from_slice(rest);
        args.extend_from_slice(&["--universe", "5", "--json"]);
        args.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let run = |args: Vec<String>| {
        let stand_in = stand_in.clone();
        async move {
            let words: Vec<&str> = args.iter().map(String::as_str).collect();
            cloud(&stand_in, Some(KEY), &words).await
        }
    };

    let got = json_of(&run(ds(&["get", "--store", "PlayerData", "--key", "user_1"])).await);
    assert_eq!(got["value"], json!({"coins": 5}));
    assert_eq!(got["revision"], "rev-1");
    assert_eq!(got["users"], json!(["users/1"]));
    assert_eq!(got["attributes"], json!({"v": 2}));

    // Stale: refused, nothing written.
    let output = run(ds(&[
        "set",
        "--store",
        "PlayerData",
        "--key",
        "user_1",
        "--value",
        "{\"coins\":0}",
        "--expected-revision",
        "rev-0",
    ]))
    .await;
    let error = &json_of(&output)["error"];
    assert_eq!(error["code"], "conflict");
    assert_eq!(stand_in.value("PlayerData", "user_1"), Some(json!({"coins": 5})));

    // Current: written, with its etag, and its users and attributes kept.
    let set = json_of(
        &run(ds(&[
            "set",
            "--store",
            "PlayerData",
            "--key",
            "user_1",
            "--value",
            "{\"coins\":9}",
            "--expected-revision",
            "rev-1",
        ]))
        .await,
    );
    assert_eq!(set["value"], json!({"coins": 9}));
    assert_eq!(set["revision"], "rev-2");
    assert_eq!(
        stand_in.entry("PlayerData", "user_1"),
        Some(json!({"value": {"coins": 9}, "users": ["users/1"], "attributes": {"v": 2}, "revision": 2}))
    );
    let patch = stand_in.received().into_iter().rfind(|r| r.method == "PATCH").unwrap();
    let body: Json = serde_json::from_slice(&patch.body).unwrap();
    assert_eq!(body["etag"], "etag-1");
    assert!(patch.query.contains(&("allowMissing".into(), "false".into())));

    let incremented = json_of(
        &run(ds(&[
            "increment",
            "--store",
            "PlayerData",
            "--key",
            "user_2",
            "--amount",
            "4",
        ]))
        .await,
    );
    assert_eq!(incremented["value"], 7);

    // Keys page by page, with a prefix.
    let page = json_of(&run(ds(&["list-keys", "--store", "PlayerData", "--prefix", "user_"])).await);
    assert_eq!(page["keys"], json!(["user_1", "user_2"]));
    assert!(page.get("nextPageToken").is_none());
    let page = json_of(&run(ds(&["list-keys", "--store", "PlayerData"])).await);
    assert_eq!(page["keys"], json!(["guild_1", "user_1"]));
    let token = page["nextPageToken"].as_str().unwrap().to_owned();
    let page = json_of(&run(ds(&["list-keys", "--store", "PlayerData", "--page-token", &token])).await);
    assert_eq!(page["keys"], json!(["user_2"]));
    let stores = json_of(&run(ds(&["list-stores"])).await);
    assert_eq!(stores["stores"][0]["id"], "PlayerData");

    let deleted = json_of(&run(ds(&["delete", "--store", "PlayerData", "--key", "guild_1"])).await);
    assert_eq!(deleted, json!({"key": "guild_1", "deleted": true}));
    assert_eq!(stand_in.value("PlayerData", "guild_1"), None);

    // A write needs `write`: --read-only is not a CLI flag, so the config file says it.
    let dir = scratch("read-only");
    std::fs::write(dir.join("config.toml"), "read_only = true\n").unwrap();
    let output = cloud_in(
        &stand_in,
        Some(KEY),
        &dir,
        &[
            "datastore",
            "delete",
            "--store",
            "PlayerData",
            "--key",
            "user_2",
            "--universe",
            "5",
            "--json",
        ],
    )
    .await;
    assert_eq!(json_of(&output)["error"]["code"], "permission_denied");
    assert!(stand_in.value("PlayerData", "user_2").is_some());
}

/// A place file as `rojo build` would write it: binary, or XML.
fn place_file(dir: &Path, name: &str) -> PathBuf {
    let mut dom = rbx_dom_weak::WeakDom::new(rbx_dom_weak::InstanceBuilder::new("DataModel"));
    let root = dom.root_ref();
    dom.insert(root, rbx_dom_weak::InstanceBuilder::new("Workspace"));
    let path = dir.join(name);
    let file = std::fs::File::create(&path).unwrap();
    if name.ends_with(".rbxlx") {
        rbx_xml::to_writer_default(file, &dom, dom.root().children()).unwrap();
    } else {
        rbx_binary::to_writer(file, &dom, dom.root().children()).unwrap();
    }
    path
}

#[tokio::test]
async fn cloud_publish_checks_the_file_then_uploads_it_as_its_format_needs() {
    let stand_in = OpenCloud::start().await;
    let dir = scratch("publish");
    let binary_place = place_file(&dir, "game.rbxl");
    let xml_place = place_file(&dir, "game.rbxlx");
    let publish = |file: &Path, kind: &str| {
        vec![
            "publish".to_owned(),
            file.to_string_lossy().into_owned(),
            "--version-type".to_owned(),
            kind.to_owned(),
            "--universe".to_owned(),
            "4".to_owned(),
            "--place".to_owned(),
            "8".to_owned(),
            "--json".to_owned(),
        ]
    };
    let run = |args: Vec<String>, extra: &'static [&'static str]| {
        let stand_in = stand_in.clone();
        async move {
            let mut words: Vec<&str> = args.iter().map(String::as_str).collect();
            words.extend_from_slice(extra);
            cloud(&stand_in, Some(KEY), &words).await
        }
    };
    let saved = json_of(&run(publish(&binary_place, "Saved"), &[]).await);
    assert_eq!(saved, json!({"versionNumber": 1}));
    let xml = json_of(&run(publish(&xml_place, "Saved"), &[]).await);
    assert_eq!(xml, json!({"versionNumber": 2}));
    let uploads = stand_in.received();
    assert_eq!(uploads[0].path, "/universes/v1/4/places/8/versions");
    assert_eq!(uploads[0].query, [("versionType".to_owned(), "Saved".to_owned())]);
    assert_eq!(uploads[0].content_type.as_deref(), Some("application/octet-stream"));
    assert_eq!(uploads[1].content_type.as_deref(), Some("application/xml"));
    assert_eq!(stand_in.received()[0].body, std::fs::read(&binary_place).unwrap());

    // Published reaches live players: refused unless allowed, then allowed by the flag.
    let refused = json_of(&run(publish(&binary_place, "Published"), &[]).await);
    assert_eq!(refused["error"]["code"], "permission_denied");
    assert!(
        refused["error"]["message"].as_str().unwrap().contains("allow_publish"),
        "{refused}"
    );
    assert_eq!(stand_in.versions(), 2);
    let published = json_of(&run(publish(&binary_place, "Published"), &["--allow-publish"]).await);
    assert_eq!(published, json!({"versionNumber": 3}));

    // A broken build is refused before anything is sent.
    let broken = dir.join("broken.rbxl");
    std::fs::write(&broken, b"<roblox!\x89\xff\r\n\x1a\n not a place").unwrap();
    let before = stand_in.received().len();
    let output = json_of(&run(publish(&broken, "Saved"), &[]).await);
    assert_eq!(output["error"]["code"], "invalid_args");
    assert!(
        output["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a valid binary (.rbxl) place"),
        "{output}"
    );
    assert_eq!(stand_in.received().len(), before);
}

/// The MCP surface, with a key and without: the tools are offered only with one; a message
/// and a restart reach the universe.
#[tokio::test]
async fn mcp_offers_the_cloud_tools_only_with_a_key_and_they_reach_the_universe() {
    let stand_in = OpenCloud::start().await;
    let url = stand_in.url();
    let without = Mcp::spawn_in_config_dir_with_env(
        free_port(),
        &["--allow-unpaired"],
        &empty_config_dir(),
        &[("ROBLOX_API_KEY", None), ("STUDIO_BRIDGE_OPEN_CLOUD_URL", Some(&url))],
    )
    .await;
    let tools = without.client.list_all_tools().await.unwrap();
    assert!(
        !tools
            .iter()
            .any(|t| t.name.starts_with("studio_cloud_") || t.name == "studio_datastore")
    );
    let refused = error_of(&without.call("studio_cloud_restart", json!({"universe": 1})).await);
    assert_eq!(refused["code"], "permission_denied");
    assert!(
        refused["message"].as_str().unwrap().contains("cloud login"),
        "{refused}"
    );

    let with = Mcp::spawn_in_config_dir_with_env(
        free_port(),
        &["--allow-unpaired"],
        &empty_config_dir(),
        &[
            ("ROBLOX_API_KEY", Some(KEY)),
            ("STUDIO_BRIDGE_OPEN_CLOUD_URL", Some(&url)),
        ],
    )
    .await;
    let names: Vec<String> = with
        .client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    for tool in [
        "studio_cloud_exec",
        "studio_cloud_publish",
        "studio_datastore",
        "studio_cloud_message",
        "studio_cloud_restart",
    ] {
        assert!(names.iter().any(|n| n == tool), "{tool}: {names:?}");
    }
    let sent = with
        .call(
            "studio_cloud_message",
            json!({"topic": "Announcements", "message": "v2 is out", "universe": 31}),
        )
        .await;
    with.check_against_schema("studio_cloud_message", &sent);
    assert_eq!(structured(&sent), json!({"published": true}));
    assert_eq!(
        stand_in.messages(),
        [(31, "Announcements".to_owned(), "v2 is out".to_owned())]
    );
    let too_long = error_of(
        &with
            .call(
                "studio_cloud_message",
                json!({"topic": "t", "message": "x".repeat(1025), "universe": 31}),
            )
            .await,
    );
    assert_eq!(too_long["code"], "invalid_args");
    let restarted = with.call("studio_cloud_restart", json!({"universe": 31})).await;
    assert_eq!(structured(&restarted), json!({"restarted": true}));
    assert_eq!(stand_in.restarts(), [31]);
    let restart = stand_in
        .received()
        .into_iter()
        .rfind(|r| r.path.ends_with(":restartServers"))
        .unwrap();
    assert_eq!(serde_json::from_slice::<Json>(&restart.body).unwrap(), json!({}));
}

/// The key never leaves through any output: not at `trace`, not in an error.
#[tokio::test]
async fn the_key_never_appears_in_output_logs_or_errors() {
    let stand_in = OpenCloud::start().await;
    stand_in.fault("/tasks/", 500, None);
    let port = free_port().to_string();
    let mut outputs = Vec::new();
    for (key, args) in [
        (
            KEY,
            vec!["exec", "print('hi') return 1", "--universe", "1", "--place", "2"],
        ),
        (
            KEY,
            vec!["exec", "error('x')", "--universe", "1", "--place", "2", "--json"],
        ),
        (
            "another-key-that-is-wrong-0123456789",
            vec!["datastore", "list-stores", "--universe", "1", "--json"],
        ),
    ] {
        let mut command = tokio::process::Command::new(binary());
        command
            .arg("cloud")
            .args(&args)
            .args(["--port", &port, "--allow-unpaired", "--log-level", "trace"])
            .env("STUDIO_BRIDGE_CONFIG_DIR", empty_config_dir())
            .env("STUDIO_BRIDGE_OPEN_CLOUD_URL", stand_in.url())
            .env("ROBLOX_API_KEY", key);
        let output = command.output().await.unwrap();
        let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
        assert!(!all.contains(key), "the key leaked: {all}");
        outputs.push(all);
    }
    // The runs did log at trace (the check above read real lines), and the wrong key's
    // error named where the key came from.
    assert!(
        outputs[0].contains("TRACE") || outputs[0].contains("DEBUG"),
        "{}",
        outputs[0]
    );
    assert!(outputs[2].contains("ROBLOX_API_KEY"), "{}", outputs[2]);
}

#[tokio::test]
async fn login_saves_the_key_privately_and_logout_removes_it() {
    let stand_in = OpenCloud::start().await;
    let dir = scratch("login");
    let login = |input: &'static str| {
        let dir = dir.clone();
        async move {
            let mut child = tokio::process::Command::new(binary())
                .args(["cloud", "login"])
                .env("STUDIO_BRIDGE_CONFIG_DIR", &dir)
                .env_remove("ROBLOX_API_KEY")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            use tokio::io::AsyncWriteExt;
            child.stdin.take().unwrap().write_all(input.as_bytes()).await.unwrap();
            child.wait_with_output().await.unwrap()
        }
    };
    let refused = login("short\n").await;
    assert_eq!(refused.status.code(), Some(1));
    assert!(!dir.join("open-cloud-key").exists());

    let saved = login("test-open-cloud-key-0123456789abcdefghij\n").await;
    assert!(saved.status.success(), "{}", text(&saved.stderr));
    assert!(!text(&saved.stderr).contains(KEY) && !text(&saved.stdout).contains(KEY));
    let path = dir.join("open-cloud-key");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }
    // The saved key is used when ROBLOX_API_KEY is not set.
    let output = cloud_in(&stand_in, None, &dir, &["restart", "--universe", "2", "--json"]).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(stand_in.restarts(), [2]);

    let out = tokio::process::Command::new(binary())
        .args(["cloud", "logout"])
        .env("STUDIO_BRIDGE_CONFIG_DIR", &dir)
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    assert!(!path.exists());
    let output = cloud_in(&stand_in, None, &dir, &["restart", "--universe", "2", "--json"]).await;
    assert_eq!(json_of(&output)["error"]["code"], "permission_denied");
}

/// Progress says each state the task moves through; a cancel stops the polling at once
/// (the task may still run on Roblox's side, which the CLI says with its path).
#[tokio::test]
async fn cloud_exec_reports_each_state_and_a_cancel_stops_the_polling() {
    use rmcp::model::{
        CallToolRequestParams, ClientRequest, NumberOrString, ProgressToken, Request, RequestMetaObject,
    };
    use rmcp::service::PeerRequestOptions;

    let stand_in = OpenCloud::start().await;
    let url = stand_in.url();
    let env = [
        ("ROBLOX_API_KEY", Some(KEY)),
        ("STUDIO_BRIDGE_OPEN_CLOUD_URL", Some(url.as_str())),
    ];
    let mcp = Mcp::spawn_in_config_dir_with_env(free_port(), &["--allow-unpaired"], &empty_config_dir(), &env).await;
    let Json::Object(arguments) = json!({"script": "return 1", "universe": 1, "place": 2}) else {
        unreachable!()
    };
    let mut params = CallToolRequestParams::new("studio_cloud_exec").with_arguments(arguments.clone());
    let mut meta = RequestMetaObject::default();
    meta.set_progress_token(ProgressToken(NumberOrString::String("p1".into())));
    params.meta = Some(meta);
    let result = mcp.client.call_tool(params).await.unwrap();
    assert_ne!(result.is_error, Some(true));
    support::wait_for("progress", Duration::from_secs(5), || {
        mcp.recorder.progress.lock().unwrap().len() >= 3
    })
    .await;
    let said: Vec<String> = mcp
        .recorder
        .progress
        .lock()
        .unwrap()
        .iter()
        .filter_map(|p| p.message.clone())
        .collect();
    assert_eq!(said, ["Luau task QUEUED", "Luau task PROCESSING", "Luau task COMPLETE"]);

    // An MCP cancel while the task is queued: no poll after it.
    let before = stand_in.received().len();
    let request = ClientRequest::CallToolRequest(Request::new(
        CallToolRequestParams::new("studio_cloud_exec").with_arguments(arguments),
    ));
    let handle = mcp
        .client
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .unwrap();
    support::wait_for("the task to be created", Duration::from_secs(5), || {
        stand_in.received().len() > before
    })
    .await;
    handle.cancel(Some("stop".into())).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let after: Vec<String> = stand_in.received()[before..].iter().map(|r| r.method.clone()).collect();
    assert_eq!(after, ["POST"], "polling stopped at the cancel");

    // Ctrl-C on the CLI: the same, said with the task's path.
    let port = free_port().to_string();
    let child = tokio::process::Command::new(binary())
        .args([
            "cloud",
            "exec",
            "return 1",
            "--universe",
            "1",
            "--place",
            "2",
            "--port",
            &port,
            "--allow-unpaired",
        ])
        .env("STUDIO_BRIDGE_CONFIG_DIR", empty_config_dir())
        .env("STUDIO_BRIDGE_OPEN_CLOUD_URL", &url)
        .env("ROBLOX_API_KEY", KEY)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let creates = stand_in.received().iter().filter(|r| r.method == "POST").count();
    support::wait_for("the CLI's task", Duration::from_secs(10), || {
        stand_in.received().iter().filter(|r| r.method == "POST").count() > creates
    })
    .await;
    #[cfg(unix)]
    unsafe {
        libc::kill(child.id().unwrap() as i32, libc::SIGINT);
    }
    let output = child.wait_with_output().await.unwrap();
    assert_eq!(output.status.code(), Some(1));
    let said = text(&output.stderr);
    assert!(
        said.contains("may still run on Roblox's servers: universes/1/places/2/"),
        "{said}"
    );
}

/// A binary input reaches the script as a buffer; its upload goes without the API key.
#[tokio::test]
async fn cloud_exec_hands_a_binary_input_to_the_script() {
    let stand_in = OpenCloud::start().await;
    let dir = scratch("binary-input");
    let input = dir.join("fixture.bin");
    std::fs::write(&input, [7u8, 1, 2, 3, 250]).unwrap();
    let input_text = input.to_string_lossy().into_owned();
    let script = "local b = ({...})[1].BinaryInput return buffer.len(b), buffer.readu8(b, 0), buffer.readu8(b, 4)";
    let output = cloud(
        &stand_in,
        Some(KEY),
        &[
            "exec",
            script,
            "--binary-input",
            &input_text,
            "--universe",
            "3",
            "--place",
            "4",
            "--json",
        ],
    )
    .await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(json_of(&output)["results"], json!([5, 7, 250]));
    let received = stand_in.received();
    let shape: Vec<String> = received
        .iter()
        .take(3)
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(
        shape,
        [
            "POST /cloud/v2/universes/3/luau-execution-session-task-binary-inputs",
            "PUT /upload/in1",
            "POST /cloud/v2/universes/3/places/4/luau-execution-session-tasks",
        ]
    );
    assert_eq!(
        serde_json::from_slice::<Json>(&received[0].body).unwrap(),
        json!({"size": 5})
    );
    assert_eq!(received[1].key, None, "the key never goes to the upload URI");
    assert_eq!(received[1].body, [7u8, 1, 2, 3, 250]);
    let created: Json = serde_json::from_slice(&received[2].body).unwrap();
    assert_eq!(
        created["binaryInput"],
        "universes/3/luau-execution-session-task-binary-inputs/in1"
    );

    // A missing file sends nothing.
    let before = stand_in.received().len();
    let output = cloud(
        &stand_in,
        Some(KEY),
        &[
            "exec",
            "return 1",
            "--binary-input",
            "/nonexistent/x.bin",
            "--universe",
            "3",
            "--place",
            "4",
            "--json",
        ],
    )
    .await;
    assert_eq!(json_of(&output)["error"]["code"], "not_found");
    assert_eq!(stand_in.received().len(), before);
}

/// End to end through the real plugin under Lune: an agent names no universe or place, and
/// the cloud tools take the open Studio's (its DataModel's GameId and PlaceId, as its hello
/// says them); a message needs only the universe.
#[tokio::test]
async fn the_real_plugin_s_published_place_is_where_cloud_calls_go() {
    use support::lune::HeadlessStudio;
    use support::studio::{exchange, installed_plugin};

    let stand_in = OpenCloud::start().await;
    let url = stand_in.url();
    let rbxm = installed_plugin().await;
    let port = free_port();
    let env = [
        ("ROBLOX_API_KEY", Some(KEY)),
        ("STUDIO_BRIDGE_OPEN_CLOUD_URL", Some(url.as_str())),
    ];
    let mcp = Mcp::spawn_paired_with_env(port, &[], &env).await;
    let mut studio = HeadlessStudio::start_with(port, &rbxm, "edit", &["--published", "4711:99"]);
    studio.wait_connected(&["edit"]).await;

    let ran = exchange(&mcp, "studio_cloud_exec", json!({"script": "return 'on Roblox'"})).await;
    assert_eq!(ran["results"], json!(["on Roblox"]), "{ran}");
    assert!(
        ran["task"].as_str().unwrap().starts_with("universes/99/places/4711/"),
        "{ran}"
    );
    exchange(&mcp, "studio_cloud_message", json!({"topic": "News", "message": "hi"})).await;
    assert_eq!(stand_in.messages(), [(99, "News".to_owned(), "hi".to_owned())]);
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

//! The Studio Bridge panel (issue #43) against the real plugin under Lune, with a person at
//! it: the test Studio's `--person FILE` takes a person's clicks (tests/lune/lib/Person.luau)
//! and prints what the panel shows. Pause answers `paused` on every surface; Ask before
//! writes answers `denied` on Deny and on no answer, writing nothing, and runs on Allow; the
//! call list shows a call while it runs; the panel's Undo reverts exactly the agent's write
//! and refuses when another step is on top.

use crate::support;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value as Json, json};
use support::free_port;
use support::lune::HeadlessStudio;
use support::mcp_client::{Mcp, binary, error_of, paired_config_dir};
use support::studio::{exchange, installed_plugin};

/// A person's commands, appended to the file the test Studio reads.
struct Person {
    file: PathBuf,
}

impl Person {
    fn new(name: &str) -> Person {
        let file = std::env::temp_dir().join(format!("sb-person-{}-{name}", std::process::id()));
        std::fs::write(&file, "").unwrap();
        Person { file }
    }

    fn path(&self) -> &Path {
        &self.file
    }

    fn say(&self, command: &str) {
        let mut file = std::fs::OpenOptions::new().append(true).open(&self.file).unwrap();
        writeln!(file, "{command}").unwrap();
    }
}

/// Calls `tool` while the test goes on (a person answers it meanwhile).
fn in_background(mcp: &Mcp, tool: &str, args: Json) -> tokio::task::JoinHandle<rmcp::model::CallToolResult> {
    let client = mcp.client.peer().clone();
    let Json::Object(arguments) = args else {
        panic!("arguments must be an object")
    };
    let params = rmcp::model::CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
    tokio::spawn(async move { client.call_tool(params).await.unwrap() })
}

/// Asks for what the panel shows (`rows` or `prompt`) and returns it as JSON.
async fn shown(studio: &mut HeadlessStudio, person: &Person, what: &str) -> Json {
    person.say(what);
    let line = studio
        .wait_for_line(&format!("[person] {what} "), Duration::from_secs(10))
        .await;
    let text = line.split_once(&format!("[person] {what} ")).unwrap().1;
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {line}"))
}

/// Clicks `button` and waits for the test Studio to say it was clicked.
async fn click(studio: &mut HeadlessStudio, person: &Person, button: &str) {
    person.say(&format!("click {button}"));
    studio
        .wait_for_line(&format!("[person] clicked {button}"), Duration::from_secs(10))
        .await;
}

async fn start(name: &str) -> (Mcp, HeadlessStudio, Person, u16) {
    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn_paired(port, &[]).await;
    let person = Person::new(name);
    let person_path = person.path().to_string_lossy().into_owned();
    let mut studio = HeadlessStudio::start_with(port, &rbxm, "edit", &["--person", &person_path]);
    studio.wait_connected(&["edit"]).await;
    person.say("open");
    studio.wait_for_line("[person] opened", Duration::from_secs(10)).await;
    (mcp, studio, person, port)
}

async fn wait_paused(mcp: &Mcp, paused: bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let sessions = mcp.ok("studio_sessions", json!({})).await;
        let now = sessions["sessions"][0]["paused"].as_bool().unwrap_or(false);
        if now == paused {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "sessions never said paused={paused}: {sessions}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `studio-bridge <args>` as a peer of the test's MCP host.
async fn cli(port: u16, args: &[&str]) -> std::process::Output {
    tokio::process::Command::new(binary())
        .args(args)
        .args(["--port", &port.to_string(), "--json"])
        .env("STUDIO_BRIDGE_CONFIG_DIR", paired_config_dir())
        .output()
        .await
        .unwrap()
}

/// Whether `Workspace.<name>` exists, asked with a read (a read is never asked for).
async fn exists(mcp: &Mcp, name: &str) -> bool {
    let result = mcp
        .call("studio_query", json!({"path": format!("Workspace.{name}")}))
        .await;
    if result.is_error == Some(true) {
        let error = error_of(&result);
        assert_eq!(error["code"], "not_found", "{error}");
        false
    } else {
        true
    }
}

#[tokio::test]
async fn pause_answers_paused_over_mcp_and_the_cli_until_the_person_resumes() {
    let (mcp, mut studio, person, port) = start("pause").await;
    click(&mut studio, &person, "Pause").await;
    wait_paused(&mcp, true).await;

    let refused = error_of(&mcp.call("studio_query", json!({"path": "Workspace"})).await);
    assert_eq!(refused["code"], "paused", "{refused}");
    assert_eq!(
        refused["message"],
        "A person paused studio-bridge in Studio's Studio Bridge panel; nothing was done. Ask them to resume."
    );
    let output = cli(port, &["query", "Workspace"]).await;
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let printed: Json = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed["error"]["code"], "paused", "{printed}");
    // The CLI's sessions says so too.
    let output = cli(port, &["sessions"]).await;
    let printed: Json = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed["sessions"][0]["paused"], true, "{printed}");
    // What the pause refused is listed, as refused.
    let rows = shown(&mut studio, &person, "rows").await;
    assert_eq!(rows[0]["tool"], "query", "{rows}");
    assert_eq!(rows[0]["status"], "paused", "{rows}");

    click(&mut studio, &person, "Pause").await;
    wait_paused(&mcp, false).await;
    let query = exchange(&mcp, "studio_query", json!({"path": "Workspace"})).await;
    assert_eq!(query["instance"]["className"], "Workspace", "{query}");
    let output = cli(port, &["query", "Workspace"]).await;
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

#[tokio::test]
async fn the_list_shows_a_call_while_it_runs_and_its_result_after() {
    let (mcp, mut studio, person, _port) = start("list").await;
    let running = in_background(&mcp, "studio_exec", json!({"script": "task.wait(1.5) return 7"}));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let rows = loop {
        let rows = shown(&mut studio, &person, "rows").await;
        if rows[0]["tool"] == "exec" {
            break rows;
        }
        assert!(tokio::time::Instant::now() < deadline, "exec never listed: {rows}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(rows[0]["status"], "running", "{rows}");
    assert!(rows[0].get("durationMs").is_none(), "{rows}");
    let result = running.await.unwrap();
    assert_ne!(result.is_error, Some(true));
    let rows = shown(&mut studio, &person, "rows").await;
    assert_eq!(rows[0]["tool"], "exec", "{rows}");
    assert_eq!(rows[0]["status"], "ok", "{rows}");
    assert!(rows[0]["durationMs"].as_u64().unwrap() >= 1000, "{rows}");

    // A call the host answers by polling (debug's hits while it waits) is listed once: the
    // polls after its first request go `quiet`.
    let hits = exchange(&mcp, "studio_debug", json!({"action": "hits", "waitMs": 1000})).await;
    assert_eq!(hits["hits"], json!([]), "{hits}");
    let rows = shown(&mut studio, &person, "rows").await;
    let debug_rows = rows.as_array().unwrap().iter().filter(|r| r["tool"] == "debug").count();
    assert_eq!(debug_rows, 1, "{rows}");
}

#[tokio::test]
async fn ask_before_writes_denies_on_deny_and_on_no_answer_and_runs_on_allow() {
    let (mcp, mut studio, person, _port) = start("ask").await;
    click(&mut studio, &person, "AskBeforeWrites").await;

    // Reads are not asked.
    exchange(&mcp, "studio_query", json!({"path": "Workspace"})).await;

    // Deny: `denied`, nothing written.
    let create = |name: &str| json!({"items": [{"className": "Part", "parent": "Workspace", "name": name}]});
    let call = in_background(&mcp, "studio_create", create("Denied"));
    studio
        .wait_for_line("[person] prompt-shown create", Duration::from_secs(10))
        .await;
    let prompt = shown(&mut studio, &person, "prompt").await;
    assert_eq!(prompt["tool"], "create", "{prompt}");
    click(&mut studio, &person, "Deny").await;
    let denied = error_of(&call.await.unwrap());
    assert_eq!(denied["code"], "denied", "{denied}");
    assert_eq!(denied["message"], "A person in Studio denied this create call");
    assert!(!exists(&mcp, "Denied").await);

    // No answer within the call's deadline: `denied`, the script never ran.
    let late = error_of(
        &mcp.call(
            "studio_exec",
            json!({"script": "Instance.new('Folder', workspace).Name = 'Ran' return 1", "timeoutMs": 3000}),
        )
        .await,
    );
    assert_eq!(late["code"], "denied", "{late}");
    assert_eq!(
        late["message"],
        "A person in Studio did not answer this exec call within 2 s"
    );
    studio
        .wait_for_line("[person] prompt-shown exec", Duration::from_secs(1))
        .await;

    // Allow: written.
    let call = in_background(&mcp, "studio_create", create("Allowed"));
    studio
        .wait_for_line("[person] prompt-shown create", Duration::from_secs(10))
        .await;
    click(&mut studio, &person, "Allow").await;
    let allowed = call.await.unwrap();
    assert_ne!(allowed.is_error, Some(true), "{allowed:?}");
    assert!(exists(&mcp, "Allowed").await);
    assert!(!exists(&mcp, "Ran").await);
}

#[tokio::test]
async fn the_panels_undo_reverts_the_agents_write_and_refuses_under_another_step() {
    let (mcp, mut studio, person, _port) = start("undo").await;
    let create = |name: &str| json!({"items": [{"className": "Part", "parent": "Workspace", "name": name}]});
    exchange(&mcp, "studio_create", create("First")).await;
    let rows = shown(&mut studio, &person, "rows").await;
    assert_eq!(rows[0]["tool"], "create", "{rows}");
    assert_eq!(rows[0]["undo"], "enabled", "{rows}");
    let seq = rows[0]["seq"].as_u64().unwrap();
    click(&mut studio, &person, &format!("Undo:{seq}")).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while exists(&mcp, "First").await {
        assert!(tokio::time::Instant::now() < deadline, "Undo did not revert the create");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let rows = shown(&mut studio, &person, "rows").await;
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["seq"] == seq)
        .unwrap()
        .clone();
    assert_eq!(row["undo"], "undone", "{rows}");

    // Another step on top (as a person's edit would be): Undo is refused, naming it.
    exchange(&mcp, "studio_create", create("Second")).await;
    let script = "local h = game:GetService('ChangeHistoryService') \
        local id = h:TryBeginRecording('Move part') workspace.Second.Name = 'Moved' \
        h:FinishRecording(id, Enum.FinishRecordingOperation.Commit) return 1";
    mcp.ok("studio_exec", json!({"script": script})).await;
    let rows = shown(&mut studio, &person, "rows").await;
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["tool"] == "create" && r["undo"] != "undone")
        .unwrap()
        .clone();
    assert_eq!(row["undo"], "disabled", "{rows}");
    assert!(row["undoNote"].as_str().unwrap().contains("Move part"), "{rows}");
    person.say(&format!("click Undo:{}", row["seq"]));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(exists(&mcp, "Moved").await, "a refused Undo changed nothing");
}

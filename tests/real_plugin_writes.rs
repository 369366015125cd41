//! Writes stopped while they yield inside their ChangeHistoryService recording (issue 25, item
//! 2), against the real plugin (the .rbxm the binary installs) in the headless Studio under
//! Lune, through the real `studio-bridge mcp`. A recording left open would make every later
//! write and `undo` answer `busy` until Studio restarts; each test stops a write mid-recording
//! (an MCP cancel, the call's deadline, the host's death) and then checks that nothing is
//! recording, nothing of the stopped write was kept, and writes, undo and script_edit work.
//!
//! The harness is `tests/lune/studio-writes.luau`: studio.luau with UpdateSourceAsync held
//! while its script carries the attribute `HoldUpdateSource`, and LoadAsset of asset 4242 held.

mod support;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientRequest, Request};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value as Json, json};
use support::free_port;
use support::lune::{lune, repo};
use support::mcp_client::{Mcp, binary, error_of, paired_config_dir};
use support::studio::installed_plugin;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(30);

/// `tests/lune/studio-writes.luau` in Edit, its stdout read line by line.
struct Studio {
    _child: Child,
    lines: mpsc::UnboundedReceiver<String>,
}

impl Studio {
    fn start(port: u16, rbxm: &Path) -> Studio {
        let mut child = Command::new(lune())
            .current_dir(repo())
            .args([
                "run",
                "tests/lune/studio-writes.luau",
                "--",
                "--port",
                &port.to_string(),
            ])
            .args(["--context", "edit", "--rbxm"])
            .arg(rbxm)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start lune");
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Studio { _child: child, lines }
    }

    async fn wait_for_line(&mut self, needle: &str) -> String {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(line)) if line.contains(needle) => return line,
                Ok(Some(_)) => {}
                Ok(None) => panic!("the headless Studio exited before printing {needle:?}"),
                Err(_) => panic!("the headless Studio did not print {needle:?} within {WAIT:?}"),
            }
        }
    }
}

/// The plugin in the headless Studio, connected to a fresh paired `mcp` host.
async fn edit_studio() -> (Mcp, Studio) {
    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn_paired(port, &[]).await;
    let mut studio = Studio::start(port, &rbxm);
    studio.wait_for_line("[harness] connected context=edit").await;
    (mcp, studio)
}

async fn luau(mcp: &Mcp, script: &str) -> Json {
    let out = mcp.ok("studio_exec", json!({ "script": script })).await;
    assert_eq!(out["success"], true, "{out}");
    out["returns"][0].clone()
}

/// A ModuleScript `ServerStorage.<name>` holding `return 1`, made by exec (no undo step), whose
/// script_edit holds inside UpdateSourceAsync.
async fn held_script(mcp: &Mcp, name: &str) {
    let made = luau(
        mcp,
        &format!(
            "local s = Instance.new('ModuleScript')\ns.Name = '{name}'\ns.Source = 'return 1\\n'\n\
             s:SetAttribute('HoldUpdateSource', true)\ns.Parent = game:GetService('ServerStorage')\n\
             return s.Name"
        ),
    )
    .await;
    assert_eq!(made, name);
}

/// Starts a tool call that the test will cancel; returns the handle to cancel it with.
async fn cancellable(mcp: &Mcp, tool: &str, args: Json) -> rmcp::service::RequestHandle<rmcp::RoleClient> {
    let Json::Object(arguments) = args else {
        panic!("arguments must be an object")
    };
    let request = ClientRequest::CallToolRequest(Request::new(
        CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments),
    ));
    mcp.client
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .expect("send the request")
}

/// Waits until Studio records nothing: the stopped write's recording was closed. A recording
/// left open never closes, so this gives up after [`WAIT`].
async fn nothing_recording(mcp: &Mcp) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let open = luau(
            mcp,
            "return game:GetService('ChangeHistoryService'):IsRecordingInProgress()",
        )
        .await;
        if open == false {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stopped write's recording is still open after {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// After a write to `ServerStorage.<name>` was stopped mid-recording: nothing of it was kept,
/// and create, update, undo (with `expect`) and script_edit all work.
async fn writes_still_work(mcp: &Mcp, name: &str) {
    let path = format!("ServerStorage.{name}");
    let read = mcp.ok("studio_script_read", json!({ "path": path })).await;
    assert_eq!(read["source"], "return 1\n", "the stopped edit wrote nothing: {read}");
    let nothing = mcp.ok("studio_undo", json!({})).await;
    assert_eq!(nothing["done"], 0, "the stopped write left no undo step: {nothing}");

    let made = mcp
        .ok(
            "studio_create",
            json!({"items": [{"className": "Folder", "parent": "Workspace", "name": "After"}]}),
        )
        .await;
    assert_eq!(made["created"], json!(["game.Workspace.After"]), "{made}");
    let undone = mcp.ok("studio_undo", json!({"expect": "studio-bridge: create"})).await;
    assert_eq!(undone["done"], 1, "{undone}");
    assert_eq!(undone["waypoint"], "studio-bridge: create", "{undone}");
    assert_eq!(luau(mcp, "return workspace:FindFirstChild('After') == nil").await, true);

    mcp.ok(
        "studio_update",
        json!({"items": [{"path": path, "attributes": {"HoldUpdateSource": null}}]}),
    )
    .await;
    let edited = mcp
        .ok("studio_script_edit", json!({"path": path, "source": "return 2\n"}))
        .await;
    assert_eq!(edited["lineCount"], 1, "{edited}");
    let undone = mcp
        .ok("studio_undo", json!({"expect": "studio-bridge: script_edit"}))
        .await;
    assert_eq!(undone["done"], 1, "{undone}");
    let read = mcp.ok("studio_script_read", json!({ "path": path })).await;
    assert_eq!(read["source"], "return 1\n", "{read}");
}

#[tokio::test]
async fn a_script_edit_cancelled_inside_its_recording_leaves_writes_and_undo_working() {
    let (mcp, mut studio) = edit_studio().await;
    held_script(&mcp, "Held").await;
    let call = cancellable(
        &mcp,
        "studio_script_edit",
        json!({"path": "ServerStorage.Held", "source": "return 2\n"}),
    )
    .await;
    studio.wait_for_line("[harness] update source held script=Held").await;
    call.cancel(Some("the user pressed stop".into()))
        .await
        .expect("send the cancel");
    nothing_recording(&mcp).await;
    writes_still_work(&mcp, "Held").await;
}

#[tokio::test]
async fn a_script_edit_that_times_out_inside_its_recording_leaves_writes_and_undo_working() {
    let (mcp, mut studio) = edit_studio().await;
    held_script(&mcp, "Slow").await;
    let (timed_out, line) = tokio::join!(
        mcp.call(
            "studio_script_edit",
            json!({"path": "ServerStorage.Slow", "source": "return 2\n"}),
        ),
        studio.wait_for_line("[harness] update source held script=Slow"),
    );
    assert!(line.contains("Slow"));
    assert_eq!(timed_out.is_error, Some(true), "{timed_out:?}");
    let error = error_of(&timed_out);
    assert_eq!(error["code"], "timeout", "{error}");
    nothing_recording(&mcp).await;
    writes_still_work(&mcp, "Slow").await;
}

#[tokio::test]
async fn a_script_edit_whose_host_dies_inside_its_recording_leaves_writes_working_on_the_next_host() {
    let rbxm = installed_plugin().await;
    let port = free_port();
    // Host A is a bare host, so that the MCP process below is its peer and takes over.
    let mut host_a = Command::new(binary())
        .args(["serve", "--port", &port.to_string(), "--no-install-plugin"])
        .env("STUDIO_BRIDGE_CONFIG_DIR", paired_config_dir())
        .env("STUDIO_BRIDGE_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("start studio-bridge serve");
    let mut studio = Studio::start(port, &rbxm);
    studio.wait_for_line("[harness] connected context=edit").await;
    let mcp = Mcp::spawn_paired(port, &[]).await;
    held_script(&mcp, "Orphan").await;
    let held = mcp.call(
        "studio_script_edit",
        json!({"path": "ServerStorage.Orphan", "source": "return 2\n"}),
    );
    let kill = async {
        studio.wait_for_line("[harness] update source held script=Orphan").await;
        let pid = host_a.id().expect("host A's pid");
        let status = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    };
    let (lost, ()) = tokio::time::timeout(WAIT, async { tokio::join!(held, kill) })
        .await
        .expect("the call in flight ends once its host is gone");
    assert_eq!(lost.is_error, Some(true), "{lost:?}");
    let _ = host_a.wait().await;
    // The peer is host B now; the plugin reconnects to it, its old connection's write gone.
    studio.wait_for_line("[harness] connected context=edit").await;
    nothing_recording(&mcp).await;
    writes_still_work(&mcp, "Orphan").await;
}

#[tokio::test]
async fn an_insert_asset_cancelled_while_loading_leaves_nothing_inserted_and_writes_working() {
    let (mcp, mut studio) = edit_studio().await;
    let call = cancellable(&mcp, "studio_insert_asset", json!({"assetId": 4242})).await;
    studio.wait_for_line("[harness] load held asset=4242").await;
    call.cancel(Some("the user pressed stop".into()))
        .await
        .expect("send the cancel");
    nothing_recording(&mcp).await;
    assert_eq!(
        luau(&mcp, "return workspace:FindFirstChild('SlowCrate') == nil").await,
        true,
        "nothing was inserted"
    );
    let nothing = mcp.ok("studio_undo", json!({})).await;
    assert_eq!(nothing["done"], 0, "{nothing}");
    let made = mcp
        .ok(
            "studio_create",
            json!({"items": [{"className": "Part", "parent": "Workspace", "name": "Next"}]}),
        )
        .await;
    assert_eq!(made["created"], json!(["game.Workspace.Next"]), "{made}");
    let undone = mcp.ok("studio_undo", json!({"expect": "studio-bridge: create"})).await;
    assert_eq!(undone["done"], 1, "{undone}");
}

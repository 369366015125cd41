//! Writes stopped while they yield inside their ChangeHistoryService recording (issue 25, item
//! 2), against the real plugin (the .rbxm the binary installs) in the headless Studio under
//! Lune, through the real `studio-bridge mcp`. A recording left open would make every later
//! write and `undo` answer `busy` until Studio restarts; each test stops a write mid-recording
//! (an MCP cancel, the call's deadline, the host's death) and then checks that nothing is
//! recording, nothing of the stopped write was kept, and writes, undo and script_edit work.
//!
//! The harness is `tests/lune/studio-writes.luau`: studio.luau with UpdateSourceAsync held
//! while its script carries the attribute `HoldUpdateSource`, and LoadAsset of asset 4242 held.

use crate::support;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientRequest, Request};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value as Json, json};
use support::free_port;
use support::lune::{HeadlessStudio, lune, repo};
use support::mcp_client::{Mcp, binary, error_of, paired_config_dir};
use support::studio::{exchange, installed_plugin, run_luau};
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

// Writes that run to the end, in the plain headless Studio (tests/lune/studio.luau, started by
// `support::studio::edit_studio`, not the `Studio` above): what each write tool answers and
// what it leaves in the place, undo and redo included.

/// A canonical text of the whole DataModel, read through `exec`: every instance in
/// pre-order (children in GetChildren order) with its class, name, a fixed list of
/// properties (those that exist on it), attributes and tags, sorted.
const DUMP: &str = r##"
local props = {"Archivable", "Anchored", "CFrame", "Size", "Color", "Material", "Transparency",
    "CanCollide", "Locked", "Shape", "Source", "Disabled", "Value", "PrimaryPart"}
local out = {}
local function walk(inst, depth)
    local line = { string.rep(" ", depth) .. inst.ClassName .. " " .. inst.Name }
    for _, p in props do
        local ok, v = pcall(function() return inst[p] end)
        if ok and v ~= nil then table.insert(line, p .. "=" .. tostring(v)) end
    end
    local attrs, names = inst:GetAttributes(), {}
    for k in attrs do table.insert(names, k) end
    table.sort(names)
    for _, k in names do table.insert(line, "@" .. k .. "=" .. tostring(attrs[k])) end
    local tags = inst:GetTags()
    table.sort(tags)
    for _, t in tags do table.insert(line, "#" .. t) end
    table.insert(out, table.concat(line, " "))
    for _, c in inst:GetChildren() do walk(c, depth + 1) end
end
walk(game, 0)
return table.concat(out, "\n")
"##;

async fn dump(mcp: &Mcp) -> String {
    let out = mcp.ok("studio_exec", json!({ "script": DUMP })).await;
    out["returns"][0].as_str().expect("the dump is a string").to_owned()
}

#[tokio::test]
async fn delete_clone_selection_undo_redo_are_answered_by_the_real_plugin() {
    let (rbxm, mcp, _studio) = support::studio::edit_studio().await;

    // Nothing recorded yet (exec records nothing): nothing to undo is not an error.
    let nothing = exchange(&mcp, "studio_undo", json!({})).await;
    assert_eq!(nothing["done"], 0, "{nothing}");
    assert_eq!(nothing["canUndo"], false);
    assert_eq!(nothing["canRedo"], false);
    assert!(nothing.get("waypoint").is_none(), "{nothing}");

    let made = run_luau(
        &mcp,
        "local f = Instance.new('Folder')\nf.Name = 'Edits'\n\
         local a = Instance.new('Part')\na.Name = 'A'\na.Color = Color3.new(0, 1, 0)\n\
         a:SetAttribute('Weight', 3)\na:AddTag('Crate')\na.Parent = f\n\
         local b = Instance.new('Part')\nb.Name = 'B'\nb.Parent = f\n\
         f.Parent = workspace\n\
         local ref = Instance.new('ObjectValue')\nref.Name = 'RefToA'\nref.Value = a\n\
         ref.Parent = game:GetService('ServerStorage')\nreturn #f:GetChildren()",
    )
    .await;
    assert_eq!(made, 2);
    let before = dump(&mcp).await;

    // delete two parts, one undo makes the DataModel identical, redo deletes them again.
    let deleted = exchange(
        &mcp,
        "studio_delete",
        json!({"paths": ["Workspace.Model.Twin[2]", "Workspace.Edits.A"]}),
    )
    .await;
    assert_eq!(deleted["deleted"], 2, "{deleted}");
    let after_delete = dump(&mcp).await;
    assert_ne!(after_delete, before);
    assert!(!after_delete.contains("Part A "), "A is gone: {after_delete}");
    let undone = exchange(&mcp, "studio_undo", json!({})).await;
    assert_eq!(undone["done"], 1);
    assert_eq!(undone["waypoint"], "studio-bridge: delete");
    assert_eq!(undone["canUndo"], false);
    assert_eq!(undone["canRedo"], true);
    assert_eq!(dump(&mcp).await, before, "one undo reverts the whole delete");
    let same = run_luau(&mcp, "return game.ServerStorage.RefToA.Value.Parent == workspace.Edits").await;
    assert_eq!(same, true, "the undo brought back the same instance a reference held");
    let redone = exchange(&mcp, "studio_redo", json!({})).await;
    assert_eq!(redone["done"], 1);
    assert_eq!(redone["waypoint"], "studio-bridge: delete");
    assert_eq!(dump(&mcp).await, after_delete, "redo deletes them again");
    mcp.ok("studio_undo", json!({})).await;
    assert_eq!(dump(&mcp).await, before);

    // game, a service, a missing path: refused, nothing deleted.
    let game = mcp
        .err("studio_delete", json!({"paths": ["Workspace.Edits.A", "game"]}))
        .await;
    assert_eq!(game["code"], "invalid_args", "{game}");
    assert!(game["message"].as_str().unwrap().contains("game"), "{game}");
    let service = mcp
        .err(
            "studio_delete",
            json!({"paths": ["Workspace.Edits.B", "ServerStorage"]}),
        )
        .await;
    assert_eq!(service["code"], "invalid_args", "{service}");
    assert!(service["message"].as_str().unwrap().contains("service"), "{service}");
    let missing = mcp
        .err(
            "studio_delete",
            json!({"paths": ["Workspace.Edits.B", "Workspace.Nope"]}),
        )
        .await;
    assert_eq!(missing["code"], "not_found", "{missing}");
    let empty = mcp.err("studio_delete", json!({"paths": []})).await;
    assert_eq!(empty["code"], "invalid_args");
    let zero = mcp
        .err(
            "studio_clone",
            json!({"path": "Workspace.Edits.A", "parent": "Workspace", "count": 0}),
        )
        .await;
    assert!(zero["message"].as_str().unwrap().contains("`count`"), "{zero}");
    let steps = mcp.err("studio_redo", json!({"steps": 0})).await;
    assert!(steps["message"].as_str().unwrap().contains("`steps`"), "{steps}");
    assert_eq!(dump(&mcp).await, before, "nothing deleted");
    let none = mcp.ok("studio_undo", json!({})).await;
    assert_eq!(none["done"], 0, "refusals left no undo step: {none}");

    // clone three copies: names kept, Name[i] paths; one undo removes them, redo brings them.
    let cloned = exchange(
        &mcp,
        "studio_clone",
        json!({"path": "Workspace.Edits.A", "parent": "Workspace.Edits", "count": 3}),
    )
    .await;
    assert_eq!(
        cloned["created"],
        json!([
            "game.Workspace.Edits.A[2]",
            "game.Workspace.Edits.A[3]",
            "game.Workspace.Edits.A[4]"
        ])
    );
    let copy = mcp
        .ok(
            "studio_query",
            json!({"path": "game.Workspace.Edits.A[4]", "properties": ["Color"], "includeAttributes": true}),
        )
        .await;
    assert_eq!(copy["instance"]["attributes"], json!({"Weight": 3}), "{copy}");
    assert_eq!(copy["instance"]["tags"], json!(["Crate"]), "{copy}");
    let after_clone = dump(&mcp).await;
    let undone = mcp.ok("studio_undo", json!({})).await;
    assert_eq!(undone["waypoint"], "studio-bridge: clone");
    assert_eq!(dump(&mcp).await, before, "one undo removes all three copies");
    mcp.ok("studio_redo", json!({})).await;
    assert_eq!(dump(&mcp).await, after_clone, "redo brings the same three back");
    mcp.ok("studio_undo", json!({})).await;

    // selection: get, set, a bad path leaves it as it was.
    let empty = exchange(&mcp, "studio_selection", json!({})).await;
    assert_eq!(empty["selection"], json!([]));
    let set = exchange(
        &mcp,
        "studio_selection",
        json!({"set": ["Workspace.Edits.B", "Workspace.Model.Twin[2]"]}),
    )
    .await;
    let selected = json!(["game.Workspace.Edits.B", "game.Workspace.Model.Twin[2]"]);
    assert_eq!(set["selection"], selected);
    let bad = mcp
        .err(
            "studio_selection",
            json!({"set": ["Workspace.Edits.A", "Workspace.Gone"]}),
        )
        .await;
    assert_eq!(bad["code"], "not_found", "{bad}");
    let kept = mcp.ok("studio_selection", json!({})).await;
    assert_eq!(kept["selection"], selected, "unchanged by the failed set");
    let undone = mcp.ok("studio_undo", json!({})).await;
    assert_eq!(
        undone["waypoint"], "studio-bridge: selection",
        "setting it was one step"
    );
    assert_eq!(dump(&mcp).await, before);

    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

/// A canonical text of the place, made by the plugin's `exec`: every instance in tree order
/// with its class, name, attributes and tags (sorted), and the BasePart values the tests
/// write. Equal dumps mean a failed write left nothing behind.
async fn place_dump(mcp: &Mcp) -> String {
    let out = mcp
        .ok(
            "studio_exec",
            json!({"script": "local out = {}\n\
                local function walk(i, d)\n\
                  local attrs = {}\n\
                  for k, v in i:GetAttributes() do table.insert(attrs, k .. '=' .. tostring(v)) end\n\
                  table.sort(attrs)\n\
                  local tags = i:GetTags()\n\
                  table.sort(tags)\n\
                  local extra = ''\n\
                  if i:IsA('BasePart') then extra = tostring(i.Size) .. ' ' .. tostring(i.Color) .. ' ' .. tostring(i.Material) .. ' ' .. tostring(i.Transparency) end\n\
                  table.insert(out, string.rep(' ', d) .. i.ClassName .. ' ' .. i.Name .. ' [' .. table.concat(attrs, ',') .. '] [' .. table.concat(tags, ',') .. '] ' .. extra)\n\
                  for _, c in i:GetChildren() do walk(c, d + 1) end\n\
                end\n\
                walk(game, 0)\n\
                return table.concat(out, '\\n')"}),
        )
        .await;
    out["returns"][0].as_str().expect("the dump is a string").to_owned()
}

#[tokio::test]
async fn create_and_update_are_all_or_nothing_with_the_real_plugin() {
    let (rbxm, mcp, _studio) = support::studio::edit_studio().await;
    // Lune creates a service on its first GetService (Studio has them all from the start):
    // touch the two the undo history uses, so that dumps compare the place alone.
    mcp.ok("studio_undo", json!({})).await;
    mcp.ok("studio_selection", json!({})).await;
    let before = place_dump(&mcp).await;

    // Three items, the third with a property Part does not have: nothing is created.
    let items = json!([
        {"className": "Model", "parent": "Workspace", "name": "Tower"},
        {"className": "Part", "parent": "Workspace.Tower", "name": "Base",
         "properties": {"Size": [4, 1, 4], "Color": "#ff0000", "Material": "Neon", "Anchored": true},
         "attributes": {"Floor": 1, "Label": "ground"}, "tags": ["Building"]},
        {"className": "Part", "parent": "Workspace.Tower", "name": "Top", "properties": {"Colour": [0, 0, 1]}},
    ]);
    let args = json!({"items": items});
    let failed = mcp.call("studio_create", args.clone()).await;
    eprintln!(
        "--> {}\n<-- {}",
        json!({"method": "tools/call", "params": {"name": "studio_create", "arguments": args}}),
        serde_json::to_string(&failed).unwrap()
    );
    let error = mcp.err("studio_create", args).await;
    assert_eq!(error["code"], "invalid_args", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("item 3") && message.contains("properties.Colour"),
        "{message}"
    );
    assert_eq!(
        place_dump(&mcp).await,
        before,
        "a refused create leaves the place as it was"
    );

    // The same three with the third fixed: all created, in order.
    let mut items = items;
    items[2]["properties"] = json!({"Color": [0, 0, 1]});
    let created = exchange(&mcp, "studio_create", json!({"items": items})).await;
    assert_eq!(
        created["created"],
        json!([
            "game.Workspace.Tower",
            "game.Workspace.Tower.Base",
            "game.Workspace.Tower.Top"
        ]),
        "{created}"
    );
    let base = mcp
        .ok(
            "studio_query",
            json!({"path": "Workspace.Tower.Base", "properties": ["Size", "Color", "Material", "Anchored"], "includeAttributes": true}),
        )
        .await;
    let props = &base["instance"]["properties"];
    assert_eq!(props["Size"], json!({"type": "Vector3", "value": [4, 1, 4]}));
    assert_eq!(props["Color"], json!({"type": "Color3", "value": [1, 0, 0]}));
    assert_eq!(props["Material"]["value"]["name"], "Neon");
    assert_eq!(props["Anchored"], true);
    assert_eq!(base["instance"]["attributes"], json!({"Floor": 1, "Label": "ground"}));
    assert_eq!(base["instance"]["tags"], json!(["Building"]));

    // update: an attribute removed by null, tags added and removed, renamed then moved.
    let after_create = place_dump(&mcp).await;
    let bad = mcp
        .err(
            "studio_update",
            json!({"items": [
                {"path": "Workspace.Tower.Base", "properties": {"Transparency": 0.5}},
                {"path": "Workspace.Tower.Top", "properties": {"Anchored": "yes"}},
            ]}),
        )
        .await;
    assert_eq!(bad["code"], "invalid_args", "{bad}");
    let message = bad["message"].as_str().unwrap();
    assert!(
        message.contains("item 2") && message.contains("properties.Anchored"),
        "{message}"
    );
    assert_eq!(place_dump(&mcp).await, after_create, "a refused update changes nothing");

    let updated = exchange(
        &mcp,
        "studio_update",
        json!({"items": [{
            "path": "Workspace.Tower.Base",
            "attributes": {"Label": null, "Level": 2},
            "tags": {"add": ["Stone"], "remove": ["Building"]},
            "name": "Plinth",
            "parent": "Workspace",
        }]}),
    )
    .await;
    assert_eq!(updated["updated"], json!(["game.Workspace.Plinth"]), "{updated}");
    let plinth = mcp
        .ok(
            "studio_query",
            json!({"path": "Workspace.Plinth", "includeAttributes": true}),
        )
        .await;
    assert_eq!(plinth["instance"]["attributes"], json!({"Floor": 1, "Level": 2}));
    assert_eq!(plinth["instance"]["tags"], json!(["Stone"]));
    let tower = mcp
        .ok("studio_query", json!({"path": "Workspace.Tower", "children": true}))
        .await;
    assert_eq!(tower["instance"]["childCount"], 1, "Base moved out of the Tower");

    // One undo reverts the whole update, the next the whole create; redo brings each back.
    let after_update = place_dump(&mcp).await;
    let undone = mcp.ok("studio_undo", json!({})).await;
    assert_eq!(undone["waypoint"], "studio-bridge: update", "{undone}");
    assert_eq!(
        place_dump(&mcp).await,
        after_create,
        "one undo reverts the whole update"
    );
    let undone = mcp.ok("studio_undo", json!({})).await;
    assert_eq!(undone["waypoint"], "studio-bridge: create", "{undone}");
    assert_eq!(place_dump(&mcp).await, before, "one undo reverts the whole create");
    mcp.ok("studio_redo", json!({})).await;
    assert_eq!(place_dump(&mcp).await, after_create, "redo brings the create back");
    mcp.ok("studio_redo", json!({})).await;
    assert_eq!(place_dump(&mcp).await, after_update, "redo brings the update back");

    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

/// One row per DataType that some property holds (PROTOCOL.md, Values): written by `create`
/// in the shorthand the property's type decides, read back by `query` in the typed form, then
/// written again by `update` in the typed form of another value and read back. Vector2int16,
/// Vector3int16, Region3, Region3int16 and DateTime have no property scriptable from Luau in
/// the API dump (TerrainRegion.ExtentsMin is in saved files only; the host refuses it), so
/// Codec.spec.luau holds their rows.
#[tokio::test]
async fn every_property_data_type_round_trips_through_create_update_and_query() {
    let (rbxm, mcp, _studio) = support::studio::edit_studio().await;
    // (class, property, shorthand for create, typed form create gives, typed form for update)
    let rows = [
        (
            "Part",
            "Size",
            json!([2, 3, 4]),
            json!({"type": "Vector3", "value": [2, 3, 4]}),
            json!({"type": "Vector3", "value": [5, 6, 7]}),
        ),
        (
            "ImageLabel",
            "ImageRectOffset",
            json!([1, 2]),
            json!({"type": "Vector2", "value": [1, 2]}),
            json!({"type": "Vector2", "value": [3, 4]}),
        ),
        (
            "Part",
            "CFrame",
            json!([1, 2, 3]),
            json!({"type": "CFrame", "value": [1, 2, 3, 1, 0, 0, 0, 1, 0, 0, 0, 1]}),
            json!({"type": "CFrame", "value": [4, 5, 6, 0, -1, 0, 1, 0, 0, 0, 0, 1]}),
        ),
        (
            "Part",
            "Color",
            json!("#00ff00"),
            json!({"type": "Color3", "value": [0, 1, 0]}),
            json!({"type": "Color3", "value": [1, 0, 0]}),
        ),
        (
            "BrickColorValue",
            "Value",
            json!("Bright red"),
            json!({"type": "BrickColor", "value": {"number": 21, "name": "Bright red"}}),
            json!({"type": "BrickColor", "value": {"number": 23, "name": "Bright blue"}}),
        ),
        (
            "UIListLayout",
            "Padding",
            json!([0.5, 4]),
            json!({"type": "UDim", "value": [0.5, 4]}),
            json!({"type": "UDim", "value": [0, 8]}),
        ),
        (
            "Frame",
            "Size",
            json!([0.5, 10, 0.25, 20]),
            json!({"type": "UDim2", "value": [0.5, 10, 0.25, 20]}),
            json!({"type": "UDim2", "value": [1, 0, 1, 0]}),
        ),
        (
            "ImageLabel",
            "SliceCenter",
            json!([1, 2, 3, 4]),
            json!({"type": "Rect", "value": [1, 2, 3, 4]}),
            json!({"type": "Rect", "value": [0, 0, 8, 8]}),
        ),
        (
            "ParticleEmitter",
            "Lifetime",
            json!([1, 2]),
            json!({"type": "NumberRange", "value": [1, 2]}),
            json!({"type": "NumberRange", "value": [3, 3]}),
        ),
        (
            "ParticleEmitter",
            "Size",
            json!([[0, 1, 0], [1, 2, 0]]),
            json!({"type": "NumberSequence", "value": [[0, 1, 0], [1, 2, 0]]}),
            json!({"type": "NumberSequence", "value": [[0, 0.5, 0], [1, 0.5, 0]]}),
        ),
        (
            "ParticleEmitter",
            "Color",
            json!([[0, 1, 0, 0], [1, 0, 0, 1]]),
            json!({"type": "ColorSequence", "value": [[0, 1, 0, 0], [1, 0, 0, 1]]}),
            json!({"type": "ColorSequence", "value": [[0, 0, 1, 0], [1, 0, 1, 0]]}),
        ),
        (
            "Part",
            "Material",
            json!("Neon"),
            json!({"type": "EnumItem", "value": {"enum": "Material", "name": "Neon", "value": 288}}),
            json!({"type": "EnumItem", "value": {"enum": "Material", "name": "Wood", "value": 512}}),
        ),
        (
            "ObjectValue",
            "Value",
            json!("Workspace.Baseplate"),
            json!({"type": "Instance", "value": {"path": "game.Workspace.Baseplate", "className": "Part"}}),
            json!({"type": "Instance", "value": {"path": "game.Workspace", "className": "Workspace"}}),
        ),
        (
            "TextLabel",
            "FontFace",
            json!({"family": "rbxasset://fonts/families/Arial.json", "weight": "Bold"}),
            json!({"type": "Font", "value": {"family": "rbxasset://fonts/families/Arial.json", "weight": "Bold", "style": "Normal"}}),
            json!({"type": "Font", "value": {"family": "rbxasset://fonts/families/Arial.json", "weight": "Light", "style": "Italic"}}),
        ),
        (
            "Part",
            "CustomPhysicalProperties",
            json!({"type": "PhysicalProperties", "value": {"density": 2, "friction": 0.5, "elasticity": 0.25, "frictionWeight": 1, "elasticityWeight": 1}}),
            json!({"type": "PhysicalProperties", "value": {"density": 2, "friction": 0.5, "elasticity": 0.25, "frictionWeight": 1, "elasticityWeight": 1}}),
            json!({"type": "PhysicalProperties", "value": {"density": 1, "friction": 0.25, "elasticity": 0.5, "frictionWeight": 2, "elasticityWeight": 2}}),
        ),
        (
            "RayValue",
            "Value",
            json!({"origin": [1, 2, 3], "direction": [0, -1, 0]}),
            json!({"type": "Ray", "value": {"origin": [1, 2, 3], "direction": [0, -1, 0]}}),
            json!({"type": "Ray", "value": {"origin": [0, 0, 0], "direction": [1, 0, 0]}}),
        ),
        (
            "Handles",
            "Faces",
            json!(["Top", "Front"]),
            json!({"type": "Faces", "value": ["Top", "Front"]}),
            json!({"type": "Faces", "value": ["Left"]}),
        ),
        (
            "ArcHandles",
            "Axes",
            json!(["X", "Z"]),
            json!({"type": "Axes", "value": ["X", "Z"]}),
            json!({"type": "Axes", "value": ["Y"]}),
        ),
        (
            "ImageLabel",
            "ImageContent",
            json!("rbxassetid://123"),
            json!({"type": "Content", "value": {"sourceType": "Uri", "uri": "rbxassetid://123"}}),
            json!({"type": "Content", "value": {"sourceType": "Uri", "uri": "rbxassetid://456"}}),
        ),
    ];
    let items: Vec<_> = rows
        .iter()
        .enumerate()
        .map(|(i, (class, property, shorthand, _, _))| {
            json!({"className": class, "parent": "Workspace", "name": format!("Row{i}"), "properties": {*property: shorthand}})
        })
        .collect();
    let created = exchange(&mcp, "studio_create", json!({"items": items})).await;
    assert_eq!(created["created"].as_array().unwrap().len(), rows.len(), "{created}");
    let read = |i: usize, property: &'static str| {
        let mcp = &mcp;
        async move {
            let out = mcp
                .ok(
                    "studio_query",
                    json!({"path": format!("Workspace.Row{i}"), "properties": [property]}),
                )
                .await;
            out["instance"]["properties"][property].clone()
        }
    };
    for (i, (class, property, _, typed, _)) in rows.iter().enumerate() {
        assert_eq!(&read(i, property).await, typed, "create {class}.{property}");
    }
    let items: Vec<_> = rows
        .iter()
        .enumerate()
        .map(|(i, (_, property, _, _, next))| json!({"path": format!("Workspace.Row{i}"), "properties": {*property: next}}))
        .collect();
    let updated = exchange(&mcp, "studio_update", json!({"items": items})).await;
    assert_eq!(updated["updated"].as_array().unwrap().len(), rows.len(), "{updated}");
    for (i, (class, property, _, _, next)) in rows.iter().enumerate() {
        assert_eq!(&read(i, property).await, next, "update {class}.{property}");
    }
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

#[tokio::test]
async fn insert_asset_is_answered_by_the_real_plugin_and_one_undo_removes_it() {
    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn_paired(port, &[]).await;
    let crate_file = support::lune::repo().join("tests/lune/assets/Crate.rbxmx");
    let asset = format!("4242={}", crate_file.display());
    let mut studio = HeadlessStudio::start_with(port, &rbxm, "edit", &["--asset", &asset]);
    studio
        .wait_for_line("[harness] connected context=edit", Duration::from_secs(30))
        .await;
    // Nothing to undo yet; this also brings ChangeHistoryService into the DataModel, as in Studio.
    assert_eq!(mcp.ok("studio_undo", json!({})).await["done"], 0);
    let before = dump(&mcp).await;

    // By id, served from the model file by the test Studio's InsertService: the asset itself
    // (not LoadAsset's wrapper Model) under the parent, its script listed, its pivot moved.
    let inserted = exchange(
        &mcp,
        "studio_insert_asset",
        json!({"assetId": 4242, "parent": "Workspace", "position": [10, 20, 30]}),
    )
    .await;
    assert_eq!(inserted["inserted"], json!(["game.Workspace.Crate"]), "{inserted}");
    assert_eq!(
        inserted["scripts"],
        json!(["game.Workspace.Crate.Box.Open"]),
        "{inserted}"
    );
    assert_eq!(inserted["assetId"], 4242);
    assert_eq!(inserted["context"], "edit");
    let pivot = run_luau(
        &mcp,
        "local p = workspace.Crate:GetPivot().Position\nreturn {p.X, p.Y, p.Z, workspace.Crate.Box.Open.Source}",
    )
    .await;
    assert_eq!(pivot, json!([10, 20, 30, "print(\"the crate opens\")"]));
    let after = dump(&mcp).await;
    assert_ne!(after, before);

    // One undo removes the whole insert; redo brings it back.
    let undone = exchange(&mcp, "studio_undo", json!({})).await;
    assert_eq!(undone["done"], 1);
    assert_eq!(undone["waypoint"], "studio-bridge: insert_asset");
    assert_eq!(dump(&mcp).await, before, "one undo removes the insert");
    mcp.ok("studio_redo", json!({})).await;
    assert_eq!(dump(&mcp).await, after, "redo puts the same crate back");
    mcp.ok("studio_undo", json!({})).await;

    // A query inserts the first free model the search finds.
    let found = exchange(&mcp, "studio_insert_asset", json!({"query": "crate"})).await;
    assert_eq!(found["assetId"], 4242, "{found}");
    assert_eq!(found["inserted"], json!(["game.Workspace.Crate"]));
    mcp.ok("studio_undo", json!({})).await;

    // Refusals name the field or the asset, and leave nothing behind.
    let both = mcp
        .err("studio_insert_asset", json!({"assetId": 4242, "query": "crate"}))
        .await;
    assert_eq!(both["code"], "invalid_args", "{both}");
    let text = both["message"].as_str().unwrap_or_default();
    assert!(text.contains("`assetId`") && text.contains("`query`"), "{both}");
    let unknown = mcp.err("studio_insert_asset", json!({"assetId": 777})).await;
    assert_eq!(unknown["code"], "not_found", "{unknown}");
    assert!(
        unknown["message"].as_str().unwrap_or_default().contains("777"),
        "{unknown}"
    );
    let nowhere = mcp
        .err(
            "studio_insert_asset",
            json!({"assetId": 4242, "parent": "Workspace.Nope"}),
        )
        .await;
    assert_eq!(nowhere["code"], "not_found", "{nowhere}");
    assert_eq!(dump(&mcp).await, before, "nothing inserted");
    let none = mcp.ok("studio_undo", json!({})).await;
    assert_eq!(none["done"], 0, "refusals left no undo step: {none}");

    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

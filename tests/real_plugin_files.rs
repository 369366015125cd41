//! Your files and Studio as one (issue 30; TOOLS.md, "Your files"): the real plugin under
//! Lune, driven by the real `studio-bridge mcp` given the sourcemap of the Rojo project in
//! tests/fixtures/rojo-place (see its README), with the project's scripts put in Studio as
//! a sync tool would.
//!
//! - Every mapped script's path in a result carries its file (script_read, find and
//!   script_search matches, create and update paths); a script the map does not know, none.
//! - An error raised in a required ModuleScript during exec, and a game script's error
//!   during test_run, carry locations with the right file and line.
//! - script_edit of a mapped script is refused (`file_backed`, naming the file) with nothing
//!   written; `force` writes.
//! - A change to the sourcemap is seen by the next call; two `mcp` processes on one bridge
//!   each name the files of their own sourcemap.
//! - `studio-bridge logs` prints `file:line:` for a line that names a mapped script.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value as Json, json};
use support::free_port;
use support::lune::HeadlessStudio;
use support::mcp_client::{Mcp, binary, paired_config_dir};
use support::studio::{exchange, installed_plugin, wait_for_contexts};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rojo-place")
}

fn source(file: &str) -> String {
    std::fs::read_to_string(fixture().join(file)).expect("a fixture file")
}

/// The fixture's sourcemap, copied into a folder of this test's own (so that it can be
/// changed), and that folder.
fn sourcemap_copy(name: &str) -> (PathBuf, PathBuf) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("files-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sourcemap.json");
    std::fs::copy(fixture().join("sourcemap.json"), &path).expect("the fixture's sourcemap");
    (dir, path)
}

/// The plugin in a headless Studio in Edit and an `mcp` host given `sourcemap`.
async fn studio_with(sourcemap: &Path) -> (PathBuf, Mcp, HeadlessStudio, u16) {
    let rbxm = installed_plugin().await;
    let port = free_port();
    let map = sourcemap.to_str().unwrap();
    let mcp = Mcp::spawn_paired(port, &["--sourcemap", map]).await;
    let mut studio = HeadlessStudio::start(port, &rbxm, "edit");
    studio
        .wait_for_line("[harness] connected context=edit", Duration::from_secs(30))
        .await;
    (rbxm, mcp, studio, port)
}

/// The project's scripts put in Studio as the sync tool would (the fixture's sources), and
/// one script of Studio's own that the map does not know. Returns `create`'s result.
async fn sync_project(mcp: &Mcp, with_faulty: bool) -> Json {
    let mut items = vec![
        json!({"className": "Folder", "parent": "ReplicatedStorage", "name": "Common"}),
        json!({"className": "ModuleScript", "parent": "ReplicatedStorage.Common", "name": "Util",
               "source": source("src/shared/Util.luau")}),
        json!({"className": "ModuleScript", "parent": "ReplicatedStorage.Common", "name": "Boom",
               "source": source("src/shared/Boom.luau")}),
        json!({"className": "Script", "parent": "ServerScriptService", "name": "Boot",
               "source": source("src/server/Boot.server.luau")}),
        json!({"className": "Script", "parent": "ServerScriptService", "name": "Local",
               "source": "print('a script of Studio\\'s own')\n"}),
    ];
    if with_faulty {
        items.push(
            json!({"className": "Script", "parent": "ServerScriptService", "name": "Faulty",
                          "source": source("src/server/Faulty.server.luau")}),
        );
    }
    exchange(mcp, "studio_create", json!({ "items": items })).await
}

#[tokio::test]
async fn mapped_scripts_carry_their_files_and_edits_of_them_are_refused() {
    let (dir, sourcemap) = sourcemap_copy("results");
    let (rbxm, mcp, _studio, port) = studio_with(&sourcemap).await;

    let created = sync_project(&mcp, false).await;
    assert_eq!(
        created["files"],
        json!({
            "game.ReplicatedStorage.Common.Util": "src/shared/Util.luau",
            "game.ReplicatedStorage.Common.Boom": "src/shared/Boom.luau",
            "game.ServerScriptService.Boot": "src/server/Boot.server.luau",
        }),
        "mapped scripts only: not the folder, not Studio's own script: {created}"
    );

    // script_read: the file beside the path, for a mapped script only.
    let read = exchange(
        &mcp,
        "studio_script_read",
        json!({"path": "game.ServerScriptService.Boot"}),
    )
    .await;
    assert_eq!(read["file"], "src/server/Boot.server.luau", "{read}");
    assert_eq!(
        read["source"].as_str().unwrap().trim_end(),
        source("src/server/Boot.server.luau").trim_end()
    );
    let own = mcp
        .ok("studio_script_read", json!({"path": "ServerScriptService.Local"}))
        .await;
    assert_eq!(own.get("file"), None, "{own}");

    // Several mcp processes on one bridge: each annotates with its own sourcemap (a second
    // agent in another checkout of the project, joined as a peer).
    let other = dir.join("other-sourcemap.json");
    std::fs::write(
        &other,
        std::fs::read_to_string(&sourcemap)
            .unwrap()
            .replace("src/server/Boot.server.luau", "checkout-2/src/server/Boot.server.luau"),
    )
    .unwrap();
    let peer = Mcp::spawn_paired(port, &["--sourcemap", other.to_str().unwrap()]).await;
    let theirs = peer
        .ok("studio_script_read", json!({"path": "game.ServerScriptService.Boot"}))
        .await;
    assert_eq!(theirs["file"], "checkout-2/src/server/Boot.server.luau", "{theirs}");
    let ours = mcp
        .ok("studio_script_read", json!({"path": "game.ServerScriptService.Boot"}))
        .await;
    assert_eq!(ours["file"], "src/server/Boot.server.luau", "{ours}");
    drop(peer);

    // find and script_search matches.
    let found = mcp
        .ok("studio_find", json!({"root": "game", "className": "Script"}))
        .await;
    let files: Vec<(String, Option<String>)> = found["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["path"].as_str().unwrap().to_owned(),
                m["file"].as_str().map(str::to_owned),
            )
        })
        .collect();
    assert!(
        files.contains(&(
            "game.ServerScriptService.Boot".into(),
            Some("src/server/Boot.server.luau".into())
        )),
        "{found}"
    );
    assert!(
        files.contains(&("game.ServerScriptService.Local".into(), None)),
        "{found}"
    );
    let searched = mcp.ok("studio_script_search", json!({"query": "explode"})).await;
    let matches = searched["matches"].as_array().unwrap();
    assert!(!matches.is_empty(), "{searched}");
    for m in matches {
        assert_eq!(m["path"], "game.ReplicatedStorage.Common.Boom", "{searched}");
        assert_eq!(m["file"], "src/shared/Boom.luau", "{searched}");
    }

    // update's paths.
    let updated = mcp
        .ok(
            "studio_update",
            json!({"items": [{"path": "ReplicatedStorage.Common.Util", "attributes": {"Seen": true}},
                             {"path": "ServerScriptService.Local", "attributes": {"Seen": true}}]}),
        )
        .await;
    assert_eq!(
        updated["files"],
        json!({"game.ReplicatedStorage.Common.Util": "src/shared/Util.luau"}),
        "{updated}"
    );

    // An error raised in a required ModuleScript during exec names the module's file and line.
    let failed = exchange(
        &mcp,
        "studio_exec",
        json!({"script": "local Boom = require(game.ReplicatedStorage.Common.Boom)\nBoom.explode()"}),
    )
    .await;
    assert_eq!(failed["success"], false, "{failed}");
    assert_eq!(
        failed["error"], "ReplicatedStorage.Common.Boom:4: kaboom from a module",
        "Luau's message as Studio gives it"
    );
    assert_eq!(
        failed["locations"],
        json!([{"path": "game.ReplicatedStorage.Common.Boom", "line": 4, "file": "src/shared/Boom.luau"}]),
        "{failed}"
    );
    let own_error = mcp.ok("studio_exec", json!({"script": "error('mine')"})).await;
    assert_eq!(own_error.get("locations"), None, "the chunk is no script: {own_error}");

    // script_edit of a mapped script: refused naming the file, nothing written; force writes.
    let refused = mcp
        .err(
            "studio_script_edit",
            json!({"path": "game.ServerScriptService.Boot", "source": "print('edited in Studio')\n"}),
        )
        .await;
    eprintln!("script_edit refused: {refused}");
    assert_eq!(refused["code"], "file_backed", "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("edit src/server/Boot.server.luau instead"),
        "{message}"
    );
    assert!(message.contains("force: true"), "{message}");
    let unchanged = mcp
        .ok("studio_script_read", json!({"path": "game.ServerScriptService.Boot"}))
        .await;
    assert_eq!(unchanged["hash"], read["hash"], "nothing was written");
    let forced = mcp
        .ok(
            "studio_script_edit",
            json!({"path": "game.ServerScriptService.Boot", "source": "print('edited in Studio')\n", "force": true}),
        )
        .await;
    assert_ne!(forced["hash"], read["hash"], "{forced}");
    let after = mcp
        .ok("studio_script_read", json!({"path": "game.ServerScriptService.Boot"}))
        .await;
    assert_eq!(
        after["source"].as_str().unwrap().trim_end(),
        "print('edited in Studio')"
    );
    // A script the map does not know is edited as before.
    mcp.ok(
        "studio_script_edit",
        json!({"path": "ServerScriptService.Local", "source": "print('mine')\n"}),
    )
    .await;

    // A change to the sourcemap is seen by the next call: Boot now comes from another file.
    let text = std::fs::read_to_string(&sourcemap).unwrap();
    let renamed = text.replace("src/server/Boot.server.luau", "src/server/Entry.server.luau");
    assert_ne!(renamed, text, "the fixture maps Boot");
    std::fs::write(&sourcemap, renamed).unwrap();
    let reread = mcp
        .ok("studio_script_read", json!({"path": "game.ServerScriptService.Boot"}))
        .await;
    assert_eq!(reread["file"], "src/server/Entry.server.luau", "{reread}");
    // A sourcemap that no longer parses: the map read before is kept.
    std::fs::write(&sourcemap, "{ \"name\": ").unwrap();
    let kept = mcp
        .ok("studio_script_read", json!({"path": "game.ServerScriptService.Boot"}))
        .await;
    assert_eq!(kept["file"], "src/server/Entry.server.luau", "{kept}");
    // No sourcemap: no files, and script_edit writes.
    std::fs::remove_file(&sourcemap).unwrap();
    let gone = mcp
        .ok("studio_script_read", json!({"path": "game.ServerScriptService.Boot"}))
        .await;
    assert_eq!(gone.get("file"), None, "{gone}");
    mcp.ok(
        "studio_script_edit",
        json!({"path": "game.ServerScriptService.Boot", "source": "print('no map')\n"}),
    )
    .await;

    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

/// The locations a log entry carries, as (path, line, file).
fn locations_of(entry: &Json) -> Vec<(String, u64, Option<String>)> {
    entry["locations"]
        .as_array()
        .map(|all| {
            all.iter()
                .map(|l| {
                    (
                        l["path"].as_str().unwrap().to_owned(),
                        l["line"].as_u64().unwrap(),
                        l["file"].as_str().map(str::to_owned),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_game_scripts_error_in_test_run_and_in_logs_names_its_file_and_line() {
    let (dir, sourcemap) = sourcemap_copy("errors");
    let (rbxm, mcp, _studio, port) = studio_with(&sourcemap).await;
    sync_project(&mcp, true).await;

    // The test's server runs Faulty (it errors at line 3, called from line 6); the test's
    // script raises in a required module.
    let ran = exchange(
        &mcp,
        "studio_test_run",
        json!({"script": "task.wait(0.5)\nrequire(game.ReplicatedStorage.Common.Boom).explode()"}),
    )
    .await;
    assert_eq!(ran["success"], false, "{ran}");
    assert_eq!(
        ran["locations"],
        json!([{"path": "game.ReplicatedStorage.Common.Boom", "line": 4, "file": "src/shared/Boom.luau"}]),
        "{ran}"
    );
    let logs = ran["logs"].as_array().expect("logs");
    let faulty = "src/server/Faulty.server.luau";
    let error = logs
        .iter()
        .find(|l| l["level"] == "Error" && l["body"].as_str().unwrap().starts_with("ServerScriptService.Faulty:3:"))
        .unwrap_or_else(|| panic!("the game script's error line: {logs:?}"));
    assert_eq!(error["context"], "server");
    assert_eq!(
        locations_of(error),
        [("game.ServerScriptService.Faulty".to_owned(), 3, Some(faulty.to_owned()))]
    );
    // Its stack, innermost first, each line located.
    let stack: Vec<(u64, Option<String>)> = logs
        .iter()
        .filter(|l| {
            l["level"] == "Info"
                && l["body"]
                    .as_str()
                    .unwrap()
                    .starts_with("Script 'ServerScriptService.Faulty'")
        })
        .flat_map(locations_of)
        .map(|(_, line, file)| (line, file))
        .collect();
    assert_eq!(
        stack,
        [(3, Some(faulty.to_owned())), (6, Some(faulty.to_owned()))],
        "{logs:?}"
    );
    for line in logs
        .iter()
        .filter(|l| !l["body"].as_str().unwrap().contains("ServerScriptService."))
    {
        assert_eq!(line.get("locations"), None, "{line}");
    }

    // In a playtest the server's own log holds the same lines; the CLI prints file:line.
    mcp.ok("studio_play", json!({"mode": "start"})).await;
    wait_for_contexts(&mcp, &["edit", "server", "client"], "the playtest came up").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let entries = loop {
        let read = mcp
            .ok("studio_logs", json!({"context": "server", "levels": ["Error", "Info"]}))
            .await;
        let entries = read["entries"].as_array().unwrap().clone();
        if entries.iter().any(|e| e["body"] == "Stack End") {
            break entries;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no stack in the server's log: {read}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let error = entries
        .iter()
        .find(|e| e["level"] == "Error")
        .unwrap_or_else(|| panic!("{entries:?}"));
    assert_eq!(
        locations_of(error),
        [("game.ServerScriptService.Faulty".to_owned(), 3, Some(faulty.to_owned()))]
    );
    let cli = tokio::process::Command::new(binary())
        .args([
            "logs",
            "--context",
            "server",
            "--levels",
            "Error,Info",
            "--port",
            &port.to_string(),
        ])
        .arg("--sourcemap")
        .arg(&sourcemap)
        .env("STUDIO_BRIDGE_CONFIG_DIR", paired_config_dir())
        .env("NO_COLOR", "1")
        .output()
        .await
        .expect("run the CLI");
    let stdout = String::from_utf8_lossy(&cli.stdout);
    eprintln!("$ studio-bridge logs --context server --levels Error,Info\n{stdout}");
    assert!(cli.status.success(), "{}", String::from_utf8_lossy(&cli.stderr));
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with(&format!("{faulty}:3: [Error] ServerScriptService.Faulty:3:"))),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l == format!("{faulty}:6: [Info] Script 'ServerScriptService.Faulty', Line 6")),
        "{stdout}"
    );
    assert!(stdout.lines().any(|l| l == "[Info] Stack Begin"), "{stdout}");
    mcp.ok("studio_play", json!({"mode": "stop"})).await;

    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

//! Studio from outside (#47): `studio_open` → session → work → `studio_close`, `run`'s exit
//! codes, the refusals, and process identity, against a stand-in Studio executable
//! (tests/stand_in_studio/main.rs) that takes Studio's documented command line strictly and
//! starts the Lune test Studio with the installed plugin on the place (TESTING.md layer 5).
//! Unix-only: the stand-in quits on SIGTERM as Studio does there.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value as Json, json};

use crate::support::free_port;
use crate::support::lune::{HeadlessStudio, lune};
use crate::support::mcp_client::{Mcp, binary, paired_config_dir};
use crate::support::studio::installed_plugin;

/// The stand-in Studio, built by `cargo test` beside the binary (an example target).
fn stand_in() -> PathBuf {
    let exe = Path::new(binary())
        .parent()
        .expect("target dir")
        .join("examples")
        .join("stand_in_studio");
    assert!(
        exe.is_file(),
        "{} is missing: `cargo test` builds it (or `cargo build --example stand_in_studio`)",
        exe.display()
    );
    exe
}

/// A test's own world: a config directory holding the paired secret (and its own list of
/// opened Studios), a folder for place files, the port, and the installed plugin.
struct World {
    config: PathBuf,
    dir: PathBuf,
    port: u16,
    rbxm: PathBuf,
    args_log: PathBuf,
}

impl World {
    async fn new(name: &str) -> World {
        let rbxm = installed_plugin().await;
        let port = free_port();
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("launch-{name}-{}-{port}", std::process::id()));
        let config = root.join("config");
        let dir = root.join("places");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(paired_config_dir().join("plugin-secret"), config.join("plugin-secret")).unwrap();
        World {
            args_log: root.join("stand-in-args.log"),
            config,
            dir,
            port,
            rbxm,
        }
    }

    /// The environment that makes studio-bridge start the stand-in, and the stand-in reach
    /// this test's bridge with the installed plugin.
    fn env(&self, mode: Option<&str>) -> Vec<(String, Option<String>)> {
        vec![
            ("STUDIO_BRIDGE_STUDIO".into(), Some(stand_in().display().to_string())),
            ("STUDIO_BRIDGE_STAND_IN_PORT".into(), Some(self.port.to_string())),
            (
                "STUDIO_BRIDGE_STAND_IN_RBXM".into(),
                Some(self.rbxm.display().to_string()),
            ),
            (
                "STUDIO_BRIDGE_STAND_IN_ARGS".into(),
                Some(self.args_log.display().to_string()),
            ),
            ("LUNE".into(), Some(lune().display().to_string())),
            ("STUDIO_BRIDGE_STAND_IN_MODE".into(), mode.map(str::to_owned)),
        ]
    }

    async fn mcp(&self, mode: Option<&str>, extra: &[&str]) -> Mcp {
        let env = self.env(mode);
        let env: Vec<(&str, Option<&str>)> = env.iter().map(|(k, v)| (k.as_str(), v.as_deref())).collect();
        Mcp::spawn_in_config_dir_with_env(self.port, extra, &self.config, &env).await
    }

    /// A place file with `Workspace.Door` (a Part), written as Studio writes .rbxl.
    fn place(&self, name: &str) -> PathBuf {
        use rbx_dom_weak::{InstanceBuilder, WeakDom};
        let mut dom = WeakDom::new(InstanceBuilder::new("DataModel"));
        let root = dom.root_ref();
        let workspace = dom.insert(root, InstanceBuilder::new("Workspace").with_name("Workspace"));
        dom.insert(workspace, InstanceBuilder::new("Part").with_name("Door"));
        let top = dom.root().children().to_vec();
        let path = self.dir.join(name);
        let mut file = std::fs::File::create(&path).unwrap();
        rbx_binary::to_writer(&mut file, &dom, &top).unwrap();
        std::fs::canonicalize(path).unwrap()
    }

    fn stand_in_args(&self) -> String {
        std::fs::read_to_string(&self.args_log).unwrap_or_default()
    }
}

fn lock_of(place: &Path) -> PathBuf {
    PathBuf::from(format!("{}.lock", place.display()))
}

fn alive(pid: u64) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // A zombie (state Z, after the name in parentheses) has exited.
    !stat.is_empty() && !stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z'))
}

async fn opened(mcp: &Mcp) -> Vec<Json> {
    let sessions = mcp.ok("studio_sessions", json!({})).await;
    sessions["opened"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn open_then_work_then_close_and_unsaved_work_is_refused() {
    let world = World::new("open").await;
    let mcp = world.mcp(None, &[]).await;
    let place = world.place("Open Me.rbxl");

    let open =
        crate::support::studio::exchange(&mcp, "studio_open", json!({"file": place.display().to_string()})).await;
    let session_id = open["session"]["sessionId"].as_str().expect("a session").to_owned();
    let pid = open["pid"].as_u64().unwrap();
    assert_eq!(open["session"]["context"], "edit");
    assert!(alive(pid));
    assert_eq!(
        world.stand_in_args().trim(),
        format!("--task EditFile --localPlaceFile {}", place.display()),
        "Studio's documented arguments, and only those"
    );
    assert!(lock_of(&place).exists(), "the stand-in holds the place's lock");
    let listed = opened(&mcp).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["status"], "connected");
    assert_eq!(listed[0]["sessionId"], session_id.as_str());

    // The session is the place's: its Door is there.
    let found = mcp
        .ok(
            "studio_exec",
            json!({"sessionId": session_id, "script": "return workspace:FindFirstChild('Door') ~= nil"}),
        )
        .await;
    assert_eq!(found["returns"], json!([true]), "{found}");

    // A change since the open: the close refuses to lose it, and nothing is closed.
    mcp.ok(
        "studio_create",
        json!({"sessionId": session_id, "items": [{"className": "Part", "parent": "Workspace", "name": "New"}]}),
    )
    .await;
    let refused = mcp.err("studio_close", json!({"sessionId": session_id})).await;
    assert_eq!(refused["code"], "conflict", "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("discard"), "{refused}");
    assert!(alive(pid), "a refused close touches nothing");

    let closed =
        crate::support::studio::exchange(&mcp, "studio_close", json!({"sessionId": session_id, "discard": true})).await;
    assert_eq!(closed["how"], "quit", "the stand-in quits on SIGTERM: {closed}");
    assert_eq!(closed["discarded"], true);
    assert!(!alive(pid), "the Studio it opened is gone");
    assert!(!lock_of(&place).exists(), "the place's lock went with it");
    assert_eq!(opened(&mcp).await, Vec::<Json>::new(), "nothing is left recorded");
}

#[tokio::test]
async fn a_studio_studio_bridge_did_not_open_is_never_touched() {
    let world = World::new("identity").await;
    let mcp = world.mcp(None, &[]).await;
    // A person's Studio: the same plugin, started by no one but the test.
    let mut theirs = HeadlessStudio::start(world.port, &world.rbxm, "edit");
    theirs
        .wait_for_line("[harness] connected context=edit", Duration::from_secs(30))
        .await;
    let sessions = mcp.ok("studio_sessions", json!({})).await;
    let their_session = sessions["sessions"][0]["sessionId"].as_str().unwrap().to_owned();

    let refused = mcp.err("studio_close", json!({"sessionId": their_session})).await;
    assert_eq!(refused["code"], "not_found", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("closes only the Studios it opened"),
        "{refused}"
    );
    let none = mcp.err("studio_close", json!({})).await;
    assert_eq!(none["code"], "not_found", "{none}");

    // A record whose process id now names another program (another start time): the
    // program is left alone, and the record is forgotten.
    let mut other = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let record = json!([{
        "pid": other.id(), "started": 1, "place": "/gone.rbxl", "sessionId": "gone-edit",
        "openedMs": 1, "log": "/tmp/gone.log"
    }]);
    std::fs::write(world.config.join("opened.json"), record.to_string()).unwrap();
    let listed = opened(&mcp).await;
    assert_eq!(
        listed[0]["status"], "exited",
        "another start time is not our Studio: {listed:?}"
    );
    let closed = mcp.ok("studio_close", json!({"sessionId": "gone-edit"})).await;
    assert_eq!(closed["how"], "exited", "{closed}");
    assert!(alive(u64::from(other.id())), "the other program runs on");
    other.kill().unwrap();
    other.wait().unwrap();

    // The person's Studio still answers.
    let still = mcp
        .ok("studio_exec", json!({"sessionId": their_session, "script": "return 1"}))
        .await;
    assert_eq!(still["returns"], json!([1]));
    drop(theirs);
}

#[tokio::test]
async fn the_refusals_say_what_to_do() {
    let world = World::new("refusals").await;
    let place = world.place("Refused.rbxl");

    // Policy: launching applications is its own capability, denied by --read-only.
    let read_only = world.mcp(None, &["--read-only"]).await;
    let denied = read_only
        .call("studio_open", json!({"file": place.display().to_string()}))
        .await;
    assert_eq!(denied.is_error, Some(true));
    drop(read_only);

    let mcp = world.mcp(None, &[]).await;
    let cases = [
        (json!({}), "invalid_args", "Name what to open"),
        (json!({"file": "/nowhere/a.rbxl"}), "not_found", "No place file"),
        (
            json!({"file": world.dir.join("notes.txt").display().to_string()}),
            "invalid_args",
            ".rbxl or .rbxlx",
        ),
        (json!({"place": 1}), "invalid_args", "both `place` and `universe`"),
        (
            json!({"file": place.display().to_string(), "script": "Workspace.Main"}),
            "invalid_args",
            "published place",
        ),
    ];
    for (args, code, words) in cases {
        let error = mcp.err("studio_open", args.clone()).await;
        assert_eq!(error["code"], code, "{args}: {error}");
        assert!(error["message"].as_str().unwrap().contains(words), "{args}: {error}");
    }
    // A place another Studio has open (its lock is there).
    std::fs::write(lock_of(&place), "").unwrap();
    let locked = mcp
        .err("studio_open", json!({"file": place.display().to_string()}))
        .await;
    assert_eq!(locked["code"], "busy", "{locked}");
    std::fs::remove_file(lock_of(&place)).unwrap();
    assert_eq!(world.stand_in_args(), "", "no refused call started Studio");
    drop(mcp);

    // No Studio where STUDIO_BRIDGE_STUDIO points: not_found, saying where it looked.
    let mut env = world.env(None);
    env[0].1 = Some("/nowhere/RobloxStudioBeta.exe".into());
    let env: Vec<(&str, Option<&str>)> = env.iter().map(|(k, v)| (k.as_str(), v.as_deref())).collect();
    let missing = Mcp::spawn_in_config_dir_with_env(world.port, &[], &world.config, &env).await;
    let error = missing
        .err("studio_open", json!({"file": place.display().to_string()}))
        .await;
    assert_eq!(error["code"], "not_found", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("/nowhere/RobloxStudioBeta.exe"),
        "{error}"
    );
}

#[tokio::test]
async fn a_studio_that_hangs_is_ended_and_one_that_crashes_is_reported() {
    let world = World::new("hang").await;
    let place = world.place("Hang.rbxl");
    let hung = world.mcp(Some("hang"), &[]).await;
    let error = hung
        .err(
            "studio_open",
            json!({"file": place.display().to_string(), "timeoutMs": 3000}),
        )
        .await;
    assert_eq!(error["code"], "timeout", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("the process started; no plugin said hello"),
        "{message}"
    );
    assert!(message.contains("was ended"), "{message}");
    assert_eq!(
        opened(&hung).await,
        Vec::<Json>::new(),
        "a Studio that never connected is not kept"
    );
    let stand_ins = std::process::Command::new("pgrep")
        .args([
            "-f",
            &format!("stand_in_studio --task EditFile --localPlaceFile {}", place.display()),
        ])
        .output()
        .unwrap();
    assert!(
        stand_ins.stdout.is_empty(),
        "the hung stand-in (which ignores SIGTERM) was killed"
    );
    drop(hung);

    // A Studio that crashes after its plugin connected: `sessions` says so, and `close`
    // forgets it and removes the lock it left.
    let crashing = world.mcp(Some("crash"), &[]).await;
    let open = crashing
        .ok("studio_open", json!({"file": place.display().to_string()}))
        .await;
    let pid = open["pid"].as_u64().unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while alive(pid) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stand-in crashes 2.5 s after it starts"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let listed = opened(&crashing).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["status"], "exited", "{listed:?}");
    assert!(lock_of(&place).exists(), "a crash leaves the lock");
    let closed = crashing.ok("studio_close", json!({})).await;
    assert_eq!(closed["how"], "exited", "{closed}");
    assert!(!lock_of(&place).exists(), "close removed the lock its Studio left");
    assert_eq!(opened(&crashing).await, Vec::<Json>::new());
    drop(crashing);

    // A Studio whose plugin went quiet while it runs on (frozen): `sessions` says so, and
    // `close` cannot know what it would lose, so it asks for `discard`.
    let wedged = world.mcp(Some("wedge"), &[]).await;
    let open = wedged
        .ok("studio_open", json!({"file": place.display().to_string()}))
        .await;
    let pid = open["pid"].as_u64().unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let listed = opened(&wedged).await;
        if listed.first().is_some_and(|o| o["status"] == "not_connected") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the plugin goes quiet 2.5 s in: {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let refused = wedged.err("studio_close", json!({})).await;
    assert_eq!(refused["code"], "conflict", "{refused}");
    assert!(
        refused["message"].as_str().unwrap().contains("not connected"),
        "{refused}"
    );
    assert!(alive(pid));
    let closed = wedged.ok("studio_close", json!({"discard": true})).await;
    assert_eq!(closed["how"], "quit", "{closed}");
    assert!(!alive(pid));
    assert!(!lock_of(&place).exists());
}

/// `studio-bridge run` on the command line, with the stand-in.
async fn run_cli(world: &World, mode: Option<&str>, args: &[&str]) -> std::process::Output {
    let mut command = tokio::process::Command::new(binary());
    command
        .arg("run")
        .args(args)
        .args(["--port", &world.port.to_string()])
        .env("STUDIO_BRIDGE_CONFIG_DIR", &world.config)
        .env("STUDIO_BRIDGE_LOG", "warn");
    for (name, value) in world.env(mode) {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .expect("run finishes")
        .expect("run starts")
}

#[tokio::test]
async fn run_exits_0_on_success_and_1_on_a_script_error_through_either_path() {
    let world = World::new("run").await;
    let place = world.place("Run.rbxl");
    let file = place.display().to_string();

    let ok = run_cli(
        &world,
        None,
        &[&file, "print('checking the door') return workspace.Door, 1 + 1"],
    )
    .await;
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(stdout.contains("checking the door"), "{stdout}");
    assert!(
        !stdout.contains("[StudioBridge]"),
        "the plugin's own lines are not the script's: {stdout}"
    );
    assert!(stdout.contains("Workspace.Door"), "{stdout}");
    assert!(stdout.contains('2'), "{stdout}");
    assert!(
        world
            .stand_in_args()
            .contains(&format!("--task RunScript --localPlaceFile {file} --runScriptFile /")),
        "{}",
        world.stand_in_args()
    );
    assert!(!lock_of(&place).exists(), "Studio quit after the run");

    let failed = run_cli(&world, None, &[&file, "error('the door is stuck')", "--json"]).await;
    assert_eq!(failed.status.code(), Some(1));
    let result: Json = serde_json::from_slice(&failed.stdout).unwrap();
    assert_eq!(result["success"], false, "{result}");
    assert!(
        result["error"]
            .as_str()
            .unwrap()
            .starts_with("script:1: the door is stuck"),
        "{result}"
    );
    assert_eq!(result["via"], "plugin");

    // Where no studio-bridge plugin loads, the result comes through --outputFile.
    let script = world.dir.join("smoke.luau");
    std::fs::write(&script, "print('no plugin here')\nreturn 'done'").unwrap();
    let fallback = run_cli(
        &world,
        Some("no-plugin"),
        &[&file, "--file", &script.display().to_string(), "--json"],
    )
    .await;
    assert_eq!(
        fallback.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&fallback.stderr)
    );
    let result: Json = serde_json::from_slice(&fallback.stdout).unwrap();
    assert_eq!(result["via"], "outputFile", "{result}");
    assert_eq!(result["returns"], json!(["done"]));
    assert_eq!(result["logs"][0]["body"], "no plugin here", "{result}");

    // A script that does not parse never starts Studio.
    let before = world.stand_in_args();
    let broken = run_cli(&world, None, &[&file, "return 1 +"]).await;
    assert_eq!(broken.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&broken.stderr).contains("syntax_error"));
    assert_eq!(world.stand_in_args(), before);
}

//! `studio-bridge doctor` on the real binary, hermetically: its own config directory
//! (the pairing secret), runtime directory (the peer token), and plugins folder (`--plugin`,
//! or on Linux Studio's own folder found through `ROBLOX_STUDIO_PATH` and `HOME`). Every
//! test also proves that no secret it made reaches doctor's stdout or stderr.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value as Json;
use support::fake_plugin::{FakePlugin, Identity, studio_like};
use support::lune::luau_tool;
use support::mcp_client::binary;
use support::squatter::{Ploy, Squatter};
use support::{free_port, missing_tool};

/// One machine's worth of studio-bridge state, under a fresh folder.
struct Machine {
    root: PathBuf,
    port: u16,
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Json {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {}", self.stdout))
    }
}

/// The check named `name` in a `--json` report.
fn check<'a>(report: &'a Json, name: &str) -> &'a Json {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} check in {report}"))
}

impl Machine {
    fn new(name: &str) -> Machine {
        let port = free_port();
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("doctor-{name}-{port}"));
        let _ = std::fs::remove_dir_all(&root);
        for dir in ["config", "run", "home", "studio/content"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(root.join("run"), std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        Machine { root, port }
    }

    /// The binary with this machine's environment (and no user's own state).
    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(binary());
        command
            .args(args)
            .env_remove("STUDIO_BRIDGE_PORT")
            .env("NO_COLOR", "1")
            .env("STUDIO_BRIDGE_CONFIG_DIR", self.root.join("config"))
            .env("XDG_RUNTIME_DIR", self.root.join("run"))
            .env("HOME", self.root.join("home"))
            .env("ROBLOX_STUDIO_PATH", self.root.join("studio"))
            .env_remove("ROBLOX_API_KEY")
            .stdin(Stdio::null());
        // The project's Luau tools where this machine has them (the all-well test requires
        // them); "" where not: doctor then warns, whatever the user's PATH holds.
        for (name, variable) in [("selene", "STUDIO_BRIDGE_SELENE"), ("stylua", "STUDIO_BRIDGE_STYLUA")] {
            command.env(variable, luau_tool(name).unwrap_or_default());
        }
        command
    }

    async fn run(&self, args: &[&str]) -> Run {
        let output = tokio::time::timeout(Duration::from_secs(30), self.command(args).output())
            .await
            .expect("finished")
            .expect("ran");
        let run = Run {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        };
        self.assert_no_secret_in(&run);
        run
    }

    async fn doctor(&self, extra: &[&str]) -> Run {
        let port = self.port.to_string();
        let mut args = vec!["doctor", "--port", &port];
        args.extend_from_slice(extra);
        self.run(&args).await
    }

    async fn install(&self, extra: &[&str]) {
        let mut args = vec!["install-plugin"];
        args.extend_from_slice(extra);
        let run = self.run(&args).await;
        assert_eq!(run.code, Some(0), "{}", run.stderr);
    }

    fn plugins(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    fn secret(&self) -> Option<String> {
        std::fs::read_to_string(self.root.join("config").join("plugin-secret"))
            .ok()
            .map(|s| s.trim().to_owned())
    }

    /// Every secret this machine ever had: the current one and those its installs carry.
    fn secrets(&self) -> Vec<String> {
        let mut found: Vec<String> = self.secret().into_iter().collect();
        let installs = walk(&self.root)
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "rbxm"));
        for file in installs {
            if let Some(secret) = std::fs::read(&file)
                .ok()
                .and_then(|bytes| studio_bridge::plugin_install::secret_in_model(&bytes))
            {
                found.push(secret);
            }
        }
        found
    }

    fn assert_no_secret_in(&self, run: &Run) {
        for secret in self.secrets() {
            assert!(secret.len() >= 32, "a real secret");
            assert!(
                !run.stdout.contains(&secret) && !run.stderr.contains(&secret),
                "a pairing secret was printed:\n{}\n{}",
                run.stdout,
                run.stderr
            );
        }
    }

    fn serve(&self) -> tokio::process::Child {
        self.serve_with(&[])
    }

    fn serve_with(&self, extra: &[&str]) -> tokio::process::Child {
        let port = self.port.to_string();
        let mut args = vec!["serve", "--no-install-plugin", "--port", &port];
        args.extend_from_slice(extra);
        self.command(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn serve")
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn nothing_installed_exits_1_with_the_install_fix_and_installing_fixes_it() {
    let machine = Machine::new("fresh");
    let run = machine.doctor(&["--json"]).await;
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let report = run.json();
    assert_eq!(report["ok"], false);
    assert_eq!(check(&report, "port")["status"], "warn", "nobody hosts: {report}");
    assert_eq!(
        check(&report, "token")["status"],
        "ok",
        "no token expected without a host"
    );
    let secret = check(&report, "secret");
    assert_eq!(
        (&secret["ok"], &secret["fix"]),
        (&Json::Bool(false), &Json::from("studio-bridge install-plugin"))
    );
    // Studio's plugins folder, as roblox_install finds it from ROBLOX_STUDIO_PATH.
    let folder = machine.root.join("home/AppData/Local/Roblox/Plugins");
    assert!(
        check(&report, "plugins-folder")["detail"]
            .as_str()
            .unwrap()
            .contains(&folder.display().to_string()),
        "{report}"
    );
    let plugin = check(&report, "plugin");
    assert_eq!(plugin["status"], "problem");
    assert!(plugin["detail"].as_str().unwrap().contains("not installed"), "{plugin}");
    assert!(
        plugin["fix"]
            .as_str()
            .unwrap()
            .starts_with("studio-bridge install-plugin,"),
        "the exact command, no --out: {plugin}"
    );
    assert!(report["sessions"].as_array().unwrap().is_empty());

    let human = machine.doctor(&[]).await;
    assert_eq!(human.code, Some(1));
    let lines: Vec<&str> = human.stdout.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("problem plugin"))
        .unwrap_or_else(|| panic!("{}", human.stdout));
    assert!(
        lines[at + 1]
            .trim_start()
            .starts_with("fix: studio-bridge install-plugin"),
        "{}",
        human.stdout
    );
    assert_eq!(lines.last(), Some(&"2 problems found"), "{}", human.stdout);

    // The fix, exactly as given, fixes it.
    machine.install(&[]).await;
    assert!(folder.join("StudioBridge.rbxm").is_file());
    let run = machine.doctor(&["--json"]).await;
    assert_eq!(run.code, Some(0), "{}", run.stdout);
    let report = run.json();
    for name in ["secret", "plugin", "pairing"] {
        assert_eq!(check(&report, name)["status"], "ok", "{report}");
    }
}

#[tokio::test]
async fn a_running_host_and_a_paired_plugin_are_all_well_and_the_session_is_listed() {
    if luau_tool("selene").is_none() || luau_tool("stylua").is_none() {
        missing_tool("selene and stylua are needed for doctor to find them all well");
        return;
    }
    let machine = Machine::new("well");
    let dir = machine.plugins("plugins");
    machine.install(&["--out", dir.to_str().unwrap()]).await;
    let secret = machine.secret().expect("install-plugin made a secret");
    let serve = machine.serve();
    let _studio = FakePlugin::connect(
        machine.port,
        Identity {
            pairing: Some(secret),
            ..Identity::edit("A")
        },
        studio_like(),
    )
    .await;

    let sourcemap = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rojo-place/sourcemap.json");
    let run = machine
        .doctor(&[
            "--json",
            "--plugin",
            dir.to_str().unwrap(),
            "--sourcemap",
            sourcemap.to_str().unwrap(),
        ])
        .await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let report = run.json();
    assert_eq!(report["ok"], true);
    let names: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "port",
            "token",
            "secret",
            "host-proof",
            "plugins-folder",
            "plugin",
            "pairing",
            "sessions",
            "sourcemap",
            "selene",
            "stylua",
            "open-cloud"
        ]
    );
    for name in names {
        assert_eq!(check(&report, name)["status"], "ok", "{report}");
        assert_eq!(check(&report, name)["fix"], Json::Null);
    }
    let pid = serve.id().expect("serve runs");
    let port = check(&report, "port")["detail"].as_str().unwrap();
    assert!(
        port.contains(&format!("pid {pid}")) && port.contains(env!("CARGO_PKG_VERSION")),
        "the host's version and pid: {port}"
    );
    let token = machine
        .root
        .join("run/studio-bridge")
        .join(format!("{}.token", machine.port));
    assert!(
        check(&report, "token")["detail"]
            .as_str()
            .unwrap()
            .contains(&token.display().to_string()),
        "{report}"
    );
    assert_eq!(report["sessions"][0]["sessionId"], "A-edit", "{report}");
    assert!(
        check(&report, "sessions")["detail"]
            .as_str()
            .unwrap()
            .contains("A-edit")
    );

    let human = machine
        .doctor(&[
            "--plugin",
            dir.to_str().unwrap(),
            "--sourcemap",
            sourcemap.to_str().unwrap(),
        ])
        .await;
    assert_eq!(human.code, Some(0));
    let lines: Vec<&str> = human.stdout.lines().collect();
    assert_eq!(lines.len(), 13, "one line per check and the verdict: {}", human.stdout);
    assert!(lines[..12].iter().all(|l| l.starts_with("ok ")), "{}", human.stdout);
    assert_eq!(lines[12], "all is well");
    assert!(
        check(&report, "selene")["detail"]
            .as_str()
            .unwrap()
            .starts_with(&luau_tool("selene").unwrap().display().to_string()),
        "where it was found: {report}"
    );
}

#[tokio::test]
async fn a_modified_plugin_does_not_match_this_binary() {
    let machine = Machine::new("stale");
    let dir = machine.plugins("plugins");
    let out = dir.to_str().unwrap();
    machine.install(&["--out", out]).await;
    let file = dir.join("StudioBridge.rbxm");

    // An older plugin: one script's source differs; the pairing secret is kept.
    let mut dom = rbx_binary::from_reader(std::fs::read(&file).unwrap().as_slice()).unwrap();
    let script = dom
        .descendants()
        .find(|i| i.properties.contains_key(&"Source".into()))
        .map(|i| i.referent())
        .expect("a script in the plugin");
    let instance = dom.get_by_ref_mut(script).unwrap();
    let source = match instance.properties.get(&"Source".into()) {
        Some(rbx_dom_weak::types::Variant::String(source)) => source.clone(),
        other => panic!("{other:?}"),
    };
    instance.properties.insert(
        "Source".into(),
        rbx_dom_weak::types::Variant::String(format!("{source}\n-- an older build\n")),
    );
    let root = dom.root().children().to_vec();
    let mut bytes = Vec::new();
    rbx_binary::to_writer(&mut bytes, &dom, &root).unwrap();
    std::fs::write(&file, bytes).unwrap();

    let run = machine.doctor(&["--json", "--plugin", out]).await;
    assert_eq!(run.code, Some(1), "{}", run.stdout);
    let report = run.json();
    let plugin = check(&report, "plugin");
    assert_eq!(plugin["status"], "problem");
    assert!(
        plugin["detail"]
            .as_str()
            .unwrap()
            .contains("does not match this binary"),
        "{plugin}"
    );
    assert!(
        plugin["fix"]
            .as_str()
            .unwrap()
            .starts_with(&format!("studio-bridge install-plugin --out {out},")),
        "{plugin}"
    );
    assert_eq!(check(&report, "pairing")["status"], "ok", "the secret is still current");

    let human = machine.doctor(&["--plugin", out]).await;
    assert!(human.stdout.contains("does not match this binary"), "{}", human.stdout);

    machine.install(&["--out", out]).await;
    let run = machine.doctor(&["--json", "--plugin", out]).await;
    assert_eq!(run.code, Some(0), "reinstalled: {}", run.stdout);
}

#[tokio::test]
async fn a_rotated_secret_is_a_problem_naming_install_plugin() {
    let machine = Machine::new("rotated");
    let dir = machine.plugins("plugins");
    let out = dir.to_str().unwrap();
    machine.install(&["--out", out]).await;
    let before = machine.secret();
    // Rotated, and installed somewhere else: the install doctor checks is now stale.
    let elsewhere = machine.plugins("elsewhere");
    machine
        .install(&["--rotate-secret", "--out", elsewhere.to_str().unwrap()])
        .await;
    assert_ne!(machine.secret(), before);

    let run = machine.doctor(&["--json", "--plugin", out]).await;
    assert_eq!(run.code, Some(1), "{}", run.stdout);
    let report = run.json();
    assert_eq!(check(&report, "plugin")["status"], "ok", "still this binary's plugin");
    let pairing = check(&report, "pairing");
    assert_eq!(pairing["status"], "problem");
    assert!(
        pairing["detail"].as_str().unwrap().contains("older pairing secret"),
        "{pairing}"
    );
    assert!(
        pairing["fix"]
            .as_str()
            .unwrap()
            .contains(&format!("studio-bridge install-plugin --out {out}")),
        "{pairing}"
    );
    assert_eq!(check(&report, "secret")["status"], "ok");

    let human = machine.doctor(&["--plugin", out]).await;
    assert_eq!(human.code, Some(1));
    assert!(
        human.stdout.contains("problem pairing") && human.stdout.contains("fix: studio-bridge install-plugin"),
        "{}",
        human.stdout
    );
}

#[tokio::test]
async fn a_host_that_allows_unpaired_plugins_is_named_and_pairing_problems_become_warnings() {
    let machine = Machine::new("unpaired");
    let stale = machine.plugins("stale");
    let fresh = machine.plugins("fresh");
    machine.install(&["--out", stale.to_str().unwrap()]).await;
    // The secret is rotated by a second install: the first one now carries an old one.
    machine
        .install(&["--rotate-secret", "--out", fresh.to_str().unwrap()])
        .await;
    let _serve = machine.serve_with(&["--allow-unpaired"]);
    support::wait_for("the host", Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", machine.port)).is_ok()
    })
    .await;

    let run = machine.doctor(&["--json", "--plugin", stale.to_str().unwrap()]).await;
    let report = run.json();
    let host_pairing = check(&report, "host-pairing");
    assert_eq!(host_pairing["status"], "warn", "{report}");
    assert!(
        host_pairing["detail"].as_str().unwrap().contains("--allow-unpaired"),
        "{host_pairing}"
    );
    let pairing = check(&report, "pairing");
    assert_eq!(pairing["status"], "warn", "{report}");
    let detail = pairing["detail"].as_str().unwrap();
    assert!(
        detail.contains("older pairing secret") && detail.contains("accepts it anyway"),
        "{pairing}"
    );
    // The fix for a host that does require pairing is still given.
    assert!(pairing["fix"].as_str().unwrap().contains("install-plugin"), "{pairing}");
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(run.code, Some(0), "{}", run.stdout);
}

/// A process that holds the port and answers `/v1/health` as studio-bridge, but cannot
/// prove it holds this user's pairing secret (PROTOCOL.md, "Pairing is mutual"): the plugin
/// serves it nothing, and doctor says so with the way to find it.
#[tokio::test]
async fn a_port_held_by_an_unproven_process_is_a_problem_naming_how_to_find_it() {
    let machine = Machine::new("squatter");
    let dir = machine.plugins("plugins");
    machine.install(&["--out", dir.to_str().unwrap()]).await;
    for ploy in [Ploy::ForgedChallenge, Ploy::NoChallenge] {
        let squatter = Squatter::start(machine.port, ploy).await;
        let run = machine.doctor(&["--json", "--plugin", dir.to_str().unwrap()]).await;
        assert_eq!(run.code, Some(1), "{ploy:?}: {}{}", run.stdout, run.stderr);
        let report = run.json();
        let proof = check(&report, "host-proof");
        assert_eq!(proof["status"], "problem", "{ploy:?}: {report}");
        let detail = proof["detail"].as_str().unwrap();
        assert!(detail.contains("cannot prove it is this user's"), "{detail}");
        assert!(
            proof["fix"].as_str().unwrap().contains(&machine.port.to_string()),
            "{proof}"
        );
        let secret = machine.secret().unwrap();
        assert!(
            !squatter
                .seen
                .lock()
                .unwrap()
                .frames
                .iter()
                .any(|f| f.windows(secret.len()).any(|w| w == secret.as_bytes())),
            "doctor sent the secret"
        );
        drop(squatter);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn without_selene_and_stylua_doctor_warns_what_a_script_write_loses() {
    let machine = Machine::new("no-luau-tools");
    let port = machine.port.to_string();
    // The overrides name no executable: neither tool counts as installed, whatever PATH has.
    let output = machine
        .command(&["doctor", "--json", "--port", &port])
        .env("STUDIO_BRIDGE_SELENE", "")
        .env("STUDIO_BRIDGE_STYLUA", "")
        .output()
        .await
        .expect("ran");
    let report: Json = serde_json::from_slice(&output.stdout).expect("doctor --json");
    for (tool, lost) in [("selene", "carry no diagnostics"), ("stylua", "format: true fails")] {
        let found = check(&report, tool);
        assert_eq!(found["status"], "warn", "{report}");
        let detail = found["detail"].as_str().unwrap();
        assert!(detail.starts_with(&format!("{tool} not found on PATH")), "{detail}");
        assert!(detail.contains(lost) && detail.contains("rokit add"), "{detail}");
    }
}

#[tokio::test]
async fn the_sourcemap_found_is_reported_with_how_many_scripts_it_maps() {
    let machine = Machine::new("sourcemap");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rojo-place/sourcemap.json");
    let report = machine
        .doctor(&["--json", "--sourcemap", fixture.to_str().unwrap()])
        .await
        .json();
    let found = check(&report, "sourcemap");
    assert_eq!(found["status"], "ok", "{report}");
    let detail = found["detail"].as_str().unwrap();
    assert!(detail.contains("maps 5 scripts to files"), "{detail}");

    let missing = machine.root.join("no-sourcemap.json");
    let report = machine
        .doctor(&["--json", "--sourcemap", missing.to_str().unwrap()])
        .await
        .json();
    let none = check(&report, "sourcemap");
    assert_eq!(none["status"], "warn", "no sourcemap is normal: {report}");
    assert!(
        none["detail"].as_str().unwrap().starts_with("no sourcemap at"),
        "{none}"
    );

    let bad = machine.root.join("sourcemap.json");
    std::fs::write(&bad, "{\"name\": \"Game\"").unwrap();
    let run = machine.doctor(&["--json", "--sourcemap", bad.to_str().unwrap()]).await;
    let report = run.json();
    let broken = check(&report, "sourcemap");
    assert_eq!(broken["status"], "problem", "{report}");
    assert!(broken["fix"].as_str().unwrap().contains("rojo sourcemap"), "{broken}");
    assert_eq!(run.code, Some(1));
    let warnings: Vec<&str> = run.stderr.lines().filter(|l| l.contains("WARN")).collect();
    assert_eq!(warnings.len(), 1, "one warning on stderr: {}", run.stderr);
    assert!(warnings[0].contains("not a Rojo sourcemap"), "{}", run.stderr);
}

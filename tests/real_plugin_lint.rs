//! Lint diagnostics and `format` on script writes (issue 29), end to end: the real plugin in
//! a headless Studio under Lune, a paired `studio-bridge mcp` running in a project folder of
//! the test's own, and the real `selene` and `stylua` executables (found on PATH by the
//! host, as a project's toolchain puts them there).

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value as Json, json};
use support::lune::{HeadlessStudio, luau_tool};
use support::mcp_client::Mcp;
use support::studio::{exchange, installed_plugin};
use support::{free_port, missing_tool};

/// The folder of selene and stylua, or None (after `missing_tool`) when one is missing.
fn tool_dirs() -> Option<String> {
    match (luau_tool("selene"), luau_tool("stylua")) {
        (Some(selene), Some(stylua)) => {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let dirs = [selene.parent(), stylua.parent()]
                .into_iter()
                .flatten()
                .map(Path::to_path_buf)
                .chain(std::env::split_paths(&path));
            Some(
                std::env::join_paths(dirs)
                    .expect("a PATH")
                    .into_string()
                    .expect("a UTF-8 PATH"),
            )
        }
        _ => {
            missing_tool("selene 0.31 and stylua 2.6 are needed on PATH for the lint and format tests");
            None
        }
    }
}

/// A fresh project folder holding `files`.
fn project(files: &[(&str, &str)]) -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("lint-project-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&dir).expect("project folder");
    for (name, text) in files {
        std::fs::write(dir.join(name), text).expect("project file");
    }
    dir
}

/// The plugin in a headless Studio in Edit, and a paired host running in `dir` with `env`
/// (the tools' PATH, or an override that takes a tool away).
async fn studio_in(dir: &Path, env: &[(&str, Option<&str>)]) -> (PathBuf, Mcp, HeadlessStudio) {
    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn_paired_in(port, dir, env).await;
    let mut studio = HeadlessStudio::start(port, &rbxm, "edit");
    studio
        .wait_for_line("[harness] connected context=edit", Duration::from_secs(30))
        .await;
    (rbxm, mcp, studio)
}

/// The host finds both tools on PATH, with no override.
fn on_path(path: &str) -> Vec<(&'static str, Option<&str>)> {
    vec![
        ("PATH", Some(path)),
        ("STUDIO_BRIDGE_SELENE", None),
        ("STUDIO_BRIDGE_STYLUA", None),
    ]
}

/// Creates a Script named `name` in ServerStorage with `source`; returns the create result.
async fn create_script(mcp: &Mcp, name: &str, source: &str) -> Json {
    exchange(
        mcp,
        "studio_create",
        json!({"items": [{"className": "Script", "parent": "ServerStorage", "name": name, "source": source}]}),
    )
    .await
}

/// `(line, code)` of each diagnostic, in the result's order.
fn found(result: &Json) -> Vec<(u64, String)> {
    result["diagnostics"]
        .as_array()
        .unwrap_or_else(|| panic!("diagnostics in {result}"))
        .iter()
        .map(|d| (d["line"].as_u64().unwrap(), d["code"].as_str().unwrap().to_owned()))
        .collect()
}

async fn source_of(mcp: &Mcp, path: &str) -> Json {
    mcp.ok("studio_script_read", json!({"path": path})).await
}

#[tokio::test]
async fn diagnostics_name_the_new_lines_of_an_unknown_global_and_an_unused_local() {
    let Some(path) = tool_dirs() else { return };
    let dir = project(&[]);
    let (rbxm, mcp, _studio) = studio_in(&dir, &on_path(&path)).await;

    // The Roblox globals are known without a selene.toml of the project's.
    let created = create_script(&mcp, "Lints", "local count = 0\nworkspace.Gravity = 10\nreturn count\n").await;
    assert_eq!(created["created"], json!(["game.ServerStorage.Lints"]), "{created}");
    assert_eq!(created["diagnostics"], json!([]), "{created}");
    assert!(created.get("diagnosticsSkipped").is_none(), "{created}");
    let script = "game.ServerStorage.Lints";

    // Two lines inserted before line 2: the findings are on the new source's lines 2 and 3.
    let edited = exchange(
        &mcp,
        "studio_script_edit",
        json!({"path": script, "edits": [{"startLine": 2, "endLine": 1, "text": "local unused = 1\nprint(mystery)"}]}),
    )
    .await;
    assert_eq!(
        found(&edited),
        [(2, "unused_variable".to_owned()), (3, "undefined_variable".to_owned())],
        "{edited}"
    );
    let unknown = &edited["diagnostics"][1];
    assert_eq!(unknown["column"], 7, "{edited}");
    assert_eq!(unknown["severity"], "error");
    assert!(unknown["message"].as_str().unwrap().contains("mystery"), "{edited}");
    let written = source_of(&mcp, script).await;
    assert_eq!(
        written["source"],
        "local count = 0\nlocal unused = 1\nprint(mystery)\nworkspace.Gravity = 10\nreturn count\n"
    );
    assert_eq!(written["hash"], edited["hash"]);

    // A dry run lints the would-be source and writes nothing.
    let dry = exchange(
        &mcp,
        "studio_script_edit",
        json!({"path": script, "find": "return count", "replace": "return count + other", "dryRun": true}),
    )
    .await;
    assert_eq!(dry["dryRun"], true, "{dry}");
    assert_eq!(
        found(&dry),
        [
            (2, "unused_variable".to_owned()),
            (3, "undefined_variable".to_owned()),
            (5, "undefined_variable".to_owned()),
        ],
        "{dry}"
    );
    assert_ne!(dry["hash"], edited["hash"], "the would-be hash: {dry}");
    let after = source_of(&mcp, script).await;
    assert_eq!(after["source"], written["source"], "the dry run wrote nothing");
    assert_eq!(after["hash"], edited["hash"]);

    // A deprecated global, and a create's findings carry their script's path.
    let made = create_script(&mcp, "Old", "wait(1)\nreturn nil\n").await;
    assert_eq!(made["diagnostics"][0]["path"], "game.ServerStorage.Old", "{made}");
    assert_eq!(made["diagnostics"][0]["code"], "deprecated", "{made}");
    assert_eq!(made["diagnostics"][0]["line"], 1, "{made}");

    // Six scripts in one create (more than are linted at once): each finding names its
    // script, in item order, on the line of that script's own unknown global.
    let items: Vec<Json> = (1..=6)
        .map(|n| {
            json!({"className": "ModuleScript", "parent": "ServerStorage", "name": format!("M{n}"),
                "source": format!("{}return unknown{n}\n", "local _ = 1\n".repeat(n))})
        })
        .collect();
    let many = exchange(&mcp, "studio_create", json!({ "items": items })).await;
    let listed: Vec<(String, u64, String)> = many["diagnostics"]
        .as_array()
        .unwrap_or_else(|| panic!("diagnostics in {many}"))
        .iter()
        .map(|d| {
            let message = d["message"].as_str().unwrap();
            let name = message.split('`').nth(1).unwrap_or(message).to_owned();
            (
                d["path"].as_str().unwrap().to_owned(),
                d["line"].as_u64().unwrap(),
                name,
            )
        })
        .collect();
    let want: Vec<(String, u64, String)> = (1..=6)
        .map(|n| (format!("game.ServerStorage.M{n}"), n + 1, format!("unknown{n}")))
        .collect();
    assert_eq!(listed, want, "{many}");

    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

/// What the user's own `stylua -` gives for `source` in the project folder.
fn stylua_gives(dir: &Path, source: &str) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new(luau_tool("stylua").expect("stylua"))
        .arg("-")
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run stylua");
    child.stdin.take().unwrap().write_all(source.as_bytes()).unwrap();
    let output = child.wait_with_output().expect("stylua's output");
    assert!(output.status.success(), "stylua formats the test's source");
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
async fn format_writes_exactly_what_stylua_gives_with_the_projects_stylua_toml() {
    let Some(path) = tool_dirs() else { return };
    let dir = project(&[(
        "stylua.toml",
        "indent_type = \"Spaces\"\nindent_width = 2\nquote_style = \"ForceSingle\"\n",
    )]);
    let (rbxm, mcp, _studio) = studio_in(&dir, &on_path(&path)).await;
    create_script(&mcp, "Tidy", "return nil\n").await;
    let script = "game.ServerStorage.Tidy";

    let messy = "local t={a=1,b=\"x\"}\nif t.a then\nprint( t.b )\nend\nreturn t\n";
    let expected = stylua_gives(&dir, messy);
    assert!(
        expected.contains("\n  print('x'") || expected.contains("\n  print(t.b)"),
        "{expected}"
    );
    assert_ne!(expected, messy);
    let edited = exchange(
        &mcp,
        "studio_script_edit",
        json!({"path": script, "source": messy, "format": true}),
    )
    .await;
    let written = source_of(&mcp, script).await;
    assert_eq!(written["source"], expected, "stylua's output, byte for byte");
    assert_eq!(edited["hash"], written["hash"]);
    assert_eq!(edited["diagnostics"], json!([]), "{edited}");

    // A find/replace, formatted: the dry run's hash is the formatted source's, the one the
    // write then makes.
    let args = json!({"path": script, "find": "return t", "replace": "return  {t,t}", "format": true});
    let mut dry_args = args.clone();
    dry_args["dryRun"] = json!(true);
    let dry = exchange(&mcp, "studio_script_edit", dry_args).await;
    assert_eq!(
        source_of(&mcp, script).await["source"],
        expected,
        "the dry run wrote nothing"
    );
    let replaced = exchange(&mcp, "studio_script_edit", args).await;
    let now = source_of(&mcp, script).await;
    let want = stylua_gives(&dir, &expected.replace("return t", "return  {t,t}"));
    assert_eq!(now["source"], want);
    assert!(want.contains("return { t, t }"), "{want}");
    assert_eq!(
        dry["hash"], now["hash"],
        "the dry run named the formatted source's hash"
    );
    assert_eq!(replaced["hash"], now["hash"]);

    // A source that does not parse is a syntax error naming its line, with `format` as
    // without it, and writes nothing.
    let broken = mcp
        .err(
            "studio_script_edit",
            json!({"path": script, "source": "local x = \n", "format": true}),
        )
        .await;
    assert_eq!(broken["code"], "syntax_error", "{broken}");
    let message = broken["message"].as_str().unwrap();
    assert!(message.starts_with("source: line "), "names the line: {message}");
    assert_eq!(source_of(&mcp, script).await["source"], want);

    // A source stylua cannot format (unchecked here) fails the call, naming it, and
    // writes nothing.
    let broken = mcp
        .err(
            "studio_script_edit",
            json!({"path": script, "source": "local x = \n", "format": true, "check": false}),
        )
        .await;
    assert_eq!(broken["code"], "invalid_args", "{broken}");
    let message = broken["message"].as_str().unwrap();
    assert!(message.starts_with("format: stylua could not format it"), "{message}");
    assert!(message.contains("nothing was written"), "{message}");
    assert_eq!(source_of(&mcp, script).await["source"], want);

    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_projects_selene_toml_is_honoured() {
    let Some(path) = tool_dirs() else { return };
    // The project's config: plain Luau (no Roblox globals) and unused variables allowed.
    let dir = project(&[(
        "selene.toml",
        "std = \"luau\"\n\n[lints]\nunused_variable = \"allow\"\n",
    )]);
    let (rbxm, mcp, _studio) = studio_in(&dir, &on_path(&path)).await;

    let created = create_script(&mcp, "Own", "local unused = 1\nprint(game)\n").await;
    assert_eq!(
        found(&created),
        [(2, "undefined_variable".to_owned())],
        "game unknown to the project's std, the unused local allowed: {created}"
    );

    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn without_selene_a_write_goes_through_and_says_why_and_format_fails_without_stylua() {
    let Some(path) = tool_dirs() else { return };
    let dir = project(&[]);
    // The tools are on PATH, but the overrides name none: both count as not installed.
    let env = [
        ("PATH", Some(path.as_str())),
        ("STUDIO_BRIDGE_SELENE", Some("")),
        ("STUDIO_BRIDGE_STYLUA", Some("")),
    ];
    let (rbxm, mcp, _studio) = studio_in(&dir, &env).await;

    let created = create_script(&mcp, "Bare", "print(mystery)\n").await;
    assert_eq!(created["created"], json!(["game.ServerStorage.Bare"]), "{created}");
    assert!(created.get("diagnostics").is_none(), "{created}");
    let why = created["diagnosticsSkipped"].as_str().unwrap();
    assert!(why.starts_with("selene not found on PATH"), "{why}");
    assert!(
        why.contains("rokit add Kampfkarren/selene"),
        "says how to install it: {why}"
    );
    let script = "game.ServerStorage.Bare";

    let edited = exchange(
        &mcp,
        "studio_script_edit",
        json!({"path": script, "source": "local unused = 1\n"}),
    )
    .await;
    assert!(
        edited["diagnosticsSkipped"]
            .as_str()
            .unwrap()
            .starts_with("selene not found"),
        "{edited}"
    );
    assert_eq!(source_of(&mcp, script).await["source"], "local unused = 1\n", "written");

    let refused = mcp
        .err(
            "studio_script_edit",
            json!({"path": script, "source": "return  1\n", "format": true}),
        )
        .await;
    assert_eq!(refused["code"], "invalid_args", "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(message.starts_with("format: stylua not found on PATH"), "{message}");
    assert!(message.contains("rokit add JohnnyMorganz/StyLua"), "{message}");
    assert_eq!(
        source_of(&mcp, script).await["source"],
        "local unused = 1\n",
        "nothing written"
    );

    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_selene_that_fails_leaves_the_write_and_says_so() {
    let Some(path) = tool_dirs() else { return };
    // A std selene cannot find: it stops before linting.
    let dir = project(&[("selene.toml", "std = \"no-such-std\"\n")]);
    let (rbxm, mcp, _studio) = studio_in(&dir, &on_path(&path)).await;

    let created = create_script(&mcp, "Failing", "return 1\n").await;
    assert_eq!(created["created"], json!(["game.ServerStorage.Failing"]), "{created}");
    let why = created["diagnosticsSkipped"].as_str().unwrap();
    assert!(why.starts_with("selene failed: "), "{why}");
    assert!(why.contains("no-such-std"), "selene's own words: {why}");

    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

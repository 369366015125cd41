//! The command line's output for a person, against the real plugin in a headless Studio
//! under Lune (#41): each command's own rendering, compared as text, beside a `serve` host
//! the CLI joins as a peer (as it would beside an agent).

use crate::support;

use std::process::Stdio;
use std::time::Duration;

use support::free_port;
use support::lune::HeadlessStudio;
use support::mcp_client::{binary, paired_config_dir};
use support::studio::{installed_plugin, serve};
use tokio::process::Command;

/// `studio-bridge <args> --port P`: (exit code, stdout, stderr).
async fn cli(port: u16, args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(binary())
        .args(args)
        .args(["--port", &port.to_string()])
        .env("STUDIO_BRIDGE_CONFIG_DIR", paired_config_dir())
        .env("NO_COLOR", "1")
        .env_remove("STUDIO_BRIDGE_PORT")
        .stdin(Stdio::null())
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), output)
        .await
        .expect("the CLI finished")
        .expect("the CLI ran");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn each_command_prints_for_a_person() {
    let port = free_port();
    let _host = serve(port);
    let rbxm = installed_plugin().await;
    let mut studio = HeadlessStudio::start(port, &rbxm, "edit");
    studio
        .wait_for_line("[harness] connected context=edit", Duration::from_secs(30))
        .await;

    // grep's form: where:line: text.
    let (code, stdout, stderr) = cli(port, &["script-search", "hello"]).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout,
        "game.ServerScriptService.Main:1: print(\"hello from the place\")\n"
    );

    // A write: its paths; then the same write undone, in words.
    let item = r#"{"className": "Part", "parent": "Workspace", "name": "Floor"}"#;
    let (code, stdout, stderr) = cli(port, &["create", "--items", item]).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, "game.Workspace.Floor\n");
    let (code, stdout, stderr) = cli(port, &["delete", "Workspace.Floor"]).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, "deleted 1 instance\n");
    let (code, stdout, stderr) = cli(port, &["undo"]).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, "undid 1 step, the last \"studio-bridge: delete\"\n");
    assert_eq!(stderr, "can undo: yes, can redo: yes\n");

    let (code, stdout, stderr) = cli(port, &["state"]).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with("Edit · "), "{stdout}");

    // A test: its output as exec prints it (the place's own script first), then its returns.
    let (code, stdout, stderr) = cli(port, &["test-run", "print('hi') return 1, {a = 2}"]).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, "hello from the place\nhi\n1, {a = 2}\n");
    assert!(
        stderr.starts_with("the test ran ") && stderr.ends_with(" ms\n"),
        "{stderr}"
    );
    // A script error: on stderr, exit 1.
    let (code, stdout, stderr) = cli(port, &["test-run", "error('nope')"]).await;
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stderr.contains("error: ") && stderr.contains("nope"), "{stderr}");
}

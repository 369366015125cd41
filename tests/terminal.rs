//! `studio-bridge terminal` with stdin piped (no TTY), against the real plugin in a headless
//! Studio under Lune, hosted by a `serve` process (so the terminal joins it as a peer, as it
//! would beside an agent).

mod support;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use support::free_port;
use support::lune::HeadlessStudio;
use support::mcp_client::{binary, install_plugin, paired_config_dir};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

async fn installed_plugin() -> PathBuf {
    install_plugin(&paired_config_dir(), &[]).await
}

fn serve(port: u16) -> Child {
    Command::new(binary())
        .args(["serve", "--no-install-plugin", "--port", &port.to_string()])
        .env("STUDIO_BRIDGE_CONFIG_DIR", paired_config_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// A `serve` host and one headless Studio in Edit connected to it.
async fn studio(port: u16, rbxm: &std::path::Path) -> HeadlessStudio {
    let mut studio = HeadlessStudio::start(port, rbxm, "edit");
    studio
        .wait_for_line("[harness] connected context=edit", Duration::from_secs(30))
        .await;
    studio
}

fn terminal(port: u16) -> Child {
    Command::new(binary())
        .args(["terminal", "--port", &port.to_string()])
        .env("STUDIO_BRIDGE_CONFIG_DIR", paired_config_dir())
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Reads a child's stream line by line into a channel.
fn lines(stream: impl tokio::io::AsyncRead + Unpin + Send + 'static) -> mpsc::UnboundedReceiver<String> {
    let (sender, receiver) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut reader = BufReader::new(stream).lines();
        while let Ok(Some(line)) = reader.next_line().await {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

async fn next_line(lines: &mut mpsc::UnboundedReceiver<String>, what: &str) -> String {
    tokio::time::timeout(Duration::from_secs(30), lines.recv())
        .await
        .unwrap_or_else(|_| panic!("no line for {what}"))
        .unwrap_or_else(|| panic!("the terminal closed before {what}"))
}

#[tokio::test]
async fn piped_lines_run_one_by_one_with_globals_continuations_and_dot_commands() {
    let port = free_port();
    let _host = serve(port);
    let rbxm = installed_plugin().await;
    let _studio = studio(port, &rbxm).await;

    let script = [
        "x = 20 + 1",
        "print(x)",
        "local hidden = 1",
        "return hidden",
        "function twice(a)",
        "  print('twice', a)",
        "  return a * 2",
        "end",
        "return twice(x), 'done'",
        ".query Workspace.Baseplate --properties Anchored",
        ".logs --count 1 --levels Print",
        "error('boom')",
        ".bogus",
        ".exit",
        "print('after exit')",
    ]
    .join("\n");
    let mut child = terminal(port);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(format!("{script}\n").as_bytes()).await.unwrap();
    drop(stdin);
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the terminal ends at .exit")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("--- stdout\n{stdout}--- stderr\n{stderr}---");
    // No prompts when piped; each line's result in order, exactly as the CLI renders exec.
    let out: Vec<&str> = stdout.lines().collect();
    assert_eq!(out[0], "21", "a global set on one line is seen on the next");
    assert_eq!(out[1], "nil", "a local does not outlive its line");
    assert_eq!(
        out[2], "twice 21",
        "the function body continued over four lines, then ran"
    );
    assert_eq!(out[3], r#"42, "done""#);
    assert!(out[4].starts_with("Baseplate (Part)"), "{stdout}");
    assert!(stdout.contains("Anchored = true"), "{stdout}");
    assert_eq!(
        out.last().copied(),
        Some("[Print] twice 21"),
        ".logs shows the last print"
    );
    assert!(!stdout.contains("after exit"), ".exit stops reading");
    let err: Vec<&str> = stderr.lines().collect();
    assert!(
        err.iter().any(|l| l.contains("error:") && l.contains("boom")),
        "{stderr}"
    );
    assert!(err.iter().any(|l| l.starts_with("unknown command .bogus")), "{stderr}");
    assert!(
        !stderr.contains("<eof>"),
        "an unfinished chunk is continued, not reported"
    );
    assert_eq!(output.status.code(), Some(1), "a failed line makes a piped run exit 1");
}

#[tokio::test]
async fn ctrl_c_cancels_the_running_chunk_and_the_terminal_goes_on() {
    let port = free_port();
    let _host = serve(port);
    let rbxm = installed_plugin().await;
    let mut studio = studio(port, &rbxm).await;

    let mut child = terminal(port);
    let pid = child.id().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = lines(child.stdout.take().unwrap());
    let mut stderr = lines(child.stderr.take().unwrap());
    stdin
        .write_all(b"spins = 0\nprint('looping') while true do spins += 1 task.wait() end\n")
        .await
        .unwrap();
    // The chunk's print reaches Studio's output at once (the terminal shows it with the result).
    studio.wait_for_line("looping", Duration::from_secs(30)).await;
    let sent = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .await
        .unwrap();
    assert!(sent.success());
    let error = next_line(&mut stderr, "the cancellation").await;
    assert!(error.starts_with("error[cancelled]"), "{error}");
    // Back at the prompt, and the plugin stopped the loop: spins no longer grows.
    stdin
        .write_all(b"local before = spins task.wait(0.3) return spins == before, spins > 0\n.exit\n")
        .await
        .unwrap();
    assert_eq!(next_line(&mut stdout, "the check").await, "true, true");
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(
        status.code().is_some(),
        "the terminal exited by itself, not by the signal"
    );
}

#[tokio::test]
async fn several_studios_without_a_tty_fail_with_the_list() {
    let port = free_port();
    let _host = serve(port);
    let rbxm = installed_plugin().await;
    let _a = studio(port, &rbxm).await;
    let _b = studio(port, &rbxm).await;

    let child = terminal(port);
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr.contains("pass --session ID"), "{stderr}");
    assert!(stderr.contains("  1) ") && stderr.contains("  2) "), "{stderr}");
}

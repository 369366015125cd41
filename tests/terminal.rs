//! `studio-bridge terminal` against the real plugin in a headless Studio under Lune, hosted
//! by a `serve` process (so the terminal joins it as a peer, as it would beside an agent):
//! first with stdin piped (no TTY), then through a pseudo-terminal as a person uses it.

use crate::support;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use support::free_port;
use support::lune::HeadlessStudio;
use support::mcp_client::{binary, paired_config_dir};
use support::studio::{installed_plugin, serve};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

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
    // Two lines: it was cancelled, and (exec may write) how to learn whether it ran.
    assert_eq!(next_line(&mut stderr, "the cancellation").await, "cancelled");
    let fate = next_line(&mut stderr, "how to learn its fate").await;
    assert!(
        fate.starts_with("it may have run; `.state --operation-id ") && fate.ends_with("` tells"),
        "{fate}"
    );
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

// ---------------------------------------------------------------------------------------
// Through a pseudo-terminal: what a person at a TTY gets (rustyline's line editing, the
// continuation prompt, Ctrl-C as the byte 0x03, the session picker).
// ---------------------------------------------------------------------------------------

/// How long any one expected output may take on a loaded machine.
const PTY_TIMEOUT_MS: u64 = 60_000;

/// `studio-bridge terminal` on the slave side of a pty, seen and typed at from the master
/// side with rexpect. Escape sequences are stripped before matching; everything read so far
/// is kept for the failure message.
#[cfg(unix)]
struct Tty {
    session: rexpect::session::PtySession,
    seen: String,
}

#[cfg(unix)]
impl Tty {
    /// Starts the terminal on a new pty, or None when this machine cannot open one.
    fn spawn(port: u16, history_dir: &std::path::Path) -> Option<Tty> {
        Tty::spawn_command(&["terminal", "--port", &port.to_string()], history_dir)
    }

    /// `studio-bridge <args>` on a new pty.
    fn spawn_command(args: &[&str], history_dir: &std::path::Path) -> Option<Tty> {
        // What posix_openpt does on Linux; rexpect would fail the same way further in.
        if let Err(error) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/ptmx") {
            support::missing_tool(&format!("no pseudo-terminal can be opened here (/dev/ptmx: {error})"));
            return None;
        }
        let mut command = std::process::Command::new(binary());
        command
            .args(args)
            .env("STUDIO_BRIDGE_CONFIG_DIR", paired_config_dir())
            .env("NO_COLOR", "1")
            .env("TERM", "xterm")
            // The history file goes to the platform data dir: keep it out of the real one
            // (on Linux; HOME stays, since the bridge's peer token is found under it).
            .env("XDG_DATA_HOME", history_dir);
        let options = rexpect::session::Options::new()
            .timeout_ms(Some(PTY_TIMEOUT_MS))
            .strip_ansi_escape_codes(true);
        let session = rexpect::spawn_with_options(command, options).expect("start the terminal on a pty");
        Some(Tty {
            session,
            seen: String::new(),
        })
    }

    /// Waits for `regex` in the output; returns the text before it and the match.
    fn expect(&mut self, regex: &str) -> (String, String) {
        let result = tokio::task::block_in_place(|| self.session.exp_regex(regex));
        match result {
            Ok((before, matched)) => {
                self.seen.push_str(&before);
                self.seen.push_str(&matched);
                (before, matched)
            }
            Err(error) => panic!(
                "the terminal did not show /{regex}/: {error}\n--- terminal so far\n{}\n---",
                self.seen
            ),
        }
    }

    /// Waits for the main prompt (`Place [context]> `); returns what came before it.
    fn prompt(&mut self) -> String {
        self.expect(r"\S+ \[(edit|server|client)\]> ").0
    }

    /// Types a line and Enter (a terminal sends CR for Enter).
    fn type_line(&mut self, line: &str) {
        self.session.send(&format!("{line}\r")).expect("write to the pty");
        self.session.flush().expect("flush the pty");
    }

    /// Writes several lines with one write, as a paste or piped keystrokes arrive.
    fn type_burst(&mut self, lines: &[&str]) {
        let burst: String = lines.iter().map(|line| format!("{line}\r")).collect();
        // rexpect's writer is a LineWriter: with no '\n' in it, the burst goes out at flush.
        let written = self.session.send(&burst).expect("write to the pty");
        assert_eq!(written, burst.len());
        self.session.flush().expect("flush the pty");
    }

    /// Writes one raw byte, e.g. 0x03 (what Ctrl-C sends).
    fn type_control(&mut self, c: char) {
        self.session.send_control(c).expect("write to the pty");
    }

    /// Waits for the terminal to exit; its exit code.
    fn exit_code(&mut self) -> i32 {
        let rest = tokio::task::block_in_place(|| self.session.exp_eof()).unwrap_or_default();
        self.seen.push_str(&rest);
        match self.session.process().wait() {
            Ok(rexpect::process::WaitStatus::Exited(_, code)) => code,
            other => panic!("the terminal did not exit by itself: {other:?}\n{}", self.seen),
        }
    }
}

#[cfg(unix)]
fn temp_dir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sb-{what}-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_tty_lines_continuations_dot_commands_and_exit() {
    let port = free_port();
    let _host = serve(port);
    let rbxm = installed_plugin().await;
    let mut studio = studio(port, &rbxm).await;
    let Some(mut tty) = Tty::spawn(port, &temp_dir("pty-history")) else {
        return;
    };
    tty.expect(r"attached to .* \[edit\] \(session ");
    tty.prompt();

    // A single-line exec.
    tty.type_line("x = 20 + 1 print('x is', x)");
    tty.expect(r"x is 21\r?\n");
    tty.prompt();
    // A function over three lines: the two after the first get the continuation prompt.
    tty.type_line("function twice(a)");
    tty.expect(r"\n[\r ]*>> ");
    tty.type_line("  print('twice', a) return a * 2");
    tty.expect(r"\n[\r ]*>> ");
    tty.type_line("end");
    tty.prompt();
    tty.type_line("return twice(x), 'done'");
    let (_, result) = tty.expect(r#"\n42, "done"\r?\n"#);
    assert!(result.contains(r#"42, "done""#));
    tty.prompt();
    assert_eq!(
        studio.lines_so_far().iter().filter(|l| l.contains("twice 21")).count(),
        1,
        "the function ran once, when called, not while it was being typed"
    );
    // `.query` and `.logs`, with the CLI's flags.
    tty.type_line(".query Workspace.Baseplate --properties Anchored");
    tty.expect(r"Baseplate \(Part\)");
    tty.expect(r"Anchored = true");
    tty.prompt();
    tty.type_line(".logs --count 1 --levels Print");
    tty.expect(r"\[Print\] twice 21");
    tty.prompt();
    // Ctrl-C at a continuation prompt drops the unfinished chunk.
    tty.type_line("function never(");
    tty.expect(r"\n[\r ]*>> ");
    tty.type_control('c');
    tty.prompt();
    tty.type_line("return never == nil");
    tty.expect(r"\ntrue\r?\n");
    tty.prompt();
    tty.type_line(".exit");
    assert_eq!(tty.exit_code(), 0, ".exit leaves with 0");
    println!("--- terminal (escapes stripped)\n{}\n---", tty.seen);
    assert!(
        !tty.seen.contains("<eof>"),
        "an unfinished chunk is continued, not reported"
    );
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_tty_ctrl_c_cancels_the_running_line_and_returns_to_the_prompt() {
    let port = free_port();
    let _host = serve(port);
    let rbxm = installed_plugin().await;
    let mut studio = studio(port, &rbxm).await;
    let Some(mut tty) = Tty::spawn(port, &temp_dir("pty-history")) else {
        return;
    };
    tty.prompt();
    tty.type_line("spins = 0");
    tty.prompt();
    tty.type_line("print('looping') while true do spins += 1 task.wait() end");
    studio.wait_for_line("looping", Duration::from_secs(60)).await;
    // The byte a terminal sends for Ctrl-C; the line discipline turns it into SIGINT.
    tty.type_control('c');
    // Said in two lines, in the terminal's words; no word of operationIds or studio_query.
    tty.expect(r"\ncancelled\r?\nit may have run; `\.state --operation-id [0-9a-f-]+` tells\r?\n");
    tty.prompt();
    // The plugin stopped the loop (it got `cancel`): spins no longer grows.
    tty.type_line("local n = spins task.wait(0.3) return spins == n, n > 0");
    tty.expect(r"\ntrue, true\r?\n");
    tty.prompt();
    tty.type_line(".exit");
    assert_eq!(
        tty.exit_code(),
        0,
        "the terminal went on after Ctrl-C and left at .exit"
    );
    println!("--- terminal (escapes stripped)\n{}\n---", tty.seen);
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_tty_two_studios_are_offered_and_one_is_picked_by_number() {
    let port = free_port();
    let _host = serve(port);
    let rbxm = installed_plugin().await;
    let mut a = studio(port, &rbxm).await;
    let mut b = studio(port, &rbxm).await;
    let session_of = |studio: &mut HeadlessStudio| {
        let line = studio
            .lines_so_far()
            .iter()
            .find(|l| l.contains("[harness] connected context=edit"))
            .cloned()
            .unwrap();
        line.rsplit("sessionId=").next().unwrap().to_owned()
    };
    let (id_a, id_b) = (session_of(&mut a), session_of(&mut b));
    let Some(mut tty) = Tty::spawn(port, &temp_dir("pty-history")) else {
        return;
    };
    tty.expect("Several Studio sessions are connected:");
    let (list, _) = tty.expect(r"attach to which \(1-2\)\? ");
    let second = list
        .lines()
        .find(|l| l.trim_start().starts_with("2) "))
        .unwrap_or_else(|| panic!("no row 2 in {list:?}"));
    let (chosen, chosen_id, other) = if second.contains(&id_a) {
        (&mut a, &id_a, &mut b)
    } else {
        assert!(second.contains(&id_b), "row 2 is one of the two Studios: {list}");
        (&mut b, &id_b, &mut a)
    };
    // A wrong answer asks again.
    tty.type_line("7");
    tty.expect("type a number from 1 to 2");
    tty.expect(r"attach to which \(1-2\)\? ");
    tty.type_line("2");
    tty.expect(&format!(r"attached to .* \[edit\] \(session {chosen_id}\)"));
    tty.prompt();
    tty.type_line("print('picked ' .. 'by number')");
    tty.expect(r"\npicked by number\r?\n");
    chosen.wait_for_line("picked by number", Duration::from_secs(60)).await;
    assert!(
        !other.lines_so_far().iter().any(|l| l.contains("picked by number")),
        "the line ran in the Studio that was picked, not the other"
    );
    tty.prompt();
    tty.type_line(".exit");
    assert_eq!(tty.exit_code(), 0);
    println!("--- terminal (escapes stripped)\n{}\n---", tty.seen);
}

/// Several lines arriving in one read (a paste into a terminal without bracketed paste,
/// keystrokes piped over ssh, fast typing): every line runs, in order, each as if typed,
/// and lines that form one chunk together still continue into one.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_tty_lines_arriving_at_once_all_run_in_order() {
    let port = free_port();
    let _host = serve(port);
    let rbxm = installed_plugin().await;
    let mut studio = studio(port, &rbxm).await;
    let Some(mut tty) = Tty::spawn(port, &temp_dir("pty-history")) else {
        return;
    };
    tty.prompt();
    // One write to the pty: three lines, no bracketed-paste markers around them.
    tty.type_burst(&[
        "burst = {} table.insert(burst, 'one') print('burst one')",
        "table.insert(burst, 'two') print('burst two')",
        "table.insert(burst, 'three') print('burst three')",
    ]);
    tty.expect(r"\nburst one\r?\n");
    tty.prompt();
    tty.expect(r"\nburst two\r?\n");
    tty.prompt();
    tty.expect(r"\nburst three\r?\n");
    tty.prompt();
    // A pasted function over three lines, then its call: the first three continue into one
    // chunk, the fourth runs it.
    tty.type_burst(&[
        "function pasted(a)",
        "  return a .. '!'",
        "end",
        "print(pasted('pasted'), table.concat(burst, ','))",
    ]);
    tty.expect(r"\npasted! one,two,three\r?\n");
    tty.prompt();
    tty.type_line(".exit");
    assert_eq!(tty.exit_code(), 0);
    println!("--- terminal (escapes stripped)\n{}\n---", tty.seen);
    // Studio ran each line once, in the order written.
    let lines = studio.lines_so_far();
    let ran: Vec<usize> = ["burst one", "burst two", "burst three", "pasted! one,two,three"]
        .iter()
        .map(|want| {
            let at: Vec<usize> = (0..lines.len()).filter(|&i| lines[i].contains(want)).collect();
            assert_eq!(at.len(), 1, "{want} ran once: {lines:?}");
            at[0]
        })
        .collect();
    assert!(ran.is_sorted(), "in order: {ran:?} {lines:?}");
    assert!(
        !tty.seen.contains("<eof>"),
        "the pasted function continued, not reported"
    );
}

/// What `error(...)` raises with a message that reads like an unfinished chunk (short enough
/// that the pty's 80 columns do not wrap it after the prompt).
const RUNTIME_EOF: &str = r#"error("Expected 'end', got <eof>")"#;

/// Piped lines, all in one write: each runs in order, and a runtime error whose message says
/// `<eof>` is reported as the error it is, not taken for an unfinished chunk (which swallowed
/// it and every line after it into one chunk that never finished).
#[tokio::test]
async fn piped_lines_in_one_write_run_in_order_and_a_runtime_eof_error_is_reported() {
    let port = free_port();
    let _host = serve(port);
    let rbxm = installed_plugin().await;
    let mut studio = studio(port, &rbxm).await;

    let script = [
        "print('piped one')",
        RUNTIME_EOF,
        "print('piped two')",
        "function later()",
        "  return 'piped three'",
        "end",
        "print(later())",
    ]
    .join("\n");
    let mut child = terminal(port);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(format!("{script}\n").as_bytes()).await.unwrap();
    drop(stdin);
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the terminal ends at the end of its input")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("--- stdout\n{stdout}--- stderr\n{stderr}---");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        ["piped one", "piped two", "piped three"],
        "every line ran, in order"
    );
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("got <eof>")).collect();
    assert_eq!(errors.len(), 1, "the runtime error is reported once: {stderr}");
    assert!(errors[0].contains("error"), "{stderr}");
    assert_eq!(output.status.code(), Some(1), "a failed line makes a piped run exit 1");
    // Studio ran the raising line once, not again with the lines after it appended.
    let lines = studio.lines_so_far().to_vec();
    let ran: Vec<usize> = ["piped one", "piped two", "piped three"]
        .iter()
        .map(|want| {
            let at: Vec<usize> = (0..lines.len()).filter(|&i| lines[i].contains(want)).collect();
            assert_eq!(at.len(), 1, "{want} ran once: {lines:?}");
            at[0]
        })
        .collect();
    assert!(ran.is_sorted(), "in order: {ran:?} {lines:?}");
}

/// On a terminal: a runtime error that says `<eof>` is an error and the main prompt, not a
/// continuation prompt; the next line runs on its own.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_tty_a_runtime_error_saying_eof_is_reported_not_continued() {
    let port = free_port();
    let _host = serve(port);
    let rbxm = installed_plugin().await;
    let _studio = studio(port, &rbxm).await;
    let Some(mut tty) = Tty::spawn(port, &temp_dir("pty-history")) else {
        return;
    };
    tty.prompt();
    tty.type_line(RUNTIME_EOF);
    // Whichever prompt comes next: the main one (reported) or a continuation (the defect).
    let (before, next) = tty.expect(r"(\n[\r ]*>> |\S+ \[edit\]> )");
    assert!(
        next.contains("[edit]> "),
        "a main prompt, not a continuation prompt: {next:?}\n{}",
        tty.seen
    );
    assert!(
        before.lines().any(|l| l.contains("error") && l.contains("got <eof>")),
        "the runtime error is reported: {before:?}"
    );
    tty.type_line("print('on its own ' .. 'line')");
    tty.expect(r"\non its own line\r?\n");
    tty.prompt();
    tty.type_line(".exit");
    assert_eq!(tty.exit_code(), 0);
    println!("--- terminal (escapes stripped)\n{}\n---", tty.seen);
}

/// On a terminal nothing waits in silence (#41): a command that waits for Studio says so
/// on stderr, and `mcp` started by hand says what it is for.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_tty_waits_are_said_and_mcp_by_hand_explains_itself() {
    let port = free_port().to_string();
    let Some(mut cli) = Tty::spawn_command(&["state", "--port", &port], &temp_dir("pty-wait")) else {
        return;
    };
    // No Studio: the startup grace is said, then the error.
    // (rexpect reads bytes as Latin-1: the ellipsis is left out of the pattern.)
    cli.expect(r"waiting for Studio to connect \(up to 3 s\)");
    cli.expect(r"error\[no_sessions\]");
    assert_eq!(cli.exit_code(), 1);

    let Some(mut mcp) = Tty::spawn_command(
        &["mcp", "--no-install-plugin", "--port", &free_port().to_string()],
        &temp_dir("pty-mcp"),
    ) else {
        return;
    };
    mcp.expect(r"studio-bridge mcp speaks MCP on stdin/stdout, for an MCP client that starts it");
    mcp.expect(r"try `studio-bridge terminal` or `studio-bridge --help`");
    mcp.type_control('d');
    mcp.exit_code();
    println!("--- mcp on a terminal\n{}\n---", mcp.seen);
}

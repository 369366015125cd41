//! Running one of the project's own Luau tools (selene, stylua): found on PATH where the
//! project's toolchain manager (rokit, aftman, foreman) puts it, or at the path an
//! environment variable names; fed the source on stdin, in this process's working directory
//! (the project's, where its `selene.toml` / `stylua.toml` and `sourcemap.json` are), with a
//! deadline after which the child is killed.
//!
//! Why executables and not the `selene-lib` and `stylua` crates: embedding both measured
//! +5.35 MB on a 13.25 MB binary (over the 14 MB size budget, B5) and compiled a second
//! full_moon; and the project's own pinned versions with its own config give exactly the
//! diagnostics and formatting its CI gives.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// One external tool: its executable's name and the variable that overrides where it is.
#[derive(Debug, Clone, Copy)]
pub struct Tool {
    pub name: &'static str,
    /// An environment variable holding the executable's path; an empty value means "none":
    /// the tool counts as not installed (how the tests take it away).
    pub env: &'static str,
    /// How to install it, for the message that says it is missing.
    pub install: &'static str,
}

/// How long a tool may take over one source before it is killed.
pub const DEADLINE: Duration = Duration::from_secs(5);

impl Tool {
    /// The executable: the variable's path if set, else the first `name` on PATH.
    pub fn find(&self) -> Option<PathBuf> {
        if let Some(path) = std::env::var_os(self.env) {
            return (!path.is_empty()).then(|| PathBuf::from(path));
        }
        let file = format!("{}{}", self.name, std::env::consts::EXE_SUFFIX);
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|dir| dir.join(&file))
            .find(|candidate| candidate.is_file())
    }

    /// Why it cannot run: not found, and how to get it.
    pub fn missing(&self) -> String {
        format!(
            "{} not found on PATH (nor in {}); {}",
            self.name, self.env, self.install
        )
    }

    /// Runs the tool with `args` and `stdin` as its input, in the working directory, within
    /// [`DEADLINE`]. Its stdout and stderr, and whether it exited 0; `Err` says why it did
    /// not run or finish, in words for a result (the child is killed on the deadline).
    pub async fn run<I, S>(&self, args: I, stdin: &str) -> Result<Ran, String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let program = self.find().ok_or_else(|| self.missing())?;
        run(self.name, &program, args, stdin, DEADLINE).await
    }
}

/// Runs `program` (named `name` in messages) as [`Tool::run`] does, within `deadline`.
async fn run<I, S>(name: &str, program: &Path, args: I, stdin: &str, deadline: Duration) -> Result<Ran, String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("{name} ({}) could not be started: {e}", program.display()))?;
    let mut input = child.stdin.take();
    let text = stdin.to_owned();
    // Written beside the reading: a large source would fill the pipe while the tool
    // fills its stdout. A tool that exits without reading it all is not an error here.
    let writer = tokio::spawn(async move {
        if let Some(input) = input.as_mut() {
            let _ = input.write_all(text.as_bytes()).await;
            let _ = input.shutdown().await;
        }
    });
    let finished = tokio::time::timeout(deadline, child.wait_with_output()).await;
    writer.abort();
    // On the deadline the future owning the child was dropped, which killed it.
    let output = finished
        .map_err(|_| format!("{name} took longer than {:.1}s and was stopped", deadline.as_secs_f64()))?
        .map_err(|e| format!("{name} could not be read: {e}"))?;
    Ok(Ran {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

/// What a tool printed, and whether it exited 0.
#[derive(Debug)]
pub struct Ran {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    /// Its stderr (or stdout when that is empty) in one line of at most 300 characters.
    pub fn complaint(&self) -> String {
        let text = self.stderr.trim();
        let text = if text.is_empty() { self.stdout.trim() } else { text };
        let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if line.is_empty() {
            return "no output".to_owned();
        }
        let cut: String = line.chars().take(300).collect();
        if cut.len() < line.len() {
            format!("{cut}…")
        } else {
            cut
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_large_input_is_fed_while_the_output_is_read() {
        // 2 MB both ways: more than a pipe holds, so writing first and reading after would
        // hang; `cat` answers as it reads.
        let input = "print(1)\n".repeat(250_000);
        let ran = run("cat", Path::new("/bin/cat"), ["-"], &input, Duration::from_secs(30))
            .await
            .expect("cat ran");
        assert!(ran.success);
        assert_eq!(ran.stdout.len(), input.len());
        assert!(ran.stdout == input, "the output is the input, whole");
    }

    #[tokio::test]
    async fn a_tool_past_its_deadline_is_stopped_with_a_message() {
        let outcome = run(
            "sleepy",
            Path::new("/bin/sh"),
            ["-c", "exec sleep 30"],
            "",
            Duration::from_millis(200),
        )
        .await;
        let message = outcome.expect_err("stopped at the deadline");
        assert_eq!(message, "sleepy took longer than 0.2s and was stopped");
    }

    #[tokio::test]
    async fn a_failing_tool_is_its_stderr_in_one_line() {
        let ran = run(
            "noisy",
            Path::new("/bin/sh"),
            ["-c", "echo 'first line' >&2; echo '  second' >&2; exit 2"],
            "",
            Duration::from_secs(30),
        )
        .await
        .expect("it ran");
        assert!(!ran.success);
        assert_eq!(ran.complaint(), "first line second");
        let gone = run("absent", Path::new("/no/such/tool"), ["-"], "", Duration::from_secs(30)).await;
        assert!(
            gone.expect_err("not started")
                .starts_with("absent (/no/such/tool) could not be started")
        );
    }
}

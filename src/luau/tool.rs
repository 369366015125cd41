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
use std::path::PathBuf;
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
        let mut child = Command::new(&program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("{} ({}) could not be started: {e}", self.name, program.display()))?;
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
        let finished = tokio::time::timeout(DEADLINE, child.wait_with_output()).await;
        writer.abort();
        // On the deadline the future owning the child was dropped, which killed it.
        let output = finished
            .map_err(|_| format!("{} took longer than {}s and was stopped", self.name, DEADLINE.as_secs()))?
            .map_err(|e| format!("{} could not be read: {e}", self.name))?;
        Ok(Ran {
            success: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }
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

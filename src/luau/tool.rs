//! Running one of the project's own Luau tools (selene, stylua): found on PATH where the
//! project's toolchain manager (rokit, aftman, foreman) puts it, or at the path an
//! environment variable names; fed the source on stdin, in this process's working directory
//! (the project's, where its `selene.toml` / `stylua.toml` and `sourcemap.json` are), with a
//! deadline after which the child is killed: on Unix the child leads a process group of its
//! own and the whole group is killed, so that nothing it started (a wrapper script's real
//! tool, a shim of a toolchain manager) outlives it. At most [`AT_ONCE`] run at once in the
//! process, whatever the number of calls (a `create` of many scripts lints each). PATH
//! entries that are not absolute are skipped: a relative one would run whatever the
//! working directory (a project someone else wrote) holds under the tool's name.
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

/// Tool runs at once in this process; the rest wait their turn within their deadline.
pub const AT_ONCE: usize = 4;

static TURNS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(AT_ONCE);

impl Tool {
    /// The executable: the variable's path if set, else the first `name` on PATH.
    pub fn find(&self) -> Option<PathBuf> {
        if let Some(path) = std::env::var_os(self.env) {
            return (!path.is_empty()).then(|| PathBuf::from(path));
        }
        self.find_on(&std::env::var_os("PATH")?)
    }

    /// The first `name` in the absolute entries of `path` (a PATH value).
    fn find_on(&self, path: &OsStr) -> Option<PathBuf> {
        let file = format!("{}{}", self.name, std::env::consts::EXE_SUFFIX);
        std::env::split_paths(path)
            .filter(|dir| dir.is_absolute())
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
    let started = tokio::time::Instant::now();
    let _turn = tokio::time::timeout(deadline, TURNS.acquire())
        .await
        .map_err(|_| {
            format!(
                "{name} waited {:.1}s for another run to finish and was not started",
                deadline.as_secs_f64()
            )
        })?
        .map_err(|_| format!("{name} could not be started: no runs are taken any more"))?;
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    let mut child = command
        .spawn()
        .map_err(|e| format!("{name} ({}) could not be started: {e}", program.display()))?;
    let group = child.id();
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
    let left = deadline.saturating_sub(started.elapsed());
    let finished = tokio::time::timeout(left, child.wait_with_output()).await;
    writer.abort();
    // On the deadline the future owning the child was dropped, which killed it; its group
    // goes with it (the child led it; its id is the group's).
    if finished.is_err() {
        kill_group(group);
    }
    let output = finished
        .map_err(|_| format!("{name} took longer than {:.1}s and was stopped", deadline.as_secs_f64()))?
        .map_err(|e| format!("{name} could not be read: {e}"))?;
    Ok(Ran {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

/// Kills the process group `leader` led, whatever is left of it.
#[cfg(unix)]
fn kill_group(leader: Option<u32>) {
    if let Some(group) = leader.and_then(|id| libc::pid_t::try_from(id).ok()) {
        // SAFETY: kill(2) with a negative pid signals that process group; no memory is
        // touched. A group already gone is ESRCH, which changes nothing.
        unsafe {
            libc::kill(-group, libc::SIGKILL);
        }
    }
}

/// On Windows the child alone is killed (kill_on_drop); a job object would take what it
/// started too, which is not built yet.
#[cfg(not(unix))]
fn kill_group(_leader: Option<u32>) {}

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

    /// What a tool started dies with it at the deadline: a shell that starts a sleeper in
    /// the background and waits is killed, and so is the sleeper (same process group).
    #[tokio::test]
    async fn what_a_tool_started_is_killed_with_it_at_the_deadline() {
        let marker = std::env::temp_dir().join(format!("sb-tool-group-{}", std::process::id()));
        let _ = std::fs::remove_file(&marker);
        let script = format!("sleep 30 & echo $! > {}; wait", marker.display());
        let outcome = run(
            "group",
            Path::new("/bin/sh"),
            ["-c", &script],
            "",
            Duration::from_millis(500),
        )
        .await;
        assert!(outcome.is_err(), "stopped at the deadline");
        let sleeper: i32 = std::fs::read_to_string(&marker)
            .expect("the sleeper's pid")
            .trim()
            .parse()
            .expect("a pid");
        let _ = std::fs::remove_file(&marker);
        // Killed: gone once its parent (init, by now) reaps it.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        // SAFETY: kill(pid, 0) only asks whether the process exists.
        while unsafe { libc::kill(sleeper, 0) } == 0 {
            let zombie = std::fs::read_to_string(format!("/proc/{sleeper}/stat"))
                .map(|stat| stat.split_whitespace().nth(2) == Some("Z"))
                .unwrap_or(true);
            if zombie {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the background sleeper {sleeper} outlived the tool"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[test]
    fn relative_path_entries_are_never_searched() {
        // Relative to the working directory (the crate's, under cargo test).
        let relative = PathBuf::from("target").join(format!("sb-tool-path-{}", std::process::id()));
        std::fs::create_dir_all(&relative).unwrap();
        std::fs::write(
            relative.join(format!("sb-fake-tool{}", std::env::consts::EXE_SUFFIX)),
            "",
        )
        .unwrap();
        let tool = Tool {
            name: "sb-fake-tool",
            env: "SB_FAKE_TOOL",
            install: "",
        };
        assert_eq!(tool.find_on(relative.as_os_str()), None, "a relative entry is skipped");
        let absolute = std::env::current_dir().unwrap().join(&relative);
        let both = std::env::join_paths([relative.clone(), absolute.clone()]).unwrap();
        assert_eq!(
            tool.find_on(&both),
            Some(absolute.join(format!("sb-fake-tool{}", std::env::consts::EXE_SUFFIX)))
        );
        let _ = std::fs::remove_dir_all(&relative);
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

//! Finding Lune (the Luau runtime that runs the real plugin headlessly) and the project's
//! Luau tools, and running the headless Studio harness in `tests/lune/`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// Lune's file name on this platform.
const LUNE_FILE: &str = if cfg!(windows) { "lune.exe" } else { "lune" };

/// The Lune binary: `$LUNE`, else `lune` on PATH, else where `.ci/run` installs it.
pub fn lune() -> PathBuf {
    if let Some(path) = std::env::var_os("LUNE") {
        return PathBuf::from(path);
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let candidate = dir.join(LUNE_FILE);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    let cached = dirs_home().join(".cache/studio-bridge-tools/bin").join(LUNE_FILE);
    assert!(
        cached.is_file(),
        "Lune 0.11.1 is needed for the plugin tests: `bash .ci/run` installs it, or `cargo install lune --locked --version 0.11.1`, or set LUNE=/path/to/lune"
    );
    cached
}

/// A Luau tool the project pins (`selene`, `stylua`): on PATH, else where `.ci/run` installs
/// it. None when neither has it (the caller fails through `missing_tool`).
pub fn luau_tool(name: &str) -> Option<PathBuf> {
    let file = format!("{name}{}", std::env::consts::EXE_SUFFIX);
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(&file));
    let cached = dirs_home().join(".cache/studio-bridge-tools/bin").join(&file);
    on_path.chain(std::iter::once(cached)).find(|p| p.is_file())
}

fn dirs_home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root"))
}

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A headless Studio running the real plugin: `lune run tests/lune/studio.luau`.
pub struct HeadlessStudio {
    pub child: Child,
    lines: mpsc::UnboundedReceiver<String>,
    /// Every line read so far, in order.
    history: Vec<String>,
}

impl HeadlessStudio {
    /// Starts the harness with the plugin from `rbxm`, in `context` (`edit` or `play`).
    pub fn start(port: u16, rbxm: &Path, context: &str) -> HeadlessStudio {
        HeadlessStudio::start_with(port, rbxm, context, &[])
    }

    /// [`HeadlessStudio::start`] with more harness arguments (`--clients 3`, …).
    pub fn start_with(port: u16, rbxm: &Path, context: &str, extra: &[&str]) -> HeadlessStudio {
        HeadlessStudio::start_lacking(port, rbxm, context, extra, &[])
    }

    /// [`HeadlessStudio::start_with`] in a Studio without the engine members `missing`
    /// (`Class.Member`), as an older Studio, or one with a feature switched off, presents
    /// them (tests/lune/lib/Studio.luau, `STUDIO_BRIDGE_TEST_MISSING`).
    pub fn start_lacking(port: u16, rbxm: &Path, context: &str, extra: &[&str], missing: &[&str]) -> HeadlessStudio {
        HeadlessStudio::start_configured(port, rbxm, context, extra, missing, &[])
    }

    /// [`HeadlessStudio::start_lacking`] with the test Studio's own settings in its
    /// environment (`STUDIO_BRIDGE_TEST_CAPTURE_PERMISSION`, tests/lune/lib/StudioCapture.luau).
    pub fn start_configured(
        port: u16,
        rbxm: &Path,
        context: &str,
        extra: &[&str],
        missing: &[&str],
        env: &[(&str, &str)],
    ) -> HeadlessStudio {
        let mut child = Command::new(lune())
            .current_dir(repo())
            .env("STUDIO_BRIDGE_TEST_MISSING", missing.join(","))
            .envs(env.iter().copied())
            .args([
                "run",
                "tests/lune/studio.luau",
                "--",
                "--port",
                &port.to_string(),
                "--context",
                context,
            ])
            .arg("--rbxm")
            .arg(rbxm)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start lune");
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, lines) = mpsc::unbounded_channel();
        let warnings = sender.clone();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        // Studio's warnings and errors (the harness writes them to stderr): shown as
        // before, and readable as lines too (a plugin's one-time warnings are outcomes).
        let stderr = child.stderr.take().expect("piped stderr");
        tokio::spawn(async move {
            let mut reader = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                eprintln!("{line}");
                let _ = warnings.send(line);
            }
        });
        HeadlessStudio {
            child,
            lines,
            history: Vec::new(),
        }
    }

    /// Every line the harness printed so far.
    pub fn lines_so_far(&mut self) -> &[String] {
        while let Ok(line) = self.lines.try_recv() {
            self.history.push(line);
        }
        &self.history
    }

    /// Waits for a harness line containing `needle`.
    /// Waits until the harness has said `[harness] connected context=<c>` for each of
    /// `contexts`, in order (a context named twice waits for two connections).
    pub async fn wait_connected(&mut self, contexts: &[&str]) {
        for context in contexts {
            self.wait_for_line(
                &format!("[harness] connected context={context}"),
                Duration::from_secs(30),
            )
            .await;
        }
    }

    pub async fn wait_for_line(&mut self, needle: &str, timeout: Duration) -> String {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(line)) if line.contains(needle) => {
                    self.history.push(line.clone());
                    return line;
                }
                Ok(Some(line)) => self.history.push(line),
                Ok(None) => panic!("the headless Studio exited before printing {needle:?}"),
                Err(_) => panic!("the headless Studio did not print {needle:?} within {timeout:?}"),
            }
        }
    }
}

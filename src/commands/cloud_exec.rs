//! `cloud_exec`: runs Luau in a fresh server of the place on Roblox's servers (Open Cloud's
//! Luau Execution), not in the person's Studio: the game's tests in CI, ten at once, with
//! no Studio open. The task is created, polled until it ends (progress reports QUEUED and
//! PROCESSING), and its logs are read; a FAILED task is `script_error` with the same fields
//! in `details`, so `studio-bridge cloud exec --file tests/run.luau` exits 1 for CI.
//!
//! A cancel or the deadline stops the waiting, not the task: the error says it may still
//! run, with its path. The script passes the Luau syntax gate first, as `exec`'s does.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant as WallClock};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

use super::cloud_place::{self, Where};
use super::{Command, Invocation, Kind, Output, Render, Spec};
use crate::cloud::luau::{self, Place};
use crate::human::render::{Rendered, Style, clean, output_window_line};
use crate::protocol::{Context, ErrorCode, ToolError};

/// Open Cloud's limit on a task's run: 5 minutes.
const MAX_TIMEOUT_MS: u64 = 300_000;
/// Time for the queue, the polls and the logs, past the script's own limit.
const QUEUE_GRACE: Duration = Duration::from_secs(60);
/// Open Cloud's limit on a script: 4 MB.
const MAX_SCRIPT_BYTES: usize = 4 * 1024 * 1024;

fn default_timeout_ms() -> u64 {
    MAX_TIMEOUT_MS
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CloudExecArgs {
    pub script: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub universe: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary_input: Option<PathBuf>,
    /// false: no syntax check
    #[serde(default = "super::check_by_default")]
    pub check: bool,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloudExecResult {
    /// COMPLETE (FAILED and CANCELLED are errors carrying these fields)
    pub state: String,
    pub results: Vec<Json>,
    pub logs: Vec<CloudLog>,
    pub duration_ms: u64,
    /// The task's resource path
    pub task: String,
}

/// One line the script printed.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct CloudLog {
    /// Output, Info, Warning or Error
    pub level: String,
    pub body: String,
    pub time: String,
}

pub struct CloudExec;

impl Command for CloudExec {
    type Args = CloudExecArgs;
    type Result = CloudExecResult;
    const SPEC: Spec = Spec {
        name: "cloud_exec",
        description: "Run Luau in a fresh server of the place on Roblox's servers (Open Cloud): CI tests.",
        needs_session: false,
        default_context: Context::Edit,
        timeout: Duration::from_secs(MAX_TIMEOUT_MS / 1000 + 60),
        kind: Kind::Destructive,
        capabilities: super::Capabilities::of(&[super::Capability::Cloud, super::Capability::Code]),
        idempotent: false,
        open_world: true,
        positional: &["script"],
        truncation_hint: "Return or print less.",
        follow_event: None,
        example: "studio-bridge cloud exec 'return 1 + 1' --universe 123 --place 456   (or --file tests/run.luau)",
        from_file: Some("script"),
        flag_help: &[
            ("script", "The Luau to run (`-`: from stdin)"),
            ("universe", "The universe (default: the open Studio's)"),
            ("place", "The place (default: the open Studio's)"),
            ("version", "A version of the place (default: its current one)"),
            ("timeoutMs", "The script's time limit, at most 300000"),
            (
                "binaryInput",
                "A file (up to 100 MiB) the script gets as a buffer: ({...})[1].BinaryInput",
            ),
        ],
    };

    async fn run(args: CloudExecArgs, cx: &Invocation) -> Result<Output, ToolError> {
        if !(1000..=MAX_TIMEOUT_MS).contains(&args.timeout_ms) {
            return Err(ToolError::invalid_args(format!(
                "`timeoutMs` must be between 1000 and {MAX_TIMEOUT_MS} (Open Cloud runs a script for at most 5 minutes)."
            )));
        }
        if args.script.len() > MAX_SCRIPT_BYTES {
            return Err(ToolError::invalid_args(format!(
                "`script` is {} bytes, over Open Cloud's 4 MB limit; require ModuleScripts from the place instead.",
                args.script.len()
            )));
        }
        if args.check {
            super::exec::check_syntax(&args.script)?;
        }
        let Where { universe, place } = cloud_place::resolve(cx, args.universe, args.place, true).await?;
        let place = Place {
            universe,
            place: place.unwrap_or_default(),
            version: args.version,
        };
        let input = match &args.binary_input {
            Some(path) => Some(read_input(path)?),
            None => None,
        };
        let timeout = Duration::from_millis(args.timeout_ms);
        let (cloud, deadline) = cloud_place::client(timeout + QUEUE_GRACE)?;
        let cancel = &cx.hooks.cancel;
        let started = WallClock::now();
        let input = match input {
            Some(bytes) => Some(luau::binary_input(&cloud, universe, bytes, deadline, cancel).await?),
            None => None,
        };
        let task = luau::create(&cloud, place, &args.script, input.as_deref(), timeout, deadline, cancel).await?;
        let mut step = 0.0;
        let task = luau::wait(&cloud, task, deadline, cancel, |state| {
            step += 1.0;
            super::open::report(cx, step, format!("Luau task {state}"));
        })
        .await?;
        let (logs, more) = luau::logs(&cloud, &task.path, deadline, cancel).await?;
        let mut result = json!({
            "state": task.state,
            "results": task.output.as_ref().map(|o| o.results.clone()).unwrap_or_default(),
            "logs": logs.iter().map(luau::LogLine::to_json).collect::<Vec<_>>(),
            "durationMs": started.elapsed().as_millis() as u64,
            "task": task.path,
        });
        if more {
            result["logsTruncated"] = Json::Bool(true);
        }
        match task.state.as_str() {
            "COMPLETE" => Ok(Output::json(result)),
            state => {
                let error = task.error.clone();
                let (code, message) = match (&error, state) {
                    (_, "CANCELLED") => (
                        ErrorCode::Cancelled,
                        "The Luau task was cancelled on Roblox's side.".to_owned(),
                    ),
                    (Some(error), _) => (ErrorCode::ScriptError, format!("{}: {}", error.code, error.message)),
                    (None, _) => (
                        ErrorCode::ScriptError,
                        "The Luau task failed and gave no reason.".to_owned(),
                    ),
                };
                if let Some(error) = error {
                    result["error"] = json!({ "code": error.code, "message": error.message });
                }
                Err(ToolError::new(code, message).with_details(result))
            }
        }
    }
}

/// The binary input's bytes, refusing a missing file or one over the API's 100 MiB.
fn read_input(path: &std::path::Path) -> Result<bytes::Bytes, ToolError> {
    let cannot = |e: std::io::Error| {
        ToolError::new(
            ErrorCode::NotFound,
            format!("binaryInput: {} cannot be read: {e}", path.display()),
        )
    };
    let size = std::fs::metadata(path).map_err(cannot)?.len();
    if size > luau::MAX_BINARY_INPUT {
        return Err(ToolError::invalid_args(format!(
            "binaryInput: {} is {size} bytes, over Open Cloud's 100 MiB for a binary input.",
            path.display()
        )));
    }
    std::fs::read(path).map(bytes::Bytes::from).map_err(cannot)
}

impl Render for CloudExec {
    /// What the script printed, then its results as JSON on one line.
    fn render(_args: &Json, result: &Json, out: Style, _err: Style) -> Option<Rendered> {
        let mut rendered = Rendered::default();
        for line in result.get("logs")?.as_array()? {
            let level = match line.get("level")?.as_str()? {
                "Output" => "Print",
                other => other,
            };
            let _ = writeln!(
                rendered.stdout,
                "{}",
                output_window_line(level, line.get("body")?.as_str()?, out)
            );
        }
        let results = result.get("results")?.as_array()?;
        if !results.is_empty() {
            let _ = writeln!(rendered.stdout, "{}", clean(&Json::Array(results.clone()).to_string()));
        }
        Some(rendered)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::plain;
    use serde_json::json;

    #[test]
    fn cloud_exec_prints_the_logs_then_the_results() {
        let result = json!({
            "state": "COMPLETE", "results": [3, {"a": true}],
            "logs": [{"level": "Output", "body": "hi", "time": "t"}, {"level": "Warning", "body": "hm", "time": "t"}],
            "durationMs": 5, "task": "universes/1/places/2/luau-execution-session-tasks/x",
        });
        let rendered = plain("cloud_exec", &result);
        assert_eq!(rendered.stdout, "hi\nwarning: hm\n[3,{\"a\":true}]\n");
    }
}

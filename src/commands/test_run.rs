//! `test_run`: run a script inside a playtest's server and get its result and the test's
//! output, Studio back in Edit afterwards. The edit plugin starts the test with the script
//! as its arguments and the server's plugin ends it with the result (plugin/src/Actions/
//! TestRun.luau and TestRunner.luau say how).

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::exec::Runtime;
use super::{Command, Invocation, Kind, Output, Spec};
use crate::protocol::{Context, ToolError};
use crate::sourcemap::locations::Location;

/// Longest `timeoutMs` accepted (10 minutes).
const MAX_TIMEOUT_MS: u64 = 600_000;
/// Beyond `timeoutMs`: the test's DataModels starting and ending (the plugin allows 20 s
/// and 10 s), and the answer's way back.
const TEST_OVERHEAD: Duration = Duration::from_secs(35);

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TestMode {
    #[default]
    Play,
    Run,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TestRunArgs {
    pub script: String,
    #[serde(default)]
    pub mode: TestMode,
    #[serde(default = "default_timeout_ms")]
    #[schemars(range(min = 1, max = 600_000))]
    pub timeout_ms: u64,
    /// game: in the game's script VM.
    #[serde(default, skip_serializing_if = "Runtime::is_plugin")]
    pub runtime: Runtime,
    // >1: a multiplayer test whose script runs once they joined (the guide says so: B9)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 8))]
    pub players: Option<u8>,
    /// false: no syntax check
    #[schemars(extend("default" = true))]
    #[serde(default = "super::check_by_default", skip_serializing)]
    pub check: bool,
    /// Each script's covered lines
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub coverage: bool,
}

/// How long a multiplayer test's server waits for its players before it runs the script
/// (plugin/src/TestRunner.luau, PLAYERS_S).
const PLAYERS_WAIT: Duration = Duration::from_secs(20);

fn default_timeout_ms() -> u64 {
    60_000
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TestRunResult {
    pub success: bool,
    /// The script's returns (nil as null, in place).
    pub returns: Vec<Json>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Where the error names scripts: `{path, line, file?}` (file: from the project's sourcemap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locations: Option<Vec<Location>>,
    /// Output of the test's server and clients while it ran, in order.
    pub logs: Vec<TestLog>,
    pub duration_ms: u64,
    pub timed_out: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    /// With `coverage`: `{scripts: [{path, file?, covered: [line], lines, functions?}],
    /// totals, cut?}` (file: from the project's sourcemap), or `{error}` where the engine
    /// refused (ScriptContext:EnableCoverage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<serde_json::Map<String, Json>>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct TestLog {
    pub level: String,
    pub body: String,
    pub context: String,
    /// Where the line names scripts: `{path, line, file?}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locations: Option<Vec<Location>>,
}

pub struct TestRun;

impl Command for TestRun {
    type Args = TestRunArgs;
    type Result = TestRunResult;
    const SPEC: Spec = Spec {
        name: "test_run",
        description: "Run Luau in a fresh playtest's server, then stop it: returns, errors, output.",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(95),
        kind: Kind::Destructive,
        capabilities: super::Capabilities::of(&[super::Capability::Code, super::Capability::Play]),
        idempotent: false,
        open_world: true,
        positional: &["script"],
        truncation_hint: "Return or print less.",
        follow_event: None,
        example: "studio-bridge test-run 'return #game.Players:GetPlayers()' --players 2   (or --file F)",
        from_file: Some("script"),
        flag_help: &[
            ("script", "The Luau to run in the playtest (`-`: from stdin)"),
            ("mode", "play: with clients; run: server only"),
            ("timeoutMs", "Stop the test after this many ms"),
            ("players", "Clients to start; the script runs once they joined"),
        ],
    };
    const FILES: super::files::Files = super::files::Files {
        messages: &["error"],
        entries: &["logs"],
        path_objects: &["coverage.scripts"],
        ..super::files::Files::NONE
    };

    async fn run(args: TestRunArgs, cx: &Invocation) -> Result<Output, ToolError> {
        if !(1..=MAX_TIMEOUT_MS).contains(&args.timeout_ms) {
            return Err(ToolError::invalid_args(format!(
                "`timeoutMs` must be between 1 and {MAX_TIMEOUT_MS}."
            )));
        }
        match args.players {
            Some(n) if !(1..=super::play::MAX_PLAYERS).contains(&n) => {
                return Err(ToolError::invalid_args(format!(
                    "`players` must be 1 to {} (how many clients the test starts with), got {n}.",
                    super::play::MAX_PLAYERS
                )));
            }
            Some(2..) if matches!(args.mode, TestMode::Run) => {
                return Err(ToolError::invalid_args(
                    "`players` needs mode play (a Run test has no clients): leave out mode, or players.",
                ));
            }
            _ => {}
        }
        if args.check {
            super::exec::check_syntax(&args.script)?;
        }
        // The players' joins (the server waits up to PLAYERS_WAIT for them) come on top.
        let joins = if args.players.unwrap_or(1) > 1 {
            PLAYERS_WAIT
        } else {
            Duration::ZERO
        };
        let plugin_timeout = Duration::from_millis(args.timeout_ms) + TEST_OVERHEAD + joins;
        let result = cx
            .call_plugin(
                &Self::SPEC,
                &args,
                plugin_timeout + Duration::from_secs(5),
                Some(plugin_timeout),
            )
            .await?;
        Ok(Output::plugin(result))
    }
}

// Human rendering --------------------------------------------------------------------------

use std::fmt::Write as _;

use crate::human::render::{self, Rendered, Style};

impl super::Render for TestRun {
    /// Its output lines as `exec` prints them, then its returns; a script error on stderr,
    /// with how long the test ran and whether it timed out.
    fn render(_args: &Json, result: &Json, out: Style, err: Style) -> Option<Rendered> {
        let mut rendered = render::script_run(result, out, err)?;
        let ms = result.get("durationMs").and_then(Json::as_u64).unwrap_or(0);
        if result.get("timedOut") == Some(&Json::Bool(true)) {
            let note = format!("the test timed out after {ms} ms (--timeout-ms sets how long it may run)");
            let _ = writeln!(rendered.stderr, "{}", err.yellow(&note));
        } else {
            let _ = writeln!(rendered.stderr, "{}", err.dim(&format!("the test ran {ms} ms")));
        }
        Some(rendered)
    }
}

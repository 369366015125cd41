//! `exec`: run Luau in a Studio session and get its returns, errors and output.
//!
//! A script error is a result (`success: false`), not a tool error: the agent wrote the
//! script and needs the message and line to fix it.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::{Command, Invocation, Kind, Output, Spec};
use crate::protocol::{Context, ErrorCode, ToolError};

/// Longest `timeoutMs` accepted (10 minutes).
const MAX_TIMEOUT_MS: u64 = 600_000;
/// How long the host waits beyond `timeoutMs` for a script that never yields.
const HOST_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExecArgs {
    pub script: String,
    #[serde(default = "default_timeout_ms")]
    #[schemars(range(min = 1, max = 600_000))]
    pub timeout_ms: u64,
    /// A named environment whose globals persist between calls (`studio-bridge terminal`
    /// picks one per attach). Kept out of the MCP schema: agents get a fresh environment
    /// per call, and the catalogue budget has no room for a terminal-only field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub env: Option<String>,
    /// game: during a test, in the game's own script VM (its module tables).
    #[serde(default, skip_serializing_if = "Runtime::is_plugin")]
    pub runtime: Runtime,
    /// true: refuse a syntax error host-side (`syntax_error`), with no round trip. Opt-in
    /// for now (the terminal and tests rely on the plugin's `success: false` answer) and
    /// kept out of the MCP schema, whose catalogue budget is spent.
    #[serde(default, skip_serializing)]
    #[schemars(skip)]
    pub check: bool,
}

/// Where a chunk runs in a playtest DataModel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    #[default]
    Plugin,
    Game,
}

impl Runtime {
    pub fn is_plugin(&self) -> bool {
        *self == Runtime::Plugin
    }
}

fn default_timeout_ms() -> u64 {
    120_000
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ExecResult {
    /// False when the script failed to compile or raised an error.
    pub success: bool,
    /// One entry per returned value (nil as null, in place).
    pub returns: Vec<Json>,
    /// Luau's error message with its line, when success is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Where it failed, when success is false: `compile` (a syntax error; nothing ran) or `run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<ExecStage>,
    /// What the script printed or warned, in order.
    pub logs: Vec<ExecLog>,
    /// How it was compiled: `loadstring`, `module` (Play refuses loadstring) or `game` (runtime game).
    #[serde(default, rename = "compiledWith", skip_serializing_if = "Option::is_none")]
    pub compiled_with: Option<CompiledWith>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CompiledWith {
    Loadstring,
    Game,
    Module,
}

/// Which stage of an `exec` failed (the plugin's `stage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExecStage {
    Compile,
    Run,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ExecLog {
    pub level: String,
    pub body: String,
}

pub struct Exec;

impl Command for Exec {
    type Args = ExecArgs;
    type Result = ExecResult;
    const SPEC: Spec = Spec {
        name: "exec",
        description: "Run Luau in Studio: returns, output, errors with lines. Server during Play.",
        needs_session: true,
        default_context: Context::Server,
        timeout: Duration::from_secs(125),
        // It can do anything Luau can: destructive, and open-world (HttpService, …).
        kind: Kind::Destructive,
        capabilities: super::Capabilities::of(&[super::Capability::Code]),
        idempotent: false,
        open_world: true,
        positional: &["script"],
        truncation_hint: "Return or print less (e.g. a count or a slice instead of a whole table).",
        follow_event: None,
    };

    async fn run(args: ExecArgs, cx: &Invocation) -> Result<Output, ToolError> {
        if !(1..=MAX_TIMEOUT_MS).contains(&args.timeout_ms) {
            return Err(ToolError::invalid_args(format!(
                "`timeoutMs` must be between 1 and {MAX_TIMEOUT_MS}."
            )));
        }
        if args.check {
            check_syntax(&args.script)?;
        }
        let plugin_timeout = Duration::from_millis(args.timeout_ms);
        let result = cx
            .call_plugin(&Self::SPEC, &args, plugin_timeout + HOST_GRACE, Some(plugin_timeout))
            .await?;
        Ok(Output::plugin(result))
    }
}

/// Luau's parser over a chunk, host-side: a syntax error is `syntax_error` worded as the
/// plugin's `loadstring` words it (`[string "exec"]:2: …`), with no round trip. `test_run`
/// checks its script the same way.
pub(super) fn check_syntax(script: &str) -> Result<(), ToolError> {
    crate::luau::check(script).map_err(|errors| {
        ToolError::new(ErrorCode::SyntaxError, crate::luau::chunk_message("exec", &errors))
            .with_details(crate::luau::details(&errors))
    })
}

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
use crate::sourcemap::locations::Location;

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
    // A named environment whose globals persist between calls (`studio-bridge terminal`
    // picks one per attach); without it every call gets a fresh one.
    /// Keep globals between calls under this name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// game: in a test's own script VM (its module tables).
    #[serde(default, skip_serializing_if = "Runtime::is_plugin")]
    pub runtime: Runtime,
    /// false: no syntax check
    #[schemars(extend("default" = true))]
    #[serde(default = "super::check_by_default", skip_serializing)]
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
    /// Where the error names scripts: `{path, line, file?}` (file: from the project's sourcemap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locations: Option<Vec<Location>>,
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
        description: "Run Luau in Studio: returns, output, errors with lines.",
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
        example: "studio-bridge exec 'return #workspace:GetChildren()'   (or --file F, or - for stdin)",
        from_file: Some("script"),
        flag_help: &[
            ("script", "The Luau to run (`-`: from stdin)"),
            ("timeoutMs", "Stop the script after this many ms"),
        ],
    };
    const FILES: super::files::Files = super::files::Files {
        messages: &["error"],
        only_failures: true,
        ..super::files::Files::NONE
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
        ToolError::new(
            ErrorCode::SyntaxError,
            format!(
                "{}. Nothing ran. Fix the script, or pass `check: false` for syntax newer than the bundled Luau {}.",
                crate::luau::chunk_message("exec", &errors),
                crate::luau::version()
            ),
        )
        .with_details(crate::luau::details(&errors))
    })
}

// Human rendering --------------------------------------------------------------------------

use super::Render;
use crate::human::render::{self, Rendered, Style};

impl Render for Exec {
    /// What the script printed, as Studio's Output window shows it, then its returns on one
    /// line; a script error goes to stderr.
    fn render(_args: &Json, result: &Json, out: Style, err: Style) -> Option<Rendered> {
        render::script_run(result, out, err)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{COLOR, PLAIN, plain, render};
    use crate::human::render::failed;
    use serde_json::json;

    #[test]
    fn exec_prints_output_then_returns_and_errors_to_stderr() {
        let result = json!({
            "success": true,
            "returns": [{"type": "Instance", "value": {"path": "game.Workspace.Baseplate", "className": "Part"}},
                        {"type": "number", "value": "inf"}, null, [1, 2, 3]],
            "logs": [{"level": "Print", "body": "hello"}, {"level": "Warning", "body": "careful"}],
            "sessionId": "A-edit",
            "context": "edit",
        });
        let rendered = plain("exec", &result);
        assert_eq!(
            rendered.stdout,
            "hello\nwarning: careful\nWorkspace.Baseplate (Part), inf, nil, {1, 2, 3}\n"
        );
        assert_eq!(rendered.stderr, "");
        assert!(!failed(&result));
        let coloured = render("exec", &result, COLOR, COLOR);
        assert!(
            coloured.stdout.starts_with("hello\n\x1b[33mcareful\x1b[0m\n"),
            "{coloured:?}"
        );

        let failure = json!({"success": false, "error": "[string \"exec\"]:1: x", "returns": [], "logs": []});
        let rendered = plain("exec", &failure);
        assert_eq!(rendered.stdout, "");
        assert_eq!(rendered.stderr, "error: [string \"exec\"]:1: x\n");
        assert!(failed(&failure));
        assert_eq!(
            render("exec", &failure, PLAIN, COLOR).stderr,
            "\x1b[31merror: [string \"exec\"]:1: x\x1b[0m\n"
        );
    }
}

//! `debug`: a capturing debugger for playtests (TOOLS.md, "v3": the engine's `OnStopped`
//! must not yield, so a breakpoint says in advance what to capture). `break`, `unbreak`,
//! `clear`, `breakpoints` and `exceptions` set it up in the edit DataModel, for the
//! playtests that follow; each playtest DataModel's plugin captures synchronously when the
//! engine stops there, resumes as the breakpoint says, and hands the capture to the edit
//! plugin, which keeps the latest ones (plugin/src/Actions/Debug.luau). `hits` reads them
//! after `since`; with `waitMs` the wait is here, in the host, asking again until a capture
//! comes or the time is up, never in the engine.

use std::fmt::Write as _;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use super::{Command, Invocation, Kind, Output, Render, Spec};
use crate::human::render::{self, Rendered, Style, clean};
use crate::protocol::raw::RawValue;
use crate::protocol::{Context, ToolError};

/// Longest `waitMs` (the call's own deadline is this plus a margin).
const MAX_WAIT_MS: u64 = 60_000;
/// How often `hits` asks again while it waits.
const POLL: Duration = Duration::from_millis(150);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DebugAction {
    Break,
    Unbreak,
    Clear,
    Breakpoints,
    Exceptions,
    Hits,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Then {
    Continue,
    StepOver,
    StepInto,
    StepOut,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExceptionMode {
    Never,
    Unhandled,
    Always,
}

/// What a stop collects.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Capture {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 4))]
    pub depth: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expressions: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 20))]
    pub frames: Option<u8>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DebugArgs {
    pub action: DebugAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub line: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<Capture>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub hits: Option<u32>,
    #[serde(default, rename = "then", skip_serializing_if = "Option::is_none")]
    pub then: Option<Then>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 20))]
    pub steps: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ExceptionMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    #[serde(default, skip_serializing)]
    #[schemars(range(max = 60_000))]
    pub wait_ms: Option<u64>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DebugResult {
    /// break: the engine's answer (a line without code moves or is refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// unbreak: whether one of ours was there; clear: how many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<Removed>,
    /// breakpoints: ours, `{path, line, condition?, log?, hits, remaining}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breakpoints: Option<Vec<Map<String, Json>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// hits: `{id, context, reason, path, line, exception?, frames, variables, expressions,
    /// cut?}`, oldest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hits: Option<Vec<Map<String, Json>>>,
    /// hits: pass back as `since` for only newer ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<u64>,
    /// hits: captures dropped from the plugin's store (it keeps the latest 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped: Option<u64>,
}

/// `unbreak`'s flag or `clear`'s count.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Removed {
    Flag(bool),
    Count(u64),
}

pub struct Debug;

impl Command for Debug {
    type Args = DebugArgs;
    type Result = DebugResult;
    const SPEC: Spec = Spec {
        name: "debug",
        description: "Breakpoints that capture stack, variables, expressions in later playtests; read with hits.",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(75),
        kind: Kind::Write,
        capabilities: super::Capabilities::of(&[super::Capability::Read]),
        idempotent: false,
        open_world: false,
        positional: &["action"],
        truncation_hint: "Pass the last `next` as `since`.",
        follow_event: None,
        example: "studio-bridge debug break --path ServerScriptService.Main --line 12 --capture '{\"expressions\": [\"player.Name\"]}'",
        from_file: None,
        flag_help: &[
            (
                "action",
                "break at a line, unbreak it, clear ours, list breakpoints, set exceptions, or read hits",
            ),
            ("path", "break, unbreak: the script"),
            ("line", "break, unbreak: the line"),
            ("condition", "break: stop only when this Luau expression is true"),
            (
                "capture",
                "break: what to collect, JSON {depth?: 2, expressions?: [..], frames?: 5}",
            ),
            ("then", "break: how to resume after a hit"),
            ("mode", "exceptions: when an error stops"),
            ("log", "break: a logpoint's message; it logs and never stops"),
            ("hits", "break: captures before it turns itself off"),
            ("steps", "break: further steps captured after a hit, as `then` says"),
            ("since", "hits: only captures after this `next`"),
            ("waitMs", "hits: wait up to this long for a capture"),
        ],
    };

    /// Listing breakpoints and reading hits read what was captured; the others set a
    /// breakpoint's Luau (its condition, its captured expressions) or the exception mode.
    fn capabilities(args: &DebugArgs) -> super::Capabilities {
        match args.action {
            DebugAction::Breakpoints | DebugAction::Hits => Self::SPEC.capabilities,
            _ => Self::SPEC.capabilities.with(super::Capability::Code),
        }
    }

    async fn run(args: DebugArgs, cx: &Invocation) -> Result<Output, ToolError> {
        let wait = match (args.action, args.wait_ms) {
            (DebugAction::Hits, Some(ms)) if ms > MAX_WAIT_MS => {
                return Err(ToolError::invalid_args(format!(
                    "`waitMs` must be at most {MAX_WAIT_MS}."
                )));
            }
            (DebugAction::Hits, Some(ms)) => Duration::from_millis(ms),
            (_, Some(_)) => {
                return Err(ToolError::invalid_args(
                    "`waitMs` goes with `action: hits` only: leave it out.",
                ));
            }
            _ => Duration::ZERO,
        };
        let call_timeout = Duration::from_secs(10);
        let deadline = tokio::time::Instant::now() + wait;
        let mut first = true;
        loop {
            // The first request is the call the panel lists; the polls after it are quiet.
            let result = if first {
                first = false;
                cx.call_plugin(&Self::SPEC, &args, call_timeout, None).await?
            } else {
                cx.poll_plugin(&Self::SPEC, &args, call_timeout).await?
            };
            if args.action != DebugAction::Hits || wait.is_zero() || has_hits(&result) {
                return Ok(Output::plugin(result));
            }
            if tokio::time::Instant::now() + POLL >= deadline {
                return Ok(Output::plugin(result));
            }
            tokio::select! {
                () = tokio::time::sleep(POLL) => {}
                () = cx.hooks.cancel.cancelled() => {
                    return Err(ToolError::new(
                        crate::protocol::ErrorCode::Cancelled,
                        "The wait for a capture was cancelled; nothing was changed.",
                    ));
                }
            }
        }
    }
}

/// Whether a `hits` answer holds any capture.
fn has_hits(result: &RawValue) -> bool {
    result
        .decode()
        .ok()
        .map(crate::protocol::value::into_json)
        .and_then(|json| json.get("hits").and_then(Json::as_array).map(|hits| !hits.is_empty()))
        .unwrap_or(false)
}

impl Render for Debug {
    /// Each capture as `#id context reason path:line`, its expressions and top variables;
    /// breakpoints as `path:line (hits, remaining)`; anything else in one line.
    fn render(_args: &Json, result: &Json, out: Style, err: Style) -> Option<Rendered> {
        let mut rendered = Rendered::default();
        if let Some(hits) = result.get("hits").and_then(Json::as_array) {
            if hits.is_empty() {
                rendered.stdout.push_str("no captures yet\n");
            }
            for hit in hits {
                let _ = writeln!(
                    rendered.stdout,
                    "{} {} {} {}:{}",
                    out.bold(&format!("#{}", hit.get("id").map(Json::to_string).unwrap_or_default())),
                    clean(hit.get("context").and_then(Json::as_str).unwrap_or("?")),
                    clean(hit.get("reason").and_then(Json::as_str).unwrap_or("?")),
                    clean(hit.get("path").and_then(Json::as_str).unwrap_or("?")),
                    hit.get("line").map(Json::to_string).unwrap_or_default()
                );
                if let Some(exception) = hit.get("exception").and_then(Json::as_str) {
                    let _ = writeln!(rendered.stdout, "  {}", err.red(&clean(exception)));
                }
                for expression in hit.get("expressions").and_then(Json::as_array).into_iter().flatten() {
                    let value = expression
                        .get("value")
                        .map(|v| render::numbers(std::slice::from_ref(v)))
                        .or_else(|| {
                            expression
                                .get("error")
                                .and_then(Json::as_str)
                                .map(|e| format!("error: {}", clean(e)))
                        })
                        .unwrap_or_default();
                    let _ = writeln!(
                        rendered.stdout,
                        "  {} = {value}",
                        clean(expression.get("expression").and_then(Json::as_str).unwrap_or("?"))
                    );
                }
                for variable in hit.get("variables").and_then(Json::as_array).into_iter().flatten() {
                    let _ = writeln!(
                        rendered.stdout,
                        "  {} {} = {}",
                        out.dim(&clean(variable.get("scope").and_then(Json::as_str).unwrap_or(""))),
                        clean(variable.get("name").and_then(Json::as_str).unwrap_or("?")),
                        variable
                            .get("value")
                            .map(|v| render::numbers(std::slice::from_ref(v)))
                            .unwrap_or_default()
                    );
                }
            }
            return Some(rendered);
        }
        if let Some(breakpoints) = result.get("breakpoints").and_then(Json::as_array) {
            if breakpoints.is_empty() {
                rendered.stdout.push_str("no breakpoints of studio-bridge's\n");
            }
            for bp in breakpoints {
                let _ = writeln!(
                    rendered.stdout,
                    "{}:{} ({} hits, {} to go)",
                    clean(bp.get("path")?.as_str()?),
                    bp.get("line")?,
                    bp.get("hits").map(Json::to_string).unwrap_or_default(),
                    bp.get("remaining").map(Json::to_string).unwrap_or_default()
                );
            }
            return Some(rendered);
        }
        None
    }
}

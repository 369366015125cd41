//! `script_read`: a script's source as the editor has it (unsaved edits included), whole
//! or a line range, with the whole source's hash.

use std::fmt::Write as _;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::files::Files;
use super::{Command, Invocation, Kind, Output, Render, Spec};
use crate::human::render::{Rendered, Style, clean};
use crate::protocol::{Context, ToolError};

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScriptReadArgs {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_line: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_line: Option<u32>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScriptReadResult {
    /// The whole source, or the asked lines joined by newlines (no trailing newline).
    pub source: String,
    /// Lines as the editor shows them (a trailing newline does not add one; empty = 0).
    pub line_count: u32,
    /// Of the whole source, even for a range; opaque.
    pub hash: String,
    pub path: String,
    /// The script's file, when the project's sourcemap maps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

pub struct ScriptRead;

impl Command for ScriptRead {
    type Args = ScriptReadArgs;
    type Result = ScriptReadResult;
    const SPEC: Spec = Spec {
        name: "script_read",
        description: "Read a script's editor source, whole or a line range.",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(10),
        kind: Kind::Read,
        capabilities: super::Capabilities::of(&[super::Capability::Read]),
        idempotent: true,
        open_world: false,
        positional: &["path"],
        truncation_hint: "Read a line range with startLine and endLine.",
        follow_event: None,
        example: "studio-bridge script-read ServerScriptService.Main --start-line 1 --end-line 40",
        from_file: None,
        flag_help: &[
            ("path", "The script"),
            ("startLine", "First line (1-based)"),
            ("endLine", "Last line"),
        ],
    };
    const FILES: Files = Files {
        path: true,
        ..Files::NONE
    };

    async fn run(args: ScriptReadArgs, cx: &Invocation) -> Result<Output, ToolError> {
        if args.path.trim().is_empty() {
            return Err(ToolError::invalid_args(
                "`path` is empty; pass a script's path such as game.ServerScriptService.Main.",
            ));
        }
        for (name, line) in [("startLine", args.start_line), ("endLine", args.end_line)] {
            if line == Some(0) {
                return Err(ToolError::invalid_args(format!(
                    "`{name}` is 1-based: the first line is 1."
                )));
            }
        }
        if let (Some(start), Some(end)) = (args.start_line, args.end_line)
            && end < start
        {
            return Err(ToolError::invalid_args(format!(
                "`endLine` ({end}) is before `startLine` ({start}); lines are inclusive, so endLine = startLine reads one line."
            )));
        }
        cx.forward(&Self::SPEC, &args).await
    }
}

impl Render for ScriptRead {
    /// The source with line numbers, like `cat -n`, when it is the whole script (a ranged
    /// read does not say where its lines start: it prints them as they are).
    fn render(_args: &Json, result: &Json, out: Style, _err: Style) -> Option<Rendered> {
        let source = result.get("source")?.as_str()?;
        let line_count = result.get("lineCount")?.as_u64()?;
        let lines: Vec<&str> = source.lines().collect();
        let mut rendered = Rendered::default();
        if lines.len() as u64 == line_count {
            let width = line_count.to_string().len().max(4);
            for (i, line) in lines.iter().enumerate() {
                let number = format!("{:>width$}", i + 1);
                let _ = writeln!(rendered.stdout, "{}  {}", out.dim(&number), clean(line));
            }
        } else {
            let _ = writeln!(rendered.stdout, "{}", clean(source));
        }
        Some(rendered)
    }
}

//! `script_read`: a script's source as the editor has it (unsaved edits included), whole
//! or a line range, with the whole source's hash.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Command, Invocation, Kind, Output, Spec};
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

//! `script_edit`: changes a script's editor source (whole, by line ranges, or find and
//! replace) in one undo step, optionally only if it still has the hash that was read.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Command, Invocation, Kind, Output, Spec};
use crate::protocol::{Context, ErrorCode, ToolError};

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScriptEditArgs {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edits: Option<Vec<LineEdit>>,
    /// Plain text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub find: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace: Option<String>,
    // How many occurrences there must be (all are replaced); a wrong number fails naming
    // the right one, so the catalogue does not spend bytes on it.
    #[serde(default = "one")]
    pub count: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_hash: Option<String>,
    /// false: skip the host's Luau syntax check of a whole `source` (for syntax newer than
    /// the bundled Luau). Kept out of the MCP schema, whose catalogue budget is spent: the
    /// `syntax_error` that needs it names it. `edits` and `find` are not checked yet (the
    /// host would have to apply them to the source it reads first).
    #[serde(default = "yes", skip_serializing)]
    #[schemars(skip)]
    pub check: bool,
}

/// Lines startLine..endLine (inclusive) become `text`; endLine = startLine - 1 inserts.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(description = "")]
pub struct LineEdit {
    pub start_line: u32,
    pub end_line: u32,
    pub text: String,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScriptEditResult {
    /// Of the whole new source.
    pub hash: String,
    pub line_count: u32,
    pub path: String,
}

pub struct ScriptEdit;

impl Command for ScriptEdit {
    type Args = ScriptEditArgs;
    type Result = ScriptEditResult;
    const SPEC: Spec = Spec {
        name: "script_edit",
        description: "Edit script source: whole, line ranges, or find and replace.",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(10),
        kind: Kind::Write,
        capabilities: super::Capabilities::of(&[super::Capability::Write, super::Capability::Code]),
        idempotent: false,
        open_world: false,
        positional: &["path"],
        truncation_hint: "",
        follow_event: None,
    };

    async fn run(args: ScriptEditArgs, cx: &Invocation) -> Result<Output, ToolError> {
        validate(&args)?;
        if args.check
            && let Some(source) = &args.source
        {
            check_syntax(source)?;
        }
        cx.forward(&Self::SPEC, &args).await
    }
}

fn one() -> u32 {
    1
}

fn yes() -> bool {
    true
}

/// Luau's parser over the new source before it is sent: a syntax error writes nothing.
fn check_syntax(source: &str) -> Result<(), ToolError> {
    crate::luau::check(source).map_err(|errors| {
        let first = errors.first().map(|e| format!("line {}: {}", e.line, e.message));
        ToolError::new(
            ErrorCode::SyntaxError,
            format!(
                "source: {}; nothing was written. Fix the source, or pass check: false for syntax newer than the bundled Luau {}.",
                first.unwrap_or_default(),
                crate::luau::version()
            ),
        )
        .with_details(crate::luau::details(&errors))
    })
}

fn validate(args: &ScriptEditArgs) -> Result<(), ToolError> {
    if args.path.trim().is_empty() {
        return Err(ToolError::invalid_args(
            "`path` is empty; pass a script's path such as game.ServerScriptService.Main.",
        ));
    }
    let modes = [args.source.is_some(), args.edits.is_some(), args.find.is_some()];
    if modes.iter().filter(|m| **m).count() != 1 {
        return Err(ToolError::invalid_args(
            "Pass exactly one of `source` (the whole new source), `edits` (line ranges) or `find` with `replace`.",
        ));
    }
    if args.find.is_some() != args.replace.is_some() {
        let missing = if args.find.is_some() { "replace" } else { "find" };
        return Err(ToolError::invalid_args(format!(
            "`{missing}` is missing: `find` and `replace` go together (replace may be \"\" to delete)."
        )));
    }
    if args.find.as_deref() == Some("") {
        return Err(ToolError::invalid_args(
            "`find` is empty; pass the exact text to replace.",
        ));
    }
    if args.count != 1 && args.find.is_none() {
        return Err(ToolError::invalid_args("`count` only goes with `find` and `replace`."));
    }
    if args.count == 0 {
        return Err(ToolError::invalid_args(
            "`count` must be at least 1: the number of occurrences there must be (all are replaced).",
        ));
    }
    if let Some(edits) = &args.edits {
        if edits.is_empty() {
            return Err(ToolError::invalid_args(
                "`edits` is empty; pass at least one {startLine, endLine, text}.",
            ));
        }
        for (i, edit) in edits.iter().enumerate() {
            let n = i + 1;
            if edit.start_line == 0 {
                return Err(ToolError::invalid_args(format!(
                    "`edits[{i}].startLine` (edit {n}) is 1-based: the first line is 1."
                )));
            }
            if edit.end_line + 1 < edit.start_line {
                return Err(ToolError::invalid_args(format!(
                    "`edits[{i}].endLine` (edit {n}) is {}, before startLine - 1 ({}): use endLine = startLine - 1 to insert, endLine = startLine to replace one line.",
                    edit.end_line,
                    edit.start_line - 1
                )));
            }
        }
    }
    Ok(())
}

impl super::Render for ScriptEdit {}

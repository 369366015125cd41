//! `script_edit`: changes a script's editor source (whole, by line ranges, or find and
//! replace) in one undo step, optionally only if it still has the hash that was read.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Command, Invocation, Kind, Output, Spec};
use crate::protocol::{Context, ErrorCode, ToolError, value};

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
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
    // Check the edit and answer the would-be hash; write nothing. (No doc comment: it would
    // be the schema's description, and the catalogue's budget is spent; the name says it.)
    #[serde(default, skip_serializing_if = "is_false")]
    pub dry_run: bool,
    /// false: skip the host's Luau syntax check of the new source (for syntax newer than
    /// the bundled Luau). Kept out of the MCP schema, whose catalogue budget is spent: the
    /// `syntax_error` that needs it names it.
    #[serde(default = "super::check_by_default", skip_serializing)]
    #[schemars(skip)]
    pub check: bool,
    /// true: edit a script the project's sourcemap maps to a file (refused `file_backed`
    /// otherwise). Kept out of the MCP schema, whose catalogue budget is spent: the
    /// `file_backed` error that needs it names it.
    #[serde(default, skip_serializing)]
    #[schemars(skip)]
    pub force: bool,
}

/// Lines startLine..endLine (inclusive) become `text`; endLine = startLine - 1 inserts.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
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
    /// true: nothing was written (the call asked for `dryRun`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub dry_run: bool,
}

/// What the plugin answers for a `dryRun`: the new source its edit would make, and the hash
/// of the source it made it from.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Preview {
    base_hash: String,
    hash: String,
    line_count: u32,
    path: String,
    source: String,
}

fn is_false(value: &bool) -> bool {
    !*value
}

pub struct ScriptEdit;

impl Command for ScriptEdit {
    type Args = ScriptEditArgs;
    type Result = ScriptEditResult;
    const SPEC: Spec = Spec {
        name: "script_edit",
        description: "Edit script source: whole, line ranges, or find/replace.",
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

    /// A whole `source` is checked as it is, then written. Line `edits` and `find` are
    /// applied by the plugin's own rules as a dry run first: the host checks the source they
    /// would make (so a syntax error names the new source's lines), then writes that source
    /// whole against the hash it was made from, so a change in between is a `conflict`,
    /// never lost. `dryRun` stops after the check.
    async fn run(args: ScriptEditArgs, cx: &Invocation) -> Result<Output, ToolError> {
        validate(&args)?;
        if !args.force {
            super::files::refuse_file_backed(&args.path, cx.sourcemap().as_deref())?;
        }
        if let Some(source) = args.source.as_deref().filter(|_| !args.dry_run) {
            if args.check {
                check_syntax(source)?;
            }
            return cx.forward(&Self::SPEC, &args).await;
        }
        let preview = ScriptEditArgs {
            dry_run: true,
            ..args.clone()
        };
        let raw = cx
            .call_plugin_to_preview(&Self::SPEC, &preview, Self::SPEC.timeout)
            .await?;
        let preview: Preview = raw
            .decode()
            .map(value::into_json)
            .ok()
            .and_then(|json| serde_json::from_value(json).ok())
            .ok_or_else(|| {
                ToolError::new(
                    ErrorCode::PluginError,
                    "The plugin answered script_edit's dry run without the new source; update the plugin (studio-bridge install-plugin).",
                )
            })?;
        if args.check {
            check_syntax(&preview.source)?;
        }
        if args.dry_run {
            return Ok(Output::json(serde_json::json!({
                "hash": preview.hash,
                "lineCount": preview.line_count,
                "path": preview.path,
                "dryRun": true,
            })));
        }
        let write = ScriptEditArgs {
            path: preview.path,
            source: Some(preview.source),
            edits: None,
            find: None,
            replace: None,
            count: 1,
            expected_hash: Some(preview.base_hash),
            dry_run: false,
            check: args.check,
            force: args.force,
        };
        cx.forward(&Self::SPEC, &write).await
    }
}

fn one() -> u32 {
    1
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

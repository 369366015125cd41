//! `script_edit`: changes a script's editor source (whole, by line ranges, or find and
//! replace) in one undo step, optionally only if it still has the hash that was read.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use std::fmt::Write as _;

use serde_json::Value as Json;

use super::{Command, Invocation, Kind, Output, Spec};
use crate::human::render::{self, Rendered, Style, clean};
use crate::luau;
use crate::protocol::{Context, ErrorCode, ToolError, value};

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScriptEditArgs {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edits: Option<Vec<LineEdit>>,
    // Plain text, not a pattern (the tool's description says "plain": the catalogue's budget
    // had no room for both that and `format`).
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
    /// false: no syntax check
    #[schemars(extend("default" = true))]
    #[serde(default = "super::check_by_default", skip_serializing)]
    pub check: bool,
    // Edit a script the project\'s sourcemap maps to a file (refused `file_backed` otherwise).
    /// Edit a file-synced script anyway.
    #[serde(default, skip_serializing)]
    pub force: bool,
    // true: stylua formats the new source (the project's stylua.toml) before it is checked.
    // (No doc comment, as for dryRun; never sent to the plugin: the host formats.)
    #[serde(default, skip_serializing_if = "is_false")]
    pub format: bool,
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
    /// selene's findings in the new source (never blocking).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<Vec<luau::lint::Diagnostic>>,
    /// How many diagnostics past the first hundred were left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics_omitted: Option<u32>,
    /// Why there are no diagnostics (selene missing or failed); the write went through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics_skipped: Option<String>,
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
        description: "Edit a script: whole, line ranges, or plain find/replace.",
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
        example: "studio-bridge script-edit ServerScriptService.Main --find 'speed = 10' --replace 'speed = 16'",
        from_file: Some("source"),
        flag_help: &[
            ("path", "The script"),
            ("source", "The whole new source (`-`: from stdin)"),
            ("edits", "Line ranges to replace"),
            ("find", "Plain text to find"),
            ("replace", "What --find becomes"),
            (
                "count",
                "How many occurrences of --find there must be (all are replaced)",
            ),
            (
                "expectedHash",
                "Edit only if the source still has this hash (from script-read)",
            ),
            ("dryRun", "Check the edit and print the would-be hash; write nothing"),
            (
                "format",
                "Format the new source with stylua (the project's stylua.toml) first",
            ),
        ],
    };

    /// A whole `source` is checked as it is, then written. Line `edits` and `find` are
    /// applied by the plugin's own rules as a dry run first: the host checks the source they
    /// would make (so a syntax error names the new source's lines), then writes that source
    /// whole against the hash it was made from, so a change in between is a `conflict`,
    /// never lost. `format` has stylua format the new source before the check; selene's
    /// diagnostics of the new source ride on the result (luau::lint, never blocking).
    /// `dryRun` stops after the check and the lint.
    async fn run(args: ScriptEditArgs, cx: &Invocation) -> Result<Output, ToolError> {
        validate(&args)?;
        if !args.force {
            super::files::refuse_file_backed(&args.path, cx.sourcemap().await.as_deref())?;
        }
        // The new source, and what it is written against: a whole source needs no preview
        // unless nothing is to be written.
        let (preview, mut source) = match args.source.clone().filter(|_| !args.dry_run) {
            Some(source) => (None, source),
            None => {
                let preview = self::preview(&args, cx).await?;
                let source = preview.source.clone();
                (Some(preview), source)
            }
        };
        // The syntax check comes first: a source that does not parse is a `syntax_error`
        // naming its line, with or without `format` (stylua would refuse it in its own
        // words). A formatted source is checked again, as what is written.
        if args.check {
            check_syntax(&source)?;
        }
        if args.format {
            source = luau::format::format(&source).await.map_err(|why| {
                ToolError::new(
                    ErrorCode::InvalidArgs,
                    format!("format: {why}; nothing was written (leave out format to write the source as it is)."),
                )
            })?;
            if args.check {
                check_syntax(&source)?;
            }
        }
        let (path, expected_hash) = match &preview {
            Some(preview) => (preview.path.clone(), Some(preview.base_hash.clone())),
            None => (args.path.clone(), args.expected_hash.clone()),
        };
        let write = ScriptEditArgs {
            path,
            source: Some(source),
            edits: None,
            find: None,
            replace: None,
            count: 1,
            expected_hash,
            dry_run: false,
            check: args.check,
            format: false,
            force: args.force,
        };
        let source = write.source.as_deref().unwrap_or_default();
        let (mut result, lint) = match preview.filter(|_| args.dry_run) {
            // The plugin's hash and line count of what would be written: its preview's, or
            // for a formatted source another preview of the formatted whole.
            Some(preview) => {
                let reformatted = args.format && source != preview.source;
                let again = ScriptEditArgs {
                    dry_run: true,
                    ..write.clone()
                };
                let (counted, lint) = tokio::join!(
                    async {
                        if reformatted {
                            self::preview(&again, cx).await
                        } else {
                            Ok(preview)
                        }
                    },
                    luau::lint::lint(source)
                );
                let counted = counted?;
                let json = serde_json::json!({
                    "hash": counted.hash,
                    "lineCount": counted.line_count,
                    "path": counted.path,
                    "dryRun": true,
                });
                (json, lint)
            }
            None => {
                let (written, lint) = tokio::join!(cx.forward(&Self::SPEC, &write), luau::lint::lint(source));
                (written?.value(), lint)
            }
        };
        if let Some(map) = result.as_object_mut() {
            luau::lint::annotate(map, lint);
        }
        Ok(Output::json(result))
    }
}

/// The plugin's dry run of `args`: the new source its edit makes, and the hash of the
/// source it made it from; nothing is written.
async fn preview(args: &ScriptEditArgs, cx: &Invocation) -> Result<Preview, ToolError> {
    let preview = ScriptEditArgs {
        dry_run: true,
        format: false,
        ..args.clone()
    };
    let raw = cx
        .call_plugin_to_preview(&ScriptEdit::SPEC, &preview, ScriptEdit::SPEC.timeout)
        .await?;
    raw.decode()
        .map(value::into_json)
        .ok()
        .and_then(|json| serde_json::from_value(json).ok())
        .ok_or_else(|| {
            ToolError::new(
                ErrorCode::PluginError,
                "The plugin answered script_edit's dry run without the new source; update the plugin (studio-bridge install-plugin).",
            )
        })
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
                "source: {}; nothing was written. Fix the source, or pass `check: false` for syntax newer than the bundled Luau {}.",
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

impl super::Render for ScriptEdit {
    /// `path: N lines, hash H`, then one line a diagnostic, `line:column severity code
    /// message` (as an editor's problem list reads); why there are none on stderr.
    fn render(_args: &Json, result: &Json, out: Style, err: Style) -> Option<Rendered> {
        let mut rendered = Rendered::default();
        let dry = if result.get("dryRun") == Some(&Json::Bool(true)) {
            " (dry run: nothing written)"
        } else {
            ""
        };
        let _ = writeln!(
            rendered.stdout,
            "{}: {} lines, hash {}{dry}",
            out.bold(&clean(result.get("path")?.as_str()?)),
            result.get("lineCount")?.as_u64()?,
            clean(result.get("hash")?.as_str()?)
        );
        render::diagnostics(result, &mut rendered, out, err);
        Some(rendered)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::plain;
    use serde_json::json;

    #[test]
    fn an_edit_reads_as_its_path_then_one_line_a_diagnostic() {
        let edited = json!({"hash": "h-9", "lineCount": 3, "path": "game.S", "diagnostics": [
            {"line": 2, "column": 7, "severity": "warning", "code": "unused_variable", "message": "a is unused"},
            {"line": 3, "column": 1, "severity": "error", "code": "undefined_variable", "message": "`b` is not defined"},
        ]});
        let rendered = plain("script_edit", &edited);
        assert_eq!(
            rendered.stdout,
            "game.S: 3 lines, hash h-9\n2:7 warning unused_variable a is unused\n3:1 error undefined_variable `b` is not defined\n"
        );
        assert_eq!(rendered.stderr, "");
        let skipped = json!({"hash": "h-1", "lineCount": 1, "path": "game.S", "dryRun": true, "diagnosticsSkipped": "selene not found"});
        let rendered = plain("script_edit", &skipped);
        assert_eq!(
            rendered.stdout,
            "game.S: 1 lines, hash h-1 (dry run: nothing written)\n"
        );
        assert_eq!(rendered.stderr, "note: no diagnostics: selene not found\n");
    }
}

//! `logs`: Studio's output, from the plugin's ring buffer of LogService messages.

use std::fmt::Write as _;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::{Command, Invocation, Kind, Output, Render, Spec};
use crate::human::render::{Rendered, Style, count, file_line, log_line};
use crate::protocol::{Context, ToolError};
use crate::sourcemap::locations::Location;

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LogsArgs {
    #[serde(default = "default_count")]
    #[schemars(range(max = 10000))]
    pub count: u32,
    #[serde(default)]
    pub direction: Direction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels: Option<Vec<Level>>,
    #[serde(default)]
    pub include_internal: bool,
    /// After this seq, oldest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
}

fn default_count() -> u32 {
    50
}

#[derive(Debug, Default, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Head,
    #[default]
    Tail,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
pub enum Level {
    Print,
    Info,
    Warning,
    Error,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogsResult {
    pub entries: Vec<LogEntry>,
    /// Entries in the buffer in all.
    pub total: u64,
    pub buffer_capacity: u64,
    /// Pass as `since` to get only newer entries.
    pub next_since: u64,
    /// Lines after `since` that the buffer no longer holds (overwritten before they were read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct LogEntry {
    pub seq: u64,
    pub level: String,
    pub body: String,
    /// Unix milliseconds.
    pub timestamp: f64,
    /// Where the line names scripts (an error, a stack line): `{path, line, file?}`, file
    /// from the project's sourcemap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locations: Option<Vec<Location>>,
}

pub struct Logs;

impl Command for Logs {
    type Args = LogsArgs;
    type Result = LogsResult;
    const SPEC: Spec = Spec {
        name: "logs",
        description: "Studio's output; pass the last nextSince as since for what is new.",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(10),
        kind: Kind::Read,
        capabilities: super::Capabilities::of(&[super::Capability::Read]),
        idempotent: true,
        open_world: false,
        positional: &[],
        truncation_hint: "Ask for fewer entries (count), filter by levels, or page with since.",
        follow_event: Some("log"),
        example: "studio-bridge logs --count 20 --levels Error,Warning --follow",
        from_file: None,
        flag_help: &[
            ("count", "How many entries"),
            ("direction", "head: the oldest first; tail: the newest"),
            ("levels", "Only these levels"),
            ("includeInternal", "Also studio-bridge's own lines"),
        ],
    };
    const FILES: super::files::Files = super::files::Files {
        entries: &["entries"],
        ..super::files::Files::NONE
    };

    async fn run(args: LogsArgs, cx: &Invocation) -> Result<Output, ToolError> {
        if !(1..=10_000).contains(&args.count) {
            return Err(ToolError::invalid_args("`count` must be between 1 and 10000."));
        }
        cx.forward(&Self::SPEC, &args).await
    }
}

impl Render for Logs {
    /// One `[Level] body` line an entry, coloured by level, after `file:line: ` where it
    /// names a script the project's sourcemap maps; lines lost before they were read are a
    /// note on stderr.
    fn render(_args: &Json, result: &Json, out: Style, err: Style) -> Option<Rendered> {
        let entries = result.get("entries")?.as_array()?;
        let mut rendered = Rendered::default();
        for entry in entries {
            let level = entry.get("level")?.as_str()?;
            let body = entry.get("body")?.as_str()?;
            let _ = writeln!(rendered.stdout, "{}{}", file_line(entry), log_line(level, body, out));
        }
        if let Some(missed) = result.get("missed").and_then(Json::as_u64).filter(|n| *n > 0) {
            let note = format!(
                "note: {} overwritten before they were read",
                count(missed, "line was", "lines were")
            );
            let _ = writeln!(rendered.stderr, "{}", err.yellow(&note));
        }
        Some(rendered)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{COLOR, PLAIN, plain, render};
    use crate::human::render::event_line;
    use serde_json::json;

    #[test]
    fn logs_are_level_and_body_coloured_only_on_request() {
        let result = json!({"entries": [
            {"seq": 1, "level": "Print", "body": "a", "timestamp": 0},
            {"seq": 2, "level": "Warning", "body": "b", "timestamp": 0},
            {"seq": 3, "level": "Error", "body": "c", "timestamp": 0},
            {"seq": 4, "level": "Info", "body": "d", "timestamp": 0},
        ], "total": 4, "bufferCapacity": 10, "nextSince": 4, "missed": 2});
        let rendered = plain("logs", &result);
        assert_eq!(rendered.stdout, "[Print] a\n[Warning] b\n[Error] c\n[Info] d\n");
        assert_eq!(
            rendered.stderr,
            "note: 2 lines were overwritten before they were read\n"
        );
        let coloured = render("logs", &result, COLOR, PLAIN).stdout;
        assert_eq!(
            coloured,
            "[Print] a\n\x1b[33m[Warning] b\x1b[0m\n\x1b[31m[Error] c\x1b[0m\n\x1b[34m[Info] d\x1b[0m\n"
        );
        assert_eq!(
            event_line(&json!({"seq": 5, "level": "Warning", "body": "x"}), PLAIN),
            "[Warning] x"
        );
    }

    #[test]
    fn a_line_that_names_a_mapped_script_starts_with_its_file_and_line() {
        let file = "src/server/Foo.server.luau";
        let result = json!({"entries": [
            {"seq": 1, "level": "Error", "body": "ServerScriptService.Foo:12: boom", "timestamp": 0,
             "locations": [{"path": "game.ServerScriptService.Foo", "line": 12, "file": file}]},
            {"seq": 2, "level": "Info", "body": "Script 'Workspace.X', Line 3", "timestamp": 0,
             "locations": [{"path": "game.Workspace.X", "line": 3}]},
            {"seq": 3, "level": "Info", "body": "Stack End", "timestamp": 0},
        ], "total": 3, "bufferCapacity": 10, "nextSince": 3});
        assert_eq!(
            plain("logs", &result).stdout,
            format!(
                "{file}:12: [Error] ServerScriptService.Foo:12: boom\n[Info] Script 'Workspace.X', Line 3\n[Info] Stack End\n"
            )
        );
        assert_eq!(
            event_line(&result["entries"][0], PLAIN),
            format!("{file}:12: [Error] ServerScriptService.Foo:12: boom")
        );
        let coloured = render("logs", &result, COLOR, PLAIN).stdout;
        assert!(
            coloured.starts_with(&format!("{file}:12: \x1b[31m[Error]")),
            "{coloured:?}"
        );
    }
}

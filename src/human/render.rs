//! Human-readable output, as a library: what every command's renderer (`Render` in the
//! command table, beside the command) writes with. The input is always the result JSON an
//! MCP client gets; a command whose result reads better another way renders it itself,
//! from these pieces ([`Style`], [`escape_controls`], [`table`], [`log_line`], the Luau
//! literals in `human::luau`), and [`finish`] adds what every rendering has. A result of a
//! shape a renderer does not know, and every other command, gets the generic indented
//! `key: value` form ([`human`]). This module knows JSON and terminals, never a command.
//!
//! Everything here is text from Studio (a game's output, instance and place names), and a
//! terminal acts on control characters: a game script could clear the screen, retitle the
//! window or write the clipboard (OSC 52). So every string of a result goes through
//! [`escape_controls`] on its way into human output, which writes each C0 control but tab
//! and newline, DEL, and each C1 control visibly as a Rust-style escape: ESC is `\u{1b}`,
//! BEL `\u{7}`, CSI (U+009B) `\u{9b}`. Only the colours added here are real escape
//! sequences. `--json` output is the MCP JSON, unchanged (JSON escapes C0 itself).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::IsTerminal as _;

use serde_json::{Map, Value as Json};

/// Whether a stream gets ANSI colours.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Style {
    pub color: bool,
}

impl Style {
    /// Colour on stdout when it is a terminal and `NO_COLOR` is unset or empty.
    pub fn stdout() -> Style {
        Style {
            color: std::io::stdout().is_terminal() && color_allowed(),
        }
    }

    /// Colour on stderr when it is a terminal and `NO_COLOR` is unset or empty.
    pub fn stderr() -> Style {
        Style {
            color: std::io::stderr().is_terminal() && color_allowed(),
        }
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    pub fn red(self, text: &str) -> String {
        self.paint("31", text)
    }

    pub fn yellow(self, text: &str) -> String {
        self.paint("33", text)
    }

    pub fn blue(self, text: &str) -> String {
        self.paint("34", text)
    }

    pub fn dim(self, text: &str) -> String {
        self.paint("2", text)
    }

    pub fn bold(self, text: &str) -> String {
        self.paint("1", text)
    }
}

/// `text` as it may be written to a terminal: every control character but tab and
/// newline (C0, DEL, C1) written as `\u{..}` with its code in lowercase hex. Text without
/// any comes back as it is. Idempotent: what it writes has no control characters.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(must_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if must_escape(c) {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Whether `c` is written escaped by [`escape_controls`]: no human output holds one.
pub fn must_escape(c: char) -> bool {
    c.is_control() && c != '\t' && c != '\n'
}

/// Short for [`escape_controls`], at every place a result's text is written.
pub fn clean(text: &str) -> Cow<'_, str> {
    escape_controls(text)
}

fn color_allowed() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty())
}

/// What to print: `stdout` is the result, `stderr` holds errors and notes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub stdout: String,
    pub stderr: String,
}

/// A command's result for a person, given what the command's own renderer made of it:
/// that, with a note on stderr when the result was cut; the generic form ([`human`]) where
/// it has none, or the result is of a shape it does not know (`None`).
pub fn finish(specific: Option<Rendered>, result: &Json, err: Style) -> Rendered {
    match specific {
        Some(mut rendered) => {
            if result.get("truncated") == Some(&Json::Bool(true)) {
                let hint = result.get("truncatedHint").and_then(Json::as_str).unwrap_or("");
                let note = format!("note: the result was cut to fit. {}", clean(hint));
                let _ = writeln!(rendered.stderr, "{}", err.yellow(note.trim_end()));
            }
            rendered
        }
        None => Rendered {
            stdout: human(result),
            stderr: String::new(),
        },
    }
}

/// Whether a result reports a failure of its own (a script error: `success: false`).
pub fn failed(result: &Json) -> bool {
    result.get("success") == Some(&Json::Bool(false))
}

/// One line of Studio's output log: `[Level] body`, coloured by level.
pub fn log_line(level: &str, body: &str, style: Style) -> String {
    let line = format!("[{}] {}", clean(level), clean(body));
    match level {
        "Warning" => style.yellow(&line),
        "Error" => style.red(&line),
        "Info" => style.blue(&line),
        _ => line,
    }
}

/// One streamed event (`logs --follow`): a log line when it is one, else its JSON.
pub fn event_line(data: &Json, style: Style) -> String {
    match (
        data.get("level").and_then(Json::as_str),
        data.get("body").and_then(Json::as_str),
    ) {
        (Some(level), Some(body)) => format!("{}{}", file_line(data), log_line(level, body, style)),
        _ => clean(&data.to_string()).into_owned(),
    }
}

/// `src/server/Foo.server.luau:12: ` for a log entry whose first located script has a file
/// (its `locations`, from the project's sourcemap), else nothing: the form editors and
/// terminals make clickable, at the start of the line.
pub fn file_line(entry: &Json) -> String {
    let located = entry
        .get("locations")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .find_map(|l| Some((l.get("file")?.as_str()?, l.get("line")?.as_u64()?)));
    match located {
        Some((file, line)) => format!("{}:{line}: ", clean(file)),
        None => String::new(),
    }
}

// shared pieces ---------------------------------------------------------------------------

/// A script's run (`exec`, `test_run`): what it printed, as Studio's Output window shows
/// it (`file:line: ` first where a line names a script the sourcemap maps), then its
/// returns on one line as Luau literals; a script error goes to stderr. None for another
/// shape.
pub fn script_run(result: &Json, out: Style, err: Style) -> Option<Rendered> {
    let success = result.get("success")?.as_bool()?;
    let returns = result.get("returns")?.as_array()?;
    let mut rendered = Rendered::default();
    for entry in result
        .get("logs")
        .and_then(Json::as_array)
        .map_or(&[][..], Vec::as_slice)
    {
        let level = entry.get("level")?.as_str()?;
        let body = entry.get("body")?.as_str()?;
        let _ = writeln!(
            rendered.stdout,
            "{}{}",
            file_line(entry),
            output_window_line(level, body, out)
        );
    }
    if !returns.is_empty() {
        let _ = writeln!(rendered.stdout, "{}", crate::human::luau::list(returns));
    }
    if !success {
        let message = result
            .get("error")
            .and_then(Json::as_str)
            .unwrap_or("the script failed");
        // `file:line: ` first where the error names a script the sourcemap maps.
        let _ = writeln!(
            rendered.stderr,
            "{}{}",
            file_line(result),
            err.red(&format!("error: {}", clean(message)))
        );
    }
    Some(rendered)
}

/// A line as Studio's Output window shows it: prints as they are, warnings and errors
/// coloured (or, without colour, prefixed).
pub fn output_window_line(level: &str, body: &str, style: Style) -> String {
    let body = clean(body);
    match (level, style.color) {
        ("Warning", true) => style.yellow(&body),
        ("Warning", false) => format!("warning: {body}"),
        ("Error", true) => style.red(&body),
        ("Error", false) => format!("error: {body}"),
        _ => body.into_owned(),
    }
}

/// selene's findings of a script write (`diagnostics`, `diagnosticsOmitted`,
/// `diagnosticsSkipped`: `script_edit`, `create`), one a line as an editor's problem list
/// reads, `[path:]line:column severity code message`; why there are none on stderr.
pub fn diagnostics(result: &Json, rendered: &mut Rendered, out: Style, err: Style) {
    for found in result.get("diagnostics").and_then(Json::as_array).into_iter().flatten() {
        let text = |key: &str| clean(found.get(key).and_then(Json::as_str).unwrap_or("")).into_owned();
        let severity = text("severity");
        let painted = if severity == "error" {
            out.red(&severity)
        } else {
            out.yellow(&severity)
        };
        let at = found
            .get("path")
            .map(|_| format!("{}:", text("path")))
            .unwrap_or_default();
        let _ = writeln!(
            rendered.stdout,
            "{at}{}:{} {painted} {} {}",
            found.get("line").and_then(Json::as_u64).unwrap_or(0),
            found.get("column").and_then(Json::as_u64).unwrap_or(0),
            out.dim(&text("code")),
            text("message")
        );
    }
    if let Some(omitted) = result.get("diagnosticsOmitted").and_then(Json::as_u64) {
        let _ = writeln!(rendered.stdout, "… and {omitted} more diagnostics");
    }
    if let Some(why) = result.get("diagnosticsSkipped").and_then(Json::as_str) {
        let note = format!("note: no diagnostics: {}", clean(why));
        let _ = writeln!(rendered.stderr, "{}", err.yellow(&note));
    }
}

/// `text` with every occurrence of `needle` marked (bold red, as grep marks a match) on a
/// terminal; ASCII case folded unless `case_sensitive`, as the plugin's search folds it.
/// Every piece is escaped ([`clean`]).
pub fn highlighted(text: &str, needle: &str, case_sensitive: bool, style: Style) -> String {
    if !style.color || needle.is_empty() {
        return clean(text).into_owned();
    }
    let (haystack, needle) = if case_sensitive {
        (text.to_owned(), needle.to_owned())
    } else {
        (text.to_ascii_lowercase(), needle.to_ascii_lowercase())
    };
    let mut out = String::with_capacity(text.len() + 16);
    let mut from = 0;
    while let Some(at) = haystack[from..].find(&needle).map(|at| from + at) {
        out.push_str(&clean(&text[from..at]));
        out.push_str(&style.red(&style.bold(&clean(&text[at..at + needle.len()]))));
        from = at + needle.len();
    }
    out.push_str(&clean(&text[from..]));
    out
}

/// A point or size as a person reads it: `10, 3.5, -2` (one decimal at most).
pub fn numbers(values: &[Json]) -> String {
    values
        .iter()
        .map(|v| match v.as_f64() {
            Some(n) => {
                let rounded = (n * 10.0).round() / 10.0;
                if rounded == rounded.trunc() {
                    format!("{}", rounded as i64)
                } else {
                    format!("{rounded:.1}")
                }
            }
            None => clean(&v.to_string()).into_owned(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One line per text of a list (paths: `find`, `clone`, `create`), for pipes.
pub fn lines(values: &[Json]) -> Option<String> {
    let mut out = String::new();
    for value in values {
        let _ = writeln!(out, "{}", clean(value.as_str()?));
    }
    Some(out)
}

/// `yes`, `no`, or `–` where the result does not say.
pub fn yes_no(value: Option<&Json>) -> String {
    match value.and_then(Json::as_bool) {
        Some(true) => "yes".into(),
        Some(false) => "no".into(),
        None => "–".into(),
    }
}

/// Columns padded to their widest cell, two spaces apart; the last is not padded.
pub fn table(
    headers: &[&str],
    rows: &[Vec<String>],
    style: Style,
    paint: impl Fn(usize, &str, &str) -> String,
) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| cells.join("  ").trim_end().to_owned();
    let pad = |column: usize, cell: &str| {
        if column + 1 == widths.len() {
            cell.to_owned()
        } else {
            format!("{cell:<width$}", width = widths[column])
        }
    };
    let mut out = String::new();
    let header = line(
        headers
            .iter()
            .enumerate()
            .map(|(i, h)| style.bold(&pad(i, h)))
            .collect(),
    );
    let _ = writeln!(out, "{header}");
    for row in rows {
        let cells = row
            .iter()
            .enumerate()
            .map(|(i, cell)| paint(i, cell, &pad(i, cell)))
            .collect();
        let _ = writeln!(out, "{}", line(cells));
    }
    out
}

/// `1 child`, `2 children`.
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

// generic ------------------------------------------------------------------------------

/// Any result as indented `key: value` lines. Where it ran (`sessionId`, `context` at the
/// top level) is left out: the command line chose it and it is noise here.
pub fn human(value: &Json) -> String {
    let mut out = String::new();
    match value {
        Json::Object(object) => {
            let own: Map<String, Json> = object
                .iter()
                .filter(|(key, _)| *key != "sessionId" && *key != "context")
                .map(|(key, item)| (key.clone(), item.clone()))
                .collect();
            if own.is_empty() && !object.is_empty() {
                // Nothing but where it ran: say that rather than `{}`.
                write_value(&mut out, value, 0);
            } else {
                write_value(&mut out, &Json::Object(own), 0);
            }
        }
        other => write_value(&mut out, other, 0),
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

fn write_value(out: &mut String, value: &Json, indent: usize) {
    match value {
        Json::Object(object) if !object.is_empty() => {
            for (key, item) in object {
                let _ = write!(out, "{:indent$}{}:", "", clean(key));
                write_nested(out, item, indent);
            }
        }
        Json::Array(items) if !items.is_empty() => {
            for item in items {
                let _ = write!(out, "{:indent$}-", "");
                write_nested(out, item, indent);
            }
        }
        other => {
            let _ = writeln!(out, "{:indent$}{}", "", scalar(other));
        }
    }
}

fn write_nested(out: &mut String, item: &Json, indent: usize) {
    match item {
        Json::Object(o) if !o.is_empty() => {
            out.push('\n');
            write_value(out, item, indent + 2);
        }
        Json::Array(a) if !a.is_empty() => {
            out.push('\n');
            write_value(out, item, indent + 2);
        }
        other => {
            let _ = writeln!(out, " {}", scalar(other));
        }
    }
}

fn scalar(value: &Json) -> String {
    match value {
        Json::String(text) => clean(text).into_owned(),
        other => clean(&other.to_string()).into_owned(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_values_are_indented() {
        let text =
            human(&json!({"success": true, "returns": [2, null], "logs": [{"level": "Print", "body": "hi"}], "e": []}));
        assert_eq!(
            text,
            "success: true\nreturns:\n  - 2\n  - null\nlogs:\n  -\n    level: Print\n    body: hi\ne: []\n"
        );
    }

    /// A game's output that would drive a terminal: ESC (a CSI clear, an OSC 52
    /// clipboard write ended by BEL, a title change), CR, and a C1 CSI.
    pub(crate) const HOSTILE: &str = "\u{1b}[2J\u{1b}]52;c;cHduZWQ=\u{7}\u{1b}]0;title\u{7}\r\u{9b}31m\u{7f}\u{0}";

    #[test]
    fn controls_are_escaped_visibly_but_tab_and_newline_kept() {
        assert_eq!(
            escape_controls(HOSTILE),
            "\\u{1b}[2J\\u{1b}]52;c;cHduZWQ=\\u{7}\\u{1b}]0;title\\u{7}\\u{d}\\u{9b}31m\\u{7f}\\u{0}"
        );
        assert!(matches!(escape_controls("a\tb\nc é ✓"), Cow::Borrowed("a\tb\nc é ✓")));
        let once = escape_controls(HOSTILE).into_owned();
        assert_eq!(escape_controls(&once), once, "escaping twice changes nothing");
    }
}

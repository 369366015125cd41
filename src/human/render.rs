//! Human-readable output. The input is always the result JSON an MCP client gets; a few
//! commands whose shape reads better another way have their own renderer, chosen by the
//! command's name (`exec`, `sessions`, `query`, `logs`, `find`, `script_read`, `api`). A result of a shape a renderer
//! does not know, and every other command, gets the generic indented `key: value` form.
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

use super::luau;

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

fn must_escape(c: char) -> bool {
    c.is_control() && c != '\t' && c != '\n'
}

/// Short for [`escape_controls`], at every place a result's text is written.
fn clean(text: &str) -> Cow<'_, str> {
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

/// A command's result for a person.
pub fn render(command: &str, result: &Json, out: Style, err: Style) -> Rendered {
    let specific = match command {
        "exec" => exec(result, out, err),
        "sessions" => sessions(result, out),
        "query" => query(result, out),
        "logs" => logs(result, out, err),
        "find" => find(result),
        "script_read" => script_read(result, out),
        "api" => api(result, out),
        _ => None,
    };
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
        (Some(level), Some(body)) => log_line(level, body, style),
        _ => clean(&data.to_string()).into_owned(),
    }
}

// exec ---------------------------------------------------------------------------------

/// What the script printed, as Studio's Output window shows it, then its returns on one
/// line; a script error goes to stderr.
fn exec(result: &Json, out: Style, err: Style) -> Option<Rendered> {
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
        let _ = writeln!(rendered.stdout, "{}", output_window_line(level, body, out));
    }
    if !returns.is_empty() {
        let _ = writeln!(rendered.stdout, "{}", luau::list(returns));
    }
    if !success {
        let message = result
            .get("error")
            .and_then(Json::as_str)
            .unwrap_or("the script failed");
        let _ = writeln!(rendered.stderr, "{}", err.red(&format!("error: {}", clean(message))));
    }
    Some(rendered)
}

/// A line as Studio's Output window shows it: prints as they are, warnings and errors
/// coloured (or, without colour, prefixed).
fn output_window_line(level: &str, body: &str, style: Style) -> String {
    let body = clean(body);
    match (level, style.color) {
        ("Warning", true) => style.yellow(&body),
        ("Warning", false) => format!("warning: {body}"),
        ("Error", true) => style.red(&body),
        ("Error", false) => format!("error: {body}"),
        _ => body.into_owned(),
    }
}

// sessions -----------------------------------------------------------------------------

fn sessions(result: &Json, out: Style) -> Option<Rendered> {
    let list = result.get("sessions")?.as_array()?;
    if list.is_empty() {
        return Some(Rendered {
            stdout: "no sessions: no Studio has the studio-bridge plugin connected\n".into(),
            stderr: String::new(),
        });
    }
    let text = |session: &Json, key: &str| clean(session.get(key).and_then(Json::as_str).unwrap_or("-")).into_owned();
    let mut rows = Vec::with_capacity(list.len());
    for session in list {
        rows.push(vec![
            clean(session.get("sessionId")?.as_str()?).into_owned(),
            text(session, "context"),
            text(session, "state"),
            text(session, "status"),
            text(session, "placeName"),
            session
                .get("uptimeMs")
                .and_then(Json::as_u64)
                .map_or_else(|| "-".into(), uptime),
        ]);
    }
    let headers = ["SESSION", "CONTEXT", "STATE", "STATUS", "PLACE", "UPTIME"];
    Some(Rendered {
        stdout: table(&headers, &rows, out, |column, cell, padded| {
            if column == 3 && cell != "connected" {
                out.yellow(padded)
            } else {
                padded.to_owned()
            }
        }),
        stderr: String::new(),
    })
}

/// Columns padded to their widest cell, two spaces apart; the last is not padded.
fn table(headers: &[&str], rows: &[Vec<String>], style: Style, paint: impl Fn(usize, &str, &str) -> String) -> String {
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

/// `42s`, `3m 07s`, `2h 05m`, `3d 04h`.
fn uptime(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {:02}h", s / 86400, s % 86400 / 3600),
    }
}

// query --------------------------------------------------------------------------------

fn query(result: &Json, out: Style) -> Option<Rendered> {
    let instance = result.get("instance")?;
    let mut text = String::new();
    write_instance(&mut text, instance, 0, out)?;
    Some(Rendered {
        stdout: text,
        stderr: String::new(),
    })
}

/// `Name (ClassName)`, then its properties, attribute (`@Name = value`), tags and
/// children, each indented two more spaces than the entry.
fn write_instance(out: &mut String, entry: &Json, indent: usize, style: Style) -> Option<()> {
    let raw_name = entry.get("name")?.as_str()?;
    let raw_class = entry.get("className")?.as_str()?;
    let (name, class) = (clean(raw_name), clean(raw_class));
    let child_count = entry.get("childCount").and_then(Json::as_u64).unwrap_or(0);
    let children = entry.get("children").and_then(Json::as_array);
    let mut header = format!("{:indent$}{name} ({class})", "");
    if children.is_none() && child_count > 0 {
        header.push_str(&style.dim(&format!("  [{}]", count(child_count, "child", "children"))));
    }
    let _ = writeln!(out, "{header}");
    let inner = indent + 2;
    let object = |key: &str| entry.get(key).and_then(Json::as_object);
    for (key, value) in object("properties").into_iter().flat_map(Map::iter) {
        // The header already says these.
        let redundant = (key == "Name" && value.as_str() == Some(raw_name))
            || (key == "ClassName" && value.as_str() == Some(raw_class));
        if !redundant {
            let _ = writeln!(out, "{:inner$}{} = {}", "", clean(key), luau::value(value));
        }
    }
    for (key, message) in object("propertyErrors").into_iter().flat_map(Map::iter) {
        let message = message.as_str().map_or_else(|| message.to_string(), str::to_owned);
        let _ = writeln!(
            out,
            "{:inner$}{} = {}",
            "",
            clean(key),
            style.red(&format!("(error: {})", clean(&message)))
        );
    }
    for (key, value) in object("attributes").into_iter().flat_map(Map::iter) {
        let _ = writeln!(out, "{:inner$}@{} = {}", "", clean(key), luau::value(value));
    }
    let tags: Vec<&str> = entry
        .get("tags")
        .and_then(Json::as_array)
        .map(|tags| tags.iter().filter_map(Json::as_str).collect())
        .unwrap_or_default();
    if !tags.is_empty() {
        let _ = writeln!(out, "{:inner$}tags: {}", "", clean(&tags.join(", ")));
    }
    if let Some(children) = children {
        for child in children {
            write_instance(out, child, inner, style)?;
        }
        let shown = children.len() as u64;
        if child_count > shown {
            let more = format!("… {}", count(child_count - shown, "more child", "more children"));
            let _ = writeln!(out, "{:inner$}{}", "", style.dim(&more));
        }
    }
    Some(())
}

fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

// logs ---------------------------------------------------------------------------------

fn logs(result: &Json, out: Style, err: Style) -> Option<Rendered> {
    let entries = result.get("entries")?.as_array()?;
    let mut rendered = Rendered::default();
    for entry in entries {
        let level = entry.get("level")?.as_str()?;
        let body = entry.get("body")?.as_str()?;
        let _ = writeln!(rendered.stdout, "{}", log_line(level, body, out));
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

/// One path per line, for pipes (`studio-bridge find … | xargs …`).
fn find(result: &Json) -> Option<Rendered> {
    let mut rendered = Rendered::default();
    for found in result.get("matches")?.as_array()? {
        let _ = writeln!(rendered.stdout, "{}", clean(found.get("path")?.as_str()?));
    }
    Some(rendered)
}

/// The source with line numbers, like `cat -n`, when it is the whole script (a ranged
/// read does not say where its lines start: it prints them as they are).
fn script_read(result: &Json, out: Style) -> Option<Rendered> {
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

// api ----------------------------------------------------------------------------------

/// A class as its chain then one aligned line a property (type, then where it comes from
/// and how it can be used); an enum as `Name = value` lines; a search one match a line.
fn api(result: &Json, out: Style) -> Option<Rendered> {
    let mut rendered = Rendered::default();
    let text = |v: &Json, key: &str| clean(v.get(key).and_then(Json::as_str).unwrap_or("")).into_owned();
    if let Some(properties) = result.get("properties").and_then(Json::as_array) {
        let mut chain = vec![text(result, "name")];
        for superclass in result
            .get("superclasses")
            .and_then(Json::as_array)
            .map_or(&[][..], Vec::as_slice)
        {
            chain.push(clean(superclass.as_str()?).into_owned());
        }
        let tags: Vec<&str> = result
            .get("tags")
            .and_then(Json::as_array)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter_map(Json::as_str)
            .collect();
        let tags = if tags.is_empty() {
            String::new()
        } else {
            format!("  [{}]", clean(&tags.join(", ")))
        };
        let _ = writeln!(rendered.stdout, "{}{tags}", out.bold(&chain.join(" : ")));
        let name_width = properties.iter().map(|p| text(p, "name").len()).max().unwrap_or(0);
        let type_width = properties.iter().map(|p| text(p, "type").len()).max().unwrap_or(0);
        for property in properties {
            let mut notes = Vec::new();
            if let Some(from) = property.get("from").and_then(Json::as_str) {
                notes.push(format!("from {}", clean(from)));
            }
            if let Some(access) = property.get("access").and_then(Json::as_str) {
                notes.push(clean(access).into_owned());
            }
            if property.get("deprecated") == Some(&Json::Bool(true)) {
                notes.push("deprecated".to_owned());
            }
            let line = format!(
                "  {:<name_width$}  {:<type_width$}  {}",
                text(property, "name"),
                text(property, "type"),
                out.dim(&notes.join(", "))
            );
            let _ = writeln!(rendered.stdout, "{}", line.trim_end());
        }
    } else if let Some(items) = result.get("items").and_then(Json::as_array) {
        let _ = writeln!(
            rendered.stdout,
            "{}",
            out.bold(&format!("Enum.{}", text(result, "name")))
        );
        for item in items {
            let value = item.get("value")?.to_string();
            let _ = writeln!(rendered.stdout, "  {} = {}", text(item, "name"), clean(&value));
        }
    } else {
        for found in result.get("matches")?.as_array()? {
            let name = text(found, "name");
            let qualified = match text(found, "kind").as_str() {
                "property" => format!("{}.{name}", text(found, "class")),
                "enum" => format!("Enum.{name}"),
                "enumItem" => format!("Enum.{}.{name}", text(found, "enum")),
                _ => name,
            };
            let _ = writeln!(rendered.stdout, "{:<8}  {qualified}", text(found, "kind"));
        }
    }
    Some(rendered)
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
mod tests {
    use super::*;
    use serde_json::json;

    const PLAIN: Style = Style { color: false };
    const COLOR: Style = Style { color: true };

    fn plain(command: &str, result: &Json) -> Rendered {
        render(command, result, PLAIN, PLAIN)
    }

    #[test]
    fn nested_values_are_indented() {
        let text =
            human(&json!({"success": true, "returns": [2, null], "logs": [{"level": "Print", "body": "hi"}], "e": []}));
        assert_eq!(
            text,
            "success: true\nreturns:\n  - 2\n  - null\nlogs:\n  -\n    level: Print\n    body: hi\ne: []\n"
        );
    }

    #[test]
    fn the_generic_form_leaves_out_where_it_ran() {
        let text = human(&json!({"state": "Edit", "sessionId": "A-edit", "context": "edit"}));
        assert_eq!(text, "state: Edit\n");
        let text = plain(
            "state",
            &json!({"state": "Edit", "sessionId": "A-edit", "context": "edit"}),
        );
        assert_eq!(text.stdout, "state: Edit\n");
    }

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

    #[test]
    fn sessions_are_an_aligned_table() {
        let result = json!({"sessions": [
            {"sessionId": "A-edit", "instanceId": "A", "context": "edit", "state": "Edit", "status": "connected",
             "placeName": "Place A", "placeId": 1, "gameId": 0, "pluginVersion": "x", "uptimeMs": 4200},
            {"sessionId": "B-server", "instanceId": "B", "context": "server", "state": "Server",
             "status": "reconnecting", "placeName": "Obby", "placeId": 2, "gameId": 0, "pluginVersion": "x",
             "uptimeMs": 3_723_000},
        ]});
        assert_eq!(
            plain("sessions", &result).stdout,
            "SESSION   CONTEXT  STATE   STATUS        PLACE    UPTIME\n\
             A-edit    edit     Edit    connected     Place A  4s\n\
             B-server  server   Server  reconnecting  Obby     1h 02m\n"
        );
        assert!(
            plain("sessions", &json!({"sessions": []}))
                .stdout
                .starts_with("no sessions")
        );
    }

    #[test]
    fn query_is_an_indented_tree() {
        let result = json!({"instance": {
            "name": "Workspace", "className": "Workspace", "path": "game.Workspace",
            "properties": {"ClassName": "Workspace", "Gravity": 196.2, "Name": "Workspace"},
            "propertyErrors": {"Secret": "not readable"},
            "attributes": {"Level": 3},
            "tags": ["Map"],
            "childCount": 3,
            "children": [
                {"name": "Baseplate", "className": "Part", "path": "game.Workspace.Baseplate", "childCount": 0,
                 "properties": {"Size": {"type": "Vector3", "value": [2048, 16, 2048]}}, "tags": []},
                {"name": "Model", "className": "Model", "path": "game.Workspace.Model", "childCount": 2},
            ],
        }, "sessionId": "A-edit", "context": "edit"});
        assert_eq!(
            plain("query", &result).stdout,
            "Workspace (Workspace)\n  Gravity = 196.2\n  Secret = (error: not readable)\n  @Level = 3\n  tags: Map\n  \
             Baseplate (Part)\n    Size = Vector3.new(2048, 16, 2048)\n  Model (Model)  [2 children]\n  … 1 more child\n"
        );
    }

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
    fn find_is_one_path_a_line_and_script_read_is_numbered() {
        let found = json!({"matches": [{"path": "game.Workspace.A", "className": "Part"}, {"path": "game.Workspace.B", "className": "Model"}], "truncated": false});
        assert_eq!(plain("find", &found).stdout, "game.Workspace.A\ngame.Workspace.B\n");
        let read = json!({"source": "local a = 1\nreturn a\n", "lineCount": 2, "hash": "h", "path": "game.S"});
        assert_eq!(
            plain("script_read", &read).stdout,
            "   1  local a = 1\n   2  return a\n"
        );
    }

    /// A game's output that would drive a terminal: ESC (a CSI clear, an OSC 52
    /// clipboard write ended by BEL, a title change), CR, and a C1 CSI.
    const HOSTILE: &str = "\u{1b}[2J\u{1b}]52;c;cHduZWQ=\u{7}\u{1b}]0;title\u{7}\r\u{9b}31m\u{7f}\u{0}";

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

    /// `value` with `HOSTILE` put into every string (and, with `keys`, every key).
    fn hostile(value: &Json, keys: bool) -> Json {
        match value {
            Json::String(text) => Json::String(format!("{text}{HOSTILE}")),
            Json::Array(items) => Json::Array(items.iter().map(|v| hostile(v, keys)).collect()),
            Json::Object(object) => Json::Object(
                object
                    .iter()
                    .map(|(k, v)| (if keys { format!("{k}{HOSTILE}") } else { k.clone() }, hostile(v, keys)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    #[test]
    fn no_renderer_writes_a_control_character_from_a_result() {
        let results = [
            (
                "exec",
                json!({"success": false, "error": "boom",
                "returns": ["s", {"type": "Instance", "value": {"path": "game.Workspace.P", "className": "Part"}},
                            {"type": "EnumItem", "value": {"enum": "Material", "name": "Wood", "value": 1}},
                            {"type": "Odd", "value": "x"}, {"k": "v"}],
                "logs": [{"level": "Print", "body": "a"}, {"level": "Warning", "body": "b"}, {"level": "Error", "body": "c"}]}),
            ),
            (
                "sessions",
                json!({"sessions": [{"sessionId": "A", "context": "edit", "state": "Edit",
                "status": "connected", "placeName": "P", "uptimeMs": 1}]}),
            ),
            (
                "query",
                json!({"instance": {"name": "W", "className": "Workspace", "childCount": 2,
                "properties": {"Name": "W", "Gravity": 1, "Text": "t"}, "propertyErrors": {"S": "no"},
                "attributes": {"A": "a"}, "tags": ["T"],
                "children": [{"name": "C", "className": "Part", "childCount": 0}]}}),
            ),
            (
                "logs",
                json!({"entries": [{"seq": 1, "level": "Print", "body": "a", "timestamp": 0}],
                "missed": 0, "truncated": true, "truncatedHint": "h"}),
            ),
            ("find", json!({"matches": [{"path": "game.W.A", "className": "Part"}]})),
            ("script_read", json!({"source": "a\nb\n", "lineCount": 2, "hash": "h"})),
            ("script_read", json!({"source": "a\nb\n", "lineCount": 9, "hash": "h"})),
            (
                "api",
                json!({"name": "Part", "superclasses": ["BasePart"], "tags": ["t"],
                "properties": [{"name": "Size", "type": "Vector3", "from": "BasePart", "access": "rw"}]}),
            ),
            (
                "api",
                json!({"name": "Material", "items": [{"name": "Wood", "value": 1}]}),
            ),
            (
                "api",
                json!({"matches": [{"kind": "property", "name": "Size", "class": "Part"}]}),
            ),
            (
                "state",
                json!({"state": "Edit", "placeName": "P", "list": ["x", {"y": "z"}]}),
            ),
        ];
        for (command, result) in &results {
            for keys in [false, true] {
                let result = hostile(result, keys);
                let rendered = render(command, &result, PLAIN, PLAIN);
                for text in [&rendered.stdout, &rendered.stderr] {
                    assert!(
                        !text.chars().any(must_escape),
                        "{command} (keys: {keys}) wrote a control: {text:?}"
                    );
                }
                assert!(
                    rendered.stdout.contains("\\u{1b}]52;") || rendered.stderr.contains("\\u{1b}]52;"),
                    "{command}: the text is shown, escaped: {rendered:?}"
                );
                // In colour the only escapes are the colours' own.
                let coloured = render(command, &result, COLOR, COLOR);
                for text in [&coloured.stdout, &coloured.stderr] {
                    let without_colours = text
                        .replace("\u{1b}[0m", "")
                        .replace("\u{1b}[1m", "")
                        .replace("\u{1b}[2m", "")
                        .replace("\u{1b}[31m", "")
                        .replace("\u{1b}[33m", "")
                        .replace("\u{1b}[34m", "");
                    assert!(!without_colours.chars().any(must_escape), "{command}: {text:?}");
                }
            }
        }
        let event = hostile(&json!({"seq": 1, "level": "Error", "body": "x"}), false);
        assert!(!event_line(&event, PLAIN).chars().any(must_escape));
        let odd_event = hostile(&json!({"seq": 1, "note": "\u{9b}"}), true);
        assert!(!event_line(&odd_event, PLAIN).chars().any(must_escape));
        assert_eq!(log_line("Print", "\u{1b}c", PLAIN), "[Print] \\u{1b}c");
    }

    #[test]
    fn unknown_shapes_fall_back_to_the_generic_form() {
        let odd = json!({"success": "maybe"});
        assert_eq!(plain("exec", &odd).stdout, "success: maybe\n");
        let truncated = json!({"entries": [], "total": 0, "bufferCapacity": 1, "nextSince": 0,
                               "truncated": true, "truncatedHint": "Ask for fewer."});
        assert_eq!(
            plain("logs", &truncated).stderr,
            "note: the result was cut to fit. Ask for fewer.\n"
        );
    }
}

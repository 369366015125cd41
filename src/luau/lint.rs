//! Lint diagnostics for a script write: the project's own `selene` over the new source
//! (unknown globals, unused variables, shadowing, deprecated members, and whatever else the
//! project's `selene.toml` turns on). Never blocking: the write goes through either way, and
//! when selene is missing or fails the result says so once (`diagnosticsSkipped`).
//!
//! Why the executable and not the `selene-lib` crate: see [`super::tool`] (binary size, and
//! the project's pinned version and config give what its CI gives). Selene runs in this
//! process's working directory, the project's: its `selene.toml` there applies. Without one,
//! selene would know no Roblox global (`game` unknown on every line), so it gets a config of
//! ours whose std is `roblox-std.yml` (selene's `luau` std plus the engine's globals), written
//! once to studio-bridge's cache folder.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::tool::Tool;

pub const SELENE: Tool = Tool {
    name: "selene",
    env: "STUDIO_BRIDGE_SELENE",
    install: "add it to the project's toolchain (`rokit add Kampfkarren/selene`) or `cargo install selene`, for lint diagnostics on script writes",
};

/// The std used when the project has no selene.toml (its comments say what it lacks).
const ROBLOX_STD: &str = include_str!("roblox-std.yml");
const STD_NAME: &str = "studio-bridge-roblox";

/// The most diagnostics a result carries; the rest are counted (`diagnosticsOmitted`).
pub const MAX_DIAGNOSTICS: usize = 100;

/// One finding, its position in the new source (1-based).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Diagnostic {
    pub line: u32,
    pub column: u32,
    /// `error` or `warning`, as the project's selene.toml ranks the lint.
    pub severity: String,
    /// selene's lint name (`undefined_variable`, `unused_variable`, …).
    pub code: String,
    pub message: String,
}

/// What linting one source gave: its diagnostics, or why there are none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lint {
    Found(Vec<Diagnostic>),
    /// Selene is missing or failed: one short sentence for `diagnosticsSkipped`.
    Skipped(String),
}

/// Runs selene over `source` in the working directory.
pub async fn lint(source: &str) -> Lint {
    let mut args: Vec<std::ffi::OsString> = vec!["--display-style".into(), "json2".into()];
    if !Path::new("selene.toml").is_file() {
        match our_config() {
            Ok(config) => {
                args.push("--config".into());
                args.push(config.into());
            }
            Err(why) => return Lint::Skipped(why),
        }
    }
    args.push("-".into());
    match SELENE.run(&args, source).await {
        Ok(ran) => match parse(&ran.stdout) {
            Some(found) => Lint::Found(found),
            None => Lint::Skipped(format!("selene failed: {}", ran.complaint())),
        },
        Err(why) => Lint::Skipped(why),
    }
}

/// Selene's `--display-style json2` output, one JSON object a line: its `Diagnostic`s (lines
/// and columns made 1-based, notes added to the message) and a `Summary` last. `None` when
/// no summary came (selene stopped before linting: a bad config, a std it could not load).
pub fn parse(stdout: &str) -> Option<Vec<Diagnostic>> {
    let mut found = Vec::new();
    let mut summary = false;
    for line in stdout.lines().filter(|l| l.trim_start().starts_with('{')) {
        let Ok(record) = serde_json::from_str::<Record>(line) else {
            continue;
        };
        match record.kind.as_str() {
            "Diagnostic" => found.push(record.into_diagnostic()),
            "Summary" => summary = true,
            _ => {}
        }
    }
    summary.then_some(found)
}

#[derive(Deserialize)]
struct Record {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    severity: String,
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    notes: Vec<String>,
    primary_label: Option<Label>,
}

#[derive(Deserialize)]
struct Label {
    span: Span,
}

#[derive(Deserialize)]
struct Span {
    start_line: u32,
    start_column: u32,
}

impl Record {
    fn into_diagnostic(self) -> Diagnostic {
        let (line, column) = self
            .primary_label
            .map(|l| (l.span.start_line + 1, l.span.start_column + 1))
            .unwrap_or((1, 1));
        let mut message = self.message;
        let notes: Vec<String> = self
            .notes
            .iter()
            .map(|n| n.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|n| !n.is_empty())
            .collect();
        if !notes.is_empty() {
            message = format!("{message} ({})", notes.join("; "));
        }
        Diagnostic {
            line,
            column,
            severity: self.severity.to_ascii_lowercase(),
            code: self.code,
            message,
        }
    }
}

/// The selene.toml of ours (std = [`ROBLOX_STD`]) in the cache folder, written when absent
/// or different (through a temporary file and a rename: lints in this and other `mcp`
/// processes may race).
fn our_config() -> Result<PathBuf, String> {
    let dir = dirs::cache_dir()
        .or_else(|| Some(std::env::temp_dir()))
        .map(|d| d.join("studio-bridge").join("selene"))
        .ok_or("no cache folder for selene's config")?;
    let config = dir.join("selene.toml");
    let files = [
        (dir.join(format!("{STD_NAME}.yml")), ROBLOX_STD.to_owned()),
        (config.clone(), format!("std = \"{STD_NAME}\"\n")),
    ];
    for (path, text) in files {
        if std::fs::read_to_string(&path).is_ok_and(|old| old == text) {
            continue;
        }
        let written = std::fs::create_dir_all(&dir).and_then(|()| {
            // A name of its own: lints run side by side, in this process and others.
            let temporary = path.with_extension(format!("{}.tmp", uuid::Uuid::new_v4().simple()));
            std::fs::write(&temporary, &text)?;
            std::fs::rename(&temporary, &path)
        });
        written.map_err(|e| format!("selene's config could not be written to {}: {e}", dir.display()))?;
    }
    Ok(config)
}

/// `diagnostics` (at most [`MAX_DIAGNOSTICS`], then `diagnosticsOmitted`) or
/// `diagnosticsSkipped`, added to a write's result.
pub fn annotate(result: &mut serde_json::Map<String, serde_json::Value>, lint: Lint) {
    match lint {
        Lint::Found(found) => annotate_all(result, found, None),
        Lint::Skipped(why) => annotate_all::<Diagnostic>(result, Vec::new(), Some(why)),
    }
}

/// [`annotate`] for a write of several sources: what was found in them all (each finding
/// in the caller's shape, e.g. with its script's path), and the first reason one was not
/// linted. `diagnostics` is left out only when nothing was linted.
pub fn annotate_all<T: Serialize>(
    result: &mut serde_json::Map<String, serde_json::Value>,
    mut found: Vec<T>,
    skipped: Option<String>,
) {
    if skipped.is_none() || !found.is_empty() {
        let omitted = found.len().saturating_sub(MAX_DIAGNOSTICS);
        found.truncate(MAX_DIAGNOSTICS);
        result.insert("diagnostics".into(), serde_json::json!(found));
        if omitted > 0 {
            result.insert("diagnosticsOmitted".into(), omitted.into());
        }
    }
    if let Some(why) = skipped {
        result.insert("diagnosticsSkipped".into(), why.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Selene 0.31's `--display-style json2` for `local unused = 1\nprint(foo)` with a
    /// deprecated call, as it printed it.
    const OUTPUT: &str = r#"{"type":"Diagnostic","severity":"Warning","code":"unused_variable","message":"unused is assigned a value, but never used","primary_label":{"filename":"-","span":{"start":6,"start_line":0,"start_column":6,"end":12,"end_line":0,"end_column":12},"message":""},"notes":[],"secondary_labels":[]}
{"type":"Diagnostic","severity":"Error","code":"undefined_variable","message":"`foo` is not defined","primary_label":{"filename":"-","span":{"start":23,"start_line":1,"start_column":6,"end":26,"end_line":1,"end_column":9},"message":""},"notes":[],"secondary_labels":[]}
{"type":"Diagnostic","severity":"Warning","code":"deprecated","message":"standard library function `wait` is deprecated","primary_label":{"filename":"-","span":{"start":16,"start_line":2,"start_column":0,"end":23,"end_line":2,"end_column":7},"message":""},"notes":["`wait` is deprecated; use `task.wait`","try: task.wait(1)"],"secondary_labels":[]}
{"type":"Summary","errors":1,"warnings":2,"parse_errors":0}
"#;

    #[test]
    fn selene_json2_becomes_one_based_diagnostics_with_their_notes() {
        let found = parse(OUTPUT).expect("a summary came");
        assert_eq!(
            found,
            vec![
                Diagnostic {
                    line: 1,
                    column: 7,
                    severity: "warning".into(),
                    code: "unused_variable".into(),
                    message: "unused is assigned a value, but never used".into(),
                },
                Diagnostic {
                    line: 2,
                    column: 7,
                    severity: "error".into(),
                    code: "undefined_variable".into(),
                    message: "`foo` is not defined".into(),
                },
                Diagnostic {
                    line: 3,
                    column: 1,
                    severity: "warning".into(),
                    code: "deprecated".into(),
                    message: "standard library function `wait` is deprecated (`wait` is deprecated; use `task.wait`; try: task.wait(1))".into(),
                },
            ]
        );
    }

    #[test]
    fn a_clean_source_is_an_empty_list_and_no_summary_is_a_failure() {
        assert_eq!(
            parse("{\"type\":\"Summary\",\"errors\":0,\"warnings\":0,\"parse_errors\":0}\n"),
            Some(vec![])
        );
        // What selene prints when it stops before linting (a std it cannot load), and noise.
        assert_eq!(parse(""), None);
        assert_eq!(parse("error: could not find std `roblox`\n{not json\n"), None);
    }

    #[test]
    fn multiline_notes_are_folded_and_a_missing_label_is_line_one() {
        let line = r#"{"type":"Diagnostic","severity":"Error","code":"parse_error","message":"bad","notes":["one\ntwo  three"]}
{"type":"Summary","errors":1,"warnings":0,"parse_errors":1}"#;
        let found = parse(line).expect("a summary came");
        assert_eq!(found[0].line, 1);
        assert_eq!(found[0].column, 1);
        assert_eq!(found[0].message, "bad (one two three)");
    }

    #[test]
    fn a_result_carries_at_most_the_cap_and_counts_the_rest() {
        let one = Diagnostic {
            line: 1,
            column: 1,
            severity: "warning".into(),
            code: "unused_variable".into(),
            message: "x".into(),
        };
        let mut result = serde_json::Map::new();
        annotate(&mut result, Lint::Found(vec![one; MAX_DIAGNOSTICS + 3]));
        assert_eq!(result["diagnostics"].as_array().map(Vec::len), Some(MAX_DIAGNOSTICS));
        assert_eq!(result["diagnosticsOmitted"], 3);
        let mut skipped = serde_json::Map::new();
        annotate(&mut skipped, Lint::Skipped("selene not found".into()));
        assert_eq!(skipped["diagnosticsSkipped"], "selene not found");
        assert!(!skipped.contains_key("diagnostics"));
    }
}

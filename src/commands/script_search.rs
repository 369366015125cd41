//! `script_search`: lines of every script under a root that contain a string (or match a
//! Luau pattern), scripts in `find`'s order, then line order.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::files::Files;
use super::{Command, Invocation, Kind, Output, Spec};
use crate::protocol::{Context, ToolError};

/// Most matches one call may ask for.
const MAX_LIMIT: u32 = 10_000;

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScriptSearchArgs {
    pub query: String,
    /// Luau pattern.
    #[serde(default)]
    pub regex: bool,
    #[serde(default)]
    pub case_sensitive: bool,
    #[serde(default = "default_root")]
    pub root: String,
    #[serde(default = "default_limit")]
    #[schemars(range(max = 10_000))]
    pub limit: u32,
    // From a cut result: continue the same walk after this path (TOOLS.md, "Big places").
    // No doc comment: the name says it, and the catalogue's budget is for what does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_after: Option<String>,
}

fn default_root() -> String {
    "game".to_owned()
}

fn default_limit() -> u32 {
    200
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ScriptSearchResult {
    /// Scripts in depth-first pre-order, then line order.
    pub matches: Vec<ScriptMatch>,
    /// True when `limit` or the deadline cut the list.
    pub truncated: bool,
    /// How many scripts this answer covers, in walk order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scanned: Option<u64>,
    /// When cut: the path to pass back as `resumeAfter` to go on from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_after: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ScriptMatch {
    pub path: String,
    pub line: u32,
    /// The whole line, untrimmed; cut with a marker past 500 characters.
    pub text: String,
    /// The script's file, when the project's sourcemap maps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

pub struct ScriptSearch;

impl Command for ScriptSearch {
    type Args = ScriptSearchArgs;
    type Result = ScriptSearchResult;
    const SPEC: Spec = Spec {
        name: "script_search",
        description: "Search the source lines of scripts.",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(15),
        kind: Kind::Read,
        capabilities: super::Capabilities::of(&[super::Capability::Read]),
        idempotent: true,
        open_world: false,
        positional: &["query"],
        truncation_hint: "Narrow the root or the query, or raise limit.",
        follow_event: None,
        example: "studio-bridge script-search RemoteEvent --root ReplicatedStorage",
        from_file: None,
        flag_help: &[
            ("query", "Text to find in every script"),
            ("caseSensitive", "Match case"),
            ("root", "Search scripts under this instance only"),
            ("limit", "At most this many matches"),
            (
                "resumeAfter",
                "From a cut result (its resumeAfter): go on after this path",
            ),
        ],
    };
    const FILES: Files = Files {
        path_objects: &["matches"],
        ..Files::NONE
    };

    async fn run(args: ScriptSearchArgs, cx: &Invocation) -> Result<Output, ToolError> {
        if args.query.is_empty() {
            return Err(ToolError::invalid_args("`query` is empty; pass the text to look for."));
        }
        if !(1..=MAX_LIMIT).contains(&args.limit) {
            return Err(ToolError::invalid_args(format!(
                "`limit` must be between 1 and {MAX_LIMIT}."
            )));
        }
        if args.root.trim().is_empty() {
            return Err(ToolError::invalid_args(
                "`root` is empty; pass an instance path such as game.ServerScriptService, or omit it for game.",
            ));
        }
        cx.forward(&Self::SPEC, &args).await
    }
}

use serde_json::Value as Json;

// Human rendering --------------------------------------------------------------------------

use std::fmt::Write as _;

use crate::human::render::{self, Rendered, Style, clean};

impl super::Render for ScriptSearch {
    /// grep's form, `where:line: text`, the script's file where the sourcemap maps it (what
    /// editors make clickable), else its path; the query marked on a terminal (a Luau
    /// pattern, `--regex`, is not).
    fn render(args: &Json, result: &Json, out: Style, _err: Style) -> Option<Rendered> {
        let query = args.get("query").and_then(Json::as_str).unwrap_or("");
        let case_sensitive = args.get("caseSensitive") == Some(&Json::Bool(true));
        let marked = if args.get("regex") == Some(&Json::Bool(true)) {
            ""
        } else {
            query
        };
        let mut rendered = Rendered::default();
        for found in result.get("matches")?.as_array()? {
            let at = found.get("file").or_else(|| found.get("path"))?.as_str()?;
            let _ = writeln!(
                rendered.stdout,
                "{}:{}: {}",
                out.blue(&clean(at)),
                found.get("line")?.as_u64()?,
                render::highlighted(found.get("text")?.as_str()?, marked, case_sensitive, out)
            );
        }
        Some(rendered)
    }
}

//! `find`: instances under a root that match a class, name, tag or attribute, in
//! depth-first pre-order.

use std::fmt::Write as _;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::files::Files;
use super::{Command, Invocation, Kind, Output, Render, Spec};
use crate::human::render::{Rendered, Style, clean};
use crate::protocol::{Context, ToolError};

/// Most matches one call may ask for.
const MAX_LIMIT: u32 = 10_000;

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FindArgs {
    #[serde(default = "default_root")]
    pub root: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_name: Option<String>,
    /// Substring, any case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Luau pattern.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribute: Option<String>,
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
    100
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct FindResult {
    /// Depth-first pre-order: a parent before its children.
    pub matches: Vec<FindMatch>,
    /// True when `limit` or the deadline cut the list.
    pub truncated: bool,
    /// How many instances this answer covers, in walk order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scanned: Option<u64>,
    /// When cut: the path to pass back as `resumeAfter` to go on from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_after: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FindMatch {
    pub path: String,
    pub class_name: String,
    /// A script's file, when the project's sourcemap maps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

pub struct Find;

impl Command for Find {
    type Args = FindArgs;
    type Result = FindResult;
    const SPEC: Spec = Spec {
        name: "find",
        description: "Find instances by class, name, tag or attribute.",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(10),
        kind: Kind::Read,
        capabilities: super::Capabilities::of(&[super::Capability::Read]),
        idempotent: true,
        open_world: false,
        positional: &["root"],
        truncation_hint: "Narrow the root or the filters, or raise limit.",
        follow_event: None,
        example: "studio-bridge find Workspace --class-name Part --limit 10",
        from_file: None,
        flag_help: &[
            ("root", "Where to search from"),
            ("className", "Instances of this class (IsA)"),
            ("tag", "Instances with this CollectionService tag"),
            ("attribute", "Instances with this attribute"),
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

    async fn run(args: FindArgs, cx: &Invocation) -> Result<Output, ToolError> {
        if !(1..=MAX_LIMIT).contains(&args.limit) {
            return Err(ToolError::invalid_args(format!(
                "`limit` must be between 1 and {MAX_LIMIT}."
            )));
        }
        if args.root.trim().is_empty() {
            return Err(ToolError::invalid_args(
                "`root` is empty; pass an instance path such as game.Workspace, or omit it for game.",
            ));
        }
        if args.name.is_some() && args.pattern.is_some() {
            return Err(ToolError::invalid_args(
                "Pass `name` (a plain substring) or `pattern` (a Luau pattern), not both.",
            ));
        }
        cx.forward(&Self::SPEC, &args).await
    }
}

impl Render for Find {
    /// One path per line, for pipes (`studio-bridge find … | xargs …`).
    fn render(_args: &Json, result: &Json, _out: Style, _err: Style) -> Option<Rendered> {
        let mut rendered = Rendered::default();
        for found in result.get("matches")?.as_array()? {
            let _ = writeln!(rendered.stdout, "{}", clean(found.get("path")?.as_str()?));
        }
        Some(rendered)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::plain;
    use serde_json::json;

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
}

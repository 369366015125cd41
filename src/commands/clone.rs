//! `clone`: exact copies of an instance (properties, attributes, tags, descendants) under a
//! parent, in one undo step; names are kept and the new paths returned.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Command, Invocation, Kind, Output, Spec};
use crate::protocol::{Context, ToolError};

const MAX_COUNT: u32 = 100;

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CloneArgs {
    pub path: String,
    pub parent: String,
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 100))]
    pub count: u32,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneResult {
    /// The copies' paths (`Name[i]` where siblings share a name).
    pub created: Vec<String>,
}

pub struct Clone;

impl Command for Clone {
    type Args = CloneArgs;
    type Result = CloneResult;
    const SPEC: Spec = Spec {
        name: "clone",
        description: "Copy an instance under a parent, count times.",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(10),
        kind: Kind::Write,
        capabilities: super::Capabilities::of(&[super::Capability::Write]),
        idempotent: false,
        open_world: false,
        positional: &["path", "parent"],
        truncation_hint: "",
        follow_event: None,
        example: "studio-bridge clone Workspace.Tree Workspace --count 3",
        from_file: None,
        flag_help: &[
            ("path", "The instance to copy"),
            ("parent", "Where the copies go"),
            ("count", "How many copies"),
        ],
    };

    async fn run(args: CloneArgs, cx: &Invocation) -> Result<Output, ToolError> {
        for (name, path) in [("path", &args.path), ("parent", &args.parent)] {
            if path.trim().is_empty() {
                return Err(ToolError::invalid_args(format!(
                    "`{name}` is empty; pass an instance path such as Workspace.Model."
                )));
            }
        }
        if !(1..=MAX_COUNT).contains(&args.count) {
            return Err(ToolError::invalid_args(format!(
                "`count` must be between 1 and {MAX_COUNT}."
            )));
        }
        cx.forward(&Self::SPEC, &args).await
    }
}

use serde_json::Value as Json;

// Human rendering --------------------------------------------------------------------------

use crate::human::render::{self, Rendered, Style};

impl super::Render for Clone {
    /// The copies' paths, one a line.
    fn render(_args: &Json, result: &Json, _out: Style, _err: Style) -> Option<Rendered> {
        Some(Rendered {
            stdout: render::lines(result.get("created")?.as_array()?)?,
            stderr: String::new(),
        })
    }
}

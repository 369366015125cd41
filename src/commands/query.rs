//! `query`: one instance of the DataModel, its properties, attributes, tags and
//! children.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::{Command, Invocation, Kind, Output, Spec};
use crate::protocol::{Context, ToolError};

/// Deepest nesting `depth` may ask for: each level multiplies the result.
const MAX_DEPTH: u32 = 10;

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct QueryArgs {
    /// e.g. `Workspace["A.B"].C`.
    #[serde(default = "default_path")]
    pub path: String,
    #[serde(default)]
    #[schemars(range(max = 10))]
    pub depth: u32,
    /// Default: Name, ClassName, Parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<Vec<String>>,
    #[serde(default)]
    pub include_attributes: bool,
    #[serde(default)]
    pub children: bool,
    #[serde(default)]
    pub list_services: bool,
}

fn default_path() -> String {
    "game".to_owned()
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct QueryResult {
    /// `{name, className, path, properties, propertyErrors?, attributes, tags, childCount, children?}`.
    #[schemars(with = "serde_json::Map<String, Json>")]
    pub instance: Json,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
}

pub struct Query;

impl Command for Query {
    type Args = QueryArgs;
    type Result = QueryResult;
    const SPEC: Spec = Spec {
        name: "query",
        description: "Inspect an instance by path: properties, attributes, tags, children.",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(10),
        kind: Kind::Read,
        capabilities: super::Capabilities::of(&[super::Capability::Read]),
        idempotent: true,
        open_world: false,
        positional: &["path"],
        truncation_hint: "Query a narrower path, a smaller depth, or fewer properties.",
        follow_event: None,
    };

    async fn run(args: QueryArgs, cx: &Invocation) -> Result<Output, ToolError> {
        if args.depth > MAX_DEPTH {
            return Err(ToolError::invalid_args(format!(
                "`depth` must be at most {MAX_DEPTH}; query a deeper path instead."
            )));
        }
        if args.path.trim().is_empty() {
            return Err(ToolError::invalid_args(
                "`path` is empty; pass an instance path such as game.Workspace.",
            ));
        }
        cx.forward(&Self::SPEC, &args).await
    }
}

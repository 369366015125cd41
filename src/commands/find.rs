//! `find`: instances under a root that match a class, name, tag or attribute, in
//! depth-first pre-order.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Command, Invocation, Kind, Output, Spec};
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
    /// True when `limit` cut the list.
    pub truncated: bool,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FindMatch {
    pub path: String,
    pub class_name: String,
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

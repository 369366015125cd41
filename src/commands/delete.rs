//! `delete`: removes instances by path, all or nothing, in one undo step. The plugin refuses
//! `game`, services and what Studio cannot remove before anything changes.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Command, Invocation, Kind, Output, Spec};
use crate::protocol::{Context, ToolError};

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeleteArgs {
    pub paths: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeleteResult {
    /// Distinct instances deleted.
    pub deleted: u32,
}

pub struct Delete;

impl Command for Delete {
    type Args = DeleteArgs;
    type Result = DeleteResult;
    const SPEC: Spec = Spec {
        name: "delete",
        description: "Delete instances by path, all or nothing.",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(10),
        kind: Kind::Destructive,
        capabilities: super::Capabilities::of(&[super::Capability::Write]),
        idempotent: false,
        open_world: false,
        positional: &["paths"],
        truncation_hint: "",
        follow_event: None,
        example: "studio-bridge delete Workspace.Old Workspace.Temp",
        from_file: None,
        flag_help: &[("paths", "The instances to delete")],
    };

    async fn run(args: DeleteArgs, cx: &Invocation) -> Result<Output, ToolError> {
        require_paths("paths", &args.paths)?;
        cx.forward(&Self::SPEC, &args).await
    }
}

/// Checks a list of instance paths: at least one, none empty.
fn require_paths(field: &str, paths: &[String]) -> Result<(), ToolError> {
    if paths.is_empty() {
        return Err(ToolError::invalid_args(format!(
            "`{field}` is empty; pass at least one instance path such as Workspace.Part."
        )));
    }
    if let Some(i) = paths.iter().position(|p| p.trim().is_empty()) {
        return Err(ToolError::invalid_args(format!(
            "`{field}[{i}]` is empty; pass an instance path such as Workspace.Part."
        )));
    }
    Ok(())
}

use serde_json::Value as Json;

// Human rendering --------------------------------------------------------------------------

use crate::human::render::{self, Rendered, Style};

impl super::Render for Delete {
    /// `deleted 2 instances`.
    fn render(_args: &Json, result: &Json, _out: Style, _err: Style) -> Option<Rendered> {
        let n = result.get("deleted")?.as_u64()?;
        Some(Rendered {
            stdout: format!("deleted {}\n", render::count(n, "instance", "instances")),
            stderr: String::new(),
        })
    }
}

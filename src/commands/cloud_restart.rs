//! `cloud_restart`: restarts the universe's live servers that run an older version (Open
//! Cloud's `:restartServers`), so players move to what was just published.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::cloud_place::{self, Where};
use super::{Capabilities, Capability, Command, Invocation, Kind, Output, Render, Spec};
use crate::cloud::universe;
use crate::protocol::{Context, ToolError};

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CloudRestartArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub universe: Option<i64>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct CloudRestartResult {
    pub restarted: bool,
}

pub struct CloudRestart;

impl Command for CloudRestart {
    type Args = CloudRestartArgs;
    type Result = CloudRestartResult;
    const SPEC: Spec = Spec {
        name: "cloud_restart",
        description: "Restart the game's live servers that run an older version (Open Cloud).",
        needs_session: false,
        default_context: Context::Edit,
        timeout: Duration::from_secs(30),
        kind: Kind::Destructive,
        capabilities: Capabilities::of(&[Capability::Cloud, Capability::Write]),
        idempotent: true,
        open_world: true,
        positional: &[],
        truncation_hint: "",
        follow_event: None,
        example: "studio-bridge cloud restart --universe 123",
        from_file: None,
        flag_help: &[("universe", "The universe (default: the open Studio's)")],
    };

    async fn run(args: CloudRestartArgs, cx: &Invocation) -> Result<Output, ToolError> {
        let Where { universe, .. } = cloud_place::resolve(cx, args.universe, None, false).await?;
        let (cloud, deadline) = cloud_place::client(Self::SPEC.timeout)?;
        universe::restart_servers(&cloud, universe, deadline, &cx.hooks.cancel).await?;
        Ok(Output::json(json!({ "restarted": true })))
    }
}

impl Render for CloudRestart {}

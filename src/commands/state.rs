//! `state`: the Studio session's real run state.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Command, Invocation, Kind, Output, Spec};
use crate::protocol::{Context, ToolError};

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StateArgs {}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StateResult {
    /// Edit, Play, Run, Paused, Server or Client, read from RunService at call time.
    pub state: String,
    pub place_name: String,
    pub place_id: i64,
    pub game_id: i64,
}

pub struct State;

impl Command for State {
    type Args = StateArgs;
    type Result = StateResult;
    const SPEC: Spec = Spec {
        name: "state",
        description: "Run state (Edit, Play, Run…), place name and ids.",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(5),
        kind: Kind::Read,
        capabilities: super::Capabilities::of(&[super::Capability::Read]),
        idempotent: true,
        open_world: false,
        positional: &[],
        truncation_hint: "",
        follow_event: None,
    };

    async fn run(args: StateArgs, cx: &Invocation) -> Result<Output, ToolError> {
        cx.forward(&Self::SPEC, &args).await
    }
}

impl super::Render for State {}

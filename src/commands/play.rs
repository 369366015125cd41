//! `play`: start a playtest (Play or Run) or stop the one running, answered once Studio's
//! real state has changed: the edit plugin sees the test's server DataModel connect over
//! PluginConnectionService, or every test DataModel's connection close (plugin/src/Actions/
//! Play.luau says why the edit DataModel cannot just read its own RunService). A `start`
//! cancelled or past its deadline ends the test it started (plugin/src/Playtest.luau).

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Command, Invocation, Kind, Output, Spec};
use crate::protocol::{Context, ToolError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Start,
    Run,
    Stop,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlayArgs {
    pub mode: Mode,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct PlayResult {
    /// Play, Run or Edit, once Studio is in it.
    pub state: String,
}

pub struct Play;

impl Command for Play {
    type Args = PlayArgs;
    type Result = PlayResult;
    const SPEC: Spec = Spec {
        name: "play",
        description: "Start a playtest (start: Play, run: server only) or stop any, even a person's.",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(30),
        kind: Kind::Write,
        capabilities: super::Capabilities::of(&[super::Capability::Play]),
        idempotent: false,
        open_world: false,
        positional: &["mode"],
        truncation_hint: "",
        follow_event: None,
    };

    async fn run(args: PlayArgs, cx: &Invocation) -> Result<Output, ToolError> {
        cx.forward(&Self::SPEC, &args).await
    }
}

impl super::Render for Play {}

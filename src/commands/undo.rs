//! `undo`: reverts Studio's last change history steps (every write of this bridge is one
//! step); nothing to undo is `done: 0`, not an error. `redo` shares its arguments and result.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Command, Invocation, Kind, Output, Spec};
use crate::protocol::{Context, ToolError};

const MAX_STEPS: u32 = 100;

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StepsArgs {
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 100))]
    pub steps: u32,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepsResult {
    /// Steps taken (0: there was nothing to take).
    pub done: u32,
    /// The name of the last step taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waypoint: Option<String>,
    pub can_undo: bool,
    pub can_redo: bool,
}

/// `steps` within bounds, for undo and redo.
pub(super) fn check_steps(args: &StepsArgs) -> Result<(), ToolError> {
    if !(1..=MAX_STEPS).contains(&args.steps) {
        return Err(ToolError::invalid_args(format!(
            "`steps` must be between 1 and {MAX_STEPS}."
        )));
    }
    Ok(())
}

pub struct Undo;

impl Command for Undo {
    type Args = StepsArgs;
    type Result = StepsResult;
    const SPEC: Spec = Spec {
        name: "undo",
        description: "Undo the last Studio change history steps (each write here is one step).",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(5),
        kind: Kind::Write,
        capabilities: super::Capabilities::of(&[super::Capability::Write]),
        idempotent: false,
        open_world: false,
        positional: &[],
        truncation_hint: "",
        follow_event: None,
    };

    async fn run(args: StepsArgs, cx: &Invocation) -> Result<Output, ToolError> {
        check_steps(&args)?;
        cx.forward(&Self::SPEC, &args).await
    }
}

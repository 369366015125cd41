//! `redo`: takes again the steps `undo` reverted; the same arguments and result as `undo`.

use std::time::Duration;

use super::undo::{StepsArgs, StepsResult, check_steps};
use super::{Command, Invocation, Kind, Output, Spec};
use crate::protocol::{Context, ToolError};

pub struct Redo;

impl Command for Redo {
    type Args = StepsArgs;
    type Result = StepsResult;
    const SPEC: Spec = Spec {
        name: "redo",
        description: "Redo Studio change history steps that undo reverted.",
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
        example: "studio-bridge redo",
        from_file: None,
        flag_help: &[("steps", "How many steps forward")],
    };

    async fn run(args: StepsArgs, cx: &Invocation) -> Result<Output, ToolError> {
        check_steps(&args)?;
        cx.forward(&Self::SPEC, &args).await
    }
}

// Human rendering --------------------------------------------------------------------------

use serde_json::Value as Json;

use crate::human::render::{Rendered, Style};

impl super::Render for Redo {
    fn render(_args: &Json, result: &Json, _out: Style, err: Style) -> Option<Rendered> {
        super::undo::steps_taken("redid", "redo", result, err)
    }
}

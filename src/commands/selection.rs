//! `selection`: Studio's selection as paths; with `set`, replaces it first (one undo step).
//! A path in `set` that does not resolve is `not_found` and the selection stays as it was.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Command, Invocation, Kind, Output, Spec};
use crate::protocol::{Context, ToolError};

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SelectionArgs {
    /// Paths to select ([] clears).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<Vec<String>>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SelectionResult {
    pub selection: Vec<String>,
}

pub struct Selection;

impl Command for Selection {
    type Args = SelectionArgs;
    type Result = SelectionResult;
    const SPEC: Spec = Spec {
        name: "selection",
        description: "The user's selection in Studio, as paths; `set` selects first.",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(5),
        // A write when it sets (one undo step); setting the same paths again changes nothing.
        kind: Kind::Write,
        capabilities: super::Capabilities::of(&[super::Capability::Read]),
        idempotent: true,
        open_world: false,
        positional: &[],
        truncation_hint: "",
        follow_event: None,
        example: "studio-bridge selection --set Workspace.Baseplate",
        from_file: None,
        flag_help: &[],
    };

    /// Reading the selection changes nothing; setting it is a write (and answers the new
    /// selection, a read).
    fn capabilities(args: &SelectionArgs) -> super::Capabilities {
        if args.set.is_some() {
            Self::SPEC.capabilities.with(super::Capability::Write)
        } else {
            Self::SPEC.capabilities
        }
    }

    async fn run(args: SelectionArgs, cx: &Invocation) -> Result<Output, ToolError> {
        if let Some(set) = &args.set
            && let Some(i) = set.iter().position(|p| p.trim().is_empty())
        {
            return Err(ToolError::invalid_args(format!(
                "`set[{i}]` is empty; pass instance paths such as Workspace.Part ([] clears the selection)."
            )));
        }
        cx.forward(&Self::SPEC, &args).await
    }
}

use serde_json::Value as Json;

// Human rendering --------------------------------------------------------------------------

use crate::human::render::{self, Rendered, Style};

impl super::Render for Selection {
    /// The selected paths, one a line (nothing: nothing is selected).
    fn render(_args: &Json, result: &Json, _out: Style, err: Style) -> Option<Rendered> {
        let paths = result.get("selection")?.as_array()?;
        let stderr = if paths.is_empty() {
            format!("{}\n", err.dim("nothing is selected"))
        } else {
            String::new()
        };
        Some(Rendered {
            stdout: render::lines(paths)?,
            stderr,
        })
    }
}

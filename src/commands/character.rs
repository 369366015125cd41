//! `character`: walk the local player's character to a point (`moveTo`, with pathfinding
//! when a path computes) or make it jump, from a Play client DataModel, which owns its
//! character (plugin/src/Actions/Character.luau). The host waits `timeoutMs` plus 5 s; the
//! plugin stops the walk at `timeoutMs` and answers where it got to.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Command, Invocation, Kind, Output, Spec};
use crate::protocol::{Context, ToolError};

const MAX_TIMEOUT_MS: u64 = 30_000;
const HOST_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CharacterAction {
    #[serde(rename = "moveTo")]
    MoveTo,
    #[serde(rename = "jump")]
    Jump,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CharacterArgs {
    pub action: CharacterAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Goal>,
    // 15000 when absent, at most 30000 (no `default` in the schema: the catalogue budget)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

// [x, y, z], or an instance path (its position).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Goal {
    // three numbers, checked in `run` (minItems/maxItems would cost the budget)
    Point(Vec<f64>),
    Path(String),
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CharacterResult {
    /// moveTo: within 2 studs horizontally when it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrived: Option<bool>,
    pub position: [f64; 3],
    /// moveTo: studs from the goal, horizontally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distance: Option<f64>,
    /// moveTo: why pathfinding was not used (it walked straight).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_status: Option<String>,
    /// jump: Humanoid.Jumping fired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jumped: Option<bool>,
}

pub struct Character;

impl Command for Character {
    type Args = CharacterArgs;
    type Result = CharacterResult;
    const SPEC: Spec = Spec {
        name: "character",
        description: "Walk or jump as the player, in a Play client.",
        needs_session: true,
        default_context: Context::Client,
        timeout: Duration::from_secs(35),
        kind: Kind::Write,
        capabilities: super::Capabilities::of(&[super::Capability::Play]),
        idempotent: false,
        open_world: false,
        positional: &["action"],
        truncation_hint: "",
        follow_event: None,
        example: "studio-bridge character move-to --to 10,0,5 --context client",
        from_file: None,
        flag_help: &[
            ("action", "move-to: walk there (pathfinding where it can); jump"),
            ("to", "move-to: x,y,z or an instance path"),
            (
                "timeoutMs",
                "Stop walking after this many ms [default: 15000, at most 30000]",
            ),
        ],
    };

    async fn run(args: CharacterArgs, cx: &Invocation) -> Result<Output, ToolError> {
        let timeout_ms = args.timeout_ms.unwrap_or(15_000);
        if !(1..=MAX_TIMEOUT_MS).contains(&timeout_ms) {
            return Err(ToolError::invalid_args(format!(
                "`timeoutMs` must be between 1 and {MAX_TIMEOUT_MS}."
            )));
        }
        match (&args.action, &args.to) {
            (CharacterAction::MoveTo, None) => {
                return Err(ToolError::invalid_args(
                    "moveTo needs `to`: [x, y, z] or an instance path (Workspace.Goal).",
                ));
            }
            (CharacterAction::MoveTo, Some(Goal::Point(p))) if p.len() != 3 || p.iter().any(|v| !v.is_finite()) => {
                return Err(ToolError::invalid_args("`to` must hold three finite numbers."));
            }
            (CharacterAction::Jump, Some(_)) => {
                return Err(ToolError::invalid_args("jump takes no `to`."));
            }
            _ => {}
        }
        let plugin_timeout = Duration::from_millis(timeout_ms);
        let result = cx
            .call_plugin(&Self::SPEC, &args, plugin_timeout + HOST_GRACE, Some(plugin_timeout))
            .await?;
        Ok(Output::plugin(result))
    }
}

// Human rendering --------------------------------------------------------------------------

use std::fmt::Write as _;

use serde_json::Value as Json;

use crate::human::render::{self, Rendered, Style, clean};

impl super::Render for Character {
    /// Where the character got to and whether it arrived (or jumped).
    fn render(_args: &Json, result: &Json, _out: Style, err: Style) -> Option<Rendered> {
        let at = render::numbers(result.get("position")?.as_array()?);
        let mut rendered = Rendered::default();
        let line = match (
            result.get("arrived").and_then(Json::as_bool),
            result.get("jumped").and_then(Json::as_bool),
        ) {
            (Some(true), _) => format!("arrived at {at}"),
            (Some(false), _) => {
                let short = result
                    .get("distance")
                    .map(|d| render::numbers(std::slice::from_ref(d)))
                    .unwrap_or_else(|| "?".into());
                format!("stopped {short} studs short, at {at}")
            }
            (None, Some(true)) => format!("jumped at {at}"),
            (None, Some(false)) => format!("did not jump (at {at})"),
            (None, None) => format!("at {at}"),
        };
        let _ = writeln!(rendered.stdout, "{line}");
        if let Some(status) = result.get("pathStatus").and_then(Json::as_str) {
            let note = format!("walked straight: pathfinding said {}", clean(status));
            let _ = writeln!(rendered.stderr, "{}", err.dim(&note));
        }
        Some(rendered)
    }
}

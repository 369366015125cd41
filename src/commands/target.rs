//! `target`: this caller's default Studio, used when a call names none. Kept per MCP
//! connection, so another agent's default is its own. Answered by the bridge itself.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{Command, Invocation, Kind, Output, Spec};
use crate::bridge::{SessionInfo, Target};
use crate::protocol::{Context, ErrorCode, ToolError};

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TargetArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<TargetChoice>,
    #[serde(default)]
    pub clear: bool,
}

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TargetChoice {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TargetResult {
    /// The default target now in force (absent when none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
    pub sessions: Vec<SessionInfo>,
}

pub struct TargetCommand;

impl Command for TargetCommand {
    type Args = TargetArgs;
    type Result = TargetResult;
    const SPEC: Spec = Spec {
        name: "target",
        description: "Show or set your default Studio, when several are open.",
        needs_session: false,
        default_context: Context::Edit,
        // Covers a new host's 3 s startup grace (see `sessions`).
        timeout: Duration::from_secs(4),
        kind: Kind::Read,
        capabilities: super::Capabilities::of(&[super::Capability::Read]),
        idempotent: true,
        open_world: false,
        positional: &[],
        truncation_hint: "",
        follow_event: None,
        example: "studio-bridge target --set '{\"sessionId\": \"A1B2-edit\"}'",
        from_file: None,
        flag_help: &[
            ("set", "Make this Studio the default for later calls"),
            ("clear", "Forget the default"),
        ],
    };

    async fn run(args: TargetArgs, cx: &Invocation) -> Result<Output, ToolError> {
        if args.clear && args.set.is_some() {
            return Err(ToolError::invalid_args("Pass either `set` or `clear`, not both."));
        }
        let sessions = cx.bridge.sessions(Self::SPEC.timeout).await?;
        if let Some(choice) = args.set {
            // The default names an instance, so that a call's own context (or, during
            // Play, the command's default context) still chooses within it.
            let instance = match (&choice.session_id, &choice.instance_id) {
                (Some(id), None) => sessions
                    .iter()
                    .find(|s| &s.session_id == id)
                    .map(|s| s.instance_id.clone()),
                (None, Some(id)) => sessions
                    .iter()
                    .find(|s| &s.instance_id == id)
                    .map(|s| s.instance_id.clone()),
                _ => {
                    return Err(ToolError::invalid_args(
                        "`set` takes exactly one of `sessionId` or `instanceId` (from studio_sessions).",
                    ));
                }
            };
            let Some(instance) = instance else {
                return Err(ToolError::new(
                    ErrorCode::SessionNotFound,
                    "No connected session or instance has that id. Call studio_sessions and pick one of its ids.",
                )
                .with_details(json!({ "sessions": sessions })));
            };
            let mut defaults = cx.defaults.lock().unwrap_or_else(|p| p.into_inner());
            *defaults = Target {
                session_id: None,
                instance_id: Some(instance),
                context: None,
            };
        } else if args.clear {
            *cx.defaults.lock().unwrap_or_else(|p| p.into_inner()) = Target::default();
        }
        let current = cx.defaults.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let target = (current != Target::default()).then_some(current);
        Ok(Output::json(
            serde_json::to_value(TargetResult { target, sessions }).unwrap_or_default(),
        ))
    }
}

// Human rendering --------------------------------------------------------------------------

use serde_json::Value as Json;

use crate::human::render::{Rendered, Style, clean};

impl super::Render for TargetCommand {
    /// The default, then the sessions as `sessions` lists them.
    fn render(args: &Json, result: &Json, out: Style, err: Style) -> Option<Rendered> {
        let mut rendered = <super::sessions::Sessions as super::Render>::render(args, result, out, err)?;
        let default = match result.get("target") {
            Some(target) => {
                let id = target
                    .get("sessionId")
                    .or_else(|| target.get("instanceId"))
                    .and_then(Json::as_str)
                    .unwrap_or("?");
                format!("default: {}\n", clean(id))
            }
            None => "no default: calls that name no session need one Studio open\n".to_owned(),
        };
        rendered.stdout.insert_str(0, &default);
        Some(rendered)
    }
}

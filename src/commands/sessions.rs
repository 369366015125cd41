//! `sessions`: the connected Studio sessions. Answered by the bridge host itself.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Command, Invocation, Kind, Output, Spec};
use crate::bridge::SessionInfo;
use crate::policy::ActivePolicy;
use crate::protocol::{Context, ToolError};

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionsArgs {}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionsResult {
    pub sessions: Vec<SessionInfo>,
    /// The caller's policy, so an agent knows why a tool or a call is refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<ActivePolicy>,
}

pub struct Sessions;

impl Command for Sessions {
    type Args = SessionsArgs;
    type Result = SessionsResult;
    const SPEC: Spec = Spec {
        name: "sessions",
        description: "List connected Studio sessions (one per DataModel). Call this first.",
        needs_session: false,
        default_context: Context::Edit,
        // Covers a new host's 3 s startup grace, in which an empty list waits for a plugin.
        timeout: Duration::from_secs(4),
        kind: Kind::Read,
        capabilities: super::Capabilities::of(&[super::Capability::Read]),
        idempotent: true,
        open_world: false,
        positional: &[],
        truncation_hint: "",
        follow_event: None,
    };

    async fn run(_args: SessionsArgs, cx: &Invocation) -> Result<Output, ToolError> {
        let sessions = cx.bridge.sessions(Self::SPEC.timeout).await?;
        Ok(Output::json(
            serde_json::to_value(SessionsResult {
                sessions,
                policy: cx.policy.as_deref().cloned(),
            })
            .unwrap_or_default(),
        ))
    }
}

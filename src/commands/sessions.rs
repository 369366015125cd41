//! `sessions`: the connected Studio sessions. Answered by the bridge host itself.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Command, Invocation, Kind, Output, Spec};
use crate::bridge::SessionInfo;
use crate::protocol::{Context, ToolError};

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionsArgs {}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionsResult {
    pub sessions: Vec<SessionInfo>,
    /// The caller's tool policy, so an agent knows why a tool is missing (MCP only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<ActivePolicy>,
}

/// The tool policy of the MCP process that answered (set by the user in its flags or
/// config file; the MCP adapter enforces it).
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActivePolicy {
    /// Only tools (and calls) that read Studio are available.
    pub read_only: bool,
    /// Tool-name globs; when any are given, only matching tools are available.
    pub allow: Vec<String>,
    /// Tool-name globs that are never available (deny wins over allow).
    pub deny: Vec<String>,
    /// Where the policy came from: flags, a config file, both, or defaults.
    pub source: String,
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

//! `state`: the Studio session's real run state; with `operationId`, what became of a
//! write whose answer never came (it timed out, was cancelled or lost its host): the
//! plugin keeps the last outcomes of writes under the id their caller gave them.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Command, Invocation, Kind, Output, Spec};
use crate::protocol::{Context, ToolError};

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StateArgs {
    // A write error's details.operationId: answers that write's outcome instead (the
    // guide and the tool's description say so; no description here, for the catalogue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<String>,
}

/// The run state, or with `operationId` only `operation`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StateResult {
    /// Edit, Play, Run, Paused, Server or Client, read from RunService at call time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub game_id: Option<i64>,
    /// The undo history has steps (what `close` would lose).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub can_undo: Option<bool>,
    /// The name of the step the next undo reverts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo_waypoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<Operation>,
}

/// What the plugin knows of one write.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Operation {
    pub id: String,
    /// The write's command; absent when the id is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    pub status: OperationStatus,
    /// The write's result, when it is done (its command's result object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub result: Option<serde_json::Value>,
    /// The write's error, when it failed (`{code, message, details?}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub error: Option<serde_json::Value>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OperationStatus {
    Running,
    Done,
    Failed,
    Cancelled,
    /// Not among the outcomes this session's plugin keeps (never seen, or too old).
    Unknown,
}

pub struct State;

impl Command for State {
    type Args = StateArgs;
    type Result = StateResult;
    const SPEC: Spec = Spec {
        name: "state",
        description: "Run state, place name and ids; or a write's outcome by operationId.",
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
        example: "studio-bridge state --operation-id 7f3a",
        from_file: None,
        flag_help: &[(
            "operationId",
            "A write's operationId (from an error that says it may have run): what became of it",
        )],
    };

    async fn run(args: StateArgs, cx: &Invocation) -> Result<Output, ToolError> {
        cx.forward(&Self::SPEC, &args).await
    }
}

use serde_json::Value as Json;

// Human rendering --------------------------------------------------------------------------

use std::fmt::Write as _;

use crate::human::render::{self, Rendered, Style, clean};

impl super::Render for State {
    /// `Edit · Place (place 1, game 2)`; a write's outcome below, its result in the generic
    /// form.
    fn render(_args: &Json, result: &Json, out: Style, err: Style) -> Option<Rendered> {
        if result.get("state").is_none() && result.get("operation").is_none() {
            return None;
        }
        let mut rendered = Rendered::default();
        let text = |key: &str| result.get(key).and_then(Json::as_str).map(|t| clean(t).into_owned());
        if let Some(state) = text("state") {
            let mut line = out.bold(&state);
            if let Some(place) = text("placeName") {
                line.push_str(&format!(" · {place}"));
            }
            let ids: Vec<String> = [("placeId", "place"), ("gameId", "game")]
                .iter()
                .filter_map(|(key, word)| Some((word, result.get(*key)?.as_i64()?)))
                // 0: not published (Studio's own word for no id)
                .filter(|(_, id)| *id > 0)
                .map(|(word, id)| format!("{word} {id}"))
                .collect();
            if !ids.is_empty() {
                line.push_str(&format!(" ({})", ids.join(", ")));
            }
            let _ = writeln!(rendered.stdout, "{line}");
        }
        if let Some(operation) = result.get("operation") {
            let id = clean(operation.get("id")?.as_str()?).into_owned();
            let status = clean(operation.get("status")?.as_str()?).into_owned();
            let command = operation
                .get("command")
                .and_then(Json::as_str)
                .map(|c| format!(" ({})", clean(c)))
                .unwrap_or_default();
            let _ = writeln!(rendered.stdout, "operation {id}{command}: {status}");
            if let Some(done) = operation.get("result") {
                for line in render::human(done).lines() {
                    let _ = writeln!(rendered.stdout, "  {line}");
                }
            }
            if let Some(error) = operation.get("error") {
                let code = error.get("code").and_then(Json::as_str).unwrap_or("error");
                let message = error.get("message").and_then(Json::as_str).unwrap_or("");
                let _ = writeln!(
                    rendered.stderr,
                    "{}",
                    err.red(&format!("error[{}]: {}", clean(code), clean(message)))
                );
            }
        }
        Some(rendered)
    }
}

//! `undo`: reverts Studio's last change history steps (every write of this bridge is one
//! step); nothing to undo is `done: 0`, not an error. `redo` shares its arguments and result.
//!
//! `expect` (a waypoint name such as `studio-bridge: create`) keeps a person's own edit from
//! being stepped by surprise: the plugin takes each step only while the top of the history
//! carries that name. A first step named otherwise is refused with `conflict` naming both,
//! nothing stepped; a later one stops the walk there (`stoppedAt`).

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
    /// Step only a waypoint of this name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<String>,
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
    /// The step left in place because it is not named `expect`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<String>,
    pub can_undo: bool,
    pub can_redo: bool,
}

/// `steps` within bounds and `expect` a name, for undo and redo.
pub(super) fn check_steps(args: &StepsArgs) -> Result<(), ToolError> {
    if !(1..=MAX_STEPS).contains(&args.steps) {
        return Err(ToolError::invalid_args(format!(
            "`steps` must be between 1 and {MAX_STEPS}."
        )));
    }
    if args.expect.as_deref().is_some_and(|e| e.trim().is_empty()) {
        return Err(ToolError::invalid_args(
            "`expect` is empty: pass a waypoint name such as \"studio-bridge: create\", or leave it out.",
        ));
    }
    Ok(())
}

pub struct Undo;

impl Command for Undo {
    type Args = StepsArgs;
    type Result = StepsResult;
    const SPEC: Spec = Spec {
        name: "undo",
        description: "Undo the last Studio change history steps.",
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
        example: "studio-bridge undo --steps 2",
        from_file: None,
        flag_help: &[("steps", "How many steps back")],
    };

    async fn run(args: StepsArgs, cx: &Invocation) -> Result<Output, ToolError> {
        check_steps(&args)?;
        cx.forward(&Self::SPEC, &args).await
    }
}

use serde_json::Value as Json;

// Human rendering --------------------------------------------------------------------------

use std::fmt::Write as _;

use crate::human::render::{self, Rendered, Style, clean};

impl super::Render for Undo {
    fn render(_args: &Json, result: &Json, _out: Style, err: Style) -> Option<Rendered> {
        steps_taken("undid", "undo", result, err)
    }
}

/// `undid 2 steps, the last "studio-bridge: create"` (or `nothing to undo`), then what
/// can be undone and redone now. Shared with `redo`.
pub(super) fn steps_taken(verb: &str, noun: &str, result: &Json, err: Style) -> Option<Rendered> {
    let done = result.get("done")?.as_u64()?;
    let mut rendered = Rendered::default();
    if done == 0 {
        let _ = writeln!(rendered.stdout, "nothing to {noun}");
    } else {
        let last = result
            .get("waypoint")
            .and_then(Json::as_str)
            .map(|w| format!(", the last {:?}", clean(w)))
            .unwrap_or_default();
        let _ = writeln!(rendered.stdout, "{verb} {}{last}", render::count(done, "step", "steps"));
    }
    if let Some(kept) = result.get("stoppedAt").and_then(Json::as_str) {
        let note = format!("stopped at {:?}: not the step --expect names", clean(kept));
        let _ = writeln!(rendered.stderr, "{}", err.yellow(&note));
    }
    let now = format!(
        "can undo: {}, can redo: {}",
        render::yes_no(result.get("canUndo")),
        render::yes_no(result.get("canRedo"))
    );
    let _ = writeln!(rendered.stderr, "{}", err.dim(&now));
    Some(rendered)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::schema;

    fn args(json: serde_json::Value) -> Result<StepsArgs, serde_json::Error> {
        serde_json::from_value(json)
    }

    #[test]
    fn expect_is_an_optional_waypoint_name_sent_to_the_plugin_as_given() {
        let with = args(serde_json::json!({"steps": 2, "expect": "studio-bridge: create"})).unwrap();
        assert!(check_steps(&with).is_ok());
        assert_eq!(
            serde_json::to_value(&with).unwrap(),
            serde_json::json!({"steps": 2, "expect": "studio-bridge: create"})
        );
        let without = args(serde_json::json!({})).unwrap();
        assert!(check_steps(&without).is_ok());
        assert_eq!(serde_json::to_value(&without).unwrap(), serde_json::json!({"steps": 1}));
        let empty = args(serde_json::json!({"expect": " "})).unwrap();
        let err = check_steps(&empty).unwrap_err();
        assert!(err.message.contains("`expect`"), "{}", err.message);
        assert!(args(serde_json::json!({"expect": 3})).is_err(), "a name is a string");
        assert!(
            args(serde_json::json!({"expected": "x"})).is_err(),
            "unknown fields are refused"
        );
    }

    #[test]
    fn the_input_schema_offers_expect_and_the_result_names_where_it_stopped() {
        let input = serde_json::Value::Object(schema::schema_for::<StepsArgs>());
        assert_eq!(input["properties"]["expect"]["type"], "string", "{input}");
        assert!(
            !input["required"]
                .as_array()
                .is_some_and(|r| r.contains(&serde_json::json!("expect"))),
            "expect is optional: {input}"
        );
        let result: StepsResult = serde_json::from_value(serde_json::json!({
            "done": 1, "waypoint": "studio-bridge: create", "stoppedAt": "Move",
            "canUndo": true, "canRedo": true
        }))
        .unwrap();
        assert_eq!(result.stopped_at.as_deref(), Some("Move"));
        let output = serde_json::Value::Object(schema::schema_for::<StepsResult>());
        assert_eq!(output["properties"]["stoppedAt"]["type"], "string", "{output}");
    }
}

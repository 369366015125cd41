//! `input`: press keys, move and click the mouse, type and wait, as a player does, in a Play
//! client DataModel through `UserInputService:CreateVirtualInput()` (plugin/src/PlayerInput.luau
//! and Actions/Input.luau). Steps are checked here, naming the step, before anything is sent;
//! the plugin answers `not_in_play` outside a client and `input_refused` (with the step's
//! 1-based index) when the engine refuses a send, and releases whatever the call pressed on
//! every exit.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Command, Invocation, Kind, Output, Spec};
use crate::protocol::{Context, ToolError};

const MAX_STEPS: usize = 40;
const MAX_WAIT_MS: u32 = 5_000;

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InputArgs {
    // The schema lists the shapes of a step in one line (StepShape) instead of a property
    // list: a third of the bytes (the catalogue budget, B9), and it says which fields go with
    // which `type`, which a flat property list cannot. `Step` checks them all the same.
    // 1..=40 steps, checked in `run` (minItems/maxItems would cost 24 bytes a catalogue).
    #[schemars(with = "Vec<StepShape>")]
    pub steps: Vec<Step>,
}

/// type key:{key,action?:tap|down|up,holdMs?}|mouse:{action,x,y,button?,scroll?}|text:{text}|wait:{ms}
#[derive(JsonSchema)]
#[schemars(transparent)]
#[allow(dead_code)] // only its schema is used
struct StepShape(serde_json::Map<String, serde_json::Value>);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StepKind {
    Key,
    Mouse,
    Text,
    Wait,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum StepAction {
    Tap,
    Down,
    Up,
    Move,
    Click,
    DoubleClick,
    Scroll,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Step {
    #[serde(rename = "type")]
    pub kind: StepKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<StepAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_ms: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub y: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub button: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scroll: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ms: Option<u32>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct InputResult {
    pub steps: Vec<StepResult>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepResult {
    #[serde(rename = "type")]
    pub kind: StepKind,
    pub ok: bool,
    /// Whether UserInputService.InputBegan was seen for this step's press.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub began: Option<bool>,
    /// InputBegan's gameProcessedEvent: the game's UI took the input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub game_processed: Option<bool>,
}

/// The fields each kind of step takes, for the message that names a stray one.
fn check_step(index: usize, step: &Step) -> Result<(), ToolError> {
    let bad = |message: String| Err(ToolError::invalid_args(format!("steps[{index}]: {message}")));
    let stray = |fields: &[(&str, bool)]| -> Option<String> {
        fields
            .iter()
            .find(|(_, present)| *present)
            .map(|(name, _)| (*name).to_owned())
    };
    use StepAction::*;
    match step.kind {
        StepKind::Key => {
            match &step.key {
                Some(key) if !key.trim().is_empty() => {}
                _ => return bad("a key step needs `key`, a KeyCode name (W, Space, Return)".into()),
            }
            if !matches!(step.action, None | Some(Tap | Down | Up)) {
                return bad("a key step's `action` is tap, down or up".into());
            }
            if let Some(field) = stray(&[
                ("x", step.x.is_some()),
                ("y", step.y.is_some()),
                ("button", step.button.is_some()),
                ("scroll", step.scroll.is_some()),
                ("text", step.text.is_some()),
                ("ms", step.ms.is_some()),
            ]) {
                return bad(format!("a key step takes no `{field}`"));
            }
        }
        StepKind::Mouse => {
            let Some(action) = step.action else {
                return bad("a mouse step needs `action`: move, down, up, click, doubleClick or scroll".into());
            };
            if matches!(action, Tap) {
                return bad("a mouse step's `action` is move, down, up, click, doubleClick or scroll".into());
            }
            if !step.x.is_some_and(f64::is_finite) || !step.y.is_some_and(f64::is_finite) {
                return bad("a mouse step needs `x` and `y`, viewport pixels from the top-left".into());
            }
            if let Some(button) = step.button
                && !(1..=3).contains(&button)
            {
                return bad("`button` is 1, 2 or 3".into());
            }
            match (action, step.scroll) {
                (Scroll, Some(n)) if n != 0.0 && n.is_finite() => {}
                (Scroll, _) => return bad("a scroll needs `scroll`, a non-zero number (+ forward)".into()),
                (_, Some(_)) => return bad("`scroll` goes with action scroll".into()),
                _ => {}
            }
            if let Some(field) = stray(&[
                ("key", step.key.is_some()),
                ("text", step.text.is_some()),
                ("ms", step.ms.is_some()),
            ]) {
                return bad(format!("a mouse step takes no `{field}`"));
            }
        }
        StepKind::Text => {
            if step.text.is_none() {
                return bad("a text step needs `text` (typed into the focused TextBox)".into());
            }
        }
        StepKind::Wait => match step.ms {
            Some(ms) if ms <= MAX_WAIT_MS => {}
            _ => return bad(format!("a wait step needs `ms`, at most {MAX_WAIT_MS}")),
        },
    }
    Ok(())
}

pub struct Input;

impl Command for Input {
    type Args = InputArgs;
    type Result = InputResult;
    const SPEC: Spec = Spec {
        name: "input",
        description: "Keys, mouse and text as a player in a Play client.",
        needs_session: true,
        default_context: Context::Client,
        timeout: Duration::from_secs(30),
        // It changes the running game, never the place; nothing to undo.
        kind: Kind::Write,
        capabilities: super::Capabilities::of(&[super::Capability::Play]),
        idempotent: false,
        open_world: false,
        positional: &[],
        truncation_hint: "",
        follow_event: None,
        example: "studio-bridge input --steps '[{\"type\": \"key\", \"key\": \"W\", \"holdMs\": 500}]' --context client",
        from_file: None,
        flag_help: &[("steps", "Keys, mouse, text and waits, in order")],
    };

    async fn run(args: InputArgs, cx: &Invocation) -> Result<Output, ToolError> {
        if args.steps.is_empty() || args.steps.len() > MAX_STEPS {
            return Err(ToolError::invalid_args(format!(
                "`steps` must hold 1 to {MAX_STEPS} steps; split a longer sequence into several calls."
            )));
        }
        for (i, step) in args.steps.iter().enumerate() {
            check_step(i + 1, step)?;
        }
        cx.forward(&Self::SPEC, &args).await
    }
}

use serde_json::Value as Json;

// Human rendering --------------------------------------------------------------------------

use crate::human::render::{self, Rendered, Style, clean};

impl super::Render for Input {
    /// One row a step: whether it was sent, whether the game saw it begin, and whether the
    /// game's UI took it.
    fn render(_args: &Json, result: &Json, out: Style, _err: Style) -> Option<Rendered> {
        let mut rows = Vec::new();
        for (i, step) in result.get("steps")?.as_array()?.iter().enumerate() {
            rows.push(vec![
                (i + 1).to_string(),
                clean(step.get("type")?.as_str()?).into_owned(),
                render::yes_no(step.get("ok")),
                render::yes_no(step.get("began")),
                render::yes_no(step.get("gameProcessed")),
            ]);
        }
        let table = render::table(
            &["STEP", "TYPE", "SENT", "BEGAN", "UI TOOK IT"],
            &rows,
            out,
            |_, _, padded| padded.to_owned(),
        );
        Some(Rendered {
            stdout: table,
            stderr: String::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(steps: serde_json::Value) -> Result<(), String> {
        let args: InputArgs = serde_json::from_value(json!({ "steps": steps })).map_err(|e| e.to_string())?;
        for (i, step) in args.steps.iter().enumerate() {
            check_step(i + 1, step).map_err(|e| e.message)?;
        }
        Ok(())
    }

    #[test]
    fn steps_are_checked_naming_the_step_before_anything_is_sent() {
        assert_eq!(
            check(
                json!([{"type": "key", "key": "W", "action": "down"}, {"type": "wait", "ms": 100},
                         {"type": "mouse", "action": "click", "x": 10, "y": 80}, {"type": "text", "text": "hi"}])
            ),
            Ok(())
        );
        let err =
            check(json!([{"type": "key", "key": "W"}, {"type": "mouse", "action": "click", "x": 1}])).unwrap_err();
        assert!(err.starts_with("steps[2]: a mouse step needs `x` and `y`"), "{err}");
        let err = check(json!([{"type": "wait", "ms": 9000}])).unwrap_err();
        assert!(
            err.starts_with("steps[1]: a wait step needs `ms`, at most 5000"),
            "{err}"
        );
        let err = check(json!([{"type": "key", "key": "W", "action": "scroll"}])).unwrap_err();
        assert!(err.contains("tap, down or up"), "{err}");
        let err = check(json!([{"type": "mouse", "action": "scroll", "x": 1, "y": 70}])).unwrap_err();
        assert!(err.contains("a scroll needs `scroll`"), "{err}");
        let err = check(json!([{"type": "mouse", "action": "click", "x": 1, "y": 70, "button": 4}])).unwrap_err();
        assert!(err.contains("`button` is 1, 2 or 3"), "{err}");
        let err = check(json!([{"type": "key", "key": "W", "x": 3}])).unwrap_err();
        assert!(err.contains("a key step takes no `x`"), "{err}");
        assert!(
            check(json!([{"type": "jump"}])).is_err(),
            "an unknown type fails the schema"
        );
    }
}

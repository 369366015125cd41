//! `ui`: the player's GUI in a Play client: `inspect` what is shown, `click` an element or
//! `type` into a TextBox like a player, through VirtualInput (plugin/src/Actions/Ui.luau).
//! A target is a path or `{text?, name?, className?}`; the plugin refuses a hidden, covered,
//! off-screen (`not_clickable`) or ambiguous (`ambiguous`) target before anything is sent.
//! Screen positions come from one plugin function (plugin/src/Screen.luau, docs/protocol.md).

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::{Command, Invocation, Kind, Output, Spec};
use crate::protocol::{Context, ToolError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum UiAction {
    Inspect,
    Click,
    Type,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UiArgs {
    pub action: UiAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    // true when absent; the schema says so, for `--no-clear` on the command line
    #[schemars(extend("default" = true))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clear: Option<bool>,
    #[serde(default)]
    pub submit: bool,
}

// A path (`PlayerGui.Menu.Play`, or a full one) or what the element is (no doc comment:
// a description in the schema would cost the catalogue budget).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Target {
    Path(String),
    // Its fields stay out of the schema (the catalogue budget): the shape is in its
    // description; `TargetMatch` still refuses anything else.
    #[schemars(with = "MatchShape")]
    Match(TargetMatch),
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TargetMatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_name: Option<String>,
}

/// {text?,name?,className?}
#[derive(JsonSchema)]
#[schemars(transparent)]
#[allow(dead_code)] // only its schema is used
struct MatchShape(serde_json::Map<String, Json>);

// The three results share one type (the outputSchema): inspect fills elements…, click
// clicked…, type path….
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UiResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elements: Option<Vec<Element>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub viewport: Option<[f64; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inset: Option<[f64; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clicked: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<[f64; 2]>,
    /// Activated seen within 0.5 s of the click.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activated: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The box's Text after typing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focused: Option<bool>,
    /// FocusLost fired with enterPressed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitted: Option<bool>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Element {
    pub path: String,
    pub class_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Screen pixels, the top bar included.
    pub center: [f64; 2],
    pub size: [f64; 2],
    /// Its centre is inside the viewport.
    pub visible: bool,
    /// It takes input (a button, a text box, Active).
    pub active: bool,
}

pub struct Ui;

impl Command for Ui {
    type Args = UiArgs;
    type Result = UiResult;
    const SPEC: Spec = Spec {
        name: "ui",
        description: "Inspect, click, type in a Play client's GUI.",
        needs_session: true,
        default_context: Context::Client,
        timeout: Duration::from_secs(15),
        kind: Kind::Write,
        // inspect reads; click and type play (`capabilities` below): a read-only policy keeps
        // the tool listed for its reading form, as `selection`.
        capabilities: super::Capabilities::of(&[super::Capability::Read]),
        idempotent: false,
        open_world: false,
        positional: &["action"],
        truncation_hint: "Pass a target to list one subtree of the GUI.",
        follow_event: None,
        example: "studio-bridge ui click --target PlayerGui.Menu.Play --context client",
        from_file: None,
        flag_help: &[
            (
                "action",
                "inspect: list what is shown; click an element; type into a TextBox",
            ),
            ("target", "The element: a path, or what it is"),
            ("text", "type: the text"),
            ("clear", "type: keep the box's text and add to it"),
            ("submit", "type: press Enter after"),
        ],
    };

    /// Inspecting reads; clicking and typing play.
    fn capabilities(args: &UiArgs) -> super::Capabilities {
        if args.action == UiAction::Inspect {
            Self::SPEC.capabilities
        } else {
            Self::SPEC.capabilities.with(super::Capability::Play)
        }
    }

    async fn run(args: UiArgs, cx: &Invocation) -> Result<Output, ToolError> {
        match (&args.action, &args.target, &args.text) {
            (UiAction::Click | UiAction::Type, None, _) => {
                return Err(ToolError::invalid_args(
                    "`target` is needed to click or type: a path (PlayerGui.Menu.Play) or {text, name, className}; list them with action inspect.",
                ));
            }
            (UiAction::Type, _, None) => {
                return Err(ToolError::invalid_args("`text` is needed to type."));
            }
            _ => {}
        }
        if let Some(Target::Match(m)) = &args.target
            && m.text.is_none()
            && m.name.is_none()
            && m.class_name.is_none()
        {
            return Err(ToolError::invalid_args(
                "`target` needs at least one of text, name, className (or a path).",
            ));
        }
        cx.forward(&Self::SPEC, &args).await
    }
}

// Human rendering --------------------------------------------------------------------------

use std::fmt::Write as _;

use crate::human::render::{self, Rendered, Style, clean};

impl super::Render for Ui {
    /// inspect: a table of what is shown (path, class, text, centre, size, clickable);
    /// click and type: one line of what happened.
    fn render(_args: &Json, result: &Json, out: Style, err: Style) -> Option<Rendered> {
        let mut rendered = Rendered::default();
        let text = |key: &str| result.get(key).and_then(Json::as_str).map(|t| clean(t).into_owned());
        let pair = |key: &str| result.get(key).and_then(Json::as_array).map(|v| render::numbers(v));
        if let Some(elements) = result.get("elements").and_then(Json::as_array) {
            let mut rows = Vec::with_capacity(elements.len());
            for element in elements {
                let words = element.get("text").and_then(Json::as_str).unwrap_or("");
                let mut words: String = clean(words).chars().take(40).collect();
                if words.chars().count() == 40 {
                    words.push('…');
                }
                let clickable = element.get("visible") == Some(&Json::Bool(true))
                    && element.get("active") == Some(&Json::Bool(true));
                rows.push(vec![
                    clean(element.get("path")?.as_str()?).into_owned(),
                    clean(element.get("className")?.as_str()?).into_owned(),
                    words,
                    render::numbers(element.get("center")?.as_array()?),
                    render::numbers(element.get("size")?.as_array()?),
                    if clickable { "yes".into() } else { "no".into() },
                ]);
            }
            rendered.stdout = render::table(
                &["PATH", "CLASS", "TEXT", "CENTRE", "SIZE", "CLICKABLE"],
                &rows,
                out,
                |_, _, padded| padded.to_owned(),
            );
            if let (Some(viewport), Some(inset)) = (pair("viewport"), pair("inset")) {
                let note = format!("viewport {viewport}; the top bar's inset {inset}");
                let _ = writeln!(rendered.stderr, "{}", err.dim(&note));
            }
        } else if let Some(clicked) = text("clicked") {
            let at = pair("at").unwrap_or_default();
            let fired = match result.get("activated").and_then(Json::as_bool) {
                Some(true) => "; Activated fired",
                Some(false) => "; no Activated within 0.5 s",
                None => "",
            };
            let _ = writeln!(rendered.stdout, "clicked {clicked} at {at}{fired}");
        } else {
            let path = text("path")?;
            let now = text("text").unwrap_or_default();
            let submitted = if result.get("submitted") == Some(&Json::Bool(true)) {
                ", submitted"
            } else {
                ""
            };
            let _ = writeln!(rendered.stdout, "typed into {path}: now {now:?}{submitted}");
        }
        Some(rendered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn needs(args: serde_json::Value) -> Vec<&'static str> {
        let args: UiArgs = serde_json::from_value(args).expect("valid args");
        <Ui as Command>::capabilities(&args).names()
    }

    #[test]
    fn inspecting_reads_and_clicking_or_typing_plays() {
        assert_eq!(needs(json!({"action": "inspect"})), ["read"]);
        assert_eq!(
            needs(json!({"action": "click", "target": "PlayerGui.Menu.Play"})),
            ["read", "play"]
        );
        assert_eq!(
            needs(json!({"action": "type", "target": {"className": "TextBox"}, "text": "hi"})),
            ["read", "play"]
        );
        let strays: Result<UiArgs, _> = serde_json::from_value(json!({"action": "click", "target": {"label": "x"}}));
        assert!(strays.is_err(), "a target map with another field is refused");
    }
}

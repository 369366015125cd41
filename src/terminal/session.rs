//! Which Studio session the terminal is attached to: choosing one at start, the prompt
//! that names it, and noticing when it goes away and comes back.

use crate::bridge::{SessionInfo, Target};
use crate::human::render::escape_controls;
use crate::protocol::Context;

/// The attached session, as Studio instance and DataModel: a playtest that ends and starts
/// again, or a plugin that reconnects, gets a new sessionId but the same instanceId and
/// context, so the terminal re-attaches by these.
#[derive(Debug, Clone, PartialEq)]
pub struct Attached {
    pub instance_id: String,
    pub context: Context,
    pub place_name: String,
    /// The `exec` environment (`env`) this attach keeps its globals in.
    pub env: String,
    /// Whether a session of this instance and context is connected now.
    pub present: bool,
}

impl Attached {
    pub fn new(session: &SessionInfo) -> Attached {
        Attached {
            instance_id: session.instance_id.clone(),
            context: session.context,
            place_name: session.place_name.clone(),
            env: format!("terminal-{}", uuid::Uuid::new_v4()),
            present: true,
        }
    }

    /// The target every call from this terminal goes to.
    pub fn target(&self) -> Target {
        Target {
            session_id: None,
            instance_id: Some(self.instance_id.clone()),
            context: Some(self.context),
        }
    }

    /// Whether `session` is this instance's DataModel of this context.
    pub fn matches(&self, session: &SessionInfo) -> bool {
        session.instance_id == self.instance_id && session.context == self.context
    }
}

/// `MyPlace [server]> `, `MyPlace [server] (gone)> ` while the session is away, and for a
/// continuation line as many spaces with `>> ` at the end.
pub fn prompt(attached: &Attached, continuation: bool) -> String {
    let place = if attached.place_name.is_empty() {
        "Studio"
    } else {
        attached.place_name.as_str()
    };
    let gone = if attached.present { "" } else { " (gone)" };
    // A place's name is Studio's to choose: shown, never acted on by the terminal.
    let main = format!("{} [{}]{gone}> ", escape_controls(place), attached.context);
    if continuation {
        let width = main.chars().count();
        format!("{}>> ", " ".repeat(width.saturating_sub(3)))
    } else {
        main
    }
}

/// What to do at start with the sessions that are connected.
#[derive(Debug, PartialEq)]
pub enum Pick {
    Attach(usize),
    /// Several fit: the person chooses among these indices.
    Choose(Vec<usize>),
    /// None fits: the message says why.
    None(String),
}

/// Chooses the session to attach to. `--session` names one; `--context` narrows to that
/// DataModel; when every remaining session is one Studio's, its edit DataModel (or the
/// only one) is taken, `.context` moving to the others.
pub fn pick(sessions: &[SessionInfo], session_id: Option<&str>, context: Option<Context>) -> Pick {
    if let Some(id) = session_id {
        return match sessions.iter().position(|s| s.session_id == id) {
            Some(index) => match context {
                Some(context) if sessions[index].context != context => {
                    match sessions
                        .iter()
                        .position(|s| s.instance_id == sessions[index].instance_id && s.context == context)
                    {
                        Some(other) => Pick::Attach(other),
                        None => Pick::None(format!("session {id} has no {context} DataModel")),
                    }
                }
                _ => Pick::Attach(index),
            },
            None => Pick::None(format!("no session {id}")),
        };
    }
    let fitting: Vec<usize> = (0..sessions.len())
        .filter(|&i| context.is_none_or(|c| sessions[i].context == c))
        .collect();
    match fitting.as_slice() {
        [] if sessions.is_empty() => Pick::None(
            "no sessions: no Studio has the studio-bridge plugin connected (run `studio-bridge install-plugin` and open a place)"
                .into(),
        ),
        [] => Pick::None(format!(
            "no session is a {} DataModel",
            context.map(|c| c.as_str()).unwrap_or("")
        )),
        [only] => Pick::Attach(*only),
        [first, ..] => {
            let one_instance = fitting
                .iter()
                .all(|&i| sessions[i].instance_id == sessions[*first].instance_id);
            if one_instance {
                let edit = fitting.iter().copied().find(|&i| sessions[i].context == Context::Edit);
                Pick::Attach(edit.unwrap_or(*first))
            } else {
                Pick::Choose(fitting)
            }
        }
    }
}

/// The picker's list: `  1) MyPlace [edit] Edit (session …)`.
pub fn choice_lines(sessions: &[SessionInfo], indices: &[usize]) -> String {
    let mut text = String::new();
    for (n, &i) in indices.iter().enumerate() {
        let s = &sessions[i];
        text.push_str(&format!(
            "  {}) {} [{}] {} (session {})\n",
            n + 1,
            escape_controls(&s.place_name),
            s.context,
            escape_controls(&s.state),
            escape_controls(&s.session_id)
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: &str, instance: &str, context: Context, place: &str) -> SessionInfo {
        serde_json::from_value(serde_json::json!({
            "sessionId": id, "instanceId": instance, "context": context.as_str(),
            "state": "Edit", "status": "connected", "placeName": place, "placeId": 0,
            "gameId": 0, "pluginVersion": "0", "uptimeMs": 0
        }))
        .unwrap()
    }

    #[test]
    fn the_prompt_names_place_and_context() {
        let mut attached = Attached::new(&session("s1", "i1", Context::Server, "MyPlace"));
        assert_eq!(prompt(&attached, false), "MyPlace [server]> ");
        assert_eq!(prompt(&attached, true), "               >> ");
        assert_eq!(prompt(&attached, true).len(), prompt(&attached, false).len());
        attached.present = false;
        assert_eq!(prompt(&attached, false), "MyPlace [server] (gone)> ");
    }

    #[test]
    fn picking_a_session() {
        let one_play = [
            session("e", "A", Context::Edit, "P"),
            session("s", "A", Context::Server, "P"),
            session("c", "A", Context::Client, "P"),
        ];
        assert_eq!(pick(&one_play, None, None), Pick::Attach(0));
        assert_eq!(pick(&one_play, None, Some(Context::Client)), Pick::Attach(2));
        assert_eq!(pick(&one_play, Some("e"), Some(Context::Server)), Pick::Attach(1));
        assert!(matches!(pick(&one_play, Some("x"), None), Pick::None(m) if m.contains("no session x")));
        let two = [
            session("a", "A", Context::Edit, "P"),
            session("b", "B", Context::Edit, "Q"),
        ];
        assert_eq!(pick(&two, None, None), Pick::Choose(vec![0, 1]));
        assert_eq!(pick(&two, Some("b"), None), Pick::Attach(1));
        assert!(matches!(pick(&[], None, None), Pick::None(m) if m.contains("no sessions")));
        assert!(choice_lines(&two, &[0, 1]).contains("  2) Q [edit] Edit (session b)"));
    }
}

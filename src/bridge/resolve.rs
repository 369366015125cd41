//! Session resolution: which one plugin connection a call goes to (PROTOCOL.md,
//! Sessions, the resolution table). A pure function over a snapshot of the registry, so
//! every row of the table is tested here.

pub use crate::protocol::Target;
use crate::protocol::{Context, ErrorCode, ToolError};

/// The part of a session that resolution looks at.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub session_id: &'a str,
    pub instance_id: &'a str,
    pub context: Context,
    /// The run state the session last reported (`Edit`, `Play`, `Run`, …).
    pub state: &'a str,
}

/// What resolution decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Choice {
    /// This session.
    Session(usize),
    /// Decided only because no server or client session of the instance has said hello,
    /// so the instance looks like it is in Edit. Right after a host starts (its startup
    /// grace) that may be wrong: a playtest's DataModels may not have reconnected yet, and
    /// an `exec` meant for the server must not run in the edit DataModel, whose changes
    /// persist in the place. The caller waits out the grace before it acts on this.
    Provisional(Result<usize, ToolError>),
    /// The instance's edit session reports a running playtest but the wanted context has
    /// not said hello yet: wait for it (never fall back to edit).
    Await(Context),
}

/// Picks the session for `target` among `sessions`, applying the action's
/// `default_context` when the instance is in Play and the caller named no context
/// (PROTOCOL.md, the resolution table). Returns the index of the chosen session. Errors
/// carry no session list; the registry adds it.
pub fn resolve(sessions: &[Candidate<'_>], target: &Target, default_context: Context) -> Result<Choice, ToolError> {
    if let Some(session_id) = &target.session_id {
        let index = sessions.iter().position(|s| s.session_id == session_id).ok_or_else(|| {
            ToolError::new(
                ErrorCode::SessionNotFound,
                format!("No session {session_id:?}. Call studio_sessions to list the connected sessions and pick one of their sessionIds."),
            )
        })?;
        let named = sessions[index];
        let wanted = match target.context {
            None => return Ok(Choice::Session(index)),
            Some(context) if context == named.context => return Ok(Choice::Session(index)),
            Some(context) => context,
        };
        // An explicit context chooses within the named session's instance.
        let scoped: Vec<usize> = members(sessions, named.instance_id);
        return Ok(within(sessions, &scoped, wanted).unwrap_or_else(|| {
            let available = contexts(sessions, &scoped);
            Choice::Provisional(Err(ToolError::new(
                ErrorCode::ContextUnavailable,
                format!(
                    "Session {session_id:?} is the {} session, and its Studio instance has no {wanted} context (it has: {available}). Omit context to use that session, or start Play for server/client.",
                    named.context
                ),
            )))
        }));
    }
    if sessions.is_empty() {
        return Err(no_sessions());
    }
    let scoped: Vec<usize> = match &target.instance_id {
        Some(instance_id) => {
            let scoped = members(sessions, instance_id);
            if scoped.is_empty() {
                return Err(ToolError::new(
                    ErrorCode::SessionNotFound,
                    format!(
                        "No Studio instance {instance_id:?}. Call studio_sessions to list the connected instances."
                    ),
                ));
            }
            scoped
        }
        None => {
            let first = sessions[0].instance_id;
            if sessions.iter().any(|s| s.instance_id != first) {
                return Err(ToolError::new(
                    ErrorCode::AmbiguousInstance,
                    "Multiple Studio instances connected. Specify a sessionId, or set a default with studio_target.",
                ));
            }
            (0..sessions.len()).collect()
        }
    };
    let explicit = target.context.is_some();
    let wanted = target.context.unwrap_or(default_context);
    if let Some(choice) = within(sessions, &scoped, wanted) {
        return Ok(choice);
    }
    // Not in Play, as far as any session has said: the edit session, or no such context.
    let edit = scoped.iter().copied().find(|&i| sessions[i].context == Context::Edit);
    match (explicit, edit) {
        (false, Some(edit)) => Ok(Choice::Provisional(Ok(edit))),
        (true, Some(_)) => Ok(Choice::Provisional(Err(ToolError::new(
            ErrorCode::ContextUnavailable,
            format!("No {wanted} context: Studio is in Edit mode. Use context: edit or omit it."),
        )))),
        (_, None) => Err(ToolError::new(
            ErrorCode::ContextUnavailable,
            format!(
                "No {wanted} context in this Studio instance (it has: {}). Pass one of those as context, or start Play for server/client.",
                contexts(sessions, &scoped)
            ),
        )),
    }
}

/// The indexes of one instance's sessions.
fn members(sessions: &[Candidate<'_>], instance_id: &str) -> Vec<usize> {
    (0..sessions.len())
        .filter(|&i| sessions[i].instance_id == instance_id)
        .collect()
}

fn contexts(sessions: &[Candidate<'_>], scoped: &[usize]) -> String {
    let names: Vec<&str> = scoped.iter().map(|&i| sessions[i].context.as_str()).collect();
    names.join(", ")
}

/// The states an edit session reports while a playtest runs: its server is on its way.
pub(super) const IN_A_TEST: [&str; 3] = ["Play", "Run", "Paused"];

/// The session of `wanted` in one instance; `Await` when the instance is in Play and
/// that context has not said hello yet; `None` when the instance is not (known to be) in
/// Play, so a server or client context is not there.
fn within(sessions: &[Candidate<'_>], scoped: &[usize], wanted: Context) -> Option<Choice> {
    if let Some(index) = scoped.iter().copied().find(|&i| sessions[i].context == wanted) {
        return Some(Choice::Session(index));
    }
    let reported = |states: &[&str]| {
        scoped
            .iter()
            .any(|&i| sessions[i].context == Context::Edit && states.contains(&sessions[i].state))
    };
    let has_server = scoped.iter().any(|&i| sessions[i].context == Context::Server);
    let has_client = scoped.iter().any(|&i| sessions[i].context == Context::Client);
    let awaited = match wanted {
        Context::Edit => false,
        // Any sign of a playtest: its server is on its way.
        Context::Server => has_client || reported(&IN_A_TEST),
        // Run mode has no client: wait for one only where the test is a Play test.
        Context::Client => reported(&["Play"]),
    };
    if awaited {
        return Some(Choice::Await(wanted));
    }
    if has_server || has_client {
        // In Play, but this context is not part of it (a Run test has no client).
        return Some(Choice::Provisional(Err(ToolError::new(
            ErrorCode::ContextUnavailable,
            format!(
                "No {wanted} context in this Studio instance (it has: {}). Pass one of those as context.",
                contexts(sessions, scoped)
            ),
        ))));
    }
    None
}

pub fn no_sessions() -> ToolError {
    ToolError::new(
        ErrorCode::NoSessions,
        "No active sessions. Is Studio running with the studio-bridge plugin installed? Run `studio-bridge install-plugin`, open a place in Studio, and try again.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s<'a>(session_id: &'a str, instance_id: &'a str, context: Context) -> Candidate<'a> {
        let state = match context {
            Context::Edit => "Edit",
            Context::Server => "Server",
            Context::Client => "Client",
        };
        Candidate {
            session_id,
            instance_id,
            context,
            state,
        }
    }

    fn target(session_id: Option<&str>, instance_id: Option<&str>, context: Option<Context>) -> Target {
        Target {
            session_id: session_id.map(Into::into),
            instance_id: instance_id.map(Into::into),
            context,
        }
    }

    fn code(result: Result<Choice, ToolError>) -> ErrorCode {
        match result {
            Err(error) | Ok(Choice::Provisional(Err(error))) => error.code,
            other => panic!("expected an error, got {other:?}"),
        }
    }

    fn edit_only() -> [Candidate<'static>; 1] {
        [s("e1", "A", Context::Edit)]
    }

    fn play() -> Vec<Candidate<'static>> {
        vec![
            s("e1", "A", Context::Edit),
            s("s1", "A", Context::Server),
            s("c1", "A", Context::Client),
        ]
    }

    #[test]
    fn row_no_instances_is_no_sessions() {
        for context in [None, Some(Context::Edit), Some(Context::Server)] {
            assert_eq!(
                code(resolve(&[], &target(None, None, context), Context::Edit)),
                ErrorCode::NoSessions
            );
        }
    }

    #[test]
    fn row_unknown_session_id_is_session_not_found() {
        assert_eq!(
            code(resolve(&play(), &target(Some("zz"), None, None), Context::Edit)),
            ErrorCode::SessionNotFound
        );
        assert_eq!(
            code(resolve(&[], &target(Some("zz"), None, None), Context::Edit)),
            ErrorCode::SessionNotFound
        );
    }

    #[test]
    fn row_given_session_id_without_context_or_with_its_own_is_that_session() {
        let sessions = play();
        assert_eq!(
            resolve(&sessions, &target(Some("c1"), None, None), Context::Server),
            Ok(Choice::Session(2))
        );
        assert_eq!(
            resolve(
                &sessions,
                &target(Some("e1"), None, Some(Context::Edit)),
                Context::Server
            ),
            Ok(Choice::Session(0))
        );
    }

    #[test]
    fn row_given_session_id_with_another_context_chooses_within_its_instance() {
        let mut sessions = play();
        sessions.push(s("e2", "B", Context::Edit));
        // A default naming the edit session must not pin a call that asks for the server.
        assert_eq!(
            resolve(
                &sessions,
                &target(Some("e1"), None, Some(Context::Server)),
                Context::Edit
            ),
            Ok(Choice::Session(1))
        );
        assert_eq!(
            resolve(
                &sessions,
                &target(Some("s1"), None, Some(Context::Client)),
                Context::Edit
            ),
            Ok(Choice::Session(2))
        );
        let err = match resolve(
            &sessions,
            &target(Some("e2"), None, Some(Context::Server)),
            Context::Edit,
        ) {
            Ok(Choice::Provisional(Err(error))) => error,
            other => panic!("{other:?}"),
        };
        assert_eq!(err.code, ErrorCode::ContextUnavailable);
        assert!(
            err.message.contains("edit session") && err.message.contains("no server"),
            "{}",
            err.message
        );
    }

    #[test]
    fn row_instance_id_scopes_the_rows_below() {
        let mut sessions = play();
        sessions.push(s("e2", "B", Context::Edit));
        assert_eq!(
            resolve(&sessions, &target(None, Some("B"), None), Context::Server),
            Ok(Choice::Provisional(Ok(3)))
        );
        assert_eq!(
            resolve(&sessions, &target(None, Some("A"), None), Context::Server),
            Ok(Choice::Session(1))
        );
        assert_eq!(
            code(resolve(
                &sessions,
                &target(None, Some("B"), Some(Context::Client)),
                Context::Edit
            )),
            ErrorCode::ContextUnavailable
        );
        assert_eq!(
            code(resolve(&sessions, &target(None, Some("C"), None), Context::Edit)),
            ErrorCode::SessionNotFound
        );
    }

    #[test]
    fn row_one_edit_instance_without_context_or_edit_is_the_edit_session() {
        assert_eq!(
            resolve(&edit_only(), &target(None, None, None), Context::Edit),
            Ok(Choice::Session(0))
        );
        assert_eq!(
            resolve(&edit_only(), &target(None, None, Some(Context::Edit)), Context::Server),
            Ok(Choice::Session(0))
        );
        // A server default falls to edit only provisionally: the registry waits out its
        // startup grace first, in case the Play DataModels are still reconnecting.
        assert_eq!(
            resolve(&edit_only(), &target(None, None, None), Context::Server),
            Ok(Choice::Provisional(Ok(0)))
        );
    }

    #[test]
    fn row_one_edit_instance_asked_for_server_or_client_is_context_unavailable() {
        for context in [Context::Server, Context::Client] {
            let result = resolve(&edit_only(), &target(None, None, Some(context)), Context::Edit);
            let Ok(Choice::Provisional(Err(err))) = result else {
                panic!("{result:?}")
            };
            assert_eq!(err.code, ErrorCode::ContextUnavailable);
            assert!(err.message.contains("Edit mode"), "{}", err.message);
        }
    }

    #[test]
    fn row_one_play_instance_without_context_uses_the_default() {
        let sessions = play();
        assert_eq!(
            resolve(&sessions, &target(None, None, None), Context::Server),
            Ok(Choice::Session(1))
        );
        assert_eq!(
            resolve(&sessions, &target(None, None, None), Context::Edit),
            Ok(Choice::Session(0))
        );
    }

    #[test]
    fn row_one_play_instance_with_context_uses_it() {
        let sessions = play();
        assert_eq!(
            resolve(&sessions, &target(None, None, Some(Context::Client)), Context::Edit),
            Ok(Choice::Session(2))
        );
        assert_eq!(
            resolve(&sessions, &target(None, None, Some(Context::Edit)), Context::Server),
            Ok(Choice::Session(0))
        );
        let server_only = [s("e1", "A", Context::Edit), s("s1", "A", Context::Server)];
        assert_eq!(
            code(resolve(
                &server_only,
                &target(None, None, Some(Context::Client)),
                Context::Edit
            )),
            ErrorCode::ContextUnavailable
        );
    }

    #[test]
    fn an_edit_session_reporting_a_test_makes_the_call_wait_for_that_context() {
        let mut edit = s("e1", "A", Context::Edit);
        edit.state = "Play";
        // exec's server default never falls back to the edit DataModel.
        assert_eq!(
            resolve(&[edit], &target(None, None, None), Context::Server),
            Ok(Choice::Await(Context::Server))
        );
        assert_eq!(
            resolve(&[edit], &target(None, None, Some(Context::Client)), Context::Edit),
            Ok(Choice::Await(Context::Client))
        );
        assert_eq!(
            resolve(&[edit], &target(None, None, None), Context::Edit),
            Ok(Choice::Session(0))
        );
        // A client that said hello before its server: the server is on its way.
        let early = [s("e1", "A", Context::Edit), s("c1", "A", Context::Client)];
        assert_eq!(
            resolve(&early, &target(None, None, None), Context::Server),
            Ok(Choice::Await(Context::Server))
        );
        // Run mode has no client to wait for.
        edit.state = "Run";
        assert_eq!(
            code(resolve(
                &[edit, s("s1", "A", Context::Server)],
                &target(None, None, Some(Context::Client)),
                Context::Edit
            )),
            ErrorCode::ContextUnavailable
        );
    }

    #[test]
    fn row_several_instances_without_ids_is_ambiguous() {
        let sessions = [s("e1", "A", Context::Edit), s("e2", "B", Context::Edit)];
        for context in [None, Some(Context::Edit), Some(Context::Server)] {
            assert_eq!(
                code(resolve(&sessions, &target(None, None, context), Context::Edit)),
                ErrorCode::AmbiguousInstance
            );
        }
    }
}

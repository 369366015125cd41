//! Session resolution: which one plugin connection a call goes to (PROTOCOL.md,
//! Sessions, the resolution table). A pure function over a snapshot of the registry, so
//! every row of the table is tested here.

use serde::{Deserialize, Serialize};

use crate::protocol::{Context, ErrorCode, ToolError};

/// What a caller asked for. All parts optional: the common case is an agent with one
/// Studio open that names nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Context>,
}

/// The part of a session that resolution looks at.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub session_id: &'a str,
    pub instance_id: &'a str,
    pub context: Context,
}

/// Picks the session for `target` among `sessions`, applying the action's
/// `default_context` when the instance is in Play and the caller named no context.
/// Returns the index of the chosen session. Errors carry no session list; the registry
/// adds it.
pub fn resolve(sessions: &[Candidate<'_>], target: &Target, default_context: Context) -> Result<usize, ToolError> {
    if let Some(session_id) = &target.session_id {
        return sessions.iter().position(|s| s.session_id == session_id).ok_or_else(|| {
            ToolError::new(
                ErrorCode::SessionNotFound,
                format!("No session {session_id:?}. Call studio_sessions to list the connected sessions and pick one of their sessionIds."),
            )
        });
    }
    if sessions.is_empty() {
        return Err(no_sessions());
    }
    let scoped: Vec<usize> = match &target.instance_id {
        Some(instance_id) => {
            let members: Vec<usize> = (0..sessions.len())
                .filter(|&i| sessions[i].instance_id == instance_id)
                .collect();
            if members.is_empty() {
                return Err(ToolError::new(
                    ErrorCode::SessionNotFound,
                    format!(
                        "No Studio instance {instance_id:?}. Call studio_sessions to list the connected instances."
                    ),
                ));
            }
            members
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
    let in_play = scoped.iter().any(|&i| sessions[i].context != Context::Edit);
    let wanted = match (in_play, target.context) {
        (false, None | Some(Context::Edit)) => Context::Edit,
        (false, Some(context)) => {
            return Err(ToolError::new(
                ErrorCode::ContextUnavailable,
                format!("No {context} context: Studio is in Edit mode. Use context: edit or omit it."),
            ));
        }
        (true, None) => default_context,
        (true, Some(context)) => context,
    };
    scoped.iter().copied().find(|&i| sessions[i].context == wanted).ok_or_else(|| {
        let available: Vec<&str> = scoped.iter().map(|&i| sessions[i].context.as_str()).collect();
        ToolError::new(
            ErrorCode::ContextUnavailable,
            format!(
                "No {wanted} context in this Studio instance (it has: {}). Pass one of those as context, or start Play for server/client.",
                available.join(", ")
            ),
        )
    })
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
        Candidate {
            session_id,
            instance_id,
            context,
        }
    }

    fn target(session_id: Option<&str>, instance_id: Option<&str>, context: Option<Context>) -> Target {
        Target {
            session_id: session_id.map(Into::into),
            instance_id: instance_id.map(Into::into),
            context,
        }
    }

    fn code(result: Result<usize, ToolError>) -> ErrorCode {
        result.expect_err("expected an error").code
    }

    const EDIT_ONLY: [Candidate<'static>; 1] = [Candidate {
        session_id: "e1",
        instance_id: "A",
        context: Context::Edit,
    }];

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
    fn row_given_session_id_wins_whatever_the_context() {
        let sessions = play();
        assert_eq!(
            resolve(&sessions, &target(Some("c1"), None, None), Context::Server),
            Ok(2)
        );
        assert_eq!(
            resolve(
                &sessions,
                &target(Some("e1"), None, Some(Context::Server)),
                Context::Edit
            ),
            Ok(0)
        );
    }

    #[test]
    fn row_instance_id_scopes_the_rows_below() {
        let mut sessions = play();
        sessions.push(s("e2", "B", Context::Edit));
        assert_eq!(
            resolve(&sessions, &target(None, Some("B"), None), Context::Server),
            Ok(3)
        );
        assert_eq!(
            resolve(&sessions, &target(None, Some("A"), None), Context::Server),
            Ok(1)
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
        assert_eq!(resolve(&EDIT_ONLY, &target(None, None, None), Context::Server), Ok(0));
        assert_eq!(
            resolve(&EDIT_ONLY, &target(None, None, Some(Context::Edit)), Context::Edit),
            Ok(0)
        );
    }

    #[test]
    fn row_one_edit_instance_asked_for_server_or_client_is_context_unavailable() {
        for context in [Context::Server, Context::Client] {
            let err = resolve(&EDIT_ONLY, &target(None, None, Some(context)), Context::Edit).unwrap_err();
            assert_eq!(err.code, ErrorCode::ContextUnavailable);
            assert!(err.message.contains("Edit mode"), "{}", err.message);
        }
    }

    #[test]
    fn row_one_play_instance_without_context_uses_the_default() {
        let sessions = play();
        assert_eq!(resolve(&sessions, &target(None, None, None), Context::Server), Ok(1));
        assert_eq!(resolve(&sessions, &target(None, None, None), Context::Edit), Ok(0));
    }

    #[test]
    fn row_one_play_instance_with_context_uses_it() {
        let sessions = play();
        assert_eq!(
            resolve(&sessions, &target(None, None, Some(Context::Client)), Context::Edit),
            Ok(2)
        );
        assert_eq!(
            resolve(&sessions, &target(None, None, Some(Context::Edit)), Context::Server),
            Ok(0)
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

//! `sessions`: the connected Studio sessions. Answered by the bridge host itself.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::{Command, Invocation, Kind, Output, Render, Spec};
use crate::bridge::{RefusedPlugin, SessionInfo};
use crate::human::render::{Rendered, Style, clean, table};
use crate::launch::opened::{self, OpenedReport};
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
    /// The last Studio plugin the host refused (unpaired, another protocol), and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<RefusedPlugin>,
    /// The Studios studio_open started and studio_close has not closed: `connected`,
    /// `not_connected` (starting, or wedged) or `exited` (crashed, or closed by a person).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub opened: Vec<OpenedReport>,
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
        example: "studio-bridge sessions",
        from_file: None,
        flag_help: &[],
    };

    async fn run(_args: SessionsArgs, cx: &Invocation) -> Result<Output, ToolError> {
        let list = cx.bridge.session_list(Self::SPEC.timeout).await?;
        let connected: Vec<String> = list.sessions.iter().map(|s| s.session_id.clone()).collect();
        Ok(Output::json(
            serde_json::to_value(SessionsResult {
                sessions: list.sessions,
                policy: cx.policy.as_deref().cloned(),
                refused: list.refused,
                opened: opened::report(&connected),
            })
            .unwrap_or_default(),
        ))
    }
}

impl Render for Sessions {
    /// An aligned table, one session a row (a status other than `connected` in yellow).
    fn render(_args: &Json, result: &Json, out: Style, _err: Style) -> Option<Rendered> {
        let list = result.get("sessions")?.as_array()?;
        let text =
            |session: &Json, key: &str| clean(session.get(key).and_then(Json::as_str).unwrap_or("-")).into_owned();
        // The last plugin refused, on stderr: why a Studio that is open is not listed.
        let refused = result
            .get("refused")
            .and_then(|r| serde_json::from_value::<RefusedPlugin>(r.clone()).ok())
            .map(|r| format!("{}\n", clean(&r.note())))
            .unwrap_or_default();
        // The Studios studio-bridge opened that are not connected now: crashed, or wedged.
        let mut refused = refused;
        for opened in result.get("opened").and_then(Json::as_array).into_iter().flatten() {
            let status = opened.get("status").and_then(Json::as_str).unwrap_or_default();
            let why = match status {
                "exited" => "exited without studio-bridge closing it (it crashed, or a person closed it)",
                "not_connected" => "runs, but its plugin is not connected (starting, or not responding)",
                _ => continue,
            };
            refused.push_str(&format!(
                "the Studio studio-bridge opened for {} (pid {}) {why}; `studio-bridge close{}` ends it and forgets it. Its output: {}\n",
                text(opened, "place"),
                opened.get("pid").and_then(Json::as_u64).unwrap_or_default(),
                opened
                    .get("sessionId")
                    .and_then(Json::as_str)
                    .map(|id| format!(" --session {}", clean(id)))
                    .unwrap_or_default(),
                text(opened, "log"),
            ));
        }
        if list.is_empty() {
            return Some(Rendered {
                stdout: "no sessions: no Studio has the studio-bridge plugin connected\n".into(),
                stderr: refused,
            });
        }
        // A PLAYER column only while some session is a Play client with its player.
        let players = list.iter().any(|s| s.get("player").is_some());
        let mut rows = Vec::with_capacity(list.len());
        for session in list {
            let mut row = vec![
                clean(session.get("sessionId")?.as_str()?).into_owned(),
                text(session, "context"),
            ];
            if players {
                row.push(text(session, "player"));
            }
            row.extend([
                text(session, "state"),
                if session.get("paused") == Some(&Json::Bool(true)) {
                    "paused".to_owned()
                } else {
                    text(session, "status")
                },
                text(session, "placeName"),
                session
                    .get("uptimeMs")
                    .and_then(Json::as_u64)
                    .map_or_else(|| "-".into(), uptime),
            ]);
            rows.push(row);
        }
        // What a Studio lacks, one line a session, on stderr beside the table.
        let mut notes = refused;
        for session in list {
            let missing: Vec<String> = session
                .get("missing")
                .and_then(Json::as_array)
                .map(|m| {
                    m.iter()
                        .filter_map(Json::as_str)
                        .map(|name| clean(name).into_owned())
                        .collect()
                })
                .unwrap_or_default();
            if !missing.is_empty() {
                notes.push_str(&format!(
                    "{}: this Studio has no {}; the tools that need them answer `unsupported` (`studio-bridge doctor --studio` lists them)\n",
                    text(session, "sessionId"),
                    missing.join(", ")
                ));
            }
        }
        let mut headers = vec!["SESSION", "CONTEXT", "STATE", "STATUS", "PLACE", "UPTIME"];
        if players {
            headers.insert(2, "PLAYER");
        }
        let status = if players { 4 } else { 3 };
        Some(Rendered {
            stdout: table(&headers, &rows, out, |column, cell, padded| {
                if column == status && cell != "connected" {
                    out.yellow(padded)
                } else {
                    padded.to_owned()
                }
            }),
            stderr: notes,
        })
    }
}

/// `42s`, `3m 07s`, `2h 05m`, `3d 04h`.
fn uptime(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {:02}h", s / 86400, s % 86400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::plain;
    use serde_json::json;

    #[test]
    fn sessions_are_an_aligned_table() {
        let result = json!({"sessions": [
            {"sessionId": "A-edit", "instanceId": "A", "context": "edit", "state": "Edit", "status": "connected",
             "placeName": "Place A", "placeId": 1, "gameId": 0, "pluginVersion": "x", "uptimeMs": 4200},
            {"sessionId": "B-server", "instanceId": "B", "context": "server", "state": "Server",
             "status": "reconnecting", "placeName": "Obby", "placeId": 2, "gameId": 0, "pluginVersion": "x",
             "uptimeMs": 3_723_000},
        ]});
        assert_eq!(
            plain("sessions", &result).stdout,
            "SESSION   CONTEXT  STATE   STATUS        PLACE    UPTIME\n\
             A-edit    edit     Edit    connected     Place A  4s\n\
             B-server  server   Server  reconnecting  Obby     1h 02m\n"
        );
        let result = json!({"sessions": [
            {"sessionId": "A-edit", "instanceId": "A", "context": "edit", "state": "Edit", "status": "connected",
             "placeName": "P", "placeId": 1, "gameId": 0, "pluginVersion": "x", "uptimeMs": 1000},
            {"sessionId": "A-c2", "instanceId": "A", "context": "client", "state": "Client", "status": "connected",
             "placeName": "P", "placeId": 1, "gameId": 0, "pluginVersion": "x", "uptimeMs": 1000, "player": "Player2"},
        ]});
        assert_eq!(
            plain("sessions", &result).stdout,
            "SESSION  CONTEXT  PLAYER   STATE   STATUS     PLACE  UPTIME\n\
             A-edit   edit     -        Edit    connected  P      1s\n\
             A-c2     client   Player2  Client  connected  P      1s\n"
        );
        assert!(
            plain("sessions", &json!({"sessions": []}))
                .stdout
                .starts_with("no sessions")
        );
    }
}

//! `close`: ends a Studio that studio-bridge opened (`open`), and only such a one: it is
//! found in the opened list by its session and known by process id plus start time, so a
//! Studio a person started, or a program that got the id later, is never touched.
//!
//! Studio saves only when a person does, so what changed since the open is lost on close:
//! while the session's undo history has steps (ChangeHistoryService:GetCanUndo, asked
//! through `state`), the close is refused unless `discard` says to lose them. Then Studio
//! is asked to quit (SIGTERM; `taskkill /T` on Windows), the place's `.lock` is given time
//! to go (Studio removes it as it closes the place), and the process tree is ended.

use std::fmt::Write as _;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::{Command, Invocation, Kind, Output, Render, Spec};
use crate::human::render::{Rendered, Style, clean};
use crate::launch::opened::{self, Opened};
use crate::launch::process::{self, Liveness};
use crate::protocol::{Context, ErrorCode, ToolError, value};

/// How long a Studio asked to quit has to close its place (its `.lock` gone) and exit
/// before its process tree is ended.
const GRACE: Duration = Duration::from_secs(10);

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CloseArgs {
    /// Lose unsaved changes
    #[serde(default)]
    pub discard: bool,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloseResult {
    pub pid: u32,
    pub place: String,
    /// `quit` (Studio closed when asked), `ended` (its process tree was ended after the
    /// grace), or `exited` (it was no longer running).
    pub how: String,
    /// Changes were discarded (`discard: true` with undo steps since the open).
    pub discarded: bool,
}

pub struct Close;

impl Command for Close {
    type Args = CloseArgs;
    type Result = CloseResult;
    const SPEC: Spec = Spec {
        name: "close",
        description: "Close a Studio studio_open opened; refuses unsaved changes unless discard.",
        // `sessionId` names the Studio (the session studio_open answered); left out, the one
        // Studio studio-bridge opened.
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(40),
        kind: Kind::Destructive,
        capabilities: super::Capabilities::of(&[super::Capability::Launch]),
        idempotent: false,
        open_world: false,
        positional: &[],
        truncation_hint: "",
        follow_event: None,
        example: "studio-bridge close --session 7f3a-edit --discard",
        from_file: None,
        flag_help: &[],
    };

    async fn run(args: CloseArgs, cx: &Invocation) -> Result<Output, ToolError> {
        let entry = which(cx.target.session_id.as_deref())?;
        let mut discarded = false;
        if process::liveness(&entry.process) == Liveness::Exited {
            forget(&entry);
            return done(entry, "exited", false);
        }
        let unsaved = match &entry.session_id {
            Some(session_id) => unsaved(cx, session_id).await?,
            None => Unsaved::Unknown,
        };
        match unsaved {
            Unsaved::None => {}
            _ if args.discard => discarded = true,
            Unsaved::Steps(top) => {
                return Err(ToolError::new(
                    ErrorCode::Conflict,
                    format!(
                        "{} has changes since it was opened (its undo history has steps; the last: {top}), and Studio saves only when a person does: closing loses them. Save them in Studio first, or pass `discard: true`.",
                        entry.place
                    ),
                ));
            }
            Unsaved::Unknown => {
                return Err(ToolError::new(
                    ErrorCode::Conflict,
                    format!(
                        "The Studio opened for {} runs, but its plugin is not connected, so whether it has unsaved changes cannot be known. Retry once it reconnects (studio_sessions), or pass `discard: true` to close it anyway.",
                        entry.place
                    ),
                ));
            }
        }
        process::ask_to_quit(&entry.process);
        let quit = lock_gone_and_exited(&entry).await;
        if !quit {
            process::end_tree(&entry.process);
            process::exited_within(&entry.process, Duration::from_secs(5)).await;
        }
        forget(&entry);
        done(entry, if quit { "quit" } else { "ended" }, discarded)
    }
}

fn done(entry: Opened, how: &str, discarded: bool) -> Result<Output, ToolError> {
    Ok(Output::json(
        serde_json::to_value(CloseResult {
            pid: entry.process.pid,
            place: entry.place,
            how: how.to_owned(),
            discarded,
        })
        .unwrap_or_default(),
    ))
}

/// The opened Studio `session_id` names, or the only one when none is named.
fn which(session_id: Option<&str>) -> Result<Opened, ToolError> {
    match session_id {
        Some(id) => opened::by_session(id).ok_or_else(|| {
            ToolError::new(
                ErrorCode::NotFound,
                format!(
                    "Session {id} is not a Studio studio-bridge opened, so it is not closed: studio-bridge closes only the Studios it opened (studio_sessions lists them under `opened`). A person's Studio is theirs to close."
                ),
            )
        }),
        None => {
            let mut all = opened::list();
            match all.len() {
                0 => Err(ToolError::new(
                    ErrorCode::NotFound,
                    "studio-bridge has opened no Studio that is still recorded; it closes only the Studios it opened.",
                )),
                1 => Ok(all.remove(0)),
                n => Err(ToolError::invalid_args(format!(
                    "studio-bridge opened {n} Studios: name one with `sessionId` ({}).",
                    all.iter()
                        .map(|e| e.session_id.clone().unwrap_or_else(|| format!("pid {}, no session", e.process.pid)))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))),
            }
        }
    }
}

/// What a close would lose.
enum Unsaved {
    None,
    /// Undo steps since the open; the last one's name.
    Steps(String),
    /// The session is not connected to ask.
    Unknown,
}

/// Whether the session's undo history has steps, through the plugin's `state`.
async fn unsaved(cx: &Invocation, session_id: &str) -> Result<Unsaved, ToolError> {
    let call = super::open::edit_call(session_id, "state", &Json::Object(serde_json::Map::new()));
    let reply = match cx.bridge.call(call, cx.hooks.clone()).await {
        Ok(reply) => reply,
        // Not connected (wedged, or gone past its reconnect grace): nothing to ask.
        Err(error)
            if matches!(
                error.code,
                ErrorCode::SessionNotFound | ErrorCode::NoSessions | ErrorCode::SessionLost | ErrorCode::Timeout
            ) =>
        {
            return Ok(Unsaved::Unknown);
        }
        Err(error) => return Err(error),
    };
    let state = reply.value.decode().map(value::into_json).unwrap_or(Json::Null);
    Ok(match state.get("canUndo") {
        Some(Json::Bool(true)) => Unsaved::Steps(
            state
                .get("undoWaypoint")
                .and_then(Json::as_str)
                .unwrap_or("unnamed")
                .to_owned(),
        ),
        Some(Json::Bool(false)) => Unsaved::None,
        // A plugin older than `canUndo` cannot say.
        _ => Unsaved::Unknown,
    })
}

/// Waits up to [`GRACE`] for Studio to close its place (the `.lock` gone) and exit.
async fn lock_gone_and_exited(entry: &Opened) -> bool {
    let deadline = tokio::time::Instant::now() + GRACE;
    loop {
        let lock_gone = entry.lock.as_ref().is_none_or(|lock| !lock.exists());
        if lock_gone && process::liveness(&entry.process) == Liveness::Exited {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Forgets `entry`, and removes the `.lock` its Studio left if it made it (one written
/// since the open), so the place can be opened again.
fn forget(entry: &Opened) {
    if let Some(lock) = &entry.lock
        && let Ok(modified) = lock.metadata().and_then(|m| m.modified())
    {
        let since_open = modified
            .duration_since(std::time::UNIX_EPOCH)
            .is_ok_and(|t| t.as_millis() as u64 + 2000 >= entry.opened_ms);
        if since_open && process::liveness(&entry.process) == Liveness::Exited {
            let _ = std::fs::remove_file(lock);
        }
    }
    if let Err(error) = opened::remove(&entry.process) {
        tracing::warn!(%error, "could not update the list of opened Studios");
    }
}

impl Render for Close {
    fn render(_args: &Json, result: &Json, out: Style, _err: Style) -> Option<Rendered> {
        let mut rendered = Rendered::default();
        let how = match result.get("how")?.as_str()? {
            "quit" => "closed",
            "ended" => "ended (it did not quit when asked)",
            _ => "already gone",
        };
        let _ = write!(
            rendered.stdout,
            "{} {} (pid {})",
            out.bold(how),
            clean(result.get("place")?.as_str()?),
            result.get("pid")?.as_u64()?
        );
        if result.get("discarded") == Some(&Json::Bool(true)) {
            rendered.stdout.push_str(", its changes discarded");
        }
        rendered.stdout.push('\n');
        Some(rendered)
    }
}

//! `open`: opens a place in a new Studio through Studio's documented command line
//! (`src/launch`) and answers once that Studio's plugin has connected and paired, with its
//! session, so an agent can work in a Studio no person opened. The Studio is recorded as
//! studio-bridge's (process id plus start time), which is what lets `close` end it later
//! and nothing else.
//!
//! Which new session is ours: Studio tells a plugin nothing about how it was started, so
//! the first edit session that was not connected before the start and is not another
//! opened Studio's is taken, when its place matches (the place id for a published place;
//! for a local file, place id 0, preferring a place named as the file).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::{Command, Invocation, Kind, Output, Render, Spec};
use crate::bridge::{Progress, SessionInfo};
use crate::human::render::{Rendered, Style, clean};
use crate::launch::opened::{self, Opened};
use crate::launch::process::{self, Identity};
use crate::launch::studio::{self, Place, ScriptToOpen};
use crate::launch::{lock_path, now_ms};

use crate::protocol::{Context, ErrorCode, ToolError};

/// Longest wait for the plugin (`timeoutMs`).
const MAX_TIMEOUT_MS: u64 = 600_000;
/// How often the session list is looked at while Studio starts.
const POLL: Duration = Duration::from_millis(250);

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OpenArgs {
    /// .rbxl/.rbxlx file
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Published place id (with universe)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub universe: Option<u64>,
    /// Place version
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// Path.To.Script[:LINE] to open
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    #[serde(default = "default_timeout_ms")]
    #[schemars(range(min = 1000, max = 600_000))]
    pub timeout_ms: u64,
}

fn default_timeout_ms() -> u64 {
    120_000
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpenResult {
    /// The new Studio's edit session.
    pub session: SessionInfo,
    pub pid: u32,
    /// The Studio executable started.
    pub studio: String,
    /// Where its stdout and stderr go.
    pub log: String,
    pub waited_ms: u64,
}

pub struct Open;

impl Command for Open {
    type Args = OpenArgs;
    type Result = OpenResult;
    const SPEC: Spec = Spec {
        name: "open",
        description: "Open a place in a new Studio; answers its session once connected.",
        needs_session: false,
        default_context: Context::Edit,
        timeout: Duration::from_secs(610),
        kind: Kind::Write,
        capabilities: super::Capabilities::of(&[super::Capability::Launch]),
        idempotent: false,
        open_world: true,
        positional: &["file"],
        truncation_hint: "",
        follow_event: None,
        example: "studio-bridge open ./MyGame.rbxl",
        from_file: None,
        flag_help: &[
            ("universe", "The published place's universe id (with --place)"),
            ("timeoutMs", "How long to wait for Studio's plugin to connect"),
        ],
    };

    async fn run(args: OpenArgs, cx: &Invocation) -> Result<Output, ToolError> {
        if !(1000..=MAX_TIMEOUT_MS).contains(&args.timeout_ms) {
            return Err(ToolError::invalid_args(format!(
                "`timeoutMs` must be between 1000 and {MAX_TIMEOUT_MS}."
            )));
        }
        let place = place_of(&args)?;
        let script = match &args.script {
            None => None,
            Some(_) if matches!(place, Place::File(_)) => {
                return Err(ToolError::invalid_args(
                    "`script` needs a published place (`place` and `universe`): Studio's command line opens a script only there. Open the file, then read the script with studio_script_read.",
                ));
            }
            Some(text) => {
                Some(ScriptToOpen::parse(text).map_err(|e| ToolError::invalid_args(format!("`script`: {e}.")))?)
            }
        };
        let arguments = studio::open_arguments(&place, script.as_ref());
        let (started, session) = start(cx, &place, &arguments, Duration::from_millis(args.timeout_ms)).await?;
        let result = OpenResult {
            pid: started.identity.pid,
            studio: started.exe.display().to_string(),
            log: started.log.display().to_string(),
            waited_ms: started.started_at.elapsed().as_millis() as u64,
            session,
        };
        process::reap_in_background(started.child);
        Ok(Output::json(serde_json::to_value(result).unwrap_or_default()))
    }
}

/// The place `args` names: a file (absolute, existing, .rbxl/.rbxlx, not open elsewhere)
/// or a published place with its universe.
fn place_of(args: &OpenArgs) -> Result<Place, ToolError> {
    match (&args.file, args.place, args.universe) {
        (Some(file), None, None) => {
            if args.version.is_some() {
                return Err(ToolError::invalid_args(
                    "`version` is a published place's: leave it out for a file.",
                ));
            }
            Ok(Place::File(place_file(file)?))
        }
        (None, Some(place), Some(universe)) => Ok(Place::Published {
            place,
            universe,
            version: args.version,
        }),
        (None, Some(_), None) | (None, None, Some(_)) => Err(ToolError::invalid_args(
            "A published place needs both `place` and `universe` (Studio's command line takes both).",
        )),
        (None, None, None) => Err(ToolError::invalid_args(
            "Name what to open: `file` (a .rbxl or .rbxlx), or `place` and `universe`.",
        )),
        _ => Err(ToolError::invalid_args(
            "Give either `file` or `place` and `universe`, not both.",
        )),
    }
}

/// A place file as Studio's command line takes it: absolute ("Absolute path to a local
/// .rbxl or .rbxlx place file"), and one no Studio has open (its `.lock` is absent).
pub(super) fn place_file(file: &str) -> Result<PathBuf, ToolError> {
    let given = Path::new(file);
    let extension = given.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    if !matches!(extension.as_deref(), Some("rbxl" | "rbxlx")) {
        return Err(ToolError::invalid_args(format!(
            "`file` must be a place file (.rbxl or .rbxlx), got {file:?}."
        )));
    }
    let path = std::fs::canonicalize(given)
        .map_err(|e| ToolError::new(ErrorCode::NotFound, format!("No place file at {file:?} ({e}).")))?;
    let lock = lock_path(&path);
    if lock.exists() {
        return Err(ToolError::new(
            ErrorCode::Busy,
            format!(
                "{} is open in another Studio ({} exists). Close it there (studio_close, if studio-bridge opened it); if no Studio has it open, delete the lock file.",
                path.display(),
                lock.display()
            ),
        ));
    }
    Ok(path)
}

/// A Studio started here and recorded as studio-bridge's, its session not yet found.
pub(super) struct Spawned {
    pub child: Child,
    pub identity: Identity,
    pub exe: PathBuf,
    pub log: PathBuf,
    pub started_at: tokio::time::Instant,
    record: Opened,
    place: Place,
    /// Sessions connected before the start, and other opened Studios' sessions.
    not_ours: HashSet<String>,
    /// A plugin was refused since the start (it loaded, but did not pair).
    pub refused: Option<String>,
}

impl Spawned {
    /// Starts Studio with `arguments` for `place` and records it (a Studio that could not
    /// be recorded is ended: `close` could never find it).
    pub async fn launch(
        cx: &Invocation,
        place: &Place,
        arguments: &[std::ffi::OsString],
    ) -> Result<Spawned, ToolError> {
        let exe = studio::locate().map_err(|missing| ToolError::new(ErrorCode::NotFound, missing.message()))?;
        let mut not_ours: HashSet<String> = cx
            .bridge
            .sessions(Duration::from_millis(500))
            .await
            .map(|list| list.into_iter().map(|s| s.session_id).collect())
            .unwrap_or_default();
        not_ours.extend(opened::list().into_iter().filter_map(|e| e.session_id));
        let log = log_file();
        report(cx, 0.0, format!("starting Studio ({})", exe.display()));
        let opened_ms = now_ms();
        let mut child = process::spawn_detached(&exe, arguments, &log).map_err(|e| {
            ToolError::new(
                ErrorCode::NotFound,
                format!("Studio could not be started ({}): {e}", exe.display()),
            )
        })?;
        let Some(identity) = process::identity_of(child.id()) else {
            let status = child.try_wait().ok().flatten();
            return Err(ToolError::new(
                ErrorCode::SessionLost,
                format!(
                    "Studio ({}) exited at once ({}); its output: {}",
                    exe.display(),
                    status.map_or_else(|| "no status".to_owned(), |s| s.to_string()),
                    log.display()
                ),
            ));
        };
        let record = Opened {
            process: identity,
            place: place.describe(),
            lock: place.lock(),
            session_id: None,
            opened_ms,
            log: log.clone(),
        };
        if let Err(error) = opened::add(record.clone()) {
            process::end_tree(&identity);
            let _ = child.wait();
            return Err(ToolError::new(
                ErrorCode::PluginError,
                format!(
                    "Studio was started but could not be recorded as studio-bridge's ({error}), so it was ended: `close` could never find it."
                ),
            ));
        }
        report(
            cx,
            1.0,
            format!("Studio started (pid {}); waiting for its plugin", identity.pid),
        );
        Ok(Spawned {
            child,
            identity,
            exe,
            log,
            started_at: tokio::time::Instant::now(),
            record,
            place: place.clone(),
            not_ours,
            refused: None,
        })
    }

    /// Looks once for this Studio's edit session, and records it when found.
    pub async fn session(&mut self, cx: &Invocation) -> Option<SessionInfo> {
        let list = cx.bridge.session_list(POLL).await.ok()?;
        if let Some(refused) = list.refused.filter(|r| r.at_ms >= self.record.opened_ms) {
            self.refused = Some(refused.note());
        }
        let session = ours(&list.sessions, &self.place, &self.not_ours)?;
        self.record.session_id = Some(session.session_id.clone());
        if let Err(error) = opened::add(self.record.clone()) {
            tracing::warn!(%error, "could not record the opened Studio's session");
        }
        report(cx, 2.0, format!("connected: session {}", session.session_id));
        Some(session)
    }

    /// Its exit status, once it has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Ends it (nothing else has it) and forgets it.
    pub async fn abandon(self) {
        process::end_tree(&self.identity);
        let mut child = self.child;
        let _ = tokio::task::spawn_blocking(move || child.wait()).await;
        let _ = opened::remove(&self.identity);
    }

    /// Forgets it, once it has exited by itself.
    pub fn forget(&self) {
        let _ = opened::remove(&self.identity);
    }
}

/// Starts Studio with `arguments` for `place` and waits up to `within` for its plugin's
/// edit session. A Studio that exits first, or does not connect in time, is an error
/// saying how far it got; one still running then is ended.
async fn start(
    cx: &Invocation,
    place: &Place,
    arguments: &[std::ffi::OsString],
    within: Duration,
) -> Result<(Spawned, SessionInfo), ToolError> {
    let mut spawned = Spawned::launch(cx, place, arguments).await?;
    let deadline = spawned.started_at + within;
    let failure = loop {
        if let Some(status) = spawned.exited() {
            spawned.forget();
            return Err(ToolError::new(
                ErrorCode::SessionLost,
                format!(
                    "Studio exited ({status}) before its plugin connected ({}); its output: {}",
                    stage(&spawned),
                    spawned.log.display()
                ),
            ));
        }
        if let Some(session) = spawned.session(cx).await {
            return Ok((spawned, session));
        }
        if tokio::time::Instant::now() >= deadline {
            let mut message = format!(
                "Studio's plugin did not connect within {} s ({}), so the Studio studio-bridge started was ended. Its output: {}.",
                within.as_secs(),
                stage(&spawned),
                spawned.log.display()
            );
            match &spawned.refused {
                Some(note) => {
                    let _ = write!(message, " {note}");
                }
                None => message
                    .push_str(" Is the plugin installed (`studio-bridge install-plugin`) and this port its port?"),
            }
            break ToolError::new(ErrorCode::Timeout, message);
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            () = cx.hooks.cancel.cancelled() => {
                break ToolError::new(
                    ErrorCode::Cancelled,
                    "The open was cancelled; the Studio it started was ended.",
                );
            }
        }
    };
    spawned.abandon().await;
    Err(failure)
}

/// How far a start got, in words.
pub(super) fn stage(spawned: &Spawned) -> &'static str {
    if spawned.refused.is_some() {
        "the process started and a plugin loaded, but it was refused"
    } else {
        "the process started; no plugin said hello"
    }
}

/// The new edit session that is this Studio's (see the module's comment).
fn ours(sessions: &[SessionInfo], place: &Place, not_ours: &HashSet<String>) -> Option<SessionInfo> {
    let fresh = |s: &&SessionInfo| s.context == Context::Edit && !not_ours.contains(&s.session_id);
    match place {
        Place::Published { place, .. } => sessions
            .iter()
            .filter(fresh)
            .find(|s| s.place_id == *place as i64)
            .cloned(),
        Place::File(path) => {
            let unpublished: Vec<&SessionInfo> = sessions.iter().filter(fresh).filter(|s| s.place_id == 0).collect();
            let names = [
                path.file_name().map(|n| n.to_string_lossy().into_owned()),
                path.file_stem().map(|n| n.to_string_lossy().into_owned()),
            ];
            unpublished
                .iter()
                .find(|s| names.iter().flatten().any(|n| *n == s.place_name))
                .or(unpublished.first())
                .map(|s| (*s).clone())
        }
    }
}

/// A new file for a started Studio's stdout and stderr, in the temporary directory.
fn log_file() -> PathBuf {
    std::env::temp_dir().join(format!("studio-bridge-studio-{}.log", uuid::Uuid::new_v4().simple()))
}

/// A call of `action` to the edit DataModel of the session `session_id` (a Studio this
/// module started): `close` asks its `state`, `run` reads its `logs` and acknowledges. The
/// host's own requests: `quiet`, so the Studio Bridge panel does not list them.
pub(super) fn edit_call(session_id: &str, action: &str, args: &Json) -> crate::bridge::Call {
    crate::bridge::Call {
        target: crate::bridge::Target {
            session_id: Some(session_id.to_owned()),
            instance_id: None,
            context: Some(Context::Edit),
        },
        action: action.to_owned(),
        args: crate::protocol::value::from_json(args),
        default_context: Context::Edit,
        timeout: Duration::from_secs(10),
        plugin_timeout: None,
        operation_id: None,
        quiet: true,
    }
}

/// Progress for the caller: MCP progress notifications (the CLI says them on a terminal).
pub(super) fn report(cx: &Invocation, step: f64, message: String) {
    tracing::info!("{message}");
    if let Some(progress) = &cx.hooks.progress {
        let _ = progress.try_send(Progress {
            progress: step,
            total: None,
            message: Some(message),
        });
    }
}

impl Render for Open {
    fn render(_args: &Json, result: &Json, out: Style, _err: Style) -> Option<Rendered> {
        let session = result.get("session")?;
        let mut rendered = Rendered::default();
        let _ = writeln!(
            rendered.stdout,
            "{} {} in Studio (pid {}): session {}",
            out.bold("opened"),
            clean(session.get("placeName")?.as_str()?),
            result.get("pid")?.as_u64()?,
            clean(session.get("sessionId")?.as_str()?)
        );
        let _ = writeln!(
            rendered.stdout,
            "close it with: studio-bridge close --session {}",
            clean(session.get("sessionId")?.as_str()?)
        );
        Some(rendered)
    }
}

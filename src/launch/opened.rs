//! The Studios studio-bridge opened, in `opened.json` of the config directory: what `close`
//! may end (and nothing else), and what `sessions` reports when one of them crashed or
//! stopped answering. A file, not memory, because the process that opened a Studio (a CLI
//! call) is usually gone when another one closes it.
//!
//! Written whole to a temporary file and renamed over the old one, so a reader never sees
//! half a list. Two processes opening at the same instant could each write a list without
//! the other's entry; opens are a person's or an agent's deliberate acts, seconds apart.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::process::{Identity, Liveness, liveness};

/// One Studio studio-bridge started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Opened {
    #[serde(flatten)]
    pub process: Identity,
    /// What it opened, as a person names it (the file, or `place P (universe U)`).
    pub place: String,
    /// The place file's `.lock`, for a local file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<PathBuf>,
    /// Its edit session, once its plugin connected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// When it was started, in Unix milliseconds.
    pub opened_ms: u64,
    /// Where its stdout and stderr go.
    pub log: PathBuf,
}

/// How an opened Studio is doing, for `sessions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpenedReport {
    pub pid: u32,
    pub place: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// `connected`; `not_connected` (running, its session not connected: starting, or
    /// wedged); or `exited` (it ended without `close`: crashed, or closed by a person).
    pub status: String,
    /// Its stdout and stderr.
    pub log: String,
}

fn file() -> Option<PathBuf> {
    crate::config::config_dir().map(|dir| dir.join("opened.json"))
}

/// Every Studio recorded as opened (an unreadable file reads as none).
pub fn list() -> Vec<Opened> {
    let Some(path) = file() else { return Vec::new() };
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|error| {
            tracing::warn!(path = %path.display(), %error, "the list of opened Studios is unreadable; starting a new one");
            Vec::new()
        }),
        Err(_) => Vec::new(),
    }
}

fn save(entries: &[Opened]) -> std::io::Result<()> {
    let path = file().ok_or_else(|| std::io::Error::other("no config directory"))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let temporary = path.with_extension(format!("json.{}", std::process::id()));
    std::fs::write(&temporary, serde_json::to_vec_pretty(entries).unwrap_or_default())?;
    std::fs::rename(&temporary, &path)
}

/// Records `entry`, replacing one of the same process.
pub fn add(entry: Opened) -> std::io::Result<()> {
    let mut entries = list();
    entries.retain(|e| e.process != entry.process);
    entries.push(entry);
    save(&entries)
}

/// Forgets the Studio of `process`.
pub fn remove(process: &Identity) -> std::io::Result<()> {
    let mut entries = list();
    let before = entries.len();
    entries.retain(|e| &e.process != process);
    if entries.len() == before {
        return Ok(());
    }
    save(&entries)
}

/// The recorded Studio whose edit session is `session_id`.
pub fn by_session(session_id: &str) -> Option<Opened> {
    list().into_iter().find(|e| e.session_id.as_deref() == Some(session_id))
}

/// Each recorded Studio with its status, given the sessions connected now.
pub fn report(connected: &[String]) -> Vec<OpenedReport> {
    list()
        .into_iter()
        .map(|entry| {
            let status = match liveness(&entry.process) {
                Liveness::Exited => "exited",
                Liveness::Running if entry.session_id.as_ref().is_some_and(|id| connected.contains(id)) => "connected",
                Liveness::Running => "not_connected",
            };
            OpenedReport {
                pid: entry.process.pid,
                place: entry.place,
                session_id: entry.session_id,
                status: status.to_owned(),
                log: entry.log.display().to_string(),
            }
        })
        .collect()
}

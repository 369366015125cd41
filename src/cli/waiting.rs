//! No silent waits: while a command waits on a terminal, stderr says what for. A command
//! waits for Studio to connect (a new host's 3 s startup grace), for a session to come back
//! (its 10 s reconnect grace), or for Studio to answer (a busy, paused or frozen Studio);
//! a person looking at a still cursor cannot tell these apart, nor from a hung program.
//! A call that reports its own progress (`open`, `run`) has each report said instead.
//! Nothing is said when stderr is not a terminal: a script reads the result, not the wait.

use std::io::IsTerminal as _;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::bridge::{Bridge, PROGRESS_QUEUE, Progress, SessionInfo, Target};
use crate::human::render::Style;

/// How long a call may take before the first word about it: a quick call says nothing.
const FIRST_WORD: Duration = Duration::from_millis(400);
/// When a call still unanswered says so again.
const STILL_WAITING: [Duration; 2] = [Duration::from_secs(5), Duration::from_secs(10)];

/// Says why `action` is waiting while it is alive; dropping it stops the words.
pub struct Announcer {
    task: tokio::task::JoinHandle<()>,
    progress: mpsc::Sender<Progress>,
}

impl Announcer {
    /// Where the call's progress goes (its hooks' `progress`): each report is said as it
    /// comes (`open`: "Studio started (pid 4242); waiting for its plugin"), and a call that
    /// reports its progress says no more than that.
    pub fn progress(&self) -> mpsc::Sender<Progress> {
        self.progress.clone()
    }
}

impl Drop for Announcer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts saying, on stderr when it is a terminal, what `action` waits for (the CLI's
/// commands and the terminal's alike: a call in flight has no prompt to print above).
pub fn announce(bridge: &Bridge, target: &Target, action: &str) -> Option<Announcer> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let style = Style::stderr();
    let bridge = bridge.clone();
    let target = target.clone();
    let action = action.to_owned();
    let (progress, mut reports) = mpsc::channel::<Progress>(PROGRESS_QUEUE);
    let task = tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let mut reported = false;
        let mut said_first = false;
        let mut next = STILL_WAITING[0];
        loop {
            let wake = if said_first {
                started + next
            } else {
                started + FIRST_WORD
            };
            tokio::select! {
                report = reports.recv() => match report {
                    Some(report) => {
                        reported = true;
                        if let Some(message) = report.message {
                            eprintln!("{}", style.dim(&format!("{message}…")));
                        }
                    }
                    // The call is over; nothing more to say.
                    None => return,
                },
                () = tokio::time::sleep_until(wake) => {
                    if reported {
                        // A call that says its own progress needs no words of ours.
                    } else if !said_first {
                        let sessions = bridge.sessions(Duration::from_millis(200)).await.unwrap_or_default();
                        if let Some(first) = first_word(&sessions, &target) {
                            eprintln!("{}", style.dim(&first));
                        }
                    } else {
                        eprintln!("{}", style.dim(&format!(
                            "still waiting for Studio to answer `{action}` ({} s): it may be busy, paused at a breakpoint or frozen. Ctrl-C stops waiting.",
                            next.as_secs()
                        )));
                        next += STILL_WAITING[1];
                    }
                    if !said_first {
                        said_first = true;
                    } else if reported {
                        next += STILL_WAITING[1];
                    }
                }
            }
        }
    });
    Some(Announcer { task, progress })
}

/// What a call that has not answered at once waits for, as far as the sessions tell.
fn first_word(sessions: &[SessionInfo], target: &Target) -> Option<String> {
    let named = |s: &&SessionInfo| {
        target.session_id.as_deref().is_none_or(|id| s.session_id == id)
            && target.instance_id.as_deref().is_none_or(|id| s.instance_id == id)
    };
    if sessions.is_empty() {
        return Some("waiting for Studio to connect (up to 3 s)…".to_owned());
    }
    if sessions.iter().filter(named).any(|s| s.status == "reconnecting") {
        return Some("waiting for Studio to reconnect (up to 10 s)…".to_owned());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Context;

    fn session(id: &str, status: &str) -> SessionInfo {
        SessionInfo {
            session_id: id.to_owned(),
            instance_id: id.split('-').next().unwrap_or(id).to_owned(),
            context: Context::Edit,
            state: "Edit".into(),
            status: status.to_owned(),
            place_name: "P".into(),
            place_id: 0,
            game_id: 0,
            plugin_version: "0".into(),
            uptime_ms: 0,
            player: None,
            studio_version: None,
            missing: Vec::new(),
            paused: false,
        }
    }

    #[test]
    fn the_first_word_says_what_is_awaited() {
        let anywhere = Target::default();
        assert_eq!(
            first_word(&[], &anywhere).as_deref(),
            Some("waiting for Studio to connect (up to 3 s)…")
        );
        let back = [session("A-edit", "reconnecting"), session("B-edit", "connected")];
        assert_eq!(
            first_word(&back, &anywhere).as_deref(),
            Some("waiting for Studio to reconnect (up to 10 s)…")
        );
        let b = Target {
            session_id: Some("B-edit".into()),
            ..Target::default()
        };
        assert_eq!(first_word(&back, &b), None, "B is there: Studio is working on it");
    }
}

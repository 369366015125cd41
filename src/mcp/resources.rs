//! MCP resources: what an agent reads rather than calls.
//!
//! - `studio://guide`: the cross-tool guidance (sessions, contexts, paths, writes and undo,
//!   playtests) in one place, so that tool descriptions and the server's instructions do
//!   not each repeat it: the catalogue, read into every conversation, stays lean.
//! - `studio://sessions`: the `sessions` command's result, live; subscribable, updated
//!   when a plugin connects or disconnects or a session's run state changes.
//! - `studio://logs/{sessionId}` (a template): that session's output as `logs` reads it;
//!   subscribable, updated when the session prints.
//!
//! Reading one runs the command it mirrors through the same table as the tools, so a
//! resource never says anything a tool would not.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{Resource, ResourceTemplate, ResourceUpdatedNotificationParam};
use rmcp::{ErrorData as McpError, Peer, RoleServer};
use tokio_util::sync::CancellationToken;

use super::results::RESULTS_PREFIX;
use crate::bridge::registry::SESSIONS_EVENT;
use crate::bridge::{Bridge, Target};

pub const GUIDE_URI: &str = "studio://guide";
pub const SESSIONS_URI: &str = "studio://sessions";
const LOGS_PREFIX: &str = "studio://logs/";
const LOGS_TEMPLATE: &str = "studio://logs/{sessionId}";
const RESULTS_TEMPLATE: &str = "studio://results/{id}{?page}";

/// The guide's text: the one place for guidance that spans tools.
pub const GUIDE: &str = include_str!("guide.md");

/// After an update notification, further changes within this long are told in one
/// notification: a session printing in a loop must not flood the client with updates
/// (each only says "read me again").
const UPDATE_COALESCE: Duration = Duration::from_millis(200);

/// What a `studio://` URI names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    Guide,
    Sessions,
    Logs(String),
    /// A page (from 1; the first when not given) of a cut result's rest.
    Result {
        id: String,
        page: usize,
    },
}

/// The resources `resources/list` shows.
pub fn list() -> Vec<Resource> {
    let guide = Resource::new(GUIDE_URI, "guide")
        .with_title("How the studio tools work together")
        .with_description("Sessions, contexts, paths, writes and undo, playtests: read before a first write.")
        .with_mime_type("text/markdown")
        .with_size(GUIDE.len() as u64);
    let sessions = Resource::new(SESSIONS_URI, "sessions")
        .with_description("Connected Studio sessions, as studio_sessions lists them. Subscribable.")
        .with_mime_type("application/json");
    vec![guide, sessions]
}

/// The templates `resources/templates/list` shows.
pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(LOGS_TEMPLATE, "logs")
            .with_description("A session's output, as studio_logs reads it. Subscribable: updated when it prints.")
            .with_mime_type("application/json"),
        ResourceTemplate::new(RESULTS_TEMPLATE, "result pages")
            .with_description("The rest of a cut result, linked from it; kept 10 minutes.")
            .with_mime_type("application/json"),
    ]
}

/// The resource a URI names, or the error that says which URIs exist.
pub fn parse(uri: &str) -> Result<Named, McpError> {
    match uri {
        GUIDE_URI => return Ok(Named::Guide),
        SESSIONS_URI => return Ok(Named::Sessions),
        _ => {}
    }
    if let Some(session_id) = uri.strip_prefix(LOGS_PREFIX)
        && !session_id.is_empty()
        && !session_id.contains(['/', '?', '#'])
    {
        return Ok(Named::Logs(session_id.to_owned()));
    }
    if let Some(rest) = uri.strip_prefix(RESULTS_PREFIX) {
        let (id, query) = rest.split_once('?').unwrap_or((rest, ""));
        if !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric()) {
            let page = match query {
                "" => 1,
                query => query
                    .strip_prefix("page=")
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| {
                        McpError::invalid_params(
                            format!("{uri}: `page` must be a whole number from 1, as in {RESULTS_PREFIX}{id}?page=2."),
                            None,
                        )
                    })?,
            };
            return Ok(Named::Result {
                id: id.to_owned(),
                page,
            });
        }
    }
    Err(not_found(uri))
}

pub fn not_found(uri: &str) -> McpError {
    McpError::resource_not_found(
        format!(
            "No resource {uri:?}. Resources: {GUIDE_URI}, {SESSIONS_URI}, {LOGS_TEMPLATE} (a sessionId from studio_sessions), and the {RESULTS_TEMPLATE} a cut result links to."
        ),
        None,
    )
}

/// One MCP connection's subscriptions: each a task that tells the client when its
/// resource changed, until it unsubscribes or goes away.
#[derive(Default)]
pub struct Subscriptions {
    /// Each URI's notifier: its number (told apart from a later one of the same URI) and
    /// the token that stops it. A notifier whose feed ended takes itself out, so that the
    /// next subscription to its URI starts a new one.
    active: Arc<Mutex<HashMap<String, (u64, CancellationToken)>>>,
    next: std::sync::atomic::AtomicU64,
}

impl Subscriptions {
    pub fn new() -> Arc<Subscriptions> {
        Arc::new(Subscriptions::default())
    }

    /// Subscribes `peer` to `uri`'s updates. Subscribing again to the same URI is a no-op.
    pub async fn subscribe(
        &self,
        uri: String,
        named: Named,
        bridge: &Bridge,
        peer: Peer<RoleServer>,
    ) -> Result<(), McpError> {
        let (target, events) = match named {
            Named::Guide | Named::Result { .. } => {
                return Err(McpError::invalid_params(
                    format!("{uri} never changes while it is kept; read it, no subscription needed."),
                    None,
                ));
            }
            Named::Sessions => (Target::default(), vec![SESSIONS_EVENT.to_owned(), "state".to_owned()]),
            Named::Logs(session_id) => (
                Target {
                    session_id: Some(session_id),
                    ..Target::default()
                },
                vec!["log".to_owned()],
            ),
        };
        if lock(&self.active).contains_key(&uri) {
            return Ok(());
        }
        let mut feed = bridge
            .subscribe(&target, &events)
            .await
            .map_err(|e| McpError::internal_error(format!("Could not subscribe to {uri}: {}", e.message), None))?;
        let cancel = CancellationToken::new();
        let number = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        {
            // A second subscription to the URI that raced this one past the check above
            // (its own `subscribe` awaited meanwhile) keeps the first notifier: this feed is
            // dropped, and no notifier is left that no unsubscribe could stop.
            let mut active = lock(&self.active);
            if active.contains_key(&uri) {
                return Ok(());
            }
            active.insert(uri.clone(), (number, cancel.clone()));
        }
        let active = Arc::clone(&self.active);
        let uri_of_task = uri.clone();
        let notify = async move {
            loop {
                // A change (a gap, events lost in a flood or a failover, may hide one: it
                // counts too)…
                let event = tokio::select! {
                    () = cancel.cancelled() => return,
                    event = feed.recv() => event,
                };
                if event.is_none() {
                    return;
                }
                // …and the rest of its burst, told in one notification.
                let quiet = tokio::time::sleep(UPDATE_COALESCE);
                tokio::pin!(quiet);
                let mut ended = false;
                while !ended {
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        () = &mut quiet => break,
                        event = feed.recv() => ended = event.is_none(),
                    }
                }
                if peer
                    .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri.clone()))
                    .await
                    .is_err()
                    || ended
                {
                    return;
                }
            }
        };
        let uri = uri_of_task;
        tokio::spawn(async move {
            notify.await;
            // Its feed ended (or the client went): out of the map, unless a new one of the
            // same URI took its place meanwhile.
            let mut active = lock(&active);
            if active.get(&uri).is_some_and(|(n, _)| *n == number) {
                active.remove(&uri);
            }
        });
        Ok(())
    }

    pub fn unsubscribe(&self, uri: &str) {
        if let Some((_, cancel)) = lock(&self.active).remove(uri) {
            cancel.cancel();
        }
    }
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        for (_, cancel) in lock(&self.active).values() {
            cancel.cancel();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_parse_to_what_they_name() {
        assert_eq!(parse("studio://guide").unwrap(), Named::Guide);
        assert_eq!(parse("studio://sessions").unwrap(), Named::Sessions);
        assert_eq!(parse("studio://logs/A-edit").unwrap(), Named::Logs("A-edit".into()));
        assert_eq!(
            parse("studio://results/ab12").unwrap(),
            Named::Result {
                id: "ab12".into(),
                page: 1
            }
        );
        assert_eq!(
            parse("studio://results/ab12?page=3").unwrap(),
            Named::Result {
                id: "ab12".into(),
                page: 3
            }
        );
        for bad_page in ["?page=0", "?page=x", "?p=1"] {
            let error = parse(&format!("studio://results/ab12{bad_page}")).unwrap_err();
            assert!(error.message.contains("`page`"), "{bad_page}: {}", error.message);
        }
        for bad in [
            "studio://logs/",
            "studio://logs/a/b",
            "studio://nope",
            "file:///etc/passwd",
        ] {
            let error = parse(bad).unwrap_err();
            assert!(error.message.contains("studio://guide"), "{bad}: {}", error.message);
        }
    }

    #[test]
    fn the_guide_covers_what_the_tools_no_longer_repeat() {
        for topic in [
            "## Sessions",
            "## Contexts",
            "## Paths",
            "## Writes and undo",
            "## Playtests",
        ] {
            assert!(GUIDE.contains(topic), "{topic}");
        }
    }
}

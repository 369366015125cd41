//! The session registry: every plugin connection the host knows, the calls in flight on
//! each, and the waiting rules of PROTOCOL.md (Sessions): the 10 s reconnect grace, the
//! 3 s startup grace, and a deadline on everything.
//!
//! Locks here are `std::sync::Mutex` and are never held across an `.await`: every
//! critical section is a few map operations. Waiters sleep on a `watch` channel that is
//! bumped on every change to the set of sessions.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::protocol::raw::RawValue;
use serde::Serialize;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use super::calls::{Refused, lock};
use super::link::{Link, MAX_IN_FLIGHT};
use super::resolve::{Candidate, Choice, Target, resolve};
use super::{Call, CallHooks, Reply, SessionEvent};
use crate::protocol::messages::{Hello, HostMessage};
use crate::protocol::{Context, ErrorCode, Ran, ToolError};

/// The event published on the host's bus whenever the session list changes (a plugin
/// connected, reconnected, went away or was removed); `data.sessions` is the new count.
pub const SESSIONS_EVENT: &str = "sessions";

/// How long a dropped session stays `reconnecting` before it is removed.
pub const RECONNECT_GRACE: Duration = Duration::from_secs(10);
/// How long after becoming host a call that finds no sessions waits for a first `hello`.
pub const STARTUP_GRACE: Duration = Duration::from_secs(3);
/// How long after an instance's session says hello to a new host its other DataModels
/// (a playtest's server and clients) may still be on their way: every plugin retries on
/// the same backoff, at most 1 s +20 %. A provisional Edit verdict is final after this,
/// or after the startup grace, whichever comes first.
const SIBLING_WINDOW: Duration = Duration::from_millis(1300);

/// A session as `studio_sessions` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub session_id: String,
    pub instance_id: String,
    pub context: Context,
    /// The real run state: Edit, Play, Run, Paused, Server or Client.
    pub state: String,
    /// `connected`, or `reconnecting` within its 10 s grace.
    pub status: String,
    pub place_name: String,
    pub place_id: i64,
    pub game_id: i64,
    pub plugin_version: String,
    pub uptime_ms: u64,
    /// A Play client's player (its LocalPlayer's Name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub player: Option<String>,
}

struct Session {
    hello: Hello,
    connected_at: Instant,
    /// `None` while reconnecting.
    link: Option<Arc<Link>>,
    /// Bumped on every (re)connection, so a stale connection's cleanup cannot touch a
    /// newer one.
    generation: u64,
    disconnected_at: Option<Instant>,
}

pub struct Registry {
    sessions: Mutex<Vec<Session>>,
    changed: watch::Sender<u64>,
    events: broadcast::Sender<SessionEvent>,
    started: Instant,
    next_request_id: AtomicU64,
    next_generation: AtomicU64,
    pub port: u16,
    pub max_message_bytes: usize,
    reconnect_grace: Duration,
    startup_grace: Duration,
}

impl Registry {
    pub fn new(port: u16, max_message_bytes: usize) -> Arc<Registry> {
        Arc::new(Registry {
            sessions: Mutex::new(Vec::new()),
            changed: watch::Sender::new(0),
            events: broadcast::Sender::new(1024),
            started: Instant::now(),
            next_request_id: AtomicU64::new(first_request_id()),
            next_generation: AtomicU64::new(1),
            port,
            max_message_bytes,
            reconnect_grace: RECONNECT_GRACE,
            startup_grace: STARTUP_GRACE,
        })
    }

    /// The session list changed: wakes the calls waiting for a session, and tells
    /// subscribers to `sessions` events (the MCP resource `studio://sessions`, here or
    /// through a peer) to read it again.
    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
        self.publish_event(SessionEvent {
            session_id: String::new(),
            event: SESSIONS_EVENT.to_owned(),
            data: serde_json::json!({ "sessions": self.session_count() }),
        });
    }

    pub fn session_count(&self) -> usize {
        lock(&self.sessions).len()
    }

    /// The session list, waiting (until `deadline` at most) through the startup grace
    /// when it is empty: an agent's first `studio_sessions`, sent the moment its MCP server
    /// starts, must not report "no Studio" while the plugins are still reconnecting. Within
    /// the grace, a list whose edit session reports a playtest also waits one
    /// [`SIBLING_WINDOW`] after the newest hello, as a call routed there does: the test's
    /// server and clients reconnect on the same backoff and must not be left out.
    pub async fn sessions_after_startup(&self, deadline: tokio::time::Instant) -> Vec<SessionInfo> {
        let grace_end = tokio::time::Instant::from_std(self.started + self.startup_grace);
        let mut changes = self.changed.subscribe();
        loop {
            changes.mark_unchanged();
            let until = match self.siblings_settle() {
                Settled::Empty => grace_end,
                Settled::At(instant) => tokio::time::Instant::from_std(instant).min(grace_end),
                Settled::Now => tokio::time::Instant::now(),
            }
            .min(deadline);
            let sessions = self.sessions();
            if tokio::time::Instant::now() >= until {
                return sessions;
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return sessions },
                () = tokio::time::sleep_until(until) => {}
            }
        }
    }

    /// When the session list is complete as far as hellos can tell.
    fn siblings_settle(&self) -> Settled {
        let sessions = lock(&self.sessions);
        if sessions.is_empty() {
            return Settled::Empty;
        }
        let in_a_test = sessions
            .iter()
            .any(|s| s.hello.context == Context::Edit && super::resolve::IN_A_TEST.contains(&s.hello.state.as_str()));
        match sessions.iter().map(|s| s.connected_at).max() {
            Some(newest) if in_a_test => Settled::At(newest + SIBLING_WINDOW),
            _ => Settled::Now,
        }
    }

    pub fn sessions(&self) -> Vec<SessionInfo> {
        let now = Instant::now();
        lock(&self.sessions)
            .iter()
            .map(|s| SessionInfo {
                session_id: s.hello.session_id.clone(),
                instance_id: s.hello.instance_id.clone(),
                context: s.hello.context,
                state: s.hello.state.clone(),
                status: if s.link.is_some() { "connected" } else { "reconnecting" }.to_owned(),
                place_name: s.hello.place_name.clone(),
                place_id: s.hello.place_id,
                game_id: s.hello.game_id,
                plugin_version: s.hello.plugin_version.clone(),
                uptime_ms: u64::try_from(now.duration_since(s.connected_at).as_millis()).unwrap_or(u64::MAX),
                player: s.hello.player.clone(),
            })
            .collect()
    }

    pub fn subscribe_events(&self) -> broadcast::Receiver<SessionEvent> {
        self.events.subscribe()
    }

    pub fn publish_event(&self, event: SessionEvent) {
        let _ = self.events.send(event);
    }

    /// Registers a connection after its `hello`. A session id that is already connected
    /// is taken over: the old connection is closed with 4001 and its calls fail with
    /// `session_lost` (a half-open old socket must never lock a reconnecting plugin out).
    /// Returns the generation to hand back to [`Registry::disconnect`].
    pub fn connect(&self, hello: Hello, link: Arc<Link>) -> u64 {
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        let replaced = {
            let mut sessions = lock(&self.sessions);
            match sessions.iter_mut().find(|s| s.hello.session_id == hello.session_id) {
                Some(existing) => {
                    existing.hello = hello;
                    existing.generation = generation;
                    existing.disconnected_at = None;
                    existing.link.replace(link)
                }
                None => {
                    sessions.push(Session {
                        hello,
                        connected_at: Instant::now(),
                        link: Some(link),
                        generation,
                        disconnected_at: None,
                    });
                    None
                }
            }
        };
        if let Some(old) = replaced {
            old.fail_all(&ToolError::new(
                ErrorCode::SessionLost,
                "The Studio session reconnected while this call was in flight; it was not re-sent because it may already have run. Check its effect, then retry if needed.",
            ));
            old.close(4001, "replaced by a newer connection of the same session");
        }
        self.bump();
        generation
    }

    /// Removes a session at once (unless a newer connection took it over): its DataModel
    /// is gone (a multiplexed session's `bye`), so there is nothing to wait for.
    pub fn remove(&self, session_id: &str, generation: u64) {
        let removed = {
            let mut sessions = lock(&self.sessions);
            let before = sessions.len();
            sessions.retain(|s| !(s.hello.session_id == session_id && s.generation == generation));
            sessions.len() != before
        };
        if removed {
            self.bump();
        }
    }

    /// Marks a session `reconnecting` when its connection ends (unless a newer connection
    /// already took over), and removes it if it has not come back after the grace period.
    pub fn disconnect(self: &Arc<Self>, session_id: &str, generation: u64) {
        let mut still_current = false;
        {
            let mut sessions = lock(&self.sessions);
            if let Some(session) = sessions.iter_mut().find(|s| s.hello.session_id == session_id)
                && session.generation == generation
            {
                session.link = None;
                session.disconnected_at = Some(Instant::now());
                still_current = true;
            }
        }
        if !still_current {
            return;
        }
        self.bump();
        let registry = Arc::clone(self);
        let session_id = session_id.to_owned();
        tokio::spawn(async move {
            tokio::time::sleep(registry.reconnect_grace).await;
            let removed = {
                let mut sessions = lock(&registry.sessions);
                let before = sessions.len();
                sessions
                    .retain(|s| !(s.hello.session_id == session_id && s.generation == generation && s.link.is_none()));
                sessions.len() != before
            };
            if removed {
                tracing::info!(session = %session_id, "session removed after its reconnect grace");
                registry.bump();
            }
        });
    }

    /// Records a plugin's `state` event.
    pub fn set_state(&self, session_id: &str, state: String) {
        let mut sessions = lock(&self.sessions);
        if let Some(session) = sessions.iter_mut().find(|s| s.hello.session_id == session_id) {
            session.hello.state = state;
        }
    }

    /// Routes one call to one plugin and waits for its answer, within `call.timeout`.
    ///
    /// A call sent to the edit session only because no playtest was known (the caller
    /// named no context) is marked `defaulted`; an edit plugin that sees a test starting
    /// answers it `context_changed` without running it, and the call is resolved again
    /// (now to the test's server, which it waits for): an `exec` meant for the game never
    /// lands in the edit DataModel, whose changes persist in the place.
    pub async fn call(&self, call: Call, hooks: CallHooks) -> Result<Reply, ToolError> {
        let deadline = tokio::time::Instant::now() + call.timeout;
        let mut test_starting = false;
        loop {
            let (link, ran, defaulted) = self
                .wait_for_link(&call, deadline, &hooks.cancel, test_starting)
                .await?;
            match self.send_and_wait(&call, &hooks, deadline, link, &ran, defaulted).await {
                Err(error) if defaulted && error.code == ErrorCode::ContextChanged => {
                    tracing::debug!(session = %ran.session_id, action = %call.action, "a playtest is starting: resolving again");
                    test_starting = true;
                }
                outcome => return outcome.map(|value| Reply { value, ran: Some(ran) }),
            }
        }
    }

    /// Sends one request on `link` and waits for its answer, the deadline, or a cancel.
    async fn send_and_wait(
        &self,
        call: &Call,
        hooks: &CallHooks,
        deadline: tokio::time::Instant,
        link: Arc<Link>,
        ran: &Ran,
        defaulted: bool,
    ) -> Result<RawValue, ToolError> {
        let id = self.next_request_id.fetch_add(1, Ordering::Relaxed);
        let reply_rx = match link.calls.register(id, hooks.progress.clone()) {
            Ok(answer) => answer,
            Err(Refused::Closed) => return Err(lost_before_send()),
            Err(Refused::Full) => {
                return Err(ToolError::new(
                    ErrorCode::Busy,
                    format!(
                        "Studio session {} already has {MAX_IN_FLIGHT} calls in flight, the most one session takes. Wait for some to finish, then retry.",
                        ran.session_id
                    ),
                ));
            }
        };
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        let plugin_timeout = call.plugin_timeout.unwrap_or(remaining).min(remaining);
        let sent = link.send(&HostMessage::Request {
            id,
            action: &call.action,
            args: &call.args,
            timeout_ms: u64::try_from(plugin_timeout.as_millis()).unwrap_or(u64::MAX),
            session: link.channel.as_deref(),
            defaulted,
            operation_id: call.operation_id.as_deref(),
        });
        if !sent {
            link.calls.forget(id);
            return Err(lost_before_send());
        }
        tokio::select! {
            // The link let the call go without an answer: it was sent, so it may have run.
            reply = reply_rx => reply.unwrap_or_else(|_| Err(lost_after_send())),
            () = tokio::time::sleep_until(deadline) => {
                link.calls.forget(id);
                link.send(&HostMessage::Cancel {
                    id,
                    session: link.channel.as_deref(),
                });
                Err(ToolError::new(
                    ErrorCode::Timeout,
                    format!(
                        "`{}` got no answer from Studio within {} ms. The plugin was asked to stop it; Studio may be busy or paused at a breakpoint. Check studio_state, then retry (exec: pass a larger timeoutMs).",
                        call.action,
                        call.timeout.as_millis()
                    ),
                ))
            }
            () = hooks.cancel.cancelled() => {
                link.calls.forget(id);
                link.send(&HostMessage::Cancel {
                    id,
                    session: link.channel.as_deref(),
                });
                Err(cancelled())
            }
        }
    }

    /// Resolves the call's target to a connected plugin, waiting (within the deadline)
    /// through a reconnect grace, the startup grace, or a playtest's DataModel that has
    /// not said hello yet. With `test_starting` (the edit plugin said a test is starting),
    /// the edit session is no longer a fallback: the call waits for its own context.
    async fn wait_for_link(
        &self,
        call: &Call,
        deadline: tokio::time::Instant,
        cancel: &CancellationToken,
        test_starting: bool,
    ) -> Result<(Arc<Link>, Ran, bool), ToolError> {
        let mut changes = self.changed.subscribe();
        let grace_end = tokio::time::Instant::from_std(self.started + self.startup_grace);
        loop {
            changes.mark_unchanged();
            let in_grace = tokio::time::Instant::now() < grace_end;
            let waiting_for = match self.try_resolve(&call.target, call.default_context) {
                Ok(Found::Link(link, ran)) => {
                    self.check_served(&ran, &call.action)?;
                    return Ok((link, ran, false));
                }
                Ok(Found::Reconnecting) => Waiting::Reconnect,
                Ok(Found::Provisional(_, settled)) if in_grace && tokio::time::Instant::now() < settled => {
                    Waiting::Siblings(settled)
                }
                Ok(Found::Provisional(Ok(_), _)) if test_starting => Waiting::PlayContext(call.default_context),
                Ok(Found::Provisional(outcome, _)) => match outcome {
                    // The edit session, for want of a known playtest: `defaulted` when the
                    // caller's context was defaulted to something else.
                    Ok(Some((link, ran))) => {
                        self.check_served(&ran, &call.action)?;
                        let defaulted = call.target.context.is_none() && call.default_context != Context::Edit;
                        return Ok((link, ran, defaulted));
                    }
                    Ok(None) => Waiting::Reconnect,
                    Err(error) => return Err(self.with_session_list(error)),
                },
                Ok(Found::Await(context)) => Waiting::PlayContext(context),
                // A plugin may still be reconnecting to this new host.
                Err(error) if in_grace && matches!(error.code, ErrorCode::NoSessions | ErrorCode::SessionNotFound) => {
                    Waiting::StartupGrace
                }
                Err(error) => return Err(self.with_session_list(error)),
            };
            let wake = match waiting_for {
                Waiting::StartupGrace => deadline.min(grace_end),
                Waiting::Siblings(settled) => deadline.min(grace_end).min(settled),
                Waiting::Reconnect | Waiting::PlayContext(_) => deadline,
            };
            tokio::select! {
                changed = changes.changed() => { if changed.is_err() { return Err(lost_before_send()); } }
                () = tokio::time::sleep_until(wake) => {
                    if wake >= deadline {
                        return Err(waiting_for.timeout(call));
                    }
                }
                () = cancel.cancelled() => return Err(super::undelivered(cancelled())),
            }
        }
    }

    /// Refuses, before anything is sent, an action the session's plugin did not announce
    /// in its `hello`: a plugin installed by an older studio-bridge lacks the newer
    /// commands, and the fix is to update it, not to wait for its `unknown_action`.
    fn check_served(&self, ran: &Ran, action: &str) -> Result<(), ToolError> {
        let sessions = lock(&self.sessions);
        let Some(session) = sessions.iter().find(|s| s.hello.session_id == ran.session_id) else {
            return Ok(());
        };
        let actions = &session.hello.actions;
        if actions.is_empty() || actions.iter().any(|a| a == action) {
            return Ok(());
        }
        Err(ToolError::new(
            ErrorCode::UnknownAction,
            format!(
                "The studio-bridge plugin in this Studio (version {}) does not serve `{action}`: it was installed by an older studio-bridge. Run `studio-bridge install-plugin` (or restart your agent's studio-bridge, which installs it) and restart Studio.",
                session.hello.plugin_version
            ),
        ))
    }

    fn try_resolve(&self, target: &Target, default_context: Context) -> Result<Found, ToolError> {
        let sessions = lock(&self.sessions);
        let candidates: Vec<Candidate<'_>> = sessions
            .iter()
            .map(|s| Candidate {
                session_id: &s.hello.session_id,
                instance_id: &s.hello.instance_id,
                context: s.hello.context,
                state: &s.hello.state,
            })
            .collect();
        let link_of = |index: usize| {
            let session = &sessions[index];
            session.link.clone().map(|link| {
                let ran = Ran {
                    session_id: session.hello.session_id.clone(),
                    context: session.hello.context,
                };
                (link, ran)
            })
        };
        Ok(match resolve(&candidates, target, default_context)? {
            Choice::Session(index) => match link_of(index) {
                Some((link, ran)) => Found::Link(link, ran),
                None => Found::Reconnecting,
            },
            Choice::Provisional(outcome) => {
                // The newest hello of the instance the verdict is about.
                let instance = target
                    .instance_id
                    .as_deref()
                    .or_else(|| {
                        let id = target.session_id.as_deref()?;
                        sessions
                            .iter()
                            .find(|s| s.hello.session_id == id)
                            .map(|s| s.hello.instance_id.as_str())
                    })
                    .or_else(|| sessions.first().map(|s| s.hello.instance_id.as_str()));
                let newest = sessions
                    .iter()
                    .filter(|s| Some(s.hello.instance_id.as_str()) == instance)
                    .map(|s| s.connected_at)
                    .max()
                    .unwrap_or_else(Instant::now);
                let settled = tokio::time::Instant::from_std(newest + SIBLING_WINDOW);
                Found::Provisional(outcome.map(link_of), settled)
            }
            Choice::Await(context) => Found::Await(context),
        })
    }

    fn with_session_list(&self, error: ToolError) -> ToolError {
        match error.code {
            ErrorCode::SessionNotFound | ErrorCode::AmbiguousInstance | ErrorCode::ContextUnavailable => {
                let sessions = serde_json::to_value(self.sessions()).unwrap_or_default();
                error.with_details(serde_json::json!({ "sessions": sessions }))
            }
            _ => error,
        }
    }

    #[cfg(test)]
    fn with_graces(port: u16, reconnect: Duration, startup: Duration) -> Arc<Registry> {
        let mut registry = Registry::new(port, 1 << 20);
        let inner = Arc::get_mut(&mut registry).expect("fresh registry");
        inner.reconnect_grace = reconnect;
        inner.startup_grace = startup;
        registry
    }
}

/// When [`Registry::sessions_after_startup`] may answer.
enum Settled {
    /// No session yet: at the end of the startup grace.
    Empty,
    /// A playtest's sessions may still be on their way until then.
    At(Instant),
    Now,
}

/// What resolution found, with the links looked up.
enum Found {
    Link(Arc<Link>, Ran),
    /// The chosen session is within its reconnect grace.
    Reconnecting,
    /// See [`Choice::Provisional`]; `Ok(None)` when that session is reconnecting. The
    /// instant is when the verdict is final even within the startup grace: one
    /// [`SIBLING_WINDOW`] after the instance's newest hello.
    Provisional(Result<Option<(Arc<Link>, Ran)>, ToolError>, tokio::time::Instant),
    Await(Context),
}

/// What a call that cannot be routed yet waits for.
enum Waiting {
    Reconnect,
    StartupGrace,
    /// A playtest's other DataModels may still be reconnecting, until then.
    Siblings(tokio::time::Instant),
    PlayContext(Context),
}

impl Waiting {
    fn timeout(&self, call: &Call) -> ToolError {
        let ms = call.timeout.as_millis();
        let action = &call.action;
        let message = match self {
            Waiting::Reconnect => format!(
                "No Studio session could take `{action}` within {ms} ms (waiting for a reconnect). Check that Studio is open and the plugin is enabled, then retry."
            ),
            Waiting::StartupGrace | Waiting::Siblings(_) => format!(
                "No Studio session could take `{action}` within {ms} ms (waiting for a first plugin). Check that Studio is open and the plugin is enabled, then retry."
            ),
            Waiting::PlayContext(context) => format!(
                "Studio reports a running playtest, but its {context} DataModel did not connect within {ms} ms, so `{action}` was not run (never in the edit DataModel instead). Check studio_sessions, retry, or pass context: \"edit\" to run it in the edit DataModel on purpose."
            ),
        };
        // No session took it: nothing was sent.
        super::undelivered(ToolError::new(ErrorCode::Timeout, message))
    }
}

/// Request ids are never reused by any host (PROTOCOL.md, Host → plugin): each host
/// starts from a random base, so a reply meant for an old host's call cannot be taken for
/// a new host's call of the same number. Below 2^52, so a Luau number holds every id
/// exactly; the base is below 2^51, which leaves 2^51 ids for the host's lifetime.
fn first_request_id() -> u64 {
    let mut bytes = [0u8; 8];
    // Without OS randomness the clock still makes two hosts' bases differ.
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes = (nanos as u64).to_le_bytes();
    }
    (u64::from_le_bytes(bytes) & ((1 << 51) - 1)).max(1)
}

fn lost_before_send() -> ToolError {
    super::undelivered(ToolError::new(
        ErrorCode::SessionLost,
        "The Studio session disconnected before the call could be delivered; nothing ran. Call studio_sessions and retry.",
    ))
}

fn lost_after_send() -> ToolError {
    ToolError::new(
        ErrorCode::SessionLost,
        "The Studio session disconnected while the call was in flight. It was not re-sent (it may have run). Check its effect with a read-only tool, then retry if needed.",
    )
}

fn cancelled() -> ToolError {
    ToolError::new(
        ErrorCode::Cancelled,
        "The call was cancelled by the caller; Studio was asked to stop it.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmpv::Value as Msgpack;
    use tokio::sync::mpsc;

    use crate::bridge::writer::Outbound;
    use crate::protocol::messages::{Frame, Framing};

    fn hello(session_id: &str) -> Hello {
        Hello {
            protocol: 1,
            plugin_version: "test".into(),
            session_id: session_id.into(),
            instance_id: "A".into(),
            context: Context::Edit,
            place_name: "Place".into(),
            place_id: 0,
            game_id: 0,
            state: "Edit".into(),
            actions: vec![],
            nonce: None,
            player: None,
        }
    }

    fn call(timeout: Duration) -> Call {
        Call {
            target: Target::default(),
            action: "state".into(),
            args: Msgpack::Map(vec![]),
            default_context: Context::Edit,
            timeout,
            plugin_timeout: None,
            operation_id: None,
        }
    }

    #[test]
    fn request_ids_start_at_a_random_base_below_2_pow_52() {
        let bases: Vec<u64> = (0..4).map(|_| first_request_id()).collect();
        for base in &bases {
            assert!((1..1 << 51).contains(base), "{base}");
        }
        let mut distinct = bases.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            bases.len(),
            "two hosts must not start at the same id: {bases:?}"
        );
    }

    #[tokio::test]
    async fn a_dropped_connection_fails_its_calls_at_once_with_session_lost() {
        let registry = Registry::with_graces(0, Duration::from_secs(10), Duration::ZERO);
        let (tx, mut rx) = mpsc::unbounded_channel();
        let link = Link::new(Framing::Binary, tx);
        let generation = registry.connect(hello("s1"), Arc::clone(&link));
        let registry2 = Arc::clone(&registry);
        let pending = tokio::spawn(async move {
            registry2
                .call(call(Duration::from_secs(30)), CallHooks::default())
                .await
        });
        // Wait for the request to be written, then drop the connection.
        assert!(matches!(rx.recv().await, Some(Outbound::Frame(_))));
        link.fail_all(&ToolError::new(ErrorCode::SessionLost, "gone"));
        registry.disconnect("s1", generation);
        let result = tokio::time::timeout(Duration::from_secs(1), pending)
            .await
            .expect("fails fast")
            .unwrap();
        assert_eq!(result.unwrap_err().code, ErrorCode::SessionLost);
        assert_eq!(registry.sessions()[0].status, "reconnecting");
    }

    #[tokio::test]
    async fn a_session_takes_max_in_flight_calls_then_answers_busy_and_other_sessions_keep_room() {
        let registry = Registry::with_graces(0, Duration::from_secs(10), Duration::ZERO);
        let (tx, mut flooded) = mpsc::unbounded_channel();
        registry.connect(hello("s1"), Link::new(Framing::Binary, tx));
        let (tx, mut quiet_rx) = mpsc::unbounded_channel();
        let quiet = Link::new(Framing::Binary, tx);
        let mut quiet_hello = hello("s2");
        quiet_hello.instance_id = "B".into();
        registry.connect(quiet_hello, Arc::clone(&quiet));
        let mut to_s1 = call(Duration::from_secs(30));
        to_s1.target.session_id = Some("s1".into());
        let calls: Vec<_> = (0..MAX_IN_FLIGHT + 44)
            .map(|_| {
                let registry = Arc::clone(&registry);
                let call = to_s1.clone();
                tokio::spawn(async move { registry.call(call, CallHooks::default()).await })
            })
            .collect();
        // The first MAX_IN_FLIGHT reach the plugin; the rest are answered `busy` at once.
        for _ in 0..MAX_IN_FLIGHT {
            assert!(matches!(flooded.recv().await, Some(Outbound::Frame(_))));
        }
        let mut busy = 0;
        let mut waiting = Vec::new();
        for call in calls {
            if call.is_finished() {
                let outcome = call.await.unwrap();
                assert_eq!(outcome.unwrap_err().code, ErrorCode::Busy);
                busy += 1;
            } else {
                waiting.push(call);
            }
        }
        assert_eq!((busy, waiting.len()), (44, MAX_IN_FLIGHT));
        assert!(flooded.try_recv().is_err(), "nothing beyond the cap was sent");
        // Another session still takes calls.
        let mut to_s2 = call(Duration::from_secs(30));
        to_s2.target.session_id = Some("s2".into());
        let registry2 = Arc::clone(&registry);
        let answer = tokio::spawn(async move { registry2.call(to_s2, CallHooks::default()).await });
        let Some(Outbound::Frame(Frame::Binary(bytes))) = quiet_rx.recv().await else {
            panic!("no request on the quiet session")
        };
        let id = rmpv::decode::read_value(&mut &bytes[..]).unwrap()["id"]
            .as_u64()
            .unwrap();
        assert!(quiet.resolve(id, Ok(RawValue::nil())));
        assert!(answer.await.unwrap().is_ok());
        for call in waiting {
            call.abort();
        }
    }

    #[tokio::test]
    async fn a_call_to_a_reconnecting_session_waits_for_its_hello() {
        let registry = Registry::with_graces(0, Duration::from_secs(10), Duration::ZERO);
        let (tx, _rx) = mpsc::unbounded_channel();
        let generation = registry.connect(hello("s1"), Link::new(Framing::Binary, tx));
        registry.disconnect("s1", generation);
        let registry2 = Arc::clone(&registry);
        let pending =
            tokio::spawn(async move { registry2.call(call(Duration::from_secs(5)), CallHooks::default()).await });
        tokio::task::yield_now().await;
        let (tx, mut rx) = mpsc::unbounded_channel();
        let link = Link::new(Framing::Binary, tx);
        registry.connect(hello("s1"), Arc::clone(&link));
        let Some(Outbound::Frame(Frame::Binary(bytes))) = rx.recv().await else {
            panic!("no request")
        };
        let request = rmpv::decode::read_value(&mut &bytes[..]).unwrap();
        let id = request["id"].as_u64().unwrap();
        assert!(link.resolve(id, Ok(RawValue::encode(&Msgpack::from("done")))));
        let reply = pending.await.unwrap().unwrap();
        assert_eq!(reply.value.decode().unwrap(), Msgpack::from("done"));
        assert_eq!(
            reply.ran.map(|r| r.session_id),
            Some("s1".to_owned()),
            "the reply says where it ran"
        );
    }

    #[tokio::test]
    async fn a_session_that_does_not_come_back_is_removed_after_the_grace() {
        let registry = Registry::with_graces(0, Duration::from_millis(50), Duration::ZERO);
        let (tx, _rx) = mpsc::unbounded_channel();
        let generation = registry.connect(hello("s1"), Link::new(Framing::Binary, tx));
        registry.disconnect("s1", generation);
        let mut changes = registry.changed.subscribe();
        tokio::time::timeout(Duration::from_secs(2), async {
            while registry.session_count() > 0 {
                changes.changed().await.unwrap();
            }
        })
        .await
        .expect("removed within the grace");
    }

    #[tokio::test]
    async fn an_empty_session_list_waits_out_the_startup_grace_for_a_first_hello() {
        let registry = Registry::with_graces(0, Duration::from_secs(10), Duration::from_secs(3));
        let waiting = Arc::clone(&registry);
        let listed = tokio::spawn(async move {
            waiting
                .sessions_after_startup(tokio::time::Instant::now() + Duration::from_secs(2))
                .await
        });
        tokio::task::yield_now().await;
        let (tx, _rx) = mpsc::unbounded_channel();
        registry.connect(hello("s1"), Link::new(Framing::Binary, tx));
        let sessions = tokio::time::timeout(Duration::from_secs(1), listed)
            .await
            .expect("answers on hello")
            .unwrap();
        assert_eq!(sessions.len(), 1);
        // Past the grace, an empty list is answered at once.
        let registry = Registry::with_graces(0, Duration::from_secs(10), Duration::ZERO);
        let started = Instant::now();
        assert!(
            registry
                .sessions_after_startup(tokio::time::Instant::now() + Duration::from_secs(2))
                .await
                .is_empty()
        );
        assert!(started.elapsed() < Duration::from_millis(500));
    }

    #[tokio::test]
    async fn a_list_during_the_startup_grace_waits_for_a_reported_playtests_server() {
        let registry = Registry::with_graces(0, Duration::from_secs(10), Duration::from_secs(60));
        let waiting = Arc::clone(&registry);
        let listed = tokio::spawn(async move {
            waiting
                .sessions_after_startup(tokio::time::Instant::now() + Duration::from_secs(30))
                .await
        });
        tokio::task::yield_now().await;
        let (tx, _rx) = mpsc::unbounded_channel();
        let mut edit = hello("edit");
        edit.state = "Play".into();
        registry.connect(edit, Link::new(Framing::Binary, tx.clone()));
        // The test's server reconnects a moment later, within the sibling window.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut server = hello("server");
        server.context = Context::Server;
        server.state = "Server".into();
        registry.connect(server, Link::new(Framing::Binary, tx));
        let sessions = listed.await.unwrap();
        let contexts: Vec<Context> = sessions.iter().map(|s| s.context).collect();
        assert_eq!(contexts, [Context::Edit, Context::Server]);
    }

    #[tokio::test]
    async fn a_server_default_falls_to_edit_once_no_sibling_said_hello_within_the_window() {
        // A startup grace far longer than the call's deadline: only the sibling window
        // can let the call through to the edit session before the deadline.
        let registry = Registry::with_graces(0, Duration::from_secs(10), Duration::from_secs(60));
        let (tx, mut rx) = mpsc::unbounded_channel();
        let link = Link::new(Framing::Binary, tx);
        registry.connect(hello("s1"), Arc::clone(&link));
        let mut exec = call(Duration::from_secs(10));
        exec.default_context = Context::Server;
        let registry2 = Arc::clone(&registry);
        let pending = tokio::spawn(async move { registry2.call(exec, CallHooks::default()).await });
        let Some(Outbound::Frame(Frame::Binary(bytes))) = rx.recv().await else {
            panic!("no request")
        };
        let request = rmpv::decode::read_value(&mut &bytes[..]).unwrap();
        assert!(link.resolve(
            request["id"].as_u64().unwrap(),
            Ok(RawValue::encode(&Msgpack::from("ran")))
        ));
        let reply = pending.await.unwrap().expect("ran in edit, not timed out");
        assert_eq!(reply.ran.map(|r| r.context), Some(Context::Edit));
    }

    #[tokio::test]
    async fn an_action_the_plugin_did_not_announce_is_refused_before_it_is_sent() {
        let registry = Registry::with_graces(0, Duration::from_secs(10), Duration::ZERO);
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut old_plugin = hello("s1");
        old_plugin.actions = vec!["state".into(), "exec".into()];
        registry.connect(old_plugin, Link::new(Framing::Binary, tx));
        let mut edit = call(Duration::from_secs(5));
        edit.action = "script_edit".into();
        let err = registry.call(edit, CallHooks::default()).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::UnknownAction);
        assert!(err.message.contains("install-plugin"), "{}", err.message);
        assert!(rx.try_recv().is_err(), "nothing reached the plugin");
    }

    #[tokio::test]
    async fn no_plugin_fails_within_the_deadline() {
        let registry = Registry::with_graces(0, Duration::from_secs(10), Duration::from_secs(60));
        let started = Instant::now();
        let err = registry
            .call(call(Duration::from_millis(200)), CallHooks::default())
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::Timeout);
        assert!(started.elapsed() < Duration::from_secs(2));
        let registry = Registry::with_graces(0, Duration::from_secs(10), Duration::ZERO);
        let err = registry
            .call(call(Duration::from_secs(5)), CallHooks::default())
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::NoSessions);
    }
}

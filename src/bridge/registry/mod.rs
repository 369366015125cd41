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

use serde::Serialize;
use tokio::sync::{broadcast, watch};

use super::SessionEvent;
use super::calls::lock;
use super::link::Link;
use crate::protocol::messages::Hello;
use crate::protocol::{Context, ErrorCode, ToolError};

mod routing;

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
    /// The Studio's version (the engine's `version()`), when the plugin says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub studio_version: Option<String>,
    /// Engine members this Studio lacks (`Class.Member`): the tools that need them answer
    /// `unsupported`; `studio-bridge doctor --studio` says which.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// A person paused studio-bridge in this Studio's panel: calls are answered `paused`
    /// until they resume it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
}

/// The last plugin this host refused (unpaired, or of another protocol), so that a person
/// whose Studio "does not connect" is told why: `sessions` lists it, a call that finds no
/// session says it, and `doctor` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RefusedPlugin {
    /// The place its hello named.
    pub place_name: String,
    /// When, in Unix milliseconds.
    pub at_ms: u64,
    /// Why, as the plugin was told.
    pub why: String,
}

impl RefusedPlugin {
    /// What `no_sessions` and `sessions` say about it.
    pub fn note(&self) -> String {
        format!(
            "A Studio plugin (place {:?}) connected but was refused: {}; run `studio-bridge doctor`.",
            self.place_name, self.why
        )
    }
}

/// The sessions, and the last plugin refused, as a host lists them (to its peers too).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionList {
    pub sessions: Vec<SessionInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<RefusedPlugin>,
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
    refused: Mutex<Option<RefusedPlugin>>,
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
            refused: Mutex::new(None),
        })
    }

    /// Remembers a plugin this host refused (the last one only).
    pub fn note_refused(&self, place_name: &str, why: &str) {
        let at_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        *lock(&self.refused) = Some(RefusedPlugin {
            place_name: place_name.to_owned(),
            at_ms,
            why: why.to_owned(),
        });
    }

    /// The last plugin refused, if any.
    pub fn last_refused(&self) -> Option<RefusedPlugin> {
        lock(&self.refused).clone()
    }

    /// [`Registry::sessions_after_startup`], with the last plugin refused.
    pub async fn session_list_after_startup(&self, deadline: tokio::time::Instant) -> SessionList {
        let sessions = self.sessions_after_startup(deadline).await;
        SessionList {
            sessions,
            refused: self.last_refused(),
        }
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
                studio_version: s.hello.studio_version.clone(),
                missing: s.hello.missing.clone(),
                paused: s.hello.paused,
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
    pub fn connect(&self, mut hello: Hello, link: Arc<Link>) -> u64 {
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        let replaced = {
            let mut sessions = lock(&self.sessions);
            // The pause is the Studio's (its edit plugin's panel): a playtest session the
            // edit plugin carries is paused with its edit session.
            if hello.context != Context::Edit
                && sessions.iter().any(|s| {
                    s.hello.instance_id == hello.instance_id && s.hello.context == Context::Edit && s.hello.paused
                })
            {
                hello.paused = true;
            }
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

    /// A `paused` event: the Studio's pause, which applies to every session it carries
    /// (one panel a Studio), so every session of its instance says it.
    pub fn set_paused(&self, session_id: &str, paused: bool) {
        let mut sessions = lock(&self.sessions);
        let Some(instance) = sessions
            .iter()
            .find(|s| s.hello.session_id == session_id)
            .map(|s| s.hello.instance_id.clone())
        else {
            return;
        };
        for session in sessions.iter_mut().filter(|s| s.hello.instance_id == instance) {
            session.hello.paused = paused;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::link::MAX_IN_FLIGHT;
    use crate::bridge::resolve::Target;
    use crate::bridge::{Call, CallHooks};
    use crate::protocol::raw::RawValue;
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
            studio_version: None,
            missing: Vec::new(),
            paused: false,
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
            quiet: false,
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

    #[test]
    fn a_pause_covers_every_session_of_its_studio_and_no_other() {
        let registry = Registry::with_graces(0, Duration::from_secs(10), Duration::ZERO);
        let (tx, _rx) = mpsc::unbounded_channel();
        registry.connect(hello("A-edit"), Link::new(Framing::Binary, tx.clone()));
        let mut server = hello("A-server");
        server.context = Context::Server;
        registry.connect(server, Link::new(Framing::Binary, tx.clone()));
        let mut other = hello("B-edit");
        other.instance_id = "B".into();
        registry.connect(other, Link::new(Framing::Binary, tx));
        let paused = |registry: &Registry| -> Vec<(String, bool)> {
            let mut listed: Vec<(String, bool)> = registry
                .sessions()
                .into_iter()
                .map(|s| (s.session_id, s.paused))
                .collect();
            listed.sort();
            listed
        };
        registry.set_paused("A-edit", true);
        assert_eq!(
            paused(&registry),
            [
                ("A-edit".into(), true),
                ("A-server".into(), true),
                ("B-edit".into(), false)
            ]
        );
        // A playtest session that joins a paused Studio is paused with it.
        let (tx, _rx) = mpsc::unbounded_channel();
        let mut client = hello("A-client");
        client.context = Context::Client;
        registry.connect(client, Link::new(Framing::Binary, tx));
        assert!(paused(&registry).contains(&("A-client".into(), true)));
        registry.set_paused("A-edit", false);
        assert!(paused(&registry).iter().all(|(_, p)| !p));
        registry.set_paused("nobody", true);
        assert!(
            paused(&registry).iter().all(|(_, p)| !p),
            "an unknown session changes nothing"
        );
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

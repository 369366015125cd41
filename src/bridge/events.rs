//! Event streams (a Studio's `log` lines, pushed as they are printed) are lossy on
//! purpose, and never unbounded.
//!
//! A script that prints in a tight loop makes its plugin push tens of thousands of events
//! a second, and a hostile local process that says `hello` can push far more. Nothing an
//! agent does needs every one of them live: `logs` reads the plugin's own buffer, and a
//! `--follow` stream is for watching. What must not happen is the host's memory growing
//! with a stream nobody drains, or a flood on one Studio taking the host's one async
//! thread from the calls to every other. So every stage that holds events has a bound,
//! and what goes over it is dropped, counted, and reported once in the stream as a
//! [`GAP_EVENT`] saying how many were dropped and where to read them instead:
//!
//! - each plugin socket may publish [`EVENTS_PER_SECOND`] events a second (bursts of up
//!   to [`EVENT_BURST`]) into the host: [`EventBudget`]. A `state` event always updates
//!   the session's run state (which must not go stale), and is published under the budget;
//! - the host's event bus keeps the last 1,024 for subscribers that fall behind;
//! - each subscriber's stream holds [`SUBSCRIBER_QUEUE`] events ([`EventSink`] and
//!   [`EventStream`]); a peer's subscription runs through one too, and waits while the
//!   host's queue for the peer's socket is over its byte bound (see `peer_server.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::sync::mpsc::error::{TryRecvError, TrySendError};
use tokio::time::Instant;

use super::SessionEvent;

/// The event a stream carries in place of events it lost: after a failover (events sent
/// while no host was reachable), or when events were dropped at one of the bounds above.
/// `data.message` says which, and `data.dropped` (when known) how many.
pub const GAP_EVENT: &str = "gap";

/// Events a plugin socket (one Studio: its edit DataModel and the playtest ones it
/// carries) may publish per second, sustained.
pub const EVENTS_PER_SECOND: u32 = 5_000;

/// Events a plugin socket may publish at once after a quiet spell.
pub const EVENT_BURST: u32 = 10_000;

/// While a socket keeps flooding, how often the count of its dropped events is reported.
pub const GAP_INTERVAL: Duration = Duration::from_secs(1);

/// A pause in dropping this long means the flood is over: the count is reported then,
/// with the next event or on its own (`EventBudget::flush_at`).
pub const GAP_QUIET: Duration = Duration::from_millis(100);

/// Events one subscriber's stream holds before it drops.
pub const SUBSCRIBER_QUEUE: usize = 1_024;

/// A gap event for `session_id` ("" when it is not one session's).
pub fn gap(session_id: &str, dropped: Option<u64>, message: String) -> SessionEvent {
    let mut data = serde_json::json!({ "message": message });
    if let Some(dropped) = dropped {
        data["dropped"] = dropped.into();
    }
    SessionEvent {
        session_id: session_id.to_owned(),
        event: GAP_EVENT.to_owned(),
        data,
    }
}

/// The gap for events a subscriber could not take in time.
pub fn fell_behind(dropped: u64) -> SessionEvent {
    gap(
        "",
        Some(dropped),
        format!(
            "{dropped} events were dropped because this stream was not read fast enough. `logs` with `since` reads a Studio's log buffer."
        ),
    )
}

/// A token bucket: how many events one plugin socket may still publish now.
#[derive(Debug)]
pub struct EventBudget {
    tokens: f64,
    refilled: Instant,
    /// Events dropped and not yet reported, by session, with when the first of them was.
    dropped: Vec<(String, u64, Instant)>,
    last_drop: Option<Instant>,
}

impl EventBudget {
    pub fn new(now: Instant) -> EventBudget {
        EventBudget {
            tokens: f64::from(EVENT_BURST),
            refilled: now,
            dropped: Vec::new(),
            last_drop: None,
        }
    }

    /// Whether an event from `session_id` may be published now. When it may and events of
    /// that session were dropped before it, returns the gap to publish first: once the
    /// flood pauses ([`GAP_QUIET`]), and during a long one every [`GAP_INTERVAL`], so
    /// that a stream is not half gaps.
    pub fn admit(&mut self, session_id: &str, now: Instant) -> Admit {
        let elapsed = now.saturating_duration_since(self.refilled);
        self.refilled = now;
        self.tokens = (self.tokens + elapsed.as_secs_f64() * f64::from(EVENTS_PER_SECOND)).min(f64::from(EVENT_BURST));
        if self.tokens < 1.0 {
            self.last_drop = Some(now);
            match self.dropped.iter_mut().find(|(id, ..)| id == session_id) {
                Some((_, count, _)) => *count += 1,
                None => self.dropped.push((session_id.to_owned(), 1, now)),
            }
            return Admit::Drop;
        }
        self.tokens -= 1.0;
        let quiet = self
            .last_drop
            .is_none_or(|at| now.saturating_duration_since(at) >= GAP_QUIET);
        let due = |since: Instant| quiet || now.saturating_duration_since(since) >= GAP_INTERVAL;
        match self
            .dropped
            .iter()
            .position(|(id, _, since)| id == session_id && due(*since))
        {
            Some(at) => {
                let (session_id, dropped, _) = self.dropped.swap_remove(at);
                Admit::AfterGap(dropped_gap(&session_id, dropped))
            }
            None => Admit::Publish,
        }
    }

    /// When the drops not yet reported are due even if no event comes to carry them: once
    /// the flood has paused for [`GAP_QUIET`] (a script that printed in a loop and
    /// stopped sends nothing more).
    pub fn flush_at(&self) -> Option<Instant> {
        if self.dropped.is_empty() {
            return None;
        }
        self.last_drop.map(|at| at + GAP_QUIET)
    }

    /// The gaps for every session's unreported drops, now; none are left pending.
    pub fn flush(&mut self) -> Vec<SessionEvent> {
        self.dropped
            .drain(..)
            .map(|(session_id, dropped, _)| dropped_gap(&session_id, dropped))
            .collect()
    }
}

fn dropped_gap(session_id: &str, dropped: u64) -> SessionEvent {
    gap(
        session_id,
        Some(dropped),
        format!(
            "{dropped} events from this Studio were dropped: it sent more than {EVENTS_PER_SECOND} a second. `logs` with `since` reads its log buffer."
        ),
    )
}

#[derive(Debug)]
pub enum Admit {
    Publish,
    /// Publish this gap, then the event.
    AfterGap(SessionEvent),
    Drop,
}

/// The sending end of one subscriber's bounded stream. A subscriber that does not keep
/// up loses events, never the host's memory, and is told how many: the count goes to its
/// [`EventStream`], which hands it on as one gap as soon as it has read what was queued.
#[derive(Debug)]
pub struct EventSink {
    sender: mpsc::Sender<SessionEvent>,
    dropped: Arc<AtomicU64>,
}

impl EventSink {
    pub fn new() -> (EventSink, EventStream) {
        let (sender, receiver) = mpsc::channel(SUBSCRIBER_QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let stream = EventStream {
            receiver,
            dropped: Arc::clone(&dropped),
        };
        (EventSink { sender, dropped }, stream)
    }

    /// Queues `event` if there is room; false once the subscriber is gone.
    pub fn offer(&mut self, event: SessionEvent) -> bool {
        match self.sender.try_send(event) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(TrySendError::Closed(_)) => false,
        }
    }

    /// Resolves once the subscriber is gone.
    pub async fn closed(&self) {
        self.sender.closed().await
    }
}

/// One subscriber's stream of events (`Bridge::subscribe`).
#[derive(Debug)]
pub struct EventStream {
    receiver: mpsc::Receiver<SessionEvent>,
    dropped: Arc<AtomicU64>,
}

impl EventStream {
    /// The next event. Events dropped because this stream was not read in time are
    /// reported by one gap once what was queued has been read, so a count is never left
    /// waiting for a later event. `None` when the stream has ended.
    pub async fn recv(&mut self) -> Option<SessionEvent> {
        match self.receiver.try_recv() {
            Ok(event) => return Some(event),
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => {}
        }
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            return Some(fell_behind(dropped));
        }
        self.receiver.recv().await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// How long the bucket takes to gain one event.
    fn refill() -> Duration {
        Duration::from_secs_f64(1.0 / f64::from(EVENTS_PER_SECOND))
    }

    fn event(n: u64) -> SessionEvent {
        SessionEvent {
            session_id: "S".into(),
            event: "log".into(),
            data: serde_json::json!({ "seq": n }),
        }
    }

    #[test]
    fn a_burst_past_the_budget_is_dropped_then_reported_once() {
        let start = Instant::now();
        let mut budget = EventBudget::new(start);
        let burst = EVENT_BURST as usize;
        let verdicts: Vec<Admit> = (0..burst + 50).map(|_| budget.admit("S", start)).collect();
        assert!(verdicts[..burst].iter().all(|v| matches!(v, Admit::Publish)));
        assert!(verdicts[burst..].iter().all(|v| matches!(v, Admit::Drop)));
        // Another session on the same socket shares the budget.
        assert!(matches!(budget.admit("P", start), Admit::Drop));

        // While the flood goes on, the count waits; once it pauses, the next event of each
        // session comes after one gap carrying its own count.
        assert!(matches!(budget.admit("S", start + refill() * 2), Admit::Publish));
        let later = start + GAP_QUIET + refill() * 4;
        let Admit::AfterGap(gap) = budget.admit("S", later) else {
            panic!("expected a gap first")
        };
        assert_eq!((gap.session_id.as_str(), gap.event.as_str()), ("S", GAP_EVENT));
        assert_eq!(
            gap.data["dropped"], 50,
            "the event that passed meanwhile is not counted"
        );
        let Admit::AfterGap(gap) = budget.admit("P", later) else {
            panic!("expected a gap first")
        };
        assert_eq!(gap.data["dropped"], 1);
        assert!(matches!(budget.admit("S", later + refill()), Admit::Publish));
    }

    #[test]
    fn a_long_flood_reports_its_drops_once_a_second() {
        let start = Instant::now();
        let mut budget = EventBudget::new(start);
        // Four times the rate, for three seconds after the burst.
        let step = Duration::from_secs(1) / (4 * EVENTS_PER_SECOND);
        let (mut gaps, mut dropped, mut published) = (0, 0u64, 0u64);
        for n in 0..(EVENT_BURST + 12 * EVENTS_PER_SECOND) {
            match budget.admit("S", start + step * n) {
                Admit::Publish => published += 1,
                Admit::AfterGap(gap) => {
                    gaps += 1;
                    published += 1;
                    dropped += gap.data["dropped"].as_u64().unwrap();
                }
                Admit::Drop => {}
            }
        }
        assert!((2..=4).contains(&gaps), "{gaps} gaps in three seconds");
        assert!(dropped > 0 && published > 0);
    }

    #[test]
    fn drops_at_the_end_of_a_flood_are_due_once_it_pauses_with_no_event_to_carry_them() {
        let start = Instant::now();
        let mut budget = EventBudget::new(start);
        assert_eq!(budget.flush_at(), None);
        for _ in 0..EVENT_BURST + 7 {
            budget.admit("S", start);
        }
        assert_eq!(budget.flush_at(), Some(start + GAP_QUIET));
        let gaps = budget.flush();
        assert_eq!(gaps.len(), 1);
        assert_eq!(
            (gaps[0].session_id.as_str(), gaps[0].data["dropped"].clone()),
            ("S", 7.into())
        );
        assert_eq!(budget.flush_at(), None, "nothing is reported twice");
        assert!(matches!(budget.admit("S", start + GAP_QUIET * 2), Admit::Publish));
    }

    #[test]
    fn a_steady_stream_under_the_rate_never_drops() {
        let start = Instant::now();
        let mut budget = EventBudget::new(start);
        let step = Duration::from_secs(1) / (EVENTS_PER_SECOND - 100);
        for n in 0..(3 * EVENTS_PER_SECOND) {
            assert!(
                matches!(budget.admit("S", start + step * n), Admit::Publish),
                "event {n} was not published"
            );
        }
    }

    #[tokio::test]
    async fn a_full_sink_drops_and_the_stream_says_how_many_once_it_is_read() {
        let (mut sink, mut stream) = EventSink::new();
        for n in 0..(SUBSCRIBER_QUEUE as u64 + 10) {
            assert!(sink.offer(event(n)));
        }
        // The subscriber reads everything queued: the first SUBSCRIBER_QUEUE, in order,
        // then the count of the rest, with no later event needed to carry it.
        for n in 0..SUBSCRIBER_QUEUE as u64 {
            assert_eq!(stream.recv().await.map(|e| e.data["seq"].clone()), Some(n.into()));
        }
        let gap = stream.recv().await.expect("a gap");
        assert_eq!(
            (gap.event.as_str(), gap.data["dropped"].clone()),
            (GAP_EVENT, 10.into())
        );
        assert!(sink.offer(event(9999)));
        assert_eq!(stream.recv().await.map(|e| e.data["seq"].clone()), Some(9999.into()));
        // A stream whose sink is gone still reports what it dropped, then ends.
        for _ in 0..SUBSCRIBER_QUEUE + 4 {
            assert!(sink.offer(event(2)));
        }
        drop(sink);
        let mut last = None;
        while let Some(event) = stream.recv().await {
            last = Some(event);
        }
        assert_eq!(last.map(|e| e.data["dropped"].clone()), Some(4.into()));
    }

    #[tokio::test]
    async fn a_gone_subscriber_is_reported_to_the_sink() {
        let (mut sink, stream) = EventSink::new();
        drop(stream);
        assert!(!sink.offer(event(1)));
    }
}

//! Liveness of the peer link (`/v1/client`, PROTOCOL.md Peer ⇄ host): both ends send a
//! WebSocket Ping every [`PING_EVERY`] and give the link up after [`SILENCE_LIMIT`] with
//! no frame of any kind from the other side. A closed link is seen at once; this is for
//! the half-open one, whose other end stopped answering without closing (a SIGSTOPped or
//! hung process, a dropped route to an `mcp --remote` host), which TCP alone would
//! notice only after minutes, if ever.
//!
//! WebSocket Pings rather than a message of the peer protocol: every WebSocket stack
//! answers them by itself (tungstenite does while it reads), so no side needs code to
//! answer, and a pong proves the other side's reader is running.

use std::time::Duration;

use tokio::time::{Instant, Interval, MissedTickBehavior};

/// How often each end pings: often enough that a few missed pongs fit in the silence
/// limit, rarely enough to cost nothing (a 2-byte frame a second per peer).
pub const PING_EVERY: Duration = Duration::from_secs(1);

/// Silence after which the other end is treated as gone. Four ping intervals: a live
/// process under load (a busy machine, a large frame in transit on loopback) answers
/// well within it, and a failover still starts within a few seconds of a hang.
pub const SILENCE_LIMIT: Duration = Duration::from_secs(4);

/// A ticker that first fires one interval from now and never bursts to catch up.
pub fn ticker() -> Interval {
    let mut interval = tokio::time::interval_at(Instant::now() + PING_EVERY, PING_EVERY);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    interval
}

/// When the other end was last heard from, judged at each ping tick.
#[derive(Debug, Clone, Copy)]
pub struct Silence {
    last_heard: Instant,
    last_tick: Instant,
}

impl Silence {
    pub fn new(now: Instant) -> Silence {
        Silence {
            last_heard: now,
            last_tick: now,
        }
    }

    /// Any frame from the other end (a pong, a ping, a message) proves it is alive.
    pub fn heard(&mut self, now: Instant) {
        self.last_heard = now;
    }

    /// At a ping tick: whether the other end has been silent past the limit. A tick that
    /// comes late (this process was itself stopped or starved) restarts the window
    /// first: our own stall is not the other end's silence, and its pongs may be waiting
    /// unread in the socket.
    pub fn expired(&mut self, now: Instant) -> bool {
        if now.saturating_duration_since(self.last_tick) > PING_EVERY * 2 {
            self.last_heard = now;
        }
        self.last_tick = now;
        now.saturating_duration_since(self.last_heard) > SILENCE_LIMIT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silence_past_the_limit_expires_and_any_frame_restarts_it() {
        let start = Instant::now();
        let mut silence = Silence::new(start);
        let mut tick = start;
        let mut expired_at = None;
        for n in 1..=10 {
            tick += PING_EVERY;
            if silence.expired(tick) {
                expired_at = Some(n);
                break;
            }
        }
        // Ticks 1–4 are within the limit; the fifth is past it.
        assert_eq!(expired_at, Some(5));

        let mut silence = Silence::new(start);
        let mut tick = start;
        for _ in 0..20 {
            tick += PING_EVERY;
            silence.heard(tick - PING_EVERY / 2);
            assert!(!silence.expired(tick), "a pong every interval keeps the link");
        }
    }

    #[test]
    fn a_late_tick_is_our_own_stall_not_the_other_ends_silence() {
        let start = Instant::now();
        let mut silence = Silence::new(start);
        // This process was stopped for a minute: the first tick after is not a verdict.
        let late = start + Duration::from_secs(60);
        assert!(!silence.expired(late));
        // But silence from then on still counts.
        let mut tick = late;
        let mut verdicts = Vec::new();
        for _ in 0..5 {
            tick += PING_EVERY;
            verdicts.push(silence.expired(tick));
        }
        assert_eq!(verdicts, [false, false, false, false, true]);
    }
}

//! Turns on the host's one async thread: the one turn-taking mechanism.
//!
//! `mcp` and `serve` run every connection on one thread (no hand-offs on the hot path;
//! see ARCHITECTURE.md, Threads and large results). A source whose next unit of work is
//! always ready (a plugin pushing events in a tight loop, a peer pipelining calls, a
//! client piping thousands of `tools/call` lines into stdin) would hold that thread for
//! as long as tokio's cooperative budget lets it: 128 operations, hundreds of frames'
//! work. Every hop of another session's call (the agent's request, the plugin's answer,
//! the write to stdout) would wait behind that. So each such source counts its units in
//! a [`Turns`] and hands the thread on once a turn is spent: a flood then costs the
//! others at most one turn's work per hop.
//!
//! Two faces of the same counter: async read loops call [`Turns::frame`] once per frame;
//! the MCP line reader, which is a poll-based `AsyncRead` handing out several lines at
//! once, asks [`Turns::room`] how many more fit, [`Turns::spend`]s them, and yields with
//! [`Turns::poll_next_turn`] when none do.

use std::task::{Context, Poll};

/// Frames a WebSocket connection handles before it yields to the other tasks.
pub const FRAMES_PER_TURN: usize = 4;

/// Counts a source's units of work and yields once per turn.
#[derive(Debug)]
pub struct Turns {
    per_turn: usize,
    spent: usize,
}

impl Default for Turns {
    /// A connection's turns: [`FRAMES_PER_TURN`] frames each.
    fn default() -> Turns {
        Turns::new(FRAMES_PER_TURN)
    }
}

impl Turns {
    /// Turns of `per_turn` units each (at least one).
    pub fn new(per_turn: usize) -> Turns {
        Turns {
            per_turn: per_turn.max(1),
            spent: 0,
        }
    }

    /// Call once per frame read, before handling it: yields when the turn is spent.
    pub async fn frame(&mut self) {
        self.spend(1);
        if self.room() == 0 {
            self.spent = 0;
            tokio::task::yield_now().await;
        }
    }

    /// Units this turn still has room for.
    pub fn room(&self) -> usize {
        self.per_turn - self.spent
    }

    /// Counts `units` against this turn (never past its end).
    pub fn spend(&mut self, units: usize) {
        self.spent = (self.spent + units).min(self.per_turn);
    }

    /// From a poll function: when the turn is spent, starts the next and yields once
    /// (wakes itself and answers `Pending`, so the runtime runs the other tasks first);
    /// otherwise `Ready`.
    pub fn poll_next_turn(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.room() > 0 {
            return Poll::Ready(());
        }
        self.spent = 0;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[tokio::test]
    async fn a_connection_that_always_has_a_frame_lets_the_others_run_each_turn() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let flood = {
            let log = Arc::clone(&log);
            tokio::spawn(async move {
                let mut turns = Turns::default();
                for _ in 0..3 * FRAMES_PER_TURN {
                    turns.frame().await;
                    log.lock().unwrap().push("frame");
                }
            })
        };
        let other = {
            let log = Arc::clone(&log);
            tokio::spawn(async move { log.lock().unwrap().push("other") })
        };
        flood.await.unwrap();
        other.await.unwrap();
        let log = log.lock().unwrap();
        let at = log.iter().position(|&entry| entry == "other").unwrap();
        assert!(at < FRAMES_PER_TURN, "the other task ran after {at} frames");
    }
}

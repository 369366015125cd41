//! Turns on the host's one async thread.
//!
//! `mcp` and `serve` run every connection on one thread (no hand-offs on the hot path;
//! see ARCHITECTURE.md, Threads and large results). A connection whose socket always has
//! its next frame ready (a plugin pushing events in a tight loop, a peer pipelining
//! calls) would hold that thread for as long as tokio's cooperative budget lets it: 128
//! operations, hundreds of frames' work. Every hop of another session's call (the agent's
//! request, the plugin's answer, the write to stdout) would wait behind that. So each
//! connection's read loop hands the thread on after [`FRAMES_PER_TURN`] frames: a flood
//! then costs the others at most a few frames' work per hop.

/// Frames a connection handles before it yields to the other tasks.
pub const FRAMES_PER_TURN: u32 = 4;

/// Counts a connection's frames and yields once per turn.
#[derive(Debug, Default)]
pub struct Turns {
    frames: u32,
}

impl Turns {
    /// Call once per frame read, before handling it.
    pub async fn frame(&mut self) {
        self.frames += 1;
        if self.frames >= FRAMES_PER_TURN {
            self.frames = 0;
            tokio::task::yield_now().await;
        }
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
        assert!(at < FRAMES_PER_TURN as usize, "the other task ran after {at} frames");
    }
}

//! A link: one plugin connection as the registry and the connection task share it, the
//! socket's outbound queue and the table of calls in flight on it (each waiting for its
//! `response`). A session carried over another's socket (a playtest DataModel) has a link
//! of its own on the same queue.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::Progress;
use super::calls::InFlight;
use super::writer::Outbound;
use crate::protocol::ToolError;
use crate::protocol::messages::{Framing, HostMessage, encode_frame};
use crate::protocol::raw::RawValue;

/// Calls one session may have in flight at once. Studio runs a plugin's work on one
/// thread, so calls beyond a few dozen only queue there; past this many a caller (an
/// agent's pipelined burst, a peer opening thousands of calls) gets `busy` at once, and
/// the host's memory for one session's calls stays bounded. Each session has its own
/// count, so a flood on one leaves room on every other.
pub const MAX_IN_FLIGHT: usize = 256;

/// One live plugin connection: where to send frames and who waits for answers.
pub struct Link {
    framing: Framing,
    outbound: mpsc::UnboundedSender<Outbound>,
    pub(super) calls: InFlight<RawValue>,
    /// For a multiplexed session (a playtest DataModel carried over its edit plugin's
    /// socket): its sessionId, stamped on every request and cancel sent through here.
    pub(super) channel: Option<String>,
}

impl Link {
    pub fn new(framing: Framing, outbound: mpsc::UnboundedSender<Outbound>) -> Arc<Link> {
        Arc::new(Link {
            framing,
            outbound,
            calls: InFlight::new(MAX_IN_FLIGHT),
            channel: None,
        })
    }

    /// A link for a session multiplexed over this link's socket: it shares the socket
    /// and keeps its own calls in flight.
    pub fn channel(&self, session_id: String) -> Arc<Link> {
        Arc::new(Link {
            framing: self.framing,
            outbound: self.outbound.clone(),
            calls: InFlight::new(MAX_IN_FLIGHT),
            channel: Some(session_id),
        })
    }

    pub fn send(&self, message: &HostMessage<'_>) -> bool {
        self.outbound
            .send(Outbound::Frame(encode_frame(message, self.framing)))
            .is_ok()
    }

    /// Closes the socket. A multiplexed session's link only stops taking calls: the
    /// socket belongs to its edit session and every other session it carries.
    pub fn close(&self, code: u16, reason: &'static str) {
        if self.channel.is_some() {
            self.calls.close();
            return;
        }
        let _ = self.outbound.send(Outbound::Close(code, reason));
    }

    /// Delivers a plugin's `response`. Returns false if nobody waits for `id` any more
    /// (it timed out or was cancelled): the response is then dropped.
    pub fn resolve(&self, id: u64, outcome: Result<RawValue, ToolError>) -> bool {
        self.calls.resolve(id, outcome)
    }

    pub fn progress(&self, id: u64, update: Progress) {
        self.calls.progress(id, update);
    }

    /// Fails every call in flight on this connection. Called once when it ends: nothing
    /// is re-sent, since the plugin may already have run it.
    pub fn fail_all(&self, error: &ToolError) {
        self.calls.fail_all(error);
    }
}

//! A link: one plugin connection as the registry and the connection task share it, the
//! socket's outbound queue and the table of calls in flight on it (each waiting for its
//! `response`). A session carried over another's socket (a playtest DataModel) has a link
//! of its own on the same queue.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{mpsc, oneshot};

use super::Progress;
use crate::protocol::ToolError;
use crate::protocol::messages::{Frame, Framing, HostMessage, encode_frame};
use crate::protocol::raw::RawValue;

/// What the connection task is told to send.
#[derive(Debug)]
pub enum Outbound {
    Frame(Frame),
    /// Close the WebSocket with this code and reason, then stop.
    Close(u16, &'static str),
    /// A WebSocket Ping (the peer link's liveness check, see `liveness.rs`).
    Ping,
}

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
    pending: Mutex<HashMap<u64, Pending>>,
    closed: AtomicBool,
    /// For a multiplexed session (a playtest DataModel carried over its edit plugin's
    /// socket): its sessionId, stamped on every request and cancel sent through here.
    pub(super) channel: Option<String>,
}

pub(super) enum Registered {
    Yes,
    Closed,
    Full,
}

pub(super) struct Pending {
    pub(super) reply: oneshot::Sender<Result<RawValue, ToolError>>,
    pub(super) progress: Option<mpsc::Sender<Progress>>,
}

impl Link {
    pub fn new(framing: Framing, outbound: mpsc::UnboundedSender<Outbound>) -> Arc<Link> {
        Arc::new(Link {
            framing,
            outbound,
            pending: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            channel: None,
        })
    }

    /// A link for a session multiplexed over this link's socket: it shares the socket
    /// and keeps its own calls in flight.
    pub fn channel(&self, session_id: String) -> Arc<Link> {
        Arc::new(Link {
            framing: self.framing,
            outbound: self.outbound.clone(),
            pending: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
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
            self.closed.store(true, Ordering::SeqCst);
            return;
        }
        let _ = self.outbound.send(Outbound::Close(code, reason));
    }

    /// Delivers a plugin's `response`. Returns false if nobody waits for `id` any more
    /// (it timed out or was cancelled): the response is then dropped.
    pub fn resolve(&self, id: u64, outcome: Result<RawValue, ToolError>) -> bool {
        let waiter = lock(&self.pending).remove(&id);
        match waiter {
            Some(pending) => pending.reply.send(outcome).is_ok(),
            None => false,
        }
    }

    pub fn progress(&self, id: u64, update: Progress) {
        if let Some(Pending {
            progress: Some(sink), ..
        }) = lock(&self.pending).get(&id)
        {
            let _ = sink.try_send(update);
        }
    }

    /// Fails every call in flight on this connection. Called once when it ends: nothing
    /// is re-sent, since the plugin may already have run it.
    pub fn fail_all(&self, error: &ToolError) {
        self.closed.store(true, Ordering::SeqCst);
        let drained: Vec<Pending> = lock(&self.pending).drain().map(|(_, p)| p).collect();
        for pending in drained {
            let _ = pending.reply.send(Err(error.clone()));
        }
    }

    pub(super) fn register(&self, id: u64, pending: Pending) -> Registered {
        let mut table = lock(&self.pending);
        // Checked under the table's lock, so `fail_all` cannot miss this entry.
        if self.closed.load(Ordering::SeqCst) {
            return Registered::Closed;
        }
        if table.len() >= MAX_IN_FLIGHT {
            return Registered::Full;
        }
        table.insert(id, pending);
        Registered::Yes
    }

    pub(super) fn forget(&self, id: u64) {
        lock(&self.pending).remove(&id);
    }
}

/// Locks `mutex`; a poisoned lock is taken as it is.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind; keep serving.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

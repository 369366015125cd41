//! The calls in flight on one socket, each waiting for its one answer.
//!
//! Both ends of the bridge that send requests keep one: a plugin link (the host's calls to
//! one Studio session, answered by the plugin's `response`) and a peer's link to its host
//! (answered by the host's `result`). Either way a call gets exactly one answer: its
//! reply, its deadline or cancel (the caller then forgets it, and a late reply is
//! dropped), or the socket's end, which fails every call still waiting and refuses new
//! ones. The check that the socket is still open happens under the table's lock, so a
//! call registered as the socket ends cannot be missed by [`InFlight::fail_all`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use tokio::sync::{mpsc, oneshot};

use super::Progress;
use crate::protocol::ToolError;

/// Why a call was not registered.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The socket has ended (or its session stopped taking calls).
    Closed,
    /// The table holds as many calls as it takes.
    Full,
}

/// The answer a registered call waits on.
pub type Answer<T> = oneshot::Receiver<Result<T, ToolError>>;

struct Waiter<T> {
    reply: oneshot::Sender<Result<T, ToolError>>,
    progress: Option<mpsc::Sender<Progress>>,
}

/// The table: calls by request id.
pub struct InFlight<T> {
    waiting: Mutex<HashMap<u64, Waiter<T>>>,
    closed: AtomicBool,
    capacity: usize,
}

impl<T> InFlight<T> {
    /// A table taking at most `capacity` calls at once.
    pub fn new(capacity: usize) -> InFlight<T> {
        InFlight {
            waiting: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            capacity,
        }
    }

    /// Registers call `id` (before its request is sent, so the answer cannot come first);
    /// `progress` hears its progress updates.
    pub fn register(&self, id: u64, progress: Option<mpsc::Sender<Progress>>) -> Result<Answer<T>, Refused> {
        let mut waiting = lock(&self.waiting);
        if self.closed.load(Ordering::SeqCst) {
            return Err(Refused::Closed);
        }
        if waiting.len() >= self.capacity {
            return Err(Refused::Full);
        }
        let (reply, answer) = oneshot::channel();
        waiting.insert(id, Waiter { reply, progress });
        Ok(answer)
    }

    /// Delivers call `id`'s answer. False if nobody waits for it any more (it timed out or
    /// was cancelled): the answer is then dropped.
    pub fn resolve(&self, id: u64, outcome: Result<T, ToolError>) -> bool {
        let waiter = lock(&self.waiting).remove(&id);
        waiter.is_some_and(|waiter| waiter.reply.send(outcome).is_ok())
    }

    /// Passes a progress update to call `id`'s listener, if it has one with room.
    pub fn progress(&self, id: u64, update: Progress) {
        if let Some(Waiter {
            progress: Some(sink), ..
        }) = lock(&self.waiting).get(&id)
        {
            let _ = sink.try_send(update);
        }
    }

    /// Stops waiting for call `id` (its caller gave up, or its request was never sent).
    pub fn forget(&self, id: u64) {
        lock(&self.waiting).remove(&id);
    }

    /// Takes no more calls; those in flight keep waiting for their answers.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    /// Takes no more calls and fails every call in flight with `error`. Called once when
    /// the socket ends: nothing is re-sent, since the other end may already have run it.
    pub fn fail_all(&self, error: &ToolError) {
        let drained: Vec<Waiter<T>> = {
            let mut waiting = lock(&self.waiting);
            self.closed.store(true, Ordering::SeqCst);
            waiting.drain().map(|(_, waiter)| waiter).collect()
        };
        for waiter in drained {
            let _ = waiter.reply.send(Err(error.clone()));
        }
    }
}

/// Locks `mutex`; a poisoned lock is taken as it is.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind; keep serving.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ErrorCode;

    #[tokio::test]
    async fn each_call_gets_its_own_answer_once() {
        let table = InFlight::<u32>::new(4);
        let first = table.register(1, None).unwrap();
        let second = table.register(2, None).unwrap();
        assert!(table.resolve(2, Ok(20)));
        assert!(table.resolve(1, Ok(10)));
        assert!(!table.resolve(1, Ok(11)), "a second answer has nobody to go to");
        assert_eq!(first.await.unwrap().unwrap(), 10);
        assert_eq!(second.await.unwrap().unwrap(), 20);
    }

    #[tokio::test]
    async fn the_end_of_the_socket_fails_those_waiting_and_refuses_new_calls() {
        let table = InFlight::<u32>::new(4);
        let waiting = table.register(1, None).unwrap();
        table.fail_all(&ToolError::new(ErrorCode::HostLost, "gone"));
        assert_eq!(waiting.await.unwrap().unwrap_err().code, ErrorCode::HostLost);
        assert_eq!(table.register(2, None).unwrap_err(), Refused::Closed);
    }

    #[test]
    fn a_full_table_refuses_until_a_call_is_forgotten() {
        let table = InFlight::<u32>::new(2);
        let _first = table.register(1, None).unwrap();
        let _second = table.register(2, None).unwrap();
        assert_eq!(table.register(3, None).unwrap_err(), Refused::Full);
        table.forget(1);
        assert!(table.register(3, None).is_ok());
    }

    #[tokio::test]
    async fn a_closed_table_still_delivers_the_answers_of_calls_in_flight() {
        let table = InFlight::<u32>::new(2);
        let waiting = table.register(1, None).unwrap();
        table.close();
        assert_eq!(table.register(2, None).unwrap_err(), Refused::Closed);
        assert!(table.resolve(1, Ok(7)));
        assert_eq!(waiting.await.unwrap().unwrap(), 7);
    }
}

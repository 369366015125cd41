//! The plugin connections that have not said `hello` yet: at most
//! [`MAX_UNIDENTIFIED_PLUGINS`] at once, a new one taking the place of the oldest silent
//! one (see `budget.rs`, which bounds what each may read meanwhile).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::budget::{MAX_UNIDENTIFIED_PLUGINS, ReadBudget};

/// The plugin connections waiting for their `hello`, oldest first: at most
/// [`MAX_UNIDENTIFIED_PLUGINS`].
#[derive(Debug, Default)]
pub struct Pending {
    inner: Mutex<Waiting>,
}

#[derive(Debug, Default)]
struct Waiting {
    next_id: u64,
    /// Oldest first.
    slots: VecDeque<Held>,
}

#[derive(Debug)]
struct Held {
    id: u64,
    budget: ReadBudget,
    /// The budget left when the slot was taken (the upgrade request read): while it is
    /// unchanged, the connection has sent nothing since.
    left_at_upgrade: usize,
    evict: CancellationToken,
}

impl Held {
    fn silent(&self) -> bool {
        self.budget.remaining() == self.left_at_upgrade
    }
}

impl Pending {
    pub fn new() -> Arc<Pending> {
        Arc::default()
    }

    /// A slot for a new connection reading through `budget`. When every slot is held, the
    /// oldest connection that has sent nothing since its upgrade (else the oldest) is
    /// evicted: its [`PendingSlot::evicted`] token is cancelled and its slot is this one.
    pub fn take(self: &Arc<Pending>, budget: &ReadBudget) -> PendingSlot {
        let mut waiting = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if waiting.slots.len() >= MAX_UNIDENTIFIED_PLUGINS {
            let victim = waiting.slots.iter().position(Held::silent).unwrap_or(0);
            if let Some(evicted) = waiting.slots.remove(victim) {
                tracing::warn!(
                    silent = evicted.silent(),
                    "{MAX_UNIDENTIFIED_PLUGINS} plugin connections are waiting to say hello: closing the oldest to make room"
                );
                evicted.evict.cancel();
            }
        }
        let id = waiting.next_id;
        waiting.next_id += 1;
        let evict = CancellationToken::new();
        waiting.slots.push_back(Held {
            id,
            budget: budget.clone(),
            left_at_upgrade: budget.remaining(),
            evict: evict.clone(),
        });
        PendingSlot {
            pending: Arc::clone(self),
            id,
            evict,
        }
    }

    /// Connections waiting for their hello now.
    pub fn waiting(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).slots.len()
    }
}

/// A slot among the [`MAX_UNIDENTIFIED_PLUGINS`], freed when dropped (once the
/// connection has said hello, or is gone).
#[derive(Debug)]
pub struct PendingSlot {
    pending: Arc<Pending>,
    id: u64,
    evict: CancellationToken,
}

impl PendingSlot {
    /// Cancelled when a newer connection takes this one's place: close it then.
    pub fn evicted(&self) -> CancellationToken {
        self.evict.clone()
    }
}

impl Drop for PendingSlot {
    fn drop(&mut self) {
        let mut waiting = self.pending.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = waiting.slots.iter().position(|held| held.id == self.id) {
            waiting.slots.remove(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_connection_takes_the_place_of_the_oldest_silent_one() {
        let pending = Pending::new();
        let budgets: Vec<ReadBudget> = (0..MAX_UNIDENTIFIED_PLUGINS).map(|_| ReadBudget::new()).collect();
        let slots: Vec<PendingSlot> = budgets.iter().map(|b| pending.take(b)).collect();
        assert_eq!(pending.waiting(), MAX_UNIDENTIFIED_PLUGINS);
        // The oldest has begun to send (its hello may be on the way): the oldest silent
        // one goes instead.
        assert!(budgets[0].spend(10));
        let newer_budget = ReadBudget::new();
        let newer = pending.take(&newer_budget);
        assert_eq!(pending.waiting(), MAX_UNIDENTIFIED_PLUGINS, "still capped");
        let evicted: Vec<bool> = slots.iter().map(|s| s.evicted().is_cancelled()).collect();
        assert_eq!(evicted.iter().filter(|e| **e).count(), 1);
        assert!(evicted[1], "the oldest silent one: {evicted:?}");
        assert!(!newer.evicted().is_cancelled());
        // None silent: the oldest.
        for budget in budgets.iter().chain([&newer_budget]) {
            budget.spend(1);
        }
        let _newest = pending.take(&ReadBudget::new());
        assert!(slots[0].evicted().is_cancelled());
        assert_eq!(pending.waiting(), MAX_UNIDENTIFIED_PLUGINS);
        // An evicted slot dropped later frees nothing twice; a held one frees its place.
        drop(slots);
        assert_eq!(pending.waiting(), 2, "the two newer ones");
        drop(newer);
        assert_eq!(pending.waiting(), 1);
    }
}

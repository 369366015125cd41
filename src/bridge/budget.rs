//! What a connection may send before it has said who it is.
//!
//! `/v1/plugin` needs no token (a Studio plugin cannot read files), so any local process
//! can open it. Its WebSocket must accept large messages (a query result of megabytes),
//! but a stranger must not get to send one before its `hello`: an 8 MiB frame of nils
//! decodes to hundreds of MiB of values, and many such connections at once exhaust the
//! machine. The WebSocket's own limits cannot change after the upgrade, so the cap sits
//! below it, on the TCP stream: every connection starts with a read budget of
//! [`UNIDENTIFIED_BYTES`] (the HTTP upgrade request and a `hello` fit many times over)
//! and reads past it fail, which closes the connection. The budget is lifted once the
//! plugin's `hello` is accepted, or a peer's token is. Separately, the host serves at
//! most [`MAX_UNIDENTIFIED_PLUGINS`] plugin connections that have not said hello yet.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// Bytes a connection may send before it is identified: the upgrade request and a
/// `hello` (under 1 KiB) many times over, and whatever log events a plugin sends right
/// behind its `hello`, which may arrive in the same read (the WebSocket reads up to
/// 128 KiB at a time). The `hello` itself is decoded with a limit of [`HELLO_BYTES`].
pub const UNIDENTIFIED_BYTES: usize = 1024 * 1024;

/// Largest `hello` decoded.
pub const HELLO_BYTES: usize = 64 * 1024;

/// Plugin connections that may be waiting for their `hello` at once.
pub const MAX_UNIDENTIFIED_PLUGINS: usize = 16;

const LIFTED: usize = usize::MAX;

/// The bytes a connection may still read; handed to the request handlers as connect info.
#[derive(Clone, Debug)]
pub struct ReadBudget(Arc<AtomicUsize>);

impl ReadBudget {
    fn new() -> ReadBudget {
        ReadBudget(Arc::new(AtomicUsize::new(UNIDENTIFIED_BYTES)))
    }

    /// The connection is identified: no cap from now on.
    pub fn lift(&self) {
        self.0.store(LIFTED, Ordering::Relaxed);
    }

    /// Counts `n` bytes read; false when they went over the budget.
    fn spend(&self, n: usize) -> bool {
        let mut remaining = self.0.load(Ordering::Relaxed);
        loop {
            if remaining == LIFTED {
                return true;
            }
            let Some(left) = remaining.checked_sub(n) else {
                return false;
            };
            match self
                .0
                .compare_exchange_weak(remaining, left, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => remaining = now,
            }
        }
    }
}

/// A TCP stream whose reads count against a [`ReadBudget`].
pub struct CappedStream {
    inner: TcpStream,
    budget: ReadBudget,
}

impl AsyncRead for CappedStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
        let read = buf.filled().len() - before;
        if self.budget.spend(read) {
            Poll::Ready(Ok(()))
        } else {
            tracing::warn!(
                "closed a connection that sent more than {UNIDENTIFIED_BYTES} bytes before identifying itself"
            );
            Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "too much data before hello",
            )))
        }
    }
}

impl AsyncWrite for CappedStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Accepts TCP connections, each with a fresh budget.
pub struct CappedListener(pub TcpListener);

impl Listener for CappedListener {
    type Io = CappedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (CappedStream, SocketAddr) {
        let (inner, addr) = Listener::accept(&mut self.0).await;
        (
            CappedStream {
                inner,
                budget: ReadBudget::new(),
            },
            addr,
        )
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Listener::local_addr(&self.0)
    }
}

impl Connected<IncomingStream<'_, CappedListener>> for ReadBudget {
    fn connect_info(stream: IncomingStream<'_, CappedListener>) -> ReadBudget {
        stream.io().budget.clone()
    }
}

/// A slot among the [`MAX_UNIDENTIFIED_PLUGINS`], freed when dropped.
pub struct PendingSlot(Arc<AtomicUsize>);

impl PendingSlot {
    /// Takes a slot, or `None` when all are taken.
    pub fn take(count: &Arc<AtomicUsize>) -> Option<PendingSlot> {
        let previous = count.fetch_add(1, Ordering::SeqCst);
        if previous >= MAX_UNIDENTIFIED_PLUGINS {
            count.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(PendingSlot(Arc::clone(count)))
    }
}

impl Drop for PendingSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_is_spent_then_refuses_until_lifted() {
        let budget = ReadBudget::new();
        assert!(budget.spend(UNIDENTIFIED_BYTES - 10));
        assert!(budget.spend(10));
        assert!(!budget.spend(1));
        budget.lift();
        assert!(budget.spend(usize::MAX / 2));
    }

    #[test]
    fn pending_slots_are_capped_and_freed() {
        let count = Arc::new(AtomicUsize::new(0));
        let slots: Vec<PendingSlot> = (0..MAX_UNIDENTIFIED_PLUGINS)
            .map(|_| PendingSlot::take(&count).expect("a slot"))
            .collect();
        assert!(PendingSlot::take(&count).is_none());
        drop(slots);
        assert!(PendingSlot::take(&count).is_some());
    }
}

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
//! most [`MAX_UNIDENTIFIED_PLUGINS`] plugin connections that have not said hello yet
//! (`unidentified.rs`). A new one is never refused for that: it takes the place of the oldest
//! that has sent nothing since its upgrade (else of the oldest), which is closed. So
//! upgrades that never say hello, however many and however often renewed, cannot keep
//! a Studio's plugin out: its hello follows its upgrade at once, and a silent
//! connection is only ever closed in favour of a newer one.

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

/// Pairing handshakes (a `hello` read, the plugin's `auth` awaited) in progress at once.
/// Counted apart from the connections that have not said hello: a connection that said a
/// well-formed hello has left those (they evict one another) and waits its turn here, in
/// order, for at most the handshake's own 5 s, and is never evicted.
pub const MAX_HANDSHAKES: usize = 16;

const LIFTED: usize = usize::MAX;

/// The bytes a connection may still read; handed to the request handlers as connect info.
#[derive(Clone, Debug)]
pub struct ReadBudget(Arc<AtomicUsize>);

impl ReadBudget {
    pub(super) fn new() -> ReadBudget {
        ReadBudget(Arc::new(AtomicUsize::new(UNIDENTIFIED_BYTES)))
    }

    /// What is left of the budget (`usize::MAX` once lifted).
    pub(super) fn remaining(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    /// The connection is identified: no cap from now on.
    pub fn lift(&self) {
        self.0.store(LIFTED, Ordering::Relaxed);
    }

    /// Counts `n` bytes read; false when they went over the budget.
    pub(super) fn spend(&self, n: usize) -> bool {
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

/// Bytes a connection reads (or writes) in a row before it lets the host's thread run
/// something else once. tungstenite reads a frame until it is whole or the socket is
/// empty, and writes one until the socket is full: for a result of megabytes that held
/// the thread that answers every other call for milliseconds at a time. A small message
/// never reaches this; a 14 MB frame goes through in about fifty turns.
const TURN_BYTES: usize = 256 * 1024;

/// A TCP stream whose reads count against a [`ReadBudget`], and which takes turns with
/// the host's other connections (see [`TURN_BYTES`]).
pub struct CappedStream<S = TcpStream> {
    inner: S,
    budget: ReadBudget,
    /// Bytes read, and written, since the stream last waited or yielded.
    read_run: usize,
    write_run: usize,
}

/// Whether a stream that has moved `run` bytes in a row should yield now; if so, it is
/// woken at once to go on after whatever else is ready.
fn yield_turn(run: &mut usize, cx: &mut Context<'_>) -> bool {
    if *run < TURN_BYTES {
        return false;
    }
    *run = 0;
    cx.waker().wake_by_ref();
    true
}

impl<S: Unpin> CappedStream<S> {
    /// Runs one write of the stream's turn: yields first if the run is over, and counts
    /// what is written towards it (waiting for the socket ends it).
    fn write_in_turn(
        &mut self,
        cx: &mut Context<'_>,
        write: impl FnOnce(Pin<&mut S>, &mut Context<'_>) -> Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        if yield_turn(&mut self.write_run, cx) {
            return Poll::Pending;
        }
        let polled = write(Pin::new(&mut self.inner), cx);
        match &polled {
            Poll::Ready(Ok(written)) => self.write_run += written,
            Poll::Ready(Err(_)) => {}
            Poll::Pending => self.write_run = 0,
        }
        polled
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for CappedStream<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if yield_turn(&mut this.read_run, cx) {
            return Poll::Pending;
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if polled.is_pending() {
            this.read_run = 0;
        }
        ready!(polled)?;
        let read = buf.filled().len() - before;
        this.read_run += read;
        if this.budget.spend(read) {
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

impl<S: AsyncWrite + Unpin> AsyncWrite for CappedStream<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.write_in_turn(cx, |inner, cx| inner.poll_write(cx, buf))
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
        self.write_in_turn(cx, |inner, cx| inner.poll_write_vectored(cx, bufs))
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
                read_run: 0,
                write_run: 0,
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::task::Wake;

    use tokio::io::AsyncWriteExt as _;

    use super::*;

    /// A waker that notes being woken.
    #[derive(Default)]
    struct Noted(AtomicBool);

    impl Wake for Noted {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    fn capped<S>(inner: S) -> CappedStream<S> {
        let budget = ReadBudget::new();
        budget.lift();
        CappedStream {
            inner,
            budget,
            read_run: 0,
            write_run: 0,
        }
    }

    #[test]
    fn a_long_read_takes_turns_and_loses_nothing() {
        let data: Vec<u8> = (0..4 * TURN_BYTES).map(|i| (i % 251) as u8).collect();
        let mut stream = capped(&data[..]);
        let noted = Arc::new(Noted::default());
        let waker = std::task::Waker::from(Arc::clone(&noted));
        let mut cx = Context::from_waker(&waker);
        let (mut out, mut turns) = (Vec::new(), 0);
        let mut space = vec![0u8; 32 * 1024];
        loop {
            noted.0.store(false, Ordering::SeqCst);
            let mut buf = ReadBuf::new(&mut space);
            match Pin::new(&mut stream).poll_read(&mut cx, &mut buf) {
                Poll::Pending => {
                    assert!(noted.0.load(Ordering::SeqCst), "a turn given up is woken at once");
                    turns += 1;
                }
                Poll::Ready(Ok(())) if buf.filled().is_empty() => break,
                Poll::Ready(Ok(())) => out.extend_from_slice(buf.filled()),
                Poll::Ready(Err(error)) => panic!("{error}"),
            }
        }
        assert_eq!(out, data);
        assert_eq!(turns, 4, "one turn per {TURN_BYTES} bytes read in a row");
    }

    #[tokio::test]
    async fn a_long_write_takes_turns_and_loses_nothing() {
        let data: Vec<u8> = (0..3 * TURN_BYTES).map(|i| (i % 251) as u8).collect();
        let mut stream = capped(Vec::new());
        let noted = Arc::new(Noted::default());
        let waker = std::task::Waker::from(Arc::clone(&noted));
        let mut cx = Context::from_waker(&waker);
        let (mut at, mut turns) = (0, 0);
        while at < data.len() {
            let end = (at + 32 * 1024).min(data.len());
            match Pin::new(&mut stream).poll_write(&mut cx, &data[at..end]) {
                Poll::Pending => turns += 1,
                Poll::Ready(written) => at += written.unwrap(),
            }
        }
        stream.flush().await.unwrap();
        assert_eq!(stream.inner, data);
        assert_eq!(turns, 2, "one turn per {TURN_BYTES} bytes written in a row");
    }

    #[test]
    fn a_budget_is_spent_then_refuses_until_lifted() {
        let budget = ReadBudget::new();
        assert!(budget.spend(UNIDENTIFIED_BYTES - 10));
        assert!(budget.spend(10));
        assert!(!budget.spend(1));
        budget.lift();
        assert!(budget.spend(usize::MAX / 2));
    }
}

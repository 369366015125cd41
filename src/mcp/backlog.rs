//! How many of the agent's requests are read but not yet answered, and a stop to reading
//! while there are too many.
//!
//! rmcp reads whatever the client has written and spawns a task per request without a
//! bound, and a task lives until its answer is written out. An agent that pipelines
//! 10,000 `tools/call`s, or one that writes faster than it reads its answers, would have
//! the server hold every one of those tasks at once (90 MiB for 10,000 in a debug build).
//! So the server stops reading stdin while [`MAX_UNANSWERED`] requests are unanswered:
//! the client's writes then wait on the pipe, as they would on any server that is busy,
//! and every request it sent is still read and answered, in turn.
//!
//! The count is kept at the two ends rmcp does not hide: the transport (`transport.rs`)
//! counts each request it hands to rmcp (and each answer with an id it writes itself),
//! the writer ([`AnswerCounter`]) each answer line with an id, recognised by how rmcp
//! serializes a JSON-RPC response or error: `{"jsonrpc":"2.0","id":…`. So every request
//! counted in has exactly one answer that counts it out. A line that is no request rmcp
//! can answer with an id (`"id": null`, JSON of the wrong shape) is answered without one
//! (`{"jsonrpc":"2.0","error":…`) and counted neither in nor out: it can never fill the
//! backlog. rmcp writes no answer to a request the client cancelled, so a
//! `notifications/cancelled` counts as that answer; were it to be answered anyway, the
//! count errs low, which only lets the reader run ahead a little.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use futures_util::task::AtomicWaker;
use tokio::io::AsyncWrite;

/// Requests read but not yet answered past which the server stops reading stdin. Above
/// the bridge's own caps (256 calls per Studio, 1,024 per peer), so that it is reached
/// only by a client that writes faster than the server can answer.
pub const MAX_UNANSWERED: usize = 1024;

/// The count shared by the reader and the writer.
#[derive(Debug, Default)]
pub struct Backlog {
    unanswered: AtomicUsize,
    reader: AtomicWaker,
}

impl Backlog {
    pub fn new() -> Arc<Backlog> {
        Arc::default()
    }

    /// Requests handed to rmcp and not yet answered (as far as the count knows).
    pub fn unanswered(&self) -> usize {
        self.unanswered.load(Ordering::Relaxed)
    }

    /// A request was handed to rmcp.
    pub fn read_request(&self) {
        self.unanswered.fetch_add(1, Ordering::Relaxed);
    }

    /// `count` requests were answered (or cancelled): the reader may go on.
    pub fn answered(&self, count: usize) {
        if count == 0 {
            return;
        }
        let _ = self
            .unanswered
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| Some(n.saturating_sub(count)));
        self.reader.wake();
    }

    /// Ready while the reader may hand rmcp more requests; otherwise wakes the reader when
    /// an answer goes out.
    pub fn poll_room(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.has_room() {
            return Poll::Ready(());
        }
        self.reader.register(cx.waker());
        // An answer may have gone out between the check and the registration.
        if self.has_room() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    fn has_room(&self) -> bool {
        self.unanswered.load(Ordering::Relaxed) < MAX_UNANSWERED
    }
}

/// How every answer line rmcp writes begins (serde_json's order of `JsonRpcResponse`'s
/// and `JsonRpcError`'s fields). Notifications begin `{"jsonrpc":"2.0","method"`.
const ANSWER_START: &[u8] = br#"{"jsonrpc":"2.0","id":"#;

/// Writes what it is given and counts the answer lines among it into a [`Backlog`].
pub struct AnswerCounter<W> {
    inner: W,
    backlog: Arc<Backlog>,
    /// How many bytes of the current line are written, up to `ANSWER_START.len()`, and
    /// whether they match so far.
    line_start: usize,
    matching: bool,
}

impl<W> AnswerCounter<W> {
    pub fn new(inner: W, backlog: Arc<Backlog>) -> AnswerCounter<W> {
        AnswerCounter {
            inner,
            backlog,
            line_start: 0,
            matching: true,
        }
    }

    /// Follows the written bytes; returns how many answer lines they began.
    fn follow(&mut self, mut written: &[u8]) -> usize {
        let mut answers = 0;
        loop {
            // The start of the current line, byte by byte, until it is known.
            while self.line_start < ANSWER_START.len() {
                let Some(&byte) = written.first() else {
                    return answers;
                };
                if byte == b'\n' {
                    break;
                }
                self.matching &= ANSWER_START[self.line_start] == byte;
                self.line_start += 1;
                written = &written[1..];
                if self.line_start == ANSWER_START.len() && self.matching {
                    answers += 1;
                }
            }
            // The rest of the line (a result may be megabytes) in one search.
            match memchr::memchr(b'\n', written) {
                Some(at) => {
                    written = &written[at + 1..];
                    self.line_start = 0;
                    self.matching = true;
                }
                None => return answers,
            }
        }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for AnswerCounter<W> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let written = std::task::ready!(Pin::new(&mut this.inner).poll_write(cx, buf))?;
        let answers = this.follow(&buf[..written]);
        this.backlog.answered(answers);
        Poll::Ready(Ok(written))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn answers_are_counted_once_each_however_the_lines_are_split() {
        let backlog = Backlog::new();
        for _ in 0..5 {
            backlog.read_request();
        }
        let out = concat!(
            r#"{"jsonrpc":"2.0","id":1,"result":{"a":"{\"jsonrpc\":\"2.0\",\"id\":"}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":"x","error":{"code":-32602,"message":"m"}}"#,
            "\n",
        );
        let mut writer = AnswerCounter::new(Vec::new(), Arc::clone(&backlog));
        // In pieces of 3 bytes, so that the start of a line spans several writes.
        for piece in out.as_bytes().chunks(3) {
            writer.write_all(piece).await.unwrap();
        }
        assert_eq!(writer.inner, out.as_bytes(), "written unchanged");
        assert_eq!(
            backlog.unanswered.load(Ordering::Relaxed),
            3,
            "two answers, not the notification"
        );
    }

    #[test]
    fn the_reader_waits_at_the_bound_and_is_woken_by_an_answer() {
        let backlog = Backlog::new();
        let woken = Arc::new(std::sync::atomic::AtomicBool::new(false));
        struct Flag(Arc<std::sync::atomic::AtomicBool>);
        impl std::task::Wake for Flag {
            fn wake(self: Arc<Self>) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let waker = std::task::Waker::from(Arc::new(Flag(Arc::clone(&woken))));
        let mut cx = Context::from_waker(&waker);
        for _ in 0..MAX_UNANSWERED - 1 {
            backlog.read_request();
        }
        assert!(backlog.poll_room(&mut cx).is_ready());
        backlog.read_request();
        assert!(backlog.poll_room(&mut cx).is_pending());
        assert!(!woken.load(Ordering::Relaxed));
        backlog.answered(1);
        assert!(woken.load(Ordering::Relaxed), "an answer wakes the reader");
        assert!(backlog.poll_room(&mut cx).is_ready());
        // More answers than requests (a cancelled request answered anyway) cannot wrap.
        backlog.answered(10 * MAX_UNANSWERED);
        assert_eq!(backlog.unanswered.load(Ordering::Relaxed), 0);
    }
}

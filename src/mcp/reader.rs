//! The reader between stdin and rmcp: it bounds lines, paces reads and keeps the backlog
//! (below). Every request gets an answer, even one nested too deep to parse.
//!
//! serde_json refuses JSON nested deeper than 128 levels, and rmcp's stdio reader drops a
//! line that fails to parse without answering it (it cannot read the id of a line it
//! cannot parse), so a client that sent such a `tools/call` would wait forever. This
//! reader sits between stdin and rmcp: it passes every line through unchanged, except a
//! line nested deeper than [`MAX_DEPTH`], which it replaces with a small request that
//! rmcp can parse and that carries the original id, naming a tool that only
//! [`is_too_deep`] recognises; the MCP handler answers it with a JSON-RPC parse error
//! (-32700) for that id. A too-deep line whose id cannot be read becomes a line rmcp
//! answers with its own "Invalid request" (-32600) and a null id; a notification (no
//! id) is dropped, as notifications get no answer.
//!
//! A line longer than [`MAX_LINE_BYTES`] is not kept (rmcp would drop it unanswered): it
//! is replaced by a stand-in line ([`too_large_line`]) carrying the id read from the
//! line's first [`MAX_LINE_BYTES`], if it is there, which the transport answers with a
//! "request too large" error for that id (`transport.rs`).
//!
//! It also paces what rmcp reads: rmcp spawns a task for every request it reads, and it
//! reads all a client has pipelined before any of those tasks runs, so a burst of 10,000
//! `tools/call` lines held 10,000 tasks (and 90 MiB) at once. After handing rmcp
//! [`LINES_PER_TURN`] lines, the reader yields once to the runtime, which runs the tasks
//! already spawned (a call past the bridge's caps is answered `busy` and gone) before
//! rmcp reads on. A client sending one request at a time never reaches the pace. And
//! it stops handing out lines while too many requests are unanswered (see `backlog.rs`;
//! the transport above counts them, as it alone knows what rmcp made of a line).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, ReadBuf};

use super::backlog::Backlog;
use crate::bridge::turns::Turns;

/// Deepest nesting passed through. serde_json's own limit is 128; this stays below it
/// so that whatever rmcp wraps around the message still parses.
pub const MAX_DEPTH: usize = 100;

/// The longest line kept: rmcp's own limit. A longer one is dropped as it arrives (rmcp
/// would drop it too), so that a client that never ends its line cannot grow this
/// reader's buffer without bound.
pub const MAX_LINE_BYTES: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// The most either buffer keeps allocated between lines.
const KEPT_BUFFER_BYTES: usize = 256 * 1024;

/// Lines handed to rmcp before the reader yields to the runtime once.
pub const LINES_PER_TURN: usize = 32;

/// How long the reader waits for room in the backlog with no answer going out before it
/// hands out one more turn anyway: a safety net. Only requests rmcp is handed are counted,
/// and each is answered or cancelled, so the backlog drains by itself (logged at debug
/// when the net is used).
const BACKLOG_STALL: Duration = Duration::from_secs(2);

/// How the stand-in for a line over [`MAX_LINE_BYTES`] begins; the transport answers a
/// line that begins so (`{"method":…,"jsonrpc":"2.0"}` and the id, if one was read).
pub const TOO_LARGE_START: &str = r#"{"method":"studio-bridge/request-too-large""#;

/// The stand-in for a line over the limit, with its id as written (`None`: none was
/// found before the limit).
fn too_large_line(id: Option<&str>) -> String {
    match id {
        Some(id) => format!(r#"{TOO_LARGE_START},"jsonrpc":"2.0","id":{id}}}"#),
        None => format!(r#"{TOO_LARGE_START},"jsonrpc":"2.0"}}"#),
    }
}

/// The error text for a line over the limit.
pub fn too_large_message() -> String {
    format!(
        "Request too large: the message is longer than the {} MiB ({MAX_LINE_BYTES} bytes) this server reads in one line, so it was not read. Send less in one request (e.g. split a large script or source over several calls).",
        MAX_LINE_BYTES / (1024 * 1024)
    )
}

/// The tool name a too-deep request is replaced with (never listed by `tools/list`).
const TOO_DEEP_TOOL: &str = "studio-bridge/nesting-too-deep";

/// Whether a `tools/call` is the stand-in for a line nested too deep.
pub fn is_too_deep(tool: &str) -> bool {
    tool == TOO_DEEP_TOOL
}

/// The error text for such a call.
pub fn too_deep_message() -> String {
    format!(
        "The request nests JSON deeper than {MAX_DEPTH} levels, which this server cannot parse. Send flatter arguments (e.g. a Luau table built in the script instead of a deeply nested argument)."
    )
}

/// Reads lines from `inner` and hands them on, replacing any line nested too deep or too
/// long, a turn at a time while the backlog has room.
pub struct LineReader<R> {
    inner: R,
    /// Bytes read but not yet ending in a newline.
    partial: Vec<u8>,
    /// Checked lines ready for the reader, from `ready_at` on.
    ready: Vec<u8>,
    ready_at: usize,
    chunk: Box<[u8]>,
    eof: bool,
    /// Lines handed out this turn ([`LINES_PER_TURN`] a turn).
    turns: Turns,
    backlog: Arc<Backlog>,
    /// Running while the reader waits for room in the backlog.
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Dropping the rest of a line longer than [`MAX_LINE_BYTES`].
    discarding: bool,
}

impl<R> LineReader<R> {
    pub fn new(inner: R, backlog: Arc<Backlog>) -> LineReader<R> {
        LineReader {
            inner,
            partial: Vec::new(),
            ready: Vec::new(),
            ready_at: 0,
            chunk: vec![0; 64 * 1024].into_boxed_slice(),
            eof: false,
            turns: Turns::new(LINES_PER_TURN),
            backlog,
            stall: None,
            discarding: false,
        }
    }

    /// Moves every complete line of `partial` (searching from `from`) to `ready`.
    fn take_lines(&mut self, from: usize) {
        let mut start = 0;
        let mut search = from;
        while let Some(offset) = self.partial[search..].iter().position(|&b| b == b'\n') {
            let end = search + offset + 1;
            let line = &self.partial[start..end];
            if line.len() > MAX_LINE_BYTES {
                let stand_in = too_long(&line[..MAX_LINE_BYTES]);
                self.ready.extend_from_slice(stand_in.as_bytes());
                self.ready.push(b'\n');
                start = end;
                search = end;
                continue;
            }
            match checked(line) {
                Checked::Pass => self.ready.extend_from_slice(line),
                Checked::Replace(replacement) => {
                    tracing::warn!(bytes = line.len(), "answered a request nested too deep to parse");
                    self.ready.extend_from_slice(replacement.as_bytes());
                    self.ready.push(b'\n');
                }
                Checked::Drop => tracing::warn!("dropped a notification nested too deep to parse"),
            }
            start = end;
            search = end;
        }
        self.partial.drain(..start);
        // A large line's buffer is not kept once it has gone.
        self.partial.shrink_to(KEPT_BUFFER_BYTES);
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LineReader<R> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.ready_at < this.ready.len() {
                if this.turns.poll_next_turn(cx).is_pending() {
                    return Poll::Pending;
                }
                if this.backlog.poll_room(cx).is_pending() {
                    let stall = this
                        .stall
                        .get_or_insert_with(|| Box::pin(tokio::time::sleep(BACKLOG_STALL)));
                    if stall.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    tracing::debug!("no answer went out while the backlog was full; reading on");
                }
                this.stall = None;
                let ready = &this.ready[this.ready_at..];
                let window = &ready[..buf.remaining().min(ready.len())];
                // What fits, but no further than the end of this turn's last line.
                let mut n = window.len();
                let room = this.turns.room();
                let mut lines = 0;
                for at in memchr::memchr_iter(b'\n', window) {
                    lines += 1;
                    if lines == room {
                        n = at + 1;
                        break;
                    }
                }
                this.turns.spend(lines);
                buf.put_slice(&window[..n]);
                this.ready_at += n;
                if this.ready_at == this.ready.len() {
                    this.ready.clear();
                    this.ready.shrink_to(KEPT_BUFFER_BYTES);
                    this.ready_at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                // An unterminated last line is passed on as it is (rmcp discards it).
                if this.partial.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                this.ready.append(&mut this.partial);
                continue;
            }
            let mut chunk = ReadBuf::new(&mut this.chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut chunk) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                Poll::Ready(Ok(())) => {
                    let filled = chunk.filled().len();
                    if filled == 0 {
                        this.eof = true;
                        continue;
                    }
                    let mut read = &this.chunk[..filled];
                    if this.discarding {
                        // The rest of a line too long to keep, up to its newline.
                        match memchr::memchr(b'\n', read) {
                            Some(at) => {
                                this.discarding = false;
                                read = &read[at + 1..];
                            }
                            None => continue,
                        }
                    }
                    let from = this.partial.len();
                    this.partial.extend_from_slice(read);
                    this.take_lines(from);
                    if this.partial.len() > MAX_LINE_BYTES {
                        // Answered now, from the line's start; the rest is skipped as it comes.
                        let stand_in = too_long(&this.partial[..MAX_LINE_BYTES]);
                        this.ready.extend_from_slice(stand_in.as_bytes());
                        this.ready.push(b'\n');
                        this.partial = Vec::new();
                        this.discarding = true;
                    }
                }
            }
        }
    }
}

/// The stand-in for a line over the limit, from its first [`MAX_LINE_BYTES`] (`start`).
fn too_long(start: &[u8]) -> String {
    let id = scan(start).id;
    tracing::error!(
        limit = MAX_LINE_BYTES,
        id = id.as_deref().unwrap_or("none found"),
        "a message from the client was longer than the limit; it is answered \"request too large\""
    );
    too_large_line(id.as_deref())
}

enum Checked {
    Pass,
    Replace(String),
    Drop,
}

fn checked(line: &[u8]) -> Checked {
    let scan = scan(line);
    if scan.max_depth <= MAX_DEPTH {
        return Checked::Pass;
    }
    match scan.id {
        Some(id) => Checked::Replace(format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{TOO_DEEP_TOOL}"}}}}"#
        )),
        None if scan.has_method && !scan.has_id_key => Checked::Drop,
        // Valid JSON of the wrong shape: rmcp answers it with "Invalid request".
        None => Checked::Replace(r#"{"jsonrpc":"2.0","error":"nested too deep"}"#.to_owned()),
    }
}

struct Scan {
    max_depth: usize,
    /// The top-level `id`'s value as written, if it is a number or a string.
    id: Option<String>,
    has_id_key: bool,
    has_method: bool,
}

/// One pass over a line: its deepest nesting, and its top-level `id` and `method` keys.
/// Strings (with escapes) are skipped, so brackets inside them do not count.
fn scan(line: &[u8]) -> Scan {
    let mut result = Scan {
        max_depth: 0,
        id: None,
        has_id_key: false,
        has_method: false,
    };
    let mut depth = 0usize;
    let mut i = 0;
    // The last top-level string seen, while it may still be a key.
    let mut last_key: Option<(usize, usize)> = None;
    while i < line.len() {
        match line[i] {
            b'"' => {
                let start = i;
                i += 1;
                // The string's body, a run at a time: most of a request's bytes are in
                // its strings (a script, a source), so they are skipped with memchr.
                loop {
                    match line.get(i..).and_then(|rest| memchr::memchr2(b'"', b'\\', rest)) {
                        Some(at) if line[i + at] == b'"' => {
                            i += at;
                            break;
                        }
                        Some(at) => i += at + 2,
                        None => {
                            i = line.len();
                            break;
                        }
                    }
                }
                if depth == 1 {
                    last_key = Some((start, (i + 1).min(line.len())));
                }
            }
            b'{' | b'[' => {
                depth += 1;
                result.max_depth = result.max_depth.max(depth);
                last_key = None;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                last_key = None;
            }
            b':' if depth == 1 => {
                if let Some((start, end)) = last_key.take() {
                    match &line[start..end] {
                        br#""id""# => {
                            result.has_id_key = true;
                            result.id = scalar_after(&line[i + 1..]);
                        }
                        br#""method""# => result.has_method = true,
                        _ => {}
                    }
                }
            }
            b',' => last_key = None,
            _ => {}
        }
        i += 1;
    }
    result
}

/// A JSON number or string at the start of `rest` (after whitespace), as written.
fn scalar_after(rest: &[u8]) -> Option<String> {
    let start = rest.iter().position(|b| !b.is_ascii_whitespace())?;
    let rest = &rest[start..];
    let end = if rest.first() == Some(&b'"') {
        let mut i = 1;
        while i < rest.len() && rest[i] != b'"' {
            i += if rest[i] == b'\\' { 2 } else { 1 };
        }
        (i + 1).min(rest.len())
    } else {
        // A number that runs to the end of the text may have been cut there (the start of
        // a line over the limit): not an id to answer with.
        rest.iter()
            .position(|b| !(b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E')))?
    };
    let token = std::str::from_utf8(&rest[..end]).ok()?;
    // Only what JSON-RPC allows as an id, checked by parsing it.
    match serde_json::from_str::<serde_json::Value>(token).ok()? {
        serde_json::Value::Number(_) | serde_json::Value::String(_) => Some(token.to_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn nested(depth: usize) -> String {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }

    fn call(id: &str, depth: usize) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"studio_exec","arguments":{{"script":"x","deep":{}}}}}}}"#,
            nested(depth)
        )
    }

    async fn through_guard(input: &str) -> String {
        let mut guard = LineReader::new(input.as_bytes(), Backlog::new());
        let mut out = String::new();
        guard.read_to_string(&mut out).await.unwrap();
        out
    }

    #[test]
    fn depth_and_id_are_read_outside_strings() {
        let found = scan(br#"{"a":"[[[[{{","id":7,"b":[[1]]}"#);
        assert_eq!(found.max_depth, 3);
        assert_eq!(found.id.as_deref(), Some("7"));
        let found = scan(br#"{"params":{"id":1},"id":"x\"y"}"#);
        assert_eq!(found.id.as_deref(), Some(r#""x\"y""#), "only the top-level id");
        assert!(!scan(br#"{"method":"m","params":{"id":1}}"#).has_id_key);
    }

    #[test]
    fn a_burst_is_handed_on_a_turn_at_a_time_and_unchanged() {
        let input: String = (0..100).map(|n| format!("{}\n", call(&n.to_string(), 2))).collect();
        let mut guard = LineReader::new(input.as_bytes(), Backlog::new());
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut space = vec![0u8; 1 << 20];
        let (mut out, mut turns, mut this_turn) = (Vec::new(), Vec::new(), 0);
        loop {
            let mut buf = ReadBuf::new(&mut space);
            match Pin::new(&mut guard).poll_read(&mut cx, &mut buf) {
                Poll::Pending => turns.push(std::mem::take(&mut this_turn)),
                Poll::Ready(Ok(())) if buf.filled().is_empty() => break,
                Poll::Ready(Ok(())) => {
                    this_turn += buf.filled().iter().filter(|&&b| b == b'\n').count();
                    out.extend_from_slice(buf.filled());
                }
                Poll::Ready(Err(error)) => panic!("{error}"),
            }
        }
        turns.push(this_turn);
        assert_eq!(String::from_utf8(out).unwrap(), input);
        assert_eq!(
            turns,
            [LINES_PER_TURN, LINES_PER_TURN, LINES_PER_TURN, 100 - 3 * LINES_PER_TURN]
        );
    }

    #[tokio::test]
    async fn a_line_over_the_limit_becomes_a_stand_in_with_the_id_from_its_start() {
        let long = "x".repeat(MAX_LINE_BYTES + 1);
        let with_id = format!(
            r#"{{"jsonrpc":"2.0","id":"big-1","method":"tools/call","params":{{"name":"studio_exec","arguments":{{"script":"{long}"}}}}}}"#
        );
        // The id comes after the limit: not known.
        let id_too_late = format!(r#"{{"params":{{"x":"{long}"}},"id":9}}"#);
        let input = format!("{}\n{with_id}\n{long}\n{id_too_late}\n{}\n", call("1", 2), call("2", 2));
        let mut guard = LineReader::new(input.as_bytes(), Backlog::new());
        let mut out = String::new();
        guard.read_to_string(&mut out).await.unwrap();
        assert_eq!(
            out,
            format!(
                "{}\n{}\n{}\n{}\n{}\n",
                call("1", 2),
                too_large_line(Some(r#""big-1""#)),
                too_large_line(None),
                too_large_line(None),
                call("2", 2)
            )
        );
        assert!(guard.partial.capacity() < MAX_LINE_BYTES, "nothing of it is kept");
        let stand_in: serde_json::Value = serde_json::from_str(&too_large_line(Some("7"))).unwrap();
        assert_eq!(stand_in["id"], 7);
        assert!(too_large_line(Some("7")).starts_with(TOO_LARGE_START));
    }

    #[test]
    fn a_number_cut_at_the_end_of_the_text_is_no_id() {
        assert_eq!(scan(br#"{"id":12"#).id, None);
        assert_eq!(scan(br#"{"id":"ab"#).id, None);
        assert_eq!(scan(br#"{"id":12,"#).id.as_deref(), Some("12"));
    }

    #[tokio::test]
    async fn ordinary_lines_pass_unchanged() {
        let input = format!("{}\n{}\n", call("1", 3), call("\"two\"", 90));
        assert_eq!(through_guard(&input).await, input);
    }

    #[tokio::test]
    async fn a_too_deep_request_becomes_a_stand_in_with_its_id() {
        for depth in [125, 128, 200, 10_000] {
            let out = through_guard(&format!("{}\n{}\n", call("42", depth), call("43", 2))).await;
            let mut lines = out.lines();
            let first: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
            assert_eq!(first["id"], 42, "depth {depth}");
            assert!(is_too_deep(first["params"]["name"].as_str().unwrap()));
            assert_eq!(lines.next().unwrap(), call("43", 2), "the next line is untouched");
        }
    }

    #[tokio::test]
    async fn without_an_id_a_request_gets_invalid_request_and_a_notification_nothing() {
        let deep = nested(300);
        let out = through_guard(&format!("{{\"jsonrpc\":\"2.0\",\"params\":{deep}}}\n")).await;
        let line: serde_json::Value = serde_json::from_str(out.trim_end()).unwrap();
        assert!(line.get("method").is_none() && line.get("id").is_none());
        let out = through_guard(&format!("{{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":{deep}}}\n")).await;
        assert_eq!(out, "");
    }
}

//! Every request gets an answer, even one nested too deep to parse.
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

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// Deepest nesting passed through. serde_json's own limit is 128; this stays below it
/// so that whatever rmcp wraps around the message still parses.
pub const MAX_DEPTH: usize = 100;

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

/// Reads lines from `inner` and hands them on, replacing any line nested too deep.
pub struct NestingGuard<R> {
    inner: R,
    /// Bytes read but not yet ending in a newline.
    partial: Vec<u8>,
    /// Checked lines ready for the reader, from `ready_at` on.
    ready: Vec<u8>,
    ready_at: usize,
    chunk: Box<[u8]>,
    eof: bool,
}

impl<R> NestingGuard<R> {
    pub fn new(inner: R) -> NestingGuard<R> {
        NestingGuard {
            inner,
            partial: Vec::new(),
            ready: Vec::new(),
            ready_at: 0,
            chunk: vec![0; 64 * 1024].into_boxed_slice(),
            eof: false,
        }
    }

    /// Moves every complete line of `partial` (searching from `from`) to `ready`.
    fn take_lines(&mut self, from: usize) {
        let mut start = 0;
        let mut search = from;
        while let Some(offset) = self.partial[search..].iter().position(|&b| b == b'\n') {
            let end = search + offset + 1;
            let line = &self.partial[start..end];
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
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for NestingGuard<R> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.ready_at < this.ready.len() {
                let n = buf.remaining().min(this.ready.len() - this.ready_at);
                buf.put_slice(&this.ready[this.ready_at..this.ready_at + n]);
                this.ready_at += n;
                if this.ready_at == this.ready.len() {
                    this.ready.clear();
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
                    let from = this.partial.len();
                    this.partial.extend_from_slice(&this.chunk[..filled]);
                    this.take_lines(from);
                }
            }
        }
    }
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
                while i < line.len() && line[i] != b'"' {
                    i += if line[i] == b'\\' { 2 } else { 1 };
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
        rest.iter()
            .position(|b| !(b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E')))
            .unwrap_or(rest.len())
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
        let mut guard = NestingGuard::new(input.as_bytes());
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

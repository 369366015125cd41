//! Results spliced into the JSON-RPC line as text already written.
//!
//! rmcp serializes every message it sends, so a tool result would have to be a tree of
//! JSON (`structuredContent`) plus its text. A command's result is already compact JSON
//! text, so that tree is built only to be written again: parsing the text, serializing
//! the tree and freeing it was about an eighth of the host's work on a small `exec`, and for a
//! 10 MB result most of the time the call takes, on the async thread. Instead a result
//! goes to rmcp as two short placeholder strings, and what writes rmcp's line puts in
//! their place the bytes prepared for them: the result's JSON text as
//! `structuredContent`, and the same text as a JSON string for the text block.
//!
//! A small result's parts are put in by the line's encoder, in memory
//! ([`Splicer::splice_small`]), so the line still goes out in one write. A large
//! result's parts are put in by the writer beneath as it writes ([`SplicingWriter`]), so
//! they are never copied into the line.
//!
//! A placeholder is `"\u0001studio-bridge:<nonce>:<n><t|s>"`, with a random nonce per
//! process: a tool result that happens to contain such a string (an `exec` return) cannot
//! name a prepared part, and one that does not name a prepared part is written as it is.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use memchr::memmem;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value as Json;
use tokio::io::AsyncWrite;
use tokio_util::bytes::BytesMut;

/// Results at least this large are written into the line by the writer as it writes
/// ([`SplicingWriter`]); smaller ones are put into the line by its encoder
/// ([`Splicer::splice_small`]).
pub const SPLICE_MIN_BYTES: usize = 64 * 1024;

/// A prepared part nobody wrote within this time (its call was cancelled and the
/// answer never sent) is dropped when the next one is prepared.
const STALE_AFTER: Duration = Duration::from_secs(600);

/// Which part of a result a placeholder stands for: `<n>t` (the text block) or `<n>s`
/// (`structuredContent`).
type Key = (u64, u8);

struct Part {
    made: Instant,
    bytes: Vec<u8>,
    /// Put in by the encoder ([`Splicer::splice_small`]) rather than the writer.
    small: bool,
}

/// The parts prepared for results on their way out, by placeholder.
pub struct Splicer {
    /// `"\u0001studio-bridge:<nonce>:` as serde_json writes it: what the encoder and the
    /// writer look for in every line. Built once: building a searcher for a needle this
    /// long cost more than the search of a small answer.
    marker: memmem::Finder<'static>,
    nonce: String,
    next: AtomicU64,
    parts: Mutex<HashMap<Key, Part>>,
}

impl Splicer {
    pub fn new() -> Arc<Splicer> {
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        Arc::new(Splicer {
            marker: memmem::Finder::new(format!("\"\\u0001studio-bridge:{nonce}:").as_bytes()).into_owned(),
            nonce,
            next: AtomicU64::new(1),
            parts: Mutex::new(HashMap::new()),
        })
    }

    /// The tool result for `text` (compact JSON of an object) and `quoted`, the same text
    /// as a JSON string, quotes included (as `commands::bound::bound_raw_quoted` writes
    /// them): its text block and `structuredContent` are placeholders filled in when the
    /// line is written.
    pub fn result(&self, text: String, quoted: Vec<u8>) -> CallToolResult {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let small = quoted.len() < SPLICE_MIN_BYTES;
        {
            let now = Instant::now();
            let mut parts = self.parts.lock().unwrap_or_else(|p| p.into_inner());
            if !parts.is_empty() {
                parts.retain(|_, part| now.duration_since(part.made) < STALE_AFTER);
            }
            let part = |bytes| Part {
                made: now,
                bytes,
                small,
            };
            parts.insert((n, b't'), part(quoted));
            parts.insert((n, b's'), part(text.into_bytes()));
        }
        // Built by hand: `format!` cost more than the rest of a small result's splicing.
        let placeholder = |kind| {
            let mut text = String::with_capacity(self.nonce.len() + 40);
            text.push_str("\u{1}studio-bridge:");
            text.push_str(&self.nonce);
            text.push(':');
            text.push_str(itoa::Buffer::new().format(n));
            text.push(kind);
            text
        };
        let mut result = CallToolResult::success(vec![ContentBlock::text(placeholder('t'))]);
        result.structured_content = Some(Json::String(placeholder('s')));
        result
    }

    /// `line` into `out`, with the placeholder of each small part replaced by the part.
    /// Large parts' placeholders are left for the writer.
    pub fn splice_small(&self, line: &[u8], out: &mut BytesMut) {
        let mut rest = line;
        while let Some(at) = self.find(rest) {
            out.extend_from_slice(&rest[..at]);
            match self.part_at(&rest[at..], true) {
                Some((part, replaced)) => {
                    out.extend_from_slice(&part);
                    rest = &rest[at + replaced..];
                }
                None => {
                    // Not a small part of ours: its first byte goes as it is.
                    out.extend_from_slice(&rest[at..=at]);
                    rest = &rest[at + 1..];
                }
            }
        }
        out.extend_from_slice(rest);
    }

    /// Where a placeholder starts in `buf`, if one does.
    fn find(&self, buf: &[u8]) -> Option<usize> {
        self.marker.find(buf)
    }

    /// The prepared part for the placeholder at the start of `buf` (only a small one if
    /// `small_only`), taken, and the placeholder's length with its quotes.
    fn part_at(&self, buf: &[u8], small_only: bool) -> Option<(Vec<u8>, usize)> {
        let marker = self.marker.needle().len();
        let rest = buf.get(marker..)?;
        let close = memchr::memchr(b'"', rest)?;
        let (&kind, n) = rest[..close].split_last()?;
        let n: u64 = std::str::from_utf8(n).ok()?.parse().ok()?;
        let mut parts = self.parts.lock().unwrap_or_else(|p| p.into_inner());
        let entry = match parts.entry((n, kind)) {
            Entry::Occupied(entry) if entry.get().small || !small_only => entry,
            _ => return None,
        };
        Some((entry.remove().bytes, marker + close + 1))
    }
}

/// An `AsyncWrite` that writes what it is given, with each placeholder replaced by its
/// prepared part.
pub struct SplicingWriter<W> {
    inner: W,
    splicer: Arc<Splicer>,
    /// A part being written: its bytes, how many are written, and the length of the
    /// placeholder it replaces (reported as written once the part is).
    active: Option<(Vec<u8>, usize, usize)>,
}

impl<W> SplicingWriter<W> {
    pub fn new(inner: W, splicer: Arc<Splicer>) -> SplicingWriter<W> {
        SplicingWriter {
            inner,
            splicer,
            active: None,
        }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for SplicingWriter<W> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        loop {
            if let Some((part, written, replaces)) = &mut this.active {
                while *written < part.len() {
                    match Pin::new(&mut this.inner).poll_write(cx, &part[*written..]) {
                        Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                        Poll::Ready(Ok(n)) => *written += n,
                        other => return other,
                    }
                }
                let replaced = *replaces;
                this.active = None;
                return Poll::Ready(Ok(replaced));
            }
            match this.splicer.find(buf) {
                None => return Pin::new(&mut this.inner).poll_write(cx, buf),
                Some(0) => match this.splicer.part_at(buf, false) {
                    Some((part, replaces)) => this.active = Some((part, 0, replaces)),
                    // Not a placeholder of ours after all: its first byte goes as it is.
                    None => return Pin::new(&mut this.inner).poll_write(cx, &buf[..1]),
                },
                Some(at) => return Pin::new(&mut this.inner).poll_write(cx, &buf[..at]),
            }
        }
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
    use crate::commands::bound::quote_json_text;

    /// A result for `text`, quoted as the conversion of a plugin's result quotes it.
    fn result(splicer: &Splicer, text: String) -> CallToolResult {
        let quoted = quote_json_text(&text);
        splicer.result(text, quoted)
    }
    use tokio::io::AsyncWriteExt;

    /// A sink that takes at most `chunk` bytes a call, to split every write.
    struct Trickle {
        out: Vec<u8>,
        chunk: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            let n = buf.len().min(self.chunk);
            self.out.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_spliced_result_is_the_line_rmcp_would_have_written() {
        let text =
            serde_json::json!({"a": "quote \" and \\ and \n", "b": [1, 2.5, null], "sessionId": "S"}).to_string();
        let splicer = Splicer::new();
        let spliced = result(&splicer, text.clone());
        let mut plain = CallToolResult::success(vec![ContentBlock::text(text.clone())]);
        plain.structured_content = Some(serde_json::from_str(&text).unwrap());
        for chunk in [1, 7, 4096] {
            let spliced = if chunk == 1 {
                spliced.clone()
            } else {
                result(&splicer, text.clone())
            };
            let mut writer = SplicingWriter::new(Trickle { out: Vec::new(), chunk }, Arc::clone(&splicer));
            let mut line = serde_json::to_vec(&spliced).unwrap();
            // Something before and after, and a string that only looks like a placeholder.
            line.splice(0..0, br#"{"x":"\u0001studio-bridge:"}"#.iter().copied());
            writer.write_all(&line).await.unwrap();
            let out = String::from_utf8(writer.inner.out).unwrap();
            let expected = format!(
                r#"{{"x":"\u0001studio-bridge:"}}{}"#,
                serde_json::to_string(&plain).unwrap()
            );
            assert_eq!(out, expected, "chunk {chunk}");
        }
        assert!(splicer.parts.lock().unwrap().is_empty(), "written parts are dropped");
    }

    /// A result as rmcp writes it without splicing: the text, and the tree parsed from it.
    fn plain(text: &str) -> Vec<u8> {
        let mut plain = CallToolResult::success(vec![ContentBlock::text(text.to_owned())]);
        plain.structured_content = Some(serde_json::from_str(text).unwrap());
        serde_json::to_vec(&plain).unwrap()
    }

    #[test]
    fn a_small_result_is_spliced_by_the_encoder_into_the_line_rmcp_would_have_written() {
        let text = serde_json::json!({"returns": ["quote \" and \\", 2.5, null], "sessionId": "S"}).to_string();
        let splicer = Splicer::new();
        let line = serde_json::to_vec(&result(&splicer, text.clone())).unwrap();
        let mut out = BytesMut::new();
        splicer.splice_small(&line, &mut out);
        assert_eq!(String::from_utf8_lossy(&out), String::from_utf8_lossy(&plain(&text)));
        assert!(splicer.parts.lock().unwrap().is_empty(), "spliced parts are dropped");
    }

    #[tokio::test]
    async fn a_large_result_is_left_to_the_writer_by_the_encoder() {
        let text = serde_json::json!({"body": "x".repeat(SPLICE_MIN_BYTES)}).to_string();
        let splicer = Splicer::new();
        let line = serde_json::to_vec(&result(&splicer, text.clone())).unwrap();
        let mut out = BytesMut::new();
        splicer.splice_small(&line, &mut out);
        assert_eq!(&out[..], &line[..], "the placeholders stay in the line");
        let mut writer = SplicingWriter::new(
            Trickle {
                out: Vec::new(),
                chunk: 4096,
            },
            Arc::clone(&splicer),
        );
        writer.write_all(&out).await.unwrap();
        assert!(writer.inner.out == plain(&text), "the writer puts the parts in");
        assert!(splicer.parts.lock().unwrap().is_empty());
    }

    #[test]
    fn compact_json_is_quoted_as_serde_json_quotes_it() {
        let value = serde_json::json!({
            "quote": "a \" b", "backslash": "c \\ d", "controls": "\n\t\r\u{1}\u{1f}\u{8}\u{c}",
            "unicode": "é 漢 🎮 \u{2028} \u{7f}", "nested": [{"k\"ey": [1, -2.5, null, true]}], "": ""
        });
        let text = serde_json::to_string(&value).unwrap();
        assert_eq!(quote_json_text(&text), serde_json::to_vec(&text).unwrap());
        assert_eq!(quote_json_text("{}"), br#""{}""#);
    }

    #[tokio::test]
    async fn a_placeholder_with_the_wrong_nonce_is_written_as_it_is() {
        let splicer = Splicer::new();
        let other = Splicer::new();
        let foreign = serde_json::to_vec(&result(&other, "{}".into())).unwrap();
        let mut writer = SplicingWriter::new(
            Trickle {
                out: Vec::new(),
                chunk: 3,
            },
            splicer,
        );
        writer.write_all(&foreign).await.unwrap();
        assert_eq!(writer.inner.out, foreign);
    }
}

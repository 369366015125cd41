//! The stdio transport under rmcp, with the one message agents send most read directly.
//!
//! rmcp reads every line into its message types through serde's buffered paths (an
//! untagged enum over flattened structs, three levels deep): about 7 µs for a small
//! `tools/call`, the largest cost of the call that is ours to choose. This transport
//! reads a line that is plainly a `tools/call` (`jsonrpc`, `id`, `method` and `params`
//! with only `_meta`, `name` and `arguments`, nothing else) straight into the message rmcp
//! would have built, in a fifth of the time, and hands every other line to rmcp's own
//! decoder, so that rmcp's reading, its leniency and its errors stay as they are. A
//! test holds the direct reading equal to rmcp's on every line it accepts.
//!
//! The writer is rmcp's design, a codec under a lock as `AsyncRwTransport` has it, with
//! two changes. A message is serialized into a plain buffer and copied to the pipe's in
//! one piece ([`LineEncoder`]), where rmcp's codec has serde_json write each fragment
//! (every run between two escapes of the result's text) through `BytesMut`'s writer; the
//! copy puts in a small result's prepared parts (`splice.rs`). And a message with none
//! waiting before it is written during [`Transport::send`] itself, not by the task rmcp
//! spawns for it ([`send`]). What rmcp's stdio transport does besides, this one does
//! the same way: a line that is not JSON is skipped, and JSON that is not a message is
//! answered `Invalid request`.
//! Lines longer than rmcp's limit never get here: the reader beneath (`reader.rs`)
//! replaces each with a stand-in that this transport answers "request too large", with
//! the line's id when its start held one.
//!
//! It also counts, for the backlog (`backlog.rs`), the requests it hands rmcp and the
//! answers with an id it writes itself: it alone knows what a line became. A line rmcp
//! cannot make a request of (`"id": null`, a malformed one) is answered here without an
//! id, or skipped, and never counted, so it cannot hold the reader back.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use futures_util::SinkExt as _;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientNotification, ClientRequest, ErrorCode, ErrorData, JsonObject,
    JsonRpcMessage, JsonRpcRequest, NumberOrString, RequestMetaObject,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::{JsonRpcMessageCodec, JsonRpcMessageCodecError};
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, BufReader};
use tokio::sync::Mutex;
use tokio_util::bytes::BytesMut;
use tokio_util::codec::{Decoder as _, Encoder, FramedWrite};

use super::backlog::Backlog;
use super::reader::{TOO_LARGE_START, too_large_message};
use super::splice::Splicer;

type Writer<W> = FramedWrite<W, LineEncoder>;
type Sending = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

pub struct StdioTransport<R, W> {
    read: BufReader<R>,
    /// The line being read: a read cancelled part-way resumes it.
    line: Vec<u8>,
    write: Arc<Out<W>>,
    /// rmcp's decoder, for every line not read directly.
    decoder: JsonRpcMessageCodec<RxJsonRpcMessage<RoleServer>>,
    /// An `Invalid request` answer being written: kept across a cancelled `receive`, so
    /// that it goes out once, whole.
    answering: Option<Sending>,
    /// Requests handed to rmcp and not yet answered.
    backlog: Arc<Backlog>,
}

impl<R: AsyncRead, W: AsyncWrite> StdioTransport<R, W> {
    /// A transport reading `read` and writing `write`, with `splicer`'s small parts put
    /// into the lines it writes, counting the requests it reads into `backlog`.
    pub fn new(read: R, write: W, splicer: Arc<Splicer>, backlog: Arc<Backlog>) -> StdioTransport<R, W> {
        StdioTransport {
            read: BufReader::new(read),
            line: Vec::new(),
            write: Arc::new(Out {
                writer: Mutex::new(Some(FramedWrite::new(
                    write,
                    LineEncoder {
                        line: Vec::new(),
                        splicer,
                    },
                ))),
                waiting: AtomicUsize::new(0),
            }),
            decoder: JsonRpcMessageCodec::default(),
            answering: None,
            backlog,
        }
    }
}

impl<R: AsyncRead + Unpin, W> StdioTransport<R, W> {
    /// Reads up to the next newline into `line`; false at the end of the input. Nothing
    /// is lost when the future is dropped: what was taken from the buffer is in `line`.
    async fn read_line(&mut self) -> bool {
        loop {
            let available = match self.read.fill_buf().await {
                Ok([]) => return false,
                Ok(available) => available,
                Err(error) => {
                    tracing::error!("cannot read stdin: {error}");
                    return false;
                }
            };
            let newline = memchr::memchr(b'\n', available);
            let take = newline.map_or(available.len(), |at| at + 1);
            self.line.extend_from_slice(&available[..take]);
            self.read.consume(take);
            if newline.is_some() {
                return true;
            }
        }
    }
}

impl<R, W> Transport<RoleServer> for StdioTransport<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = io::Error;

    fn send(&mut self, item: TxJsonRpcMessage<RoleServer>) -> impl Future<Output = io::Result<()>> + Send + 'static {
        send(&self.write, item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if let Some(answering) = self.answering.as_mut() {
                let sent = answering.await;
                self.answering = None;
                sent.ok()?;
            }
            if !self.read_line().await {
                tracing::info!(
                    unanswered = self.backlog.unanswered(),
                    "the MCP client closed its input"
                );
                return None;
            }
            let line = std::mem::take(&mut self.line);
            let message = match tools_call(trimmed(&line)) {
                Some(message) => Some(message),
                None if line.starts_with(TOO_LARGE_START.as_bytes()) => {
                    self.answer_too_large(&line);
                    None
                }
                None => self.decoded(&line),
            };
            // The buffer is kept for the next line.
            self.line = line;
            self.line.clear();
            match &message {
                Some(JsonRpcMessage::Request(_)) => self.backlog.read_request(),
                // rmcp writes no answer to a request the client cancelled.
                Some(JsonRpcMessage::Notification(notification))
                    if matches!(notification.notification, ClientNotification::CancelledNotification(_)) =>
                {
                    self.backlog.answered(1);
                }
                Some(_) => {}
                None => continue,
            }
            return message;
        }
    }

    async fn close(&mut self) -> io::Result<()> {
        self.write.writer.lock().await.take();
        Ok(())
    }
}

impl<R, W: AsyncWrite + Send + Unpin + 'static> StdioTransport<R, W> {
    /// Answers the stand-in for a line over the limit (`reader.rs`): "request too large"
    /// for its id, or without an id when none was read.
    fn answer_too_large(&mut self, line: &[u8]) {
        #[derive(Deserialize)]
        struct StandIn {
            #[serde(default)]
            id: Option<NumberOrString>,
        }
        let id = serde_json::from_slice::<StandIn>(trimmed(line)).ok().and_then(|s| s.id);
        if id.is_some() {
            // Its answer carries the id and is counted out like any other.
            self.backlog.read_request();
        }
        let error = ErrorData::new(ErrorCode::INVALID_REQUEST, too_large_message(), None);
        let answer = TxJsonRpcMessage::<RoleServer>::error(error, id);
        self.answering = Some(Box::pin(send(&self.write, answer)));
    }

    /// A line as rmcp reads it. A line that is not JSON is skipped (answering what has
    /// no id could start an error storm with a client that echoes); JSON of the wrong
    /// shape is answered `Invalid request`, with no id.
    fn decoded(&mut self, line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
        match self.decoder.decode(&mut BytesMut::from(line)) {
            Ok(message) => message,
            Err(JsonRpcMessageCodecError::Serde(error))
                if matches!(
                    error.classify(),
                    serde_json::error::Category::Syntax | serde_json::error::Category::Eof
                ) =>
            {
                tracing::debug!("skipped a line that is not JSON: {error}");
                None
            }
            Err(error) => {
                tracing::debug!("answered a message that is not JSON-RPC: {error}");
                let answer =
                    TxJsonRpcMessage::<RoleServer>::error(ErrorData::invalid_request("Invalid request", None), None);
                self.answering = Some(Box::pin(send(&self.write, answer)));
                None
            }
        }
    }
}

/// Writes each message as one line of JSON, as rmcp's codec does, with the small
/// parts of results put in.
struct LineEncoder {
    /// Where a message is serialized; kept for the next one, up to [`KEPT_LINE_BYTES`].
    line: Vec<u8>,
    splicer: Arc<Splicer>,
}

/// The most buffer [`LineEncoder`] keeps between messages: a large result's line is
/// mostly spliced in later (`splice.rs`), so a line this long is rare.
const KEPT_LINE_BYTES: usize = 64 * 1024;

impl Encoder<TxJsonRpcMessage<RoleServer>> for LineEncoder {
    type Error = io::Error;

    fn encode(&mut self, item: TxJsonRpcMessage<RoleServer>, dst: &mut BytesMut) -> io::Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, &item)?;
        self.line.push(b'\n');
        self.splicer.splice_small(&self.line, dst);
        if self.line.capacity() > KEPT_LINE_BYTES {
            self.line = Vec::new();
        }
        Ok(())
    }
}

/// The writing half: rmcp's codec under an async lock, as `AsyncRwTransport` has it, and
/// a count of the messages handed back to rmcp as futures and not yet written.
struct Out<W> {
    writer: Mutex<Option<Writer<W>>>,
    /// While any message is waiting, a later one waits too, so that lines go out in the
    /// order rmcp sent them.
    waiting: AtomicUsize,
}

/// Counts a message as waiting until its future ends, finished or dropped.
struct Waiting<W>(Arc<Out<W>>);

impl<W> Waiting<W> {
    fn new(out: &Arc<Out<W>>) -> Waiting<W> {
        out.waiting.fetch_add(1, Ordering::AcqRel);
        Waiting(Arc::clone(out))
    }
}

impl<W> Drop for Waiting<W> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What [`write_now`] did with a message.
enum Now {
    Written(io::Result<()>),
    /// It is in the writer's buffer, but the pipe did not take all of it.
    Buffered,
    /// The writer's buffer is full: not taken.
    NotTaken(Box<TxJsonRpcMessage<RoleServer>>),
}

/// What is left for the future of a send.
enum Then<W> {
    Done(io::Result<()>),
    Flush(Waiting<W>),
    /// Boxed: a message is large beside the other cases, and this one is rare.
    Send(Waiting<W>, Box<TxJsonRpcMessage<RoleServer>>),
}

/// Sends `item`. rmcp spawns the future a send returns, and that task runs only once
/// rmcp's loop has yielded: a hop on the way of every answer. So when no earlier message
/// is waiting and the writer is free, the line is written here, during the call, and
/// the future has nothing left to do (or only the rest of a write the pipe could not
/// take at once).
fn send<W: AsyncWrite + Send + Unpin + 'static>(
    out: &Arc<Out<W>>,
    item: TxJsonRpcMessage<RoleServer>,
) -> impl Future<Output = io::Result<()>> + Send + 'static {
    let then = match out.writer.try_lock() {
        Ok(mut writer) if out.waiting.load(Ordering::Acquire) == 0 => match writer.as_mut() {
            None => Then::Done(Err(closed())),
            Some(writer) => match write_now(writer, item) {
                Now::Written(result) => Then::Done(result),
                Now::Buffered => Then::Flush(Waiting::new(out)),
                Now::NotTaken(item) => Then::Send(Waiting::new(out), item),
            },
        },
        _ => Then::Send(Waiting::new(out), Box::new(item)),
    };
    async move {
        let (waiting, item) = match then {
            Then::Done(result) => return result,
            Then::Flush(waiting) => (waiting, None),
            Then::Send(waiting, item) => (waiting, Some(item)),
        };
        let mut writer = waiting.0.writer.lock().await;
        let Some(writer) = writer.as_mut() else {
            return Err(closed());
        };
        match item {
            Some(item) => writer.send(*item).await,
            None => writer.flush().await,
        }
    }
}

/// Writes `item` without waiting: as far as the pipe takes it now.
fn write_now<W: AsyncWrite + Unpin>(writer: &mut Writer<W>, item: TxJsonRpcMessage<RoleServer>) -> Now {
    use futures_util::Sink as _;
    // Nothing here waits: whatever the pipe cannot take now is left to the future, which
    // waits with a real waker.
    let mut cx = Context::from_waker(Waker::noop());
    let mut writer = Pin::new(writer);
    match writer.as_mut().poll_ready(&mut cx) {
        Poll::Ready(Ok(())) => {}
        Poll::Ready(Err(error)) => return Now::Written(Err(error)),
        Poll::Pending => return Now::NotTaken(Box::new(item)),
    }
    if let Err(error) = writer.as_mut().start_send(item) {
        return Now::Written(Err(error));
    }
    match writer.poll_flush(&mut cx) {
        Poll::Ready(result) => Now::Written(result),
        Poll::Pending => Now::Buffered,
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "the transport is closed")
}

/// A line without its newline (and a carriage return before it).
fn trimmed(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// A `tools/call` request with nothing in it rmcp reads differently, read directly;
/// `None` for any other line, which rmcp then reads.
pub fn tools_call(line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
    /// `{"jsonrpc":"2.0","id":…,"method":"tools/call","params":{…}}` and no other key.
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Envelope<'a> {
        #[serde(borrow)]
        jsonrpc: &'a str,
        id: NumberOrString,
        #[serde(borrow)]
        method: &'a str,
        params: Params,
    }
    /// The keys of `params` that rmcp reads into the same places; any other key (a
    /// task, input responses) goes to rmcp.
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Params {
        #[serde(rename = "_meta", default)]
        meta: Option<JsonObject>,
        name: String,
        #[serde(default)]
        arguments: Option<JsonObject>,
    }
    let envelope: Envelope = serde_json::from_slice(line).ok()?;
    if envelope.jsonrpc != "2.0" || envelope.method != "tools/call" {
        return None;
    }
    let mut params = CallToolRequestParams::new(envelope.params.name);
    params.arguments = envelope.params.arguments;
    let mut request = CallToolRequest::new(params);
    // rmcp keeps a request's `_meta` in its extensions, not in the params.
    if let Some(meta) = envelope.params.meta {
        request.extensions.insert(RequestMetaObject::from(meta));
    }
    Some(JsonRpcMessage::Request(JsonRpcRequest::new(
        envelope.id,
        ClientRequest::CallToolRequest(request),
    )))
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt as _;
    use tokio::io::AsyncReadExt as _;

    use super::*;

    /// A message to send, told apart by `n`.
    fn numbered(n: u32) -> TxJsonRpcMessage<RoleServer> {
        TxJsonRpcMessage::<RoleServer>::error(ErrorData::invalid_request(format!("m{n}"), None), None)
    }

    /// Everything written so far, as text.
    fn written(read: &mut tokio::io::DuplexStream) -> String {
        let mut buf = vec![0; 1 << 16];
        let n = read.read(&mut buf).now_or_never().map_or(0, |n| n.unwrap());
        String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_message_with_none_waiting_is_written_during_the_send() {
        let (write, mut read) = tokio::io::duplex(1 << 16);
        let out = StdioTransport::new(tokio::io::empty(), write, Splicer::new(), Backlog::new()).write;
        let sending = send(&out, numbered(1));
        assert!(written(&mut read).contains("\"m1\""), "written before its future ran");
        sending.await.unwrap();
        assert_eq!(out.waiting.load(Ordering::Acquire), 0);
    }

    #[tokio::test]
    async fn a_message_written_at_once_never_overtakes_one_still_waiting() {
        let (write, mut read) = tokio::io::duplex(1 << 16);
        let out = StdioTransport::new(tokio::io::empty(), write, Splicer::new(), Backlog::new()).write;
        // The first message finds the writer busy, and waits for it as rmcp's task would.
        let busy = out.writer.lock().await;
        let first = tokio::spawn(send(&out, numbered(1)));
        drop(busy);
        // The writer is free again, but the first message has not been written yet.
        let second = tokio::spawn(send(&out, numbered(2)));
        first.await.unwrap().unwrap();
        second.await.unwrap().unwrap();
        let text = written(&mut read);
        let (one, two) = (text.find("\"m1\"").unwrap(), text.find("\"m2\"").unwrap());
        assert!(one < two, "in the order sent: {text}");
        assert_eq!(out.waiting.load(Ordering::Acquire), 0);
    }

    /// What rmcp makes of a line.
    fn by_rmcp(line: &str) -> Option<RxJsonRpcMessage<RoleServer>> {
        serde_json::from_str(line).ok()
    }

    /// The message as far as the server can tell: its JSON (rmcp writes the `_meta`
    /// back from the extensions) and the `_meta` the handler is given.
    fn seen(message: &RxJsonRpcMessage<RoleServer>) -> (serde_json::Value, Option<JsonObject>) {
        let meta = match message {
            JsonRpcMessage::Request(request) => match &request.request {
                ClientRequest::CallToolRequest(call) => {
                    assert!(call.params.meta.is_none(), "rmcp keeps no _meta in the params");
                    call.extensions.get::<RequestMetaObject>().map(|m| m.0.0.clone())
                }
                other => panic!("not a tools/call: {other:?}"),
            },
            other => panic!("not a request: {other:?}"),
        };
        (serde_json::to_value(message).unwrap(), meta)
    }

    #[test]
    fn a_plain_tools_call_is_read_as_rmcp_reads_it() {
        for line in [
            r#"{"jsonrpc":"2.0","id":100,"method":"tools/call","params":{"_meta":{"progressToken":99},"name":"studio_exec","arguments":{"script":"print('hi') return 1"}}}"#,
            r#"{"method":"tools/call","params":{"name":"studio_sessions"},"id":"a\"b","jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":-3,"method":"tools/call","params":{"name":"x","arguments":null,"_meta":null}}"#,
            r#"{"jsonrpc":"2.0","id":1e2,"method":"tools/call","params":{"name":"x","arguments":{"a":[1.5,{"b":null}],"c":"\u00e9"}}}"#,
            r#" { "jsonrpc" : "2.0" , "id" : 7 , "method" : "tools/call" , "params" : { "name" : "x" } } "#,
        ] {
            let direct = tools_call(line.as_bytes()).unwrap_or_else(|| panic!("not read directly: {line}"));
            let rmcp = by_rmcp(line).unwrap_or_else(|| panic!("rmcp cannot read: {line}"));
            assert_eq!(seen(&direct), seen(&rmcp), "{line}");
        }
    }

    #[test]
    fn anything_else_is_left_to_rmcp() {
        for line in [
            // Other methods, other versions, other shapes.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"x"}}"#,
            // Keys of params read elsewhere, or not at all.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","requestState":"s"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","task":{}}}"#,
            // Duplicates, escapes where a borrowed string cannot follow, a BOM.
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"x"}}"#,
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}",
            "not json",
        ] {
            assert!(tools_call(line.as_bytes()).is_none(), "read directly: {line}");
        }
    }

    #[tokio::test]
    async fn lines_are_read_in_order_whichever_way_they_are_read() {
        let input = concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            "\r\n",
            "not json\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            "\n\n",
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"b"}}"#,
        );
        let mut transport = StdioTransport::new(input.as_bytes(), tokio::io::sink(), Splicer::new(), Backlog::new());
        let mut got = Vec::new();
        while let Some(message) = transport.receive().await {
            got.push(serde_json::to_value(&message).unwrap());
        }
        let methods: Vec<_> = got.iter().map(|m| m["method"].as_str().unwrap().to_owned()).collect();
        // The last line has no newline: rmcp does not read it either.
        assert_eq!(methods, ["tools/call", "tools/list", "notifications/initialized"]);
        assert_eq!(got[0]["id"], 1);
        assert_eq!(got[1]["id"], 2);
    }

    /// Through the reader stdin is read with, which replaces the long line.
    #[tokio::test]
    async fn json_that_is_not_a_message_and_a_long_line_are_answered_without_an_id() {
        use crate::mcp::reader::{LineReader, MAX_LINE_BYTES};
        let long = format!("{{\"x\":\"{}\"}}\n", "a".repeat(MAX_LINE_BYTES));
        let input = format!(
            "{long}[1,2]\n{}\n",
            r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"a"}}"#
        );
        let (writer, mut reader) = tokio::io::duplex(1 << 16);
        let backlog = Backlog::new();
        let mut transport = StdioTransport::new(
            LineReader::new(input.as_bytes(), Arc::clone(&backlog)),
            writer,
            Splicer::new(),
            Arc::clone(&backlog),
        );
        let message = transport.receive().await.expect("the call after them");
        assert_eq!(serde_json::to_value(&message).unwrap()["id"], 9);
        assert_eq!(backlog.unanswered(), 1, "only the call is counted");
        drop(transport);
        let mut written = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut reader, &mut written)
            .await
            .unwrap();
        let answers: Vec<serde_json::Value> = written.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(answers.len(), 2, "one for the long line, one for [1,2]: {written}");
        assert_eq!(answers[0]["error"]["code"], -32600);
        let message = answers[0]["error"]["message"].as_str().unwrap();
        assert!(message.contains("too large") && message.contains("16 MiB"), "{message}");
        assert_eq!(answers[1]["error"]["code"], -32600);
        assert!(answers.iter().all(|a| a.get("id").is_none()), "{written}");
    }

    #[tokio::test]
    async fn only_what_rmcp_is_handed_as_a_request_is_counted_and_every_answer_counts_it_out() {
        use crate::mcp::backlog::AnswerCounter;
        use crate::mcp::reader::{LineReader, MAX_LINE_BYTES};
        let long = "a".repeat(MAX_LINE_BYTES);
        let mut input = String::new();
        for _ in 0..2000 {
            input.push_str("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}\n");
        }
        input.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"tools/call\",\"params\":{{\"name\":\"x\",\"arguments\":{{\"s\":\"{long}\"}}}}}}\n"
        ));
        input.push_str("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
        input.push_str("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":1}}\n");
        let (writer, mut reader) = tokio::io::duplex(1 << 20);
        let backlog = Backlog::new();
        let mut transport = StdioTransport::new(
            LineReader::new(input.as_bytes(), Arc::clone(&backlog)),
            AnswerCounter::new(writer, Arc::clone(&backlog)),
            Splicer::new(),
            Arc::clone(&backlog),
        );
        let ping = transport.receive().await.expect("the ping with an id");
        assert_eq!(serde_json::to_value(&ping).unwrap()["id"], 1);
        // The 2,000 id:null pings were answered without an id and not counted; the long
        // call was counted in and, its answer written, out again.
        assert_eq!(backlog.unanswered(), 1, "the ping alone is unanswered");
        let cancel = transport.receive().await.expect("the cancellation");
        assert_eq!(
            serde_json::to_value(&cancel).unwrap()["method"],
            "notifications/cancelled"
        );
        assert_eq!(
            backlog.unanswered(),
            0,
            "a cancelled request is answered by its cancellation"
        );
        assert!(transport.receive().await.is_none());
        drop(transport);
        let mut written = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut reader, &mut written)
            .await
            .unwrap();
        let with_id: Vec<serde_json::Value> = written
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|a| a.get("id").is_some())
            .collect();
        assert_eq!(with_id.len(), 1, "{with_id:?}");
        assert_eq!(with_id[0]["id"], 77);
        assert!(with_id[0]["error"]["message"].as_str().unwrap().contains("too large"));
        assert_eq!(written.lines().count(), 2001);
    }
}

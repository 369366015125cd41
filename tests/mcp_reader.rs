//! The MCP reader never wedges (issue 25, item 9), over real stdio against the built
//! binary: lines answered without an id leave nothing behind in the backlog, a line over
//! the 16 MiB limit is answered for its id, and a `tools/call` whose `arguments` is not an
//! object is the tool's `invalid_args`.

use crate::support;

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value as Json, json};
use support::free_port;
use support::mcp_client::{binary, empty_config_dir, unpaired_mcp_args};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// How long a test waits for a line or an exit before it calls the server stuck: a
/// guard against hanging, never a bound on speed.
const STUCK: Duration = Duration::from_secs(60);

struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    /// stderr, read all along (a full pipe would stop the server).
    stderr: tokio::task::JoinHandle<String>,
}

/// `studio-bridge mcp` with the MCP reader's debug log on stderr, initialized.
async fn start() -> Server {
    let mut child = tokio::process::Command::new(binary())
        .args(unpaired_mcp_args(free_port()))
        .env("STUDIO_BRIDGE_LOG", "warn,studio_bridge::mcp=debug")
        .env("STUDIO_BRIDGE_CONFIG_DIR", empty_config_dir())
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn studio-bridge mcp");
    let mut stdin = child.stdin.take().unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr = child.stderr.take().unwrap();
    let stderr = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text).await;
        text
    });
    let initialize = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"reader","version":"0"}}}"#;
    stdin
        .write_all(
            format!("{initialize}\n{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}}\n").as_bytes(),
        )
        .await
        .unwrap();
    let mut server = Server {
        child,
        stdin: Some(stdin),
        lines,
        stderr,
    };
    let reply = server.next().await;
    assert_eq!(reply["id"], 0, "{reply}");
    server
}

impl Server {
    async fn write(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(text.as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
    }

    async fn next(&mut self) -> Json {
        let line = tokio::time::timeout(STUCK, self.lines.next_line())
            .await
            .expect("the server answers")
            .unwrap()
            .expect("stdout stays open");
        serde_json::from_str(&line).expect("a JSON-RPC line")
    }

    /// Every line up to and including the answer for `id`, in order.
    async fn until(&mut self, id: u64) -> Vec<Json> {
        let mut seen = Vec::new();
        loop {
            let message = self.next().await;
            let done = message["id"] == id;
            seen.push(message);
            if done {
                return seen;
            }
        }
    }

    /// Closes stdin, waits for the server to exit and returns its stderr, without any
    /// colour escapes.
    async fn finish(mut self) -> String {
        drop(self.stdin.take());
        let text = tokio::time::timeout(STUCK, self.stderr)
            .await
            .expect("the server exits when its input closes")
            .unwrap();
        let _ = self.child.wait().await;
        strip_ansi(&text)
    }
}

fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A tool error's `{"error": …}`, from its text block.
fn tool_error(answer: &Json) -> Json {
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let text = answer["result"]["content"][0]["text"].as_str().expect("a text block");
    serde_json::from_str::<Json>(text).expect("the error text is JSON")["error"].clone()
}

#[tokio::test]
async fn requests_answered_without_an_id_leave_the_backlog_empty() {
    const PINGS: usize = 1_100;
    let mut server = start().await;
    // More than the backlog's bound (1,024) of requests rmcp cannot answer with an id,
    // then an ordinary call that needs no Studio.
    let mut input = "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}\n".repeat(PINGS);
    input.push_str(
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"studio_api","arguments":{"class":"Part"}}}"#,
    );
    input.push('\n');
    server.write(&input).await;
    let seen = server.until(2).await;
    let (call, before) = seen.split_last().unwrap();
    assert_eq!(before.len(), PINGS, "one answer a ping");
    for answer in before {
        assert!(answer.get("id").is_none(), "{answer}");
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
    }
    assert_ne!(call["result"]["isError"], true, "{call}");
    assert_eq!(call["result"]["structuredContent"]["name"], "Part", "{call}");

    let stderr = server.finish().await;
    assert!(
        !stderr.contains("backlog was full"),
        "the reader never waited on a backlog of answered requests:\n{stderr}"
    );
    assert!(
        stderr.contains("unanswered=0") && stderr.contains("the MCP client closed its input"),
        "every request counted in was counted out:\n{stderr}"
    );
}

#[tokio::test]
async fn a_line_over_the_limit_is_answered_for_its_id() {
    let mut server = start().await;
    let script = "a".repeat(17 * 1024 * 1024);
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"studio_exec","arguments":{{"script":"{script}"}}}}}}"#
    );
    let after = r#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#;
    let mut stdin = server.stdin.take().unwrap();
    let writer = tokio::spawn(async move {
        stdin.write_all(format!("{huge}\n{after}\n").as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
        stdin
    });
    server.stdin = Some({
        // The answers are read while the line is still being written.
        let seen = server.until(8).await;
        assert_eq!(seen.len(), 2, "an answer for the huge line, then the ping's: {seen:?}");
        let answer = &seen[0];
        assert_eq!(answer["id"], 7, "{answer}");
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("too large") && message.contains("16 MiB"), "{message}");
        writer.await.unwrap()
    });
    // Without an id at the line's start, it is still answered (without an id).
    let no_id = format!(r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"x":"{script}"}},"id":9}}"#);
    server
        .write(&format!(
            "{no_id}\n{{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"ping\"}}\n"
        ))
        .await;
    let seen = server.until(10).await;
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen[0].get("id").is_none(), "{}", seen[0]);
    assert!(seen[0]["error"]["message"].as_str().unwrap().contains("too large"));
    let stderr = server.finish().await;
    assert!(stderr.contains("unanswered=0"), "{stderr}");
}

#[tokio::test]
async fn arguments_that_are_not_an_object_are_invalid_args() {
    let mut server = start().await;
    let calls = [
        (3, json!(5), "a number"),
        (4, json!("script"), "a string"),
        (5, json!([1, 2]), "an array"),
        (6, json!(true), "a boolean"),
    ];
    for (id, arguments, _) in &calls {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": "studio_exec", "arguments": arguments}});
        server.write(&format!("{call}\n")).await;
        let answer = server.next().await;
        assert_eq!(&answer["id"], id, "{answer}");
        assert!(
            answer.get("error").is_none(),
            "a tool error, not a JSON-RPC error: {answer}"
        );
        let error = tool_error(&answer);
        assert_eq!(error["code"], "invalid_args", "{answer}");
        let message = error["message"].as_str().unwrap();
        assert!(message.contains("`arguments` must be an object"), "{message}");
    }
    // The same shape as any other invalid argument.
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": "studio_exec", "arguments": {"script": 5}}});
    server.write(&format!("{call}\n")).await;
    let other = tool_error(&server.next().await);
    assert_eq!(other["code"], "invalid_args");
    assert_eq!(
        other.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["code", "message"],
        "{other}"
    );
    // An unknown tool with such arguments is still an unknown tool.
    let call = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                      "params": {"name": "studio_nope", "arguments": 5}});
    server.write(&format!("{call}\n")).await;
    let answer = server.next().await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    server.finish().await;
}

//! Drives the real `studio-bridge mcp` binary over stdio with rmcp's client.

use std::process::Stdio;
use std::sync::{Arc, Mutex};

use rmcp::model::{CallToolRequestParams, CallToolResult, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value as Json;
use tokio::process::Command;

/// Records the progress notifications the server sends.
#[derive(Clone, Default)]
pub struct Recorder {
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Recorder {
    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        self.progress.lock().unwrap().push(params);
    }
}

pub struct Mcp {
    pub client: RunningService<RoleClient, Recorder>,
    pub recorder: Recorder,
    pub port: u16,
    /// The process id of the `studio-bridge mcp` child.
    pub pid: u32,
}

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_studio-bridge")
}

impl Mcp {
    /// Spawns `studio-bridge mcp --port <port> --no-install-plugin <extra…>` and initializes.
    pub async fn spawn(port: u16, extra: &[&str]) -> Mcp {
        let mut command = Command::new(binary());
        // Tests never touch a real Studio's plugins folder.
        command
            .arg("mcp")
            .arg("--port")
            .arg(port.to_string())
            .arg("--no-install-plugin")
            .args(extra);
        command.env("STUDIO_BRIDGE_LOG", "warn");
        let (transport, _stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn studio-bridge mcp");
        let pid = transport.id().expect("child pid");
        let recorder = Recorder::default();
        let client = recorder.clone().serve(transport).await.expect("MCP initialize");
        Mcp {
            client,
            recorder,
            port,
            pid,
        }
    }

    pub async fn call(&self, tool: &str, args: Json) -> CallToolResult {
        let Json::Object(arguments) = args else {
            panic!("arguments must be an object")
        };
        self.client
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
            .await
            .unwrap_or_else(|e| panic!("{tool} failed at the protocol level: {e}"))
    }

    /// Calls a tool that must succeed; returns its structured content.
    pub async fn ok(&self, tool: &str, args: Json) -> Json {
        let result = self.call(tool, args).await;
        assert_ne!(result.is_error, Some(true), "{tool} failed: {result:?}");
        structured(&result)
    }

    /// Calls a tool that must fail with a tool error; returns `error`.
    pub async fn err(&self, tool: &str, args: Json) -> Json {
        let result = self.call(tool, args).await;
        assert_eq!(result.is_error, Some(true), "{tool} should have failed: {result:?}");
        structured(&result)["error"].clone()
    }
}

/// The structured content of a result, checking that its text block carries the same
/// JSON (some clients show the model only one of the two).
fn structured(result: &CallToolResult) -> Json {
    let structured = result.structured_content.clone().expect("structuredContent");
    let text = result
        .content
        .iter()
        .find_map(|c| c.as_text().map(|t| t.text.clone()))
        .expect("a text block");
    assert_eq!(
        serde_json::from_str::<Json>(&text).unwrap(),
        structured,
        "text and structuredContent differ"
    );
    structured
}

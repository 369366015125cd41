//! The MCP surface: one tool per command of the table, named `studio_<name>`.
//!
//! A hand-written `ServerHandler`, generic over [`crate::commands::ALL`]: it lists the
//! tools (schemas and annotations from each command's definition), validates and runs a
//! call, forwards progress and cancellation, and maps results and errors (TOOLS.md, What
//! the agent sees). It holds no command-specific logic.

mod backlog;
pub mod http;
pub mod policy;
mod reader;
pub mod resources;
pub mod results;
mod splice;
pub mod transport;

use std::sync::{Arc, Mutex};

use base64_simd::STANDARD as BASE64;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest, CustomResult, Implementation,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ResourceContents, ServerCapabilities, ServerConfig, SubscribeRequestParams, Tool, ToolAnnotations,
    UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};
use serde_json::Value as Json;
use tokio::sync::mpsc;

use crate::bridge::{Bridge, CallHooks, PROGRESS_QUEUE, Progress, Target};
use crate::commands::{self, Body, DynCommand, InvocationParts, Kind, Limits, Output};
use crate::policy::{ActivePolicy, Policy};
use crate::protocol::{SERVER_VERSION, ToolError};
use crate::sourcemap::Watched;
use splice::Splicer;

const TOOL_PREFIX: &str = "studio_";

/// Short on purpose: what spans tools (sessions, contexts, paths, writes and undo,
/// playtests) is the guide's, [`resources::GUIDE`], read once when needed.
const INSTRUCTIONS: &str = "studio-bridge connects you to running Roblox Studio sessions. Call studio_sessions first. Read the resource studio://guide for how sessions, contexts (edit, server, client), paths, writes and undo, and playtests work. Tool errors carry a stable code and say what to do next.";

/// One MCP connection: its own default target, shared bridge, and the user's policy.
pub struct McpServer {
    bridge: Bridge,
    limits: Limits,
    defaults: Arc<Mutex<Target>>,
    /// The tools the policy offers, in catalogue order.
    tools: Arc<Vec<Tool>>,
    policy: Arc<Policy>,
    report: Arc<ActivePolicy>,
    /// Large results' text, prepared for the writer under the transport (stdio); none
    /// over HTTP, whose transport writes the result as rmcp serializes it.
    splicer: Option<Arc<Splicer>>,
    /// This connection's resource subscriptions.
    subscriptions: Arc<resources::Subscriptions>,
    /// The rest of cut results, shared by the process's connections.
    results: Arc<results::ResultStore>,
    /// This process's sourcemap: each `mcp` annotates results with its own.
    files: Arc<Watched>,
}

/// What every MCP connection of the process shares: the bridge, the limits, the policy
/// and the tools it offers, the kept rest of cut results.
#[derive(Clone)]
pub(crate) struct Shared {
    bridge: Bridge,
    limits: Limits,
    tools: Arc<Vec<Tool>>,
    policy: Arc<Policy>,
    report: Arc<ActivePolicy>,
    splicer: Option<Arc<Splicer>>,
    results: Arc<results::ResultStore>,
    files: Arc<Watched>,
}

impl Shared {
    fn new(
        bridge: Bridge,
        limits: Limits,
        policy: Policy,
        splicer: Option<Arc<Splicer>>,
        files: Arc<Watched>,
    ) -> Shared {
        let tools = commands::ALL
            .iter()
            .filter(|c| policy.lists(**c))
            .map(|c| tool_for(*c))
            .collect();
        Shared {
            bridge,
            limits,
            tools: Arc::new(tools),
            report: Arc::new(policy.report()),
            policy: Arc::new(policy),
            splicer,
            results: results::ResultStore::new(limits.max_result_bytes / 5 * 2),
            files,
        }
    }

    /// One MCP connection: its own default target and subscriptions.
    fn connection(&self) -> McpServer {
        McpServer {
            bridge: self.bridge.clone(),
            limits: self.limits,
            defaults: Arc::new(Mutex::new(Target::default())),
            tools: Arc::clone(&self.tools),
            policy: Arc::clone(&self.policy),
            report: Arc::clone(&self.report),
            splicer: self.splicer.clone(),
            subscriptions: resources::Subscriptions::new(),
            results: Arc::clone(&self.results),
            files: Arc::clone(&self.files),
        }
    }
}

impl McpServer {
    /// The parts a command's invocation needs, for a call on this connection.
    fn parts(&self, hooks: CallHooks) -> InvocationParts {
        InvocationParts {
            bridge: self.bridge.clone(),
            hooks,
            defaults: Arc::clone(&self.defaults),
            target: Target::default(),
            policy: Some(Arc::clone(&self.report)),
            files: Some(Arc::clone(&self.files)),
            quiet: false,
        }
    }

    /// A resource that mirrors a command (`studio://sessions`, `studio://logs/{id}`): the
    /// command's result as JSON text, under the same policy as its tool.
    async fn command_resource(
        &self,
        uri: &str,
        name: &str,
        args: serde_json::Map<String, Json>,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Result<ReadResourceResult, McpError> {
        let command = commands::find(name).ok_or_else(|| resources::not_found(uri))?;
        let outcome = match self.policy.check(command, &args) {
            Ok(()) => {
                let hooks = CallHooks { progress: None, cancel };
                command.invoke(args, self.parts(hooks), self.limits).await
            }
            Err(error) => Err(error),
        };
        match outcome {
            Ok(output) => {
                let text = match output.body {
                    Body::Quoted { text, .. } => text,
                    body => serde_json::to_string(
                        &Output {
                            body,
                            image: None,
                            whole: None,
                        }
                        .value(),
                    )
                    .unwrap_or_default(),
                };
                Ok(ReadResourceResult::new(vec![
                    ResourceContents::text(text, uri).with_mime_type("application/json"),
                ]))
            }
            Err(error) => Err(resource_error(uri, &error)),
        }
    }
}

/// A command's error as the answer to a `resources/read`: a JSON-RPC error whose message
/// is the tool error's (what to do next) and whose data is the tool error's JSON.
fn resource_error(uri: &str, error: &ToolError) -> McpError {
    use crate::protocol::ErrorCode;
    let message = format!("{uri}: {}", error.message);
    let data = Some(error.to_json());
    match error.code {
        ErrorCode::NoSessions | ErrorCode::SessionNotFound | ErrorCode::NotFound => {
            McpError::resource_not_found(message, data)
        }
        ErrorCode::InvalidArgs | ErrorCode::PermissionDenied => McpError::invalid_params(message, data),
        _ => McpError::internal_error(message, data),
    }
}

/// What one tool costs an agent's context in `tools/list`: the compact JSON of its name,
/// description and input schema, as a client receives them. The catalogue is read into
/// every conversation, so it has a budget ([`CATALOGUE_BUDGET`], held by a test and by the
/// benchmark's B9). Words are trimmed to stay within it, never arguments.
pub fn catalogue_bytes(tool: &Tool) -> usize {
    let seen = serde_json::json!({
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema.as_ref(),
    });
    serde_json::to_string(&seen).map_or(0, |s| s.len())
}

/// The whole catalogue's budget in bytes ([`catalogue_bytes`] summed over every tool): 12,000
/// for the 25 tools of #41, 14,000 with the long tail's (#44), 15,500 with Studio from
/// outside's three (#47: open, run, close), 16,700 with the debugger (#48), and
/// 18,600 with Open Cloud's five (#45). #45 asked for 16,000 with them; with every argument in its
/// schema, the 37 tools' structure alone (names, schemas, no words at all) is 14,240
/// bytes, so 16,000 would leave 47 bytes of words a tool. An agent without an Open Cloud
/// key is not offered those five (the policy denies `cloud`): about 16,400 bytes.
pub const CATALOGUE_BUDGET: usize = 18_600;

/// The most one tool may cost: 1,150, which `terrain` and `debug` need (each several
/// actions' arguments in one tool instead of several tools).
pub const TOOL_BUDGET: usize = 1_150;

/// Every tool as `tools/list` lists it.
pub fn catalogue() -> Vec<Tool> {
    commands::ALL.iter().map(|c| tool_for(*c)).collect()
}

fn tool_for(command: &dyn DynCommand) -> Tool {
    let spec = command.spec();
    let annotations = ToolAnnotations::new()
        .read_only(spec.kind == Kind::Read)
        .destructive(spec.kind == Kind::Destructive)
        .idempotent(spec.idempotent)
        .open_world(spec.open_world);
    let mut tool = Tool::default();
    tool.name = format!("{TOOL_PREFIX}{}", spec.name).into();
    tool.description = Some(spec.description.into());
    tool.input_schema = Arc::new(command.input_schema());
    tool.output_schema = Some(Arc::new(command.output_schema()));
    tool.annotations = Some(annotations);
    tool
}

/// The tool result for a command's output: the complete JSON as text (some clients
/// show the model only the text) and as structured content, plus an image block for
/// images, and for a result the bound cut a `resource_link` to its rest. A plugin's
/// result without an image is spliced in as the line is written (see [`splice`]), with
/// its quoted form already written.
async fn success_result(
    output: Output,
    splicer: Option<&Arc<Splicer>>,
    results: &Arc<results::ResultStore>,
) -> CallToolResult {
    let link = |whole, text: &str| {
        let uri = results.keep(whole, text.to_owned());
        ContentBlock::resource_link(
            rmcp::model::Resource::new(uri, "rest of the result")
                .with_description("What the bound cut, in pages: read ?page=1, ?page=2, … (kept 10 minutes).")
                .with_mime_type("application/json"),
        )
    };
    let (text, structured) = match output.body {
        Body::Quoted { text, quoted } => match splicer.filter(|_| output.image.is_none()) {
            Some(splicer) => {
                let rest = output.whole.map(|whole| link(whole, &text));
                let mut result = splicer.result(text, quoted);
                result.content.extend(rest);
                return result;
            }
            None => {
                let structured = serde_json::from_str(&text).unwrap_or(Json::Null);
                (text, structured)
            }
        },
        // `serde_json::to_string` writes straight into a buffer; `Value::to_string` goes
        // through `fmt` a fragment at a time, which is several times slower on a large
        // result.
        Body::Json(json) => (serde_json::to_string(&json).unwrap_or_default(), json),
        body @ Body::Plugin(_) => {
            let json = Output {
                body,
                image: None,
                whole: None,
            }
            .value();
            (serde_json::to_string(&json).unwrap_or_default(), json)
        }
    };
    let mut content = Vec::with_capacity(3);
    if let Some(png) = &output.image {
        content.push(ContentBlock::image(BASE64.encode_to_string(png), "image/png"));
    }
    let rest = output.whole.map(|whole| link(whole, &text));
    content.push(ContentBlock::text(text));
    content.extend(rest);
    let mut result = CallToolResult::success(content);
    result.structured_content = Some(structured);
    result
}

/// A tool-level failure: `isError: true` with `{"error": {code, message, details?}}` as
/// its text only. No `structuredContent`: clients built on the TypeScript SDK (Claude
/// Code, the MCP Inspector) validate any `structuredContent` against the tool's
/// `outputSchema`, error results included, and would show the agent a schema complaint
/// instead of the guidance.
pub fn error_result(error: &ToolError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(error.to_json().to_string())])
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_tools()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("studio-bridge", SERVER_VERSION))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if reader::is_too_deep(&request.name) {
            return Err(McpError::new(
                rmcp::model::ErrorCode::PARSE_ERROR,
                reader::too_deep_message(),
                None,
            ));
        }
        let command = find_tool(&request.name)?;
        let args = request.arguments.unwrap_or_default();
        // The policy answers before anything reaches the bridge.
        if let Err(error) = self.policy.check(command, &args) {
            tracing::info!(tool = %request.name, "refused by policy");
            return Ok(error_result(&error).into());
        }
        // Progress is forwarded from this call's own task, not a task spawned per call:
        // most clients send a progress token with every call, and most calls report none.
        let (sender, progress) = match context.meta.get_progress_token() {
            Some(token) => {
                let (sender, updates) = mpsc::channel::<Progress>(PROGRESS_QUEUE);
                (Some(sender), Some((token, updates)))
            }
            None => (None, None),
        };
        let parts = self.parts(CallHooks {
            progress: sender,
            cancel: context.ct.clone(),
        });
        let invoke = command.invoke(args, parts, self.limits);
        let outcome = match progress {
            Some((token, updates)) => forwarding_progress(invoke, token, updates, &context.peer).await,
            None => invoke.await,
        };
        let result = match outcome {
            Ok(output) => success_result(output, self.splicer.as_ref(), &self.results).await,
            Err(error) => {
                tracing::debug!(tool = %request.name, %error, "tool call failed");
                error_result(&error)
            }
        };
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(ListResourcesResult::with_all_items(resources::list()))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(resources::templates()))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri;
        let result = match resources::parse(&uri)? {
            resources::Named::Guide => ReadResourceResult::new(vec![
                ResourceContents::text(resources::GUIDE, &uri).with_mime_type("text/markdown"),
            ]),
            resources::Named::Sessions => {
                self.command_resource(&uri, "sessions", serde_json::Map::new(), context.ct.clone())
                    .await?
            }
            resources::Named::Logs(session_id) => {
                let mut args = serde_json::Map::new();
                args.insert("sessionId".into(), Json::String(session_id));
                self.command_resource(&uri, "logs", args, context.ct.clone()).await?
            }
            resources::Named::Result { id, page } => {
                let read = self
                    .results
                    .page(&id, page)
                    .await
                    .map_err(|message| McpError::resource_not_found(message, None))?;
                let mut meta = serde_json::Map::new();
                meta.insert("pointer".into(), Json::String(read.page.pointer));
                meta.insert("from".into(), read.page.from.into());
                meta.insert("page".into(), read.number.into());
                meta.insert("pages".into(), read.pages.into());
                ReadResourceResult::new(vec![
                    ResourceContents::text(read.page.json, &uri)
                        .with_mime_type("application/json")
                        .with_meta(rmcp::model::MetaObject(meta)),
                ])
            }
        };
        Ok(result.into())
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let named = resources::parse(&request.uri)?;
        self.subscriptions
            .subscribe(request.uri, named, &self.bridge, context.peer.clone())
            .await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        resources::parse(&request.uri)?;
        self.subscriptions.unsubscribe(&request.uri);
        Ok(())
    }

    /// rmcp hands a `tools/call` here when it cannot read its params as a call's (and
    /// would answer -32601, as for an unknown method): `arguments` that are not an
    /// object are the tool's `invalid_args`, as any other bad argument is.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        if request.method != "tools/call" {
            return Err(McpError::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                request.method,
                None,
            ));
        }
        let params = request.params.unwrap_or(Json::Null);
        let Some(name) = params.get("name").and_then(Json::as_str) else {
            return Err(McpError::invalid_params(
                "tools/call needs `params.name`, the tool's name (a string). Call tools/list for the studio_* tools.",
                None,
            ));
        };
        let command = find_tool(name)?;
        let kind = match params.get("arguments") {
            None | Some(Json::Null | Json::Object(_)) => {
                return Err(McpError::invalid_params(
                    "tools/call params could not be read (`_meta`, if given, must be an object). Send {\"name\": …, \"arguments\": {…}}.",
                    None,
                ));
            }
            Some(Json::Array(_)) => "an array",
            Some(Json::String(_)) => "a string",
            Some(Json::Number(_)) => "a number",
            Some(Json::Bool(_)) => "a boolean",
        };
        // A tool the policy refuses is refused whatever its arguments.
        if let Err(error) = self.policy.check(command, &serde_json::Map::new()) {
            return custom_result(&error);
        }
        let error = ToolError::invalid_args(format!(
            "Invalid arguments for {}: `arguments` must be an object of the tool's arguments, not {kind}. Check the tool's input schema.",
            command.spec().name
        ));
        tracing::debug!(tool = %name, "tools/call with arguments that are not an object");
        custom_result(&error)
    }
}

/// A tool error as the answer to a `tools/call` rmcp could not read as one.
fn custom_result(error: &ToolError) -> Result<CustomResult, McpError> {
    serde_json::to_value(error_result(error))
        .map(CustomResult)
        .map_err(|e| McpError::internal_error(format!("the result could not be written: {e}"), None))
}

/// The command a tool name names, or the error for a name that names none.
fn find_tool(name: &str) -> Result<&'static dyn DynCommand, McpError> {
    name.strip_prefix(TOOL_PREFIX).and_then(commands::find).ok_or_else(|| {
        McpError::invalid_params(
            format!("Unknown tool {name:?}. Call tools/list for the studio_* tools."),
            None,
        )
    })
}

/// Runs `call` while forwarding the progress it reports to the client; what it
/// reported before it ended goes out before its result.
async fn forwarding_progress<T>(
    call: impl Future<Output = T>,
    token: ProgressToken,
    mut updates: mpsc::Receiver<Progress>,
    peer: &Peer<RoleServer>,
) -> T {
    let notification = |update: Progress| {
        let mut param = ProgressNotificationParam::new(token.clone(), update.progress);
        param.total = update.total;
        param.message = update.message;
        param
    };
    tokio::pin!(call);
    loop {
        tokio::select! {
            biased;
            Some(update) = updates.recv() => {
                // The client's going away ends the call by its cancellation.
                let _ = peer.notify_progress(notification(update)).await;
            }
            outcome = &mut call => {
                while let Ok(update) = updates.try_recv() {
                    let _ = peer.notify_progress(notification(update)).await;
                }
                return outcome;
            }
        }
    }
}

/// Serves MCP on stdin/stdout until the client disconnects.
pub async fn serve_stdio(bridge: Bridge, limits: Limits, policy: Policy, files: Arc<Watched>) -> anyhow::Result<()> {
    use rmcp::ServiceExt as _;
    let splicer = Splicer::new();
    let server = Shared::new(bridge, limits, policy, Some(Arc::clone(&splicer)), files).connection();
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let backlog = backlog::Backlog::new();
    let stdout = backlog::AnswerCounter::new(
        splice::SplicingWriter::new(stdout, Arc::clone(&splicer)),
        Arc::clone(&backlog),
    );
    let transport = transport::StdioTransport::new(
        reader::LineReader::new(stdin, Arc::clone(&backlog)),
        stdout,
        splicer,
        backlog,
    );
    let running = server.serve(transport).await?;
    let reason = running.waiting().await?;
    tracing::info!(?reason, "MCP client disconnected");
    Ok(())
}

/// The JSON an MCP client sees for a command's outcome; the CLI prints it for `--json`.
pub fn result_json(outcome: &Result<Output, ToolError>) -> Json {
    match outcome {
        Ok(output) => output.value(),
        Err(error) => error.to_json(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README's tools table names every tool, and its test line what the tests need.
    #[test]
    fn the_readme_tells_a_newcomer_the_truth() {
        let readme = include_str!("../../README.md");
        let table: Vec<&str> = readme
            .lines()
            .skip_while(|line| *line != "| tool | what for |")
            .take_while(|line| line.starts_with('|'))
            .collect();
        for tool in catalogue() {
            let cell = format!("`{}`", tool.name);
            assert!(
                table
                    .iter()
                    .any(|row| row.split('|').nth(1).is_some_and(|c| c.contains(&cell))),
                "{} is not in the README's tools table",
                tool.name
            );
        }
        let test_line: String = readme
            .lines()
            .skip_while(|line| !line.starts_with("- **Test**"))
            .take_while(|line| !line.starts_with("- **Measure**"))
            .collect();
        for needed in ["bash .ci/run", "Lune", "StyLua", "Selene", "Node", "Inspector", "Xvfb"] {
            assert!(
                test_line.contains(needed),
                "the test line does not name {needed}: {test_line}"
            );
        }
    }

    #[test]
    fn the_catalogue_stays_within_its_byte_budget() {
        let tools = catalogue();
        let sizes: Vec<(String, usize)> = tools.iter().map(|t| (t.name.to_string(), catalogue_bytes(t))).collect();
        let total: usize = sizes.iter().map(|(_, n)| n).sum();
        for (name, bytes) in &sizes {
            assert!(
                *bytes <= TOOL_BUDGET,
                "{name} costs {bytes} bytes (at most {TOOL_BUDGET}): {sizes:?}"
            );
        }
        assert!(
            total <= CATALOGUE_BUDGET,
            "{total} bytes for {} tools, over the budget of {CATALOGUE_BUDGET}: {sizes:?}",
            tools.len()
        );
        // As a client receives it: the listing's own JSON holds each of these texts.
        let listed = serde_json::to_string(&tools).unwrap();
        assert!(listed.len() > total, "{} ≤ {total}", listed.len());
    }
}

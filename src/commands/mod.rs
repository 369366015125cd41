//! The command table: every capability is one definition here, and the adapters (MCP,
//! CLI) are generic over it. Adding a command is one file in this folder, one line in
//! [`ALL`], and one Luau action in the plugin; nothing else.

pub mod api;
pub mod asset_search;
pub mod bound;
mod call;
pub mod character;
pub mod clone;
pub mod close;
pub mod cloud_exec;
pub mod cloud_message;
mod cloud_place;
pub mod cloud_publish;
pub mod cloud_restart;
pub mod create;
pub mod datastore;
pub mod debug;
pub mod delete;
pub mod exec;
pub mod files;
pub mod find;
pub mod input;
pub mod insert_asset;
pub mod logs;
pub mod open;
pub mod play;
pub mod query;
pub mod redo;
pub mod reflection;
pub mod run;
mod schema;
pub mod screenshot;
pub mod script_edit;
pub mod script_read;
pub mod script_search;
pub mod selection;
pub mod sessions;
pub mod state;
pub mod stats;
pub mod target;
pub mod terrain;
pub mod test_run;
pub mod ui;
pub mod undo;
pub mod update;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmpv::Value as Msgpack;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value as Json};

use crate::bridge::{Bridge, Call, CallHooks, Target};
use crate::human::render::{Rendered, Style};
use crate::policy::Governed;
pub use crate::policy::{ActivePolicy, Capabilities, Capability};
use crate::protocol::raw::RawValue;
use crate::protocol::{Context, Ran, ToolError, value};
use crate::sourcemap::{Sourcemap, Watched};
use call::erased;
pub use call::{MAY_HAVE_WRITTEN, bad_result};

/// What a command does to Studio, for MCP annotations and agents' caution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Read,
    Write,
    Destructive,
}

/// Scripts pass the host's Luau syntax check unless a call says `check: false`.
pub(crate) fn check_by_default() -> bool {
    true
}

/// How tool names start: `studio_exec` (MCP tools, and the names policy globs match).
pub const TOOL_PREFIX: &str = "studio_";

/// The static description of one command.
#[derive(Debug)]
pub struct Spec {
    /// `studio_<name>` as an MCP tool, `studio-bridge <name>` on the command line, and
    /// the plugin action's name.
    pub name: &'static str,
    /// Written for an agent: when to use the tool, in one or two sentences.
    pub description: &'static str,
    /// Whether the command runs in a Studio session (and so takes sessionId/context).
    pub needs_session: bool,
    /// The context used when the target instance is in Play and none is named.
    pub default_context: Context,
    /// The host's deadline for one call.
    pub timeout: Duration,
    pub kind: Kind,
    /// What every call of it needs, for the policy (TOOLS.md, Policy by capability):
    /// `read` answers from Studio or the API, `write` changes the place, `code` runs or
    /// writes Luau, `play` starts or stops playtests, `assets` brings content from the
    /// network. Arguments can add more ([`Command::capabilities`]), never take any away.
    pub capabilities: Capabilities,
    pub idempotent: bool,
    /// Whether it can reach beyond Studio (MCP's `openWorldHint`): `exec` can.
    pub open_world: bool,
    /// Arguments the CLI takes positionally, in order (`studio-bridge exec 'print(1)'`).
    pub positional: &'static [&'static str],
    /// Said to the agent when a result had to be cut: how to get the rest.
    pub truncation_hint: &'static str,
    /// The plugin event that continues this command's output (`logs --follow` on the CLI
    /// streams `log` events after the result).
    pub follow_event: Option<&'static str>,
    /// One command line that shows it in use, closing its `--help`.
    pub example: &'static str,
    /// The argument the command line can also read from a file (`--file F`) or stdin
    /// (`-`): a script's source.
    pub from_file: Option<&'static str>,
    /// A person's words for the arguments whose schema has no description: the schema's
    /// are read into every agent's context (the catalogue budget), `--help` is not.
    pub flag_help: &'static [(&'static str, &'static str)],
}

impl Spec {
    /// Its MCP tool name, `studio_<name>`.
    pub fn tool_name(&self) -> String {
        format!("{TOOL_PREFIX}{}", self.name)
    }
}

/// The result of a command: JSON for the agent, and for screenshots a PNG.
#[derive(Debug, Clone)]
pub struct Output {
    pub body: Body,
    pub image: Option<Vec<u8>>,
    /// The whole result, when the bound cut it: what the MCP adapter pages for the
    /// agent to fetch (`studio://results/{id}`). None for a result within the bound.
    pub whole: Option<Whole>,
}

/// A result as it was before the bound cut it. A plugin's result is kept as its frame
/// came, never as a tree: a JSON tree holds several times its text's bytes, and what the
/// result store counts must be what it holds (its bound is on memory).
#[derive(Debug, Clone)]
pub enum Whole {
    /// Made on this side (`sessions`, `api`).
    Json(Json),
    /// A plugin's result as it came (decoded only if the agent asks for the rest).
    Plugin(RawValue),
    /// A plugin's result as it came, with the project's files it names added when the
    /// rest is read, as they were at the call ([`Command::FILES`]).
    Annotated {
        raw: RawValue,
        files: files::Files,
        map: Option<Arc<Sourcemap>>,
    },
}

impl Whole {
    /// The whole result as a JSON tree (sessionId/context are not in it).
    pub fn value(&self) -> Json {
        match self {
            Whole::Json(json) => json.clone(),
            Whole::Plugin(raw) => raw.decode().map(value::into_json).unwrap_or(Json::Null),
            Whole::Annotated { raw, files, map } => {
                let mut json = raw.decode().map(value::into_json).unwrap_or(Json::Null);
                files.annotate(&mut json, map.as_deref());
                json
            }
        }
    }

    /// The same, its frame in an allocation of its own ([`RawValue::detached`]).
    pub fn detached(self) -> Whole {
        match self {
            Whole::Plugin(raw) => Whole::Plugin(raw.detached()),
            Whole::Annotated { raw, files, map } => Whole::Annotated {
                raw: raw.detached(),
                files,
                map,
            },
            json @ Whole::Json(_) => json,
        }
    }

    /// The bytes it holds, as the result store counts them: a frame's length; for a tree
    /// made on this side (small: `sessions`, `api`), its JSON text's, which is less than
    /// the tree holds.
    pub fn held_bytes(&self) -> usize {
        match self {
            Whole::Json(json) => {
                let mut counter = ByteCounter(0);
                // Writing into a counter fails never; a failure would count what was written.
                let _ = serde_json::to_writer(&mut counter, json);
                counter.0
            }
            Whole::Plugin(raw) | Whole::Annotated { raw, .. } => raw.len(),
        }
    }
}

/// Counts the bytes written to it.
struct ByteCounter(usize);

impl std::io::Write for ByteCounter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A result's JSON, in the form that costs least to hand on.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// Made on this side (`sessions`, `api`, a screenshot's size).
    Json(Json),
    /// A plugin's result as it came; [`DynCommand::invoke`] turns it into `Quoted`.
    Plugin(RawValue),
    /// Compact JSON text, finished and bounded, written straight from a plugin's msgpack,
    /// and the same text as a JSON string, quotes included, written in the same pass
    /// (`bound::bound_raw_quoted`): what the result's text block holds. A plugin's result
    /// is never a tree on this side.
    Quoted { text: String, quoted: Vec<u8> },
}

impl Output {
    pub fn json(json: Json) -> Output {
        Output {
            body: Body::Json(json),
            image: None,
            whole: None,
        }
    }

    /// A plugin's result, handed to the agent as it came.
    pub fn plugin(result: RawValue) -> Output {
        Output {
            body: Body::Plugin(result),
            image: None,
            whole: None,
        }
    }

    /// The result as a JSON tree (for the CLI's and the terminal's rendering).
    pub fn value(&self) -> Json {
        match &self.body {
            Body::Json(json) => json.clone(),
            Body::Plugin(raw) => raw.decode().map(value::into_json).unwrap_or(Json::Null),
            Body::Quoted { text, .. } => serde_json::from_str(text).unwrap_or(Json::Null),
        }
    }
}

/// Limits that apply to every command's result.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest JSON result (TOOLS.md, Bounded output).
    pub max_result_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_result_bytes: 256 * 1024,
        }
    }
}

/// Everything a command needs while it runs.
pub struct Invocation {
    pub bridge: Bridge,
    /// The Studio the caller named (or its default).
    pub target: Target,
    pub hooks: CallHooks,
    /// This caller's default target (`studio_target`), one per MCP connection.
    pub defaults: Arc<Mutex<Target>>,
    /// The caller's policy, for `sessions` to report.
    pub policy: Option<Arc<ActivePolicy>>,
    /// The caller's sourcemap (each `mcp` process has its own), if it looks for one.
    pub files: Option<Arc<Watched>>,
    /// The session that answered the last plugin call, for the result's
    /// `sessionId`/`context`.
    ran: Mutex<Option<Ran>>,
    /// A write's id, sent with its plugin calls (`state {operationId}` asks after it).
    operation_id: Option<String>,
    /// The host's own call (`doctor --studio`): its requests go out `quiet`, so the
    /// Studio Bridge panel does not list them.
    quiet: bool,
}

impl Invocation {
    /// The caller's sourcemap as its file is now (TOOLS.md, "Your files"); a changed
    /// file is read again off the async thread.
    pub async fn sourcemap(&self) -> Option<Arc<Sourcemap>> {
        match &self.files {
            Some(watched) => watched.current_off_thread().await,
            None => None,
        }
    }

    /// What most commands do: call the plugin action within the command's own timeout and
    /// hand its result to the agent as it came.
    pub async fn forward(&self, spec: &Spec, args: &impl Serialize) -> Result<Output, ToolError> {
        let result = self.call_plugin(spec, args, spec.timeout, None).await?;
        Ok(Output::plugin(result))
    }

    /// Calls this command's plugin action with `args` (defaults already filled in).
    pub async fn call_plugin(
        &self,
        spec: &Spec,
        args: &impl Serialize,
        timeout: Duration,
        plugin_timeout: Option<Duration>,
    ) -> Result<RawValue, ToolError> {
        self.call_plugin_as(
            spec,
            args,
            timeout,
            plugin_timeout,
            self.operation_id.clone(),
            self.quiet,
        )
        .await
    }

    /// A poll after this call's first request (`debug`'s hits while it waits): sent
    /// `quiet`, so the Studio Bridge panel lists the call once, not each poll.
    pub async fn poll_plugin(
        &self,
        spec: &Spec,
        args: &impl Serialize,
        timeout: Duration,
    ) -> Result<RawValue, ToolError> {
        self.call_plugin_as(spec, args, timeout, None, self.operation_id.clone(), true)
            .await
    }

    /// A write's call that writes nothing (`script_edit`'s dry run before its write): no
    /// operationId goes with it, and its failure says nothing was written
    /// (`details.wroteNothing`), so a timeout is never taken for a write that may have run.
    pub async fn call_plugin_to_preview(
        &self,
        spec: &Spec,
        args: &impl Serialize,
        timeout: Duration,
    ) -> Result<RawValue, ToolError> {
        self.call_plugin_as(spec, args, timeout, None, None, self.quiet)
            .await
            .map_err(|mut error| {
                error.set_detail("wroteNothing", Json::Bool(true));
                error
            })
    }

    async fn call_plugin_as(
        &self,
        spec: &Spec,
        args: &impl Serialize,
        timeout: Duration,
        plugin_timeout: Option<Duration>,
        operation_id: Option<String>,
        quiet: bool,
    ) -> Result<RawValue, ToolError> {
        // Through JSON, not `rmpv::ext::to_value`, which writes structs as arrays; this
        // also applies the `{"type": "binary" | "number"}` conventions to arguments.
        let args = serde_json::to_value(args)
            .map(|json| value::from_json(&json))
            .map_err(|e| ToolError::invalid_args(format!("arguments could not be encoded: {e}")))?;
        let call = Call {
            target: self.target.clone(),
            action: spec.name.to_owned(),
            args: map_if_empty(args),
            default_context: spec.default_context,
            timeout,
            plugin_timeout,
            operation_id,
            quiet,
        };
        let reply = self.bridge.call(call, self.hooks.clone()).await?;
        if let Some(ran) = reply.ran {
            *self.ran.lock().unwrap_or_else(|p| p.into_inner()) = Some(ran);
        }
        Ok(reply.value)
    }
}

/// `args` is a map by definition (PROTOCOL.md, Values): an argument struct with no
/// fields must not go out as an empty array.
fn map_if_empty(args: Msgpack) -> Msgpack {
    match args {
        Msgpack::Nil => Msgpack::Map(Vec::new()),
        Msgpack::Array(items) if items.is_empty() => Msgpack::Map(Vec::new()),
        other => other,
    }
}

/// A plugin result as a tree, for the commands that read it.
pub fn plugin_value(command: &str, result: &RawValue) -> Result<Msgpack, ToolError> {
    result
        .decode()
        .map_err(|e| bad_result(command, &format!("its result could not be decoded: {e}")))
}

/// How a command's result reads for a person (the CLI and the terminal), written beside
/// the command with the pieces in `crate::human::render` (every Studio text through
/// `escape_controls`). The default, and a result of a shape the command's own rendering
/// does not know (`None`), is the generic indented `key: value` form; a cut result gets
/// its note either way ([`human::finish`]).
pub trait Render {
    fn render(_args: &Json, _result: &Json, _out: Style, _err: Style) -> Option<Rendered> {
        None
    }
}

/// One command: its spec, its typed arguments and result, how it runs, and how its
/// result reads for a person ([`Render`]).
pub trait Command: Render + Send + Sync + 'static {
    /// Arguments, minus `sessionId`/`context` (the adapters add those).
    type Args: DeserializeOwned + Serialize + JsonSchema + Send + Sync + 'static;
    /// The shape of the result, for the MCP output schema.
    type Result: JsonSchema;
    const SPEC: Spec;
    /// Where its result names scripts or carries Studio's messages: the sourcemap's files
    /// and parsed locations are added there ([`files`]). None by default.
    const FILES: files::Files = files::Files::NONE;

    /// What this call needs, for the policy: [`Spec::capabilities`] unless the arguments
    /// add to it (`selection` with `set` writes; `create` with a script's source is code).
    /// Whatever it returns, a call needs at least the spec's set.
    fn capabilities(_args: &Self::Args) -> Capabilities {
        Self::SPEC.capabilities
    }

    fn run(args: Self::Args, cx: &Invocation) -> impl Future<Output = Result<Output, ToolError>> + Send;
}

/// A command with its types erased, as the adapters hold it (and the policy sees it:
/// [`Governed`]).
pub trait DynCommand: Send + Sync + Governed {
    fn spec(&self) -> &'static Spec;
    fn input_schema(&self) -> Map<String, Json>;
    fn output_schema(&self) -> Map<String, Json>;
    /// Validates `args` (naming the field and the fix), runs the command and bounds its
    /// result.
    fn invoke<'a>(
        &'a self,
        args: Map<String, Json>,
        cx: InvocationParts,
        limits: Limits,
    ) -> Pin<Box<dyn Future<Output = Result<Output, ToolError>> + Send + 'a>>;
    /// A result (its JSON, [`Output::value`]) for a person: the command's [`Render`], which
    /// also sees the call's arguments (`script_search` highlights its query).
    fn render(&self, args: &Json, result: &Json, out: Style, err: Style) -> Rendered;
}

/// What an adapter hands to [`DynCommand::invoke`]; the target is worked out from the
/// arguments there.
pub struct InvocationParts {
    pub bridge: Bridge,
    pub hooks: CallHooks,
    pub defaults: Arc<Mutex<Target>>,
    /// A target given outside the arguments (the CLI's `--session`/`--context`).
    pub target: Target,
    /// The caller's policy as `sessions` reports it.
    pub policy: Option<Arc<ActivePolicy>>,
    /// The caller's sourcemap, for the files in results (`None`: results name no files).
    pub files: Option<Arc<Watched>>,
    /// The host's own call (`doctor --studio`), not a caller's: its requests go `quiet`.
    pub quiet: bool,
}

/// Every command, in the order agents see them.
pub static ALL: &[&dyn DynCommand] = &[
    erased::<sessions::Sessions>(),
    erased::<target::TargetCommand>(),
    erased::<api::Api>(),
    erased::<state::State>(),
    erased::<stats::Stats>(),
    erased::<logs::Logs>(),
    erased::<query::Query>(),
    erased::<find::Find>(),
    erased::<exec::Exec>(),
    erased::<screenshot::Screenshot>(),
    erased::<script_read::ScriptRead>(),
    erased::<script_search::ScriptSearch>(),
    erased::<script_edit::ScriptEdit>(),
    erased::<play::Play>(),
    erased::<test_run::TestRun>(),
    erased::<debug::Debug>(),
    erased::<delete::Delete>(),
    erased::<clone::Clone>(),
    erased::<selection::Selection>(),
    erased::<undo::Undo>(),
    erased::<redo::Redo>(),
    erased::<create::Create>(),
    erased::<update::Update>(),
    erased::<insert_asset::InsertAsset>(),
    erased::<asset_search::AssetSearch>(),
    erased::<terrain::Terrain>(),
    erased::<input::Input>(),
    erased::<ui::Ui>(),
    erased::<character::Character>(),
    erased::<open::Open>(),
    erased::<run::Run>(),
    erased::<close::Close>(),
    erased::<cloud_exec::CloudExec>(),
    erased::<cloud_publish::CloudPublish>(),
    erased::<datastore::Datastore>(),
    erased::<cloud_message::CloudMessage>(),
    erased::<cloud_restart::CloudRestart>(),
];

pub fn find(name: &str) -> Option<&'static dyn DynCommand> {
    ALL.iter().copied().find(|c| c.spec().name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::human::render::tests::HOSTILE;
    use crate::human::render::{event_line, human, log_line, must_escape};
    use serde_json::json;

    pub(super) const PLAIN: Style = Style { color: false };
    pub(super) const COLOR: Style = Style { color: true };

    /// A table command's result for a person, as the CLI and the terminal render it.
    pub(super) fn render(command: &str, result: &Json, out: Style, err: Style) -> Rendered {
        find(command)
            .expect("a table command")
            .render(&Json::Null, result, out, err)
    }

    pub(super) fn plain(command: &str, result: &Json) -> Rendered {
        render(command, result, PLAIN, PLAIN)
    }

    #[test]
    fn the_generic_form_leaves_out_where_it_ran() {
        let text = human(&json!({"state": "Edit", "sessionId": "A-edit", "context": "edit"}));
        assert_eq!(text, "state: Edit\n");
        // A shape `delete`'s own rendering does not know.
        let text = plain(
            "delete",
            &json!({"removed": 1, "sessionId": "A-edit", "context": "edit"}),
        );
        assert_eq!(text.stdout, "removed: 1\n");
    }

    /// `value` with `HOSTILE` put into every string (and, with `keys`, every key).
    fn hostile(value: &Json, keys: bool) -> Json {
        match value {
            Json::String(text) => Json::String(format!("{text}{HOSTILE}")),
            Json::Array(items) => Json::Array(items.iter().map(|v| hostile(v, keys)).collect()),
            Json::Object(object) => Json::Object(
                object
                    .iter()
                    .map(|(k, v)| (if keys { format!("{k}{HOSTILE}") } else { k.clone() }, hostile(v, keys)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    #[test]
    fn no_renderer_writes_a_control_character_from_a_result() {
        let results = [
            (
                "exec",
                json!({"success": false, "error": "boom",
                "returns": ["s", {"type": "Instance", "value": {"path": "game.Workspace.P", "className": "Part"}},
                            {"type": "EnumItem", "value": {"enum": "Material", "name": "Wood", "value": 1}},
                            {"type": "Odd", "value": "x"}, {"k": "v"}],
                "logs": [{"level": "Print", "body": "a"}, {"level": "Warning", "body": "b"}, {"level": "Error", "body": "c"}]}),
            ),
            (
                "sessions",
                json!({"sessions": [{"sessionId": "A", "context": "edit", "state": "Edit",
                "status": "connected", "placeName": "P", "uptimeMs": 1}]}),
            ),
            (
                "query",
                json!({"instance": {"name": "W", "className": "Workspace", "childCount": 2,
                "properties": {"Name": "W", "Gravity": 1, "Text": "t"}, "propertyErrors": {"S": "no"},
                "attributes": {"A": "a"}, "tags": ["T"],
                "children": [{"name": "C", "className": "Part", "childCount": 0}]}}),
            ),
            (
                "logs",
                json!({"entries": [{"seq": 1, "level": "Print", "body": "a", "timestamp": 0}],
                "missed": 0, "truncated": true, "truncatedHint": "h"}),
            ),
            ("find", json!({"matches": [{"path": "game.W.A", "className": "Part"}]})),
            ("script_read", json!({"source": "a\nb\n", "lineCount": 2, "hash": "h"})),
            ("script_read", json!({"source": "a\nb\n", "lineCount": 9, "hash": "h"})),
            (
                "api",
                json!({"name": "Part", "superclasses": ["BasePart"], "tags": ["t"],
                "properties": [{"name": "Size", "type": "Vector3", "from": "BasePart", "access": "rw"}]}),
            ),
            (
                "api",
                json!({"name": "Material", "items": [{"name": "Wood", "value": 1}]}),
            ),
            (
                "api",
                json!({"matches": [{"kind": "property", "name": "Size", "class": "Part"}]}),
            ),
            (
                "state",
                json!({"state": "Edit", "placeName": "P", "list": ["x", {"y": "z"}]}),
            ),
            (
                "state",
                json!({"state": "Edit", "operation": {"id": "o", "command": "c", "status": "failed",
                       "error": {"code": "x", "message": "m"}}}),
            ),
            (
                "test_run",
                json!({"success": false, "error": "e", "returns": ["r"], "durationMs": 1, "timedOut": false,
                       "logs": [{"level": "Print", "body": "b", "context": "server"}]}),
            ),
            (
                "script_search",
                json!({"matches": [{"path": "p", "line": 1, "text": "t"}], "truncated": false}),
            ),
            (
                "play",
                json!({"state": "Play", "clients": [{"sessionId": "s", "player": "n"}]}),
            ),
            (
                "character",
                json!({"arrived": false, "position": [1, 2, 3], "distance": 1, "pathStatus": "s"}),
            ),
            ("input", json!({"steps": [{"type": "key", "ok": true}]})),
            (
                "ui",
                json!({"elements": [{"path": "p", "className": "c", "text": "t", "center": [1, 2], "size": [3, 4],
                       "visible": true, "active": true}]}),
            ),
            ("ui", json!({"clicked": "p", "at": [1, 2]})),
            ("ui", json!({"path": "p", "text": "t"})),
            (
                "undo",
                json!({"done": 1, "waypoint": "w", "stoppedAt": "s", "canUndo": true, "canRedo": false}),
            ),
            (
                "create",
                json!({"created": ["a"], "files": {"a": "f"}, "diagnosticsSkipped": "s"}),
            ),
            (
                "insert_asset",
                json!({"assetId": 1, "inserted": ["a"], "scripts": ["s"]}),
            ),
            (
                "screenshot",
                json!({"width": 1, "height": 1, "source": "window", "window": "w", "reason": "r", "hint": "h"}),
            ),
        ];
        for (command, result) in &results {
            for keys in [false, true] {
                let result = hostile(result, keys);
                let rendered = render(command, &result, PLAIN, PLAIN);
                for text in [&rendered.stdout, &rendered.stderr] {
                    assert!(
                        !text.chars().any(must_escape),
                        "{command} (keys: {keys}) wrote a control: {text:?}"
                    );
                }
                assert!(
                    rendered.stdout.contains("\\u{1b}]52;") || rendered.stderr.contains("\\u{1b}]52;"),
                    "{command}: the text is shown, escaped: {rendered:?}"
                );
                // In colour the only escapes are the colours' own.
                let coloured = render(command, &result, COLOR, COLOR);
                for text in [&coloured.stdout, &coloured.stderr] {
                    let without_colours = text
                        .replace("\u{1b}[0m", "")
                        .replace("\u{1b}[1m", "")
                        .replace("\u{1b}[2m", "")
                        .replace("\u{1b}[31m", "")
                        .replace("\u{1b}[33m", "")
                        .replace("\u{1b}[34m", "");
                    assert!(!without_colours.chars().any(must_escape), "{command}: {text:?}");
                }
            }
        }
        let event = hostile(&json!({"seq": 1, "level": "Error", "body": "x"}), false);
        assert!(!event_line(&event, PLAIN).chars().any(must_escape));
        let odd_event = hostile(&json!({"seq": 1, "note": "\u{9b}"}), true);
        assert!(!event_line(&odd_event, PLAIN).chars().any(must_escape));
        assert_eq!(log_line("Print", "\u{1b}c", PLAIN), "[Print] \\u{1b}c");
    }

    /// A result of each command the generic form used to print (#41), as a person reads it.
    #[test]
    fn every_command_reads_as_its_own_rendering() {
        let cases: &[(&str, Json, &str, &str)] = &[
            (
                "test_run",
                json!({"success": true, "returns": [1, {"a": 2}], "durationMs": 459, "timedOut": false,
                       "logs": [{"level": "Print", "body": "hi", "context": "server"},
                                {"level": "Warning", "body": "careful", "context": "client"}]}),
                "hi\nwarning: careful\n1, {a = 2}\n",
                "the test ran 459 ms\n",
            ),
            (
                "test_run",
                json!({"success": false, "returns": [], "error": "boom", "durationMs": 5000, "timedOut": true, "logs": []}),
                "",
                "error: boom\nthe test timed out after 5000 ms (--timeout-ms sets how long it may run)\n",
            ),
            (
                "script_search",
                json!({"matches": [{"path": "game.ServerScriptService.Main", "line": 3, "text": "  print(1)"},
                                   {"path": "game.X", "file": "src/x.luau", "line": 9, "text": "print"}],
                       "truncated": false}),
                "game.ServerScriptService.Main:3:   print(1)\nsrc/x.luau:9: print\n",
                "",
            ),
            (
                "play",
                json!({"state": "Play", "clients": [{"sessionId": "A-client-1", "player": "Player1"},
                                                    {"sessionId": "A-client-2"}]}),
                "Play\nCLIENT      PLAYER\nA-client-1  Player1\nA-client-2  –\n",
                "",
            ),
            ("play", json!({"state": "Edit"}), "Edit\n", ""),
            (
                "character",
                json!({"arrived": false, "position": [10.04, 3, -6.25], "distance": 4.21, "pathStatus": "NoPath"}),
                "stopped 4.2 studs short, at 10, 3, -6.3\n",
                "walked straight: pathfinding said NoPath\n",
            ),
            (
                "character",
                json!({"jumped": true, "position": [0, 5, 0]}),
                "jumped at 0, 5, 0\n",
                "",
            ),
            (
                "input",
                json!({"steps": [{"type": "key", "ok": true, "began": true, "gameProcessed": false},
                                 {"type": "wait", "ok": true}]}),
                "STEP  TYPE  SENT  BEGAN  UI TOOK IT\n1     key   yes   yes    no\n2     wait  yes   –      –\n",
                "",
            ),
            (
                "ui",
                json!({"elements": [{"path": "PlayerGui.Menu.Play", "className": "TextButton", "text": "Play",
                                     "center": [400, 300], "size": [200, 50], "visible": true, "active": true}],
                       "viewport": [800, 600], "inset": [0, 58]}),
                "PATH                 CLASS       TEXT  CENTRE    SIZE     CLICKABLE\nPlayerGui.Menu.Play  TextButton  Play  400, 300  200, 50  yes\n",
                "viewport 800, 600; the top bar's inset 0, 58\n",
            ),
            (
                "ui",
                json!({"clicked": "PlayerGui.Menu.Play", "at": [400, 358], "activated": true}),
                "clicked PlayerGui.Menu.Play at 400, 358; Activated fired\n",
                "",
            ),
            (
                "ui",
                json!({"path": "PlayerGui.Chat.Box", "text": "hello", "focused": false, "submitted": true}),
                "typed into PlayerGui.Chat.Box: now \"hello\", submitted\n",
                "",
            ),
            (
                "state",
                json!({"state": "Edit", "placeName": "Place A", "placeId": 1, "gameId": 2,
                       "operation": {"id": "7f", "command": "delete", "status": "done", "result": {"deleted": 1}}}),
                "Edit · Place A (place 1, game 2)\noperation 7f (delete): done\n  deleted: 1\n",
                "",
            ),
            (
                "undo",
                json!({"done": 2, "waypoint": "studio-bridge: create", "canUndo": true, "canRedo": true}),
                "undid 2 steps, the last \"studio-bridge: create\"\n",
                "can undo: yes, can redo: yes\n",
            ),
            (
                "redo",
                json!({"done": 0, "stoppedAt": "Move", "canUndo": true, "canRedo": true}),
                "nothing to redo\n",
                "stopped at \"Move\": not the step --expect names\ncan undo: yes, can redo: yes\n",
            ),
            ("delete", json!({"deleted": 1}), "deleted 1 instance\n", ""),
            (
                "clone",
                json!({"created": ["Workspace.A[2]", "Workspace.A[3]"]}),
                "Workspace.A[2]\nWorkspace.A[3]\n",
                "",
            ),
            (
                "create",
                json!({"created": ["ServerScriptService.S", "Workspace.P"], "files": {"ServerScriptService.S": "src/S.server.luau"}}),
                "ServerScriptService.S → src/S.server.luau\nWorkspace.P\n",
                "",
            ),
            ("update", json!({"updated": ["Workspace.P"]}), "Workspace.P\n", ""),
            ("selection", json!({"selection": []}), "", "nothing is selected\n"),
            (
                "insert_asset",
                json!({"assetId": 12, "inserted": ["Workspace.Tree"], "scripts": ["Workspace.Tree.Sway"]}),
                "inserted asset 12:\nWorkspace.Tree\n1 script inside:\nWorkspace.Tree.Sway\n",
                "",
            ),
            (
                "screenshot",
                json!({"width": 1280, "height": 720, "source": "viewport"}),
                "1280×720 PNG from the viewport\n",
                "",
            ),
            (
                "asset_search",
                json!({"assets": [{"id": 4242, "name": "Crate", "creator": "Tests"}], "page": 1}),
                "ID    NAME   CREATOR\n4242  Crate  Tests\n",
                "page 1; --page 2 for more\n",
            ),
            (
                "stats",
                json!({"memory": {"totalMb": 812.25, "byTag": {"Gui": 3, "Script": 9}},
                       "instances": {"total": 7, "byClass": [{"className": "Part", "count": 4}]},
                       "scripts": {"total": 1, "byKind": {"Script": 1}, "enabled": 1},
                       "network": {"dataSendKbps": 2.5}, "unavailable": ["Stats.HeartbeatTime"], "sources": {}}),
                "memory: 812.3 MB\n  Script                   9 MB\n  Gui                      3 MB\ninstances: 7\n  CLASS  COUNT\n  Part   4\nscripts: 1 (1 enabled)\nnetwork: dataSendKbps 2.5\n",
                "not exposed by this Studio here: Stats.HeartbeatTime\n",
            ),
            (
                "target",
                json!({"sessions": []}),
                "no default: calls that name no session need one Studio open\nno sessions: no Studio has the studio-bridge plugin connected\n",
                "",
            ),
        ];
        for (command, result, stdout, stderr) in cases {
            let rendered = plain(command, result);
            assert_eq!(rendered.stdout, *stdout, "{command}: {result}");
            assert_eq!(rendered.stderr, *stderr, "{command}: {result}");
        }
    }

    #[test]
    fn script_search_marks_its_query_on_a_terminal() {
        let result = json!({"matches": [{"path": "game.S", "line": 1, "text": "Print(print)"}], "truncated": false});
        let marked = "\u{1b}[31m\u{1b}[1m";
        let asked = json!({"query": "print"});
        let rendered = find("script_search").unwrap().render(&asked, &result, COLOR, COLOR);
        assert_eq!(
            rendered.stdout,
            format!("\u{1b}[34mgame.S\u{1b}[0m:1: {marked}Print\u{1b}[0m\u{1b}[0m({marked}print\u{1b}[0m\u{1b}[0m)\n")
        );
        let asked = json!({"query": "print", "caseSensitive": true});
        let rendered = find("script_search").unwrap().render(&asked, &result, COLOR, COLOR);
        assert!(
            rendered
                .stdout
                .ends_with(&format!("Print({marked}print\u{1b}[0m\u{1b}[0m)\n")),
            "{rendered:?}"
        );
        // A Luau pattern is not marked; nor is anything without colour.
        let asked = json!({"query": "pr.nt", "regex": true});
        let rendered = find("script_search").unwrap().render(&asked, &result, COLOR, COLOR);
        assert!(rendered.stdout.ends_with(":1: Print(print)\n"), "{rendered:?}");
        let rendered = find("script_search")
            .unwrap()
            .render(&json!({"query": "print"}), &result, PLAIN, PLAIN);
        assert_eq!(rendered.stdout, "game.S:1: Print(print)\n");
    }

    #[test]
    fn unknown_shapes_fall_back_to_the_generic_form() {
        let odd = json!({"success": "maybe"});
        assert_eq!(plain("exec", &odd).stdout, "success: maybe\n");
        let truncated = json!({"entries": [], "total": 0, "bufferCapacity": 1, "nextSince": 0,
                               "truncated": true, "truncatedHint": "Ask for fewer."});
        assert_eq!(
            plain("logs", &truncated).stderr,
            "note: the result was cut to fit. Ask for fewer.\n"
        );
    }

    #[test]
    fn names_are_unique_and_snake_case() {
        let mut names: Vec<&str> = ALL.iter().map(|c| c.spec().name).collect();
        for name in &names {
            assert!(name.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{name}");
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
    }

    #[test]
    fn schemas_are_objects_without_refs_or_nonstandard_formats() {
        for command in ALL {
            for schema in [command.input_schema(), command.output_schema()] {
                let text = Json::Object(schema.clone()).to_string();
                assert_eq!(
                    schema.get("type"),
                    Some(&Json::String("object".into())),
                    "{}",
                    command.spec().name
                );
                assert!(!text.contains("$ref"), "{}: {text}", command.spec().name);
                assert!(!text.contains("\"format\":\"uint"), "{}: {text}", command.spec().name);
                assert!(!text.contains("\"format\":\"double"), "{}: {text}", command.spec().name);
            }
            let input = command.input_schema();
            let has_session = input["properties"].get("sessionId").is_some();
            assert_eq!(has_session, command.spec().needs_session, "{}", command.spec().name);
        }
    }

    #[test]
    fn descriptions_are_lean() {
        for command in ALL {
            let words = command.spec().description.split_whitespace().count();
            assert!((5..=80).contains(&words), "{}: {words} words", command.spec().name);
        }
    }

    fn capabilities_of_call(name: &str, args: Json) -> Vec<&'static str> {
        let Json::Object(args) = args else { unreachable!() };
        let command = find(name).unwrap();
        command.call_capabilities(&args).names()
    }

    #[test]
    fn every_command_names_its_capabilities() {
        let expected: &[(&str, &[&str])] = &[
            ("sessions", &["read"]),
            ("target", &["read"]),
            ("api", &["read"]),
            ("state", &["read"]),
            ("stats", &["read"]),
            ("logs", &["read"]),
            ("query", &["read"]),
            ("find", &["read"]),
            ("exec", &["code"]),
            ("screenshot", &["read"]),
            ("script_read", &["read"]),
            ("script_search", &["read"]),
            ("script_edit", &["write", "code"]),
            ("play", &["play"]),
            ("test_run", &["code", "play"]),
            ("debug", &["read"]),
            ("delete", &["write"]),
            ("clone", &["write"]),
            ("selection", &["read"]),
            ("undo", &["write"]),
            ("redo", &["write"]),
            ("create", &["write"]),
            ("update", &["write"]),
            ("insert_asset", &["write", "assets"]),
            ("asset_search", &["read"]),
            ("terrain", &["read"]),
            ("input", &["play"]),
            ("ui", &["read"]),
            ("character", &["play"]),
            ("open", &["launch"]),
            ("run", &["code", "launch"]),
            ("close", &["launch"]),
            ("cloud_exec", &["code", "cloud"]),
            ("cloud_publish", &["write", "cloud"]),
            ("datastore", &["cloud"]),
            ("cloud_message", &["write", "cloud"]),
            ("cloud_restart", &["write", "cloud"]),
        ];
        assert_eq!(expected.len(), ALL.len(), "every command is listed here");
        for (name, capabilities) in expected {
            let command = find(name).unwrap();
            assert_eq!(command.capabilities().names(), *capabilities, "{name}");
            assert_eq!(command.tool_name(), format!("studio_{name}"));
            // With no arguments (or ones that do not parse), a call needs the static set.
            assert_eq!(command.call_capabilities(&Map::new()).names(), *capabilities, "{name}");
            let mut bogus = Map::new();
            bogus.insert("bogus".into(), Json::Bool(true));
            assert_eq!(command.call_capabilities(&bogus).names(), *capabilities, "{name}");
        }
    }

    #[test]
    fn arguments_decide_what_selection_and_create_need() {
        assert_eq!(capabilities_of_call("selection", serde_json::json!({})), ["read"]);
        assert_eq!(
            capabilities_of_call(
                "selection",
                serde_json::json!({"sessionId": "A-edit", "context": "edit"})
            ),
            ["read"]
        );
        assert_eq!(
            capabilities_of_call("selection", serde_json::json!({"set": ["Workspace"]})),
            ["read", "write"]
        );
        assert_eq!(
            capabilities_of_call("selection", serde_json::json!({"set": []})),
            ["read", "write"]
        );

        let part = serde_json::json!({"className": "Part", "parent": "Workspace", "properties": {"Anchored": true}});
        let script = serde_json::json!({"className": "Script", "parent": "ServerScriptService", "source": "print(1)"});
        let by_property =
            serde_json::json!({"className": "Script", "parent": "Workspace", "properties": {"Source": "x"}});
        assert_eq!(
            capabilities_of_call("create", serde_json::json!({"items": [part]})),
            ["write"]
        );
        assert_eq!(
            capabilities_of_call("create", serde_json::json!({"items": [part, script]})),
            ["write", "code"],
            "source on any item is code"
        );
        assert_eq!(
            capabilities_of_call(
                "create",
                serde_json::json!({"items": [by_property], "sessionId": "A-edit"})
            ),
            ["write", "code"]
        );
        assert_eq!(
            capabilities_of_call("exec", serde_json::json!({"script": "return 1", "runtime": "game"})),
            ["code"]
        );
        assert_eq!(
            capabilities_of_call("test_run", serde_json::json!({"script": "return 1"})),
            ["code", "play"]
        );
    }
}

//! `run`: runs a script in a place file in a Studio started for it, with no window to
//! click, through Studio's `--task RunScript --localPlaceFile … --runScriptFile …
//! --outputFile … --quitAfterExecution`; for local CI on a machine with a signed-in Studio
//! (not a headless server: Open Cloud's Luau Execution is that).
//!
//! Studio runs the script at the command bar's level; the plugin cannot tell a run's
//! script from any other. So the script is wrapped (see [`wrapper`]): it prints a marked
//! line before it starts and one with its result, as JSON. studio-bridge reads those lines,
//! and what was printed between them, from the plugin's log over our own socket where
//! the plugin loads, else from `--outputFile` once Studio has quit. The wrapper then waits
//! (up to [`ACK_WAIT_S`]) for studio-bridge to say it has read them, an attribute on the
//! DataModel set through `exec`, so that `--quitAfterExecution` does not end Studio before
//! the plugin has carried the lines.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::open::{Spawned, edit_call, place_file, report, stage};
use super::{Command, Invocation, Kind, Output, Render, Spec};
use crate::human::render::{self, Rendered, Style};
use crate::launch::process;
use crate::launch::studio::{self, Place};
use crate::protocol::{Context, ErrorCode, ToolError, value};

/// Longest `timeoutMs` accepted (10 minutes).
const MAX_TIMEOUT_MS: u64 = 600_000;
/// How long the wrapper waits for studio-bridge to have read its result before the script
/// ends (and Studio quits): what a plugin that loads takes to connect, with room.
const ACK_WAIT_S: u32 = 20;
/// The DataModel attribute the acknowledgement is written to.
const ACK_ATTRIBUTE: &str = "StudioBridgeRunRead";
/// How long Studio has to quit once the result is read, before its process tree is ended.
const QUIT_GRACE: Duration = Duration::from_secs(15);
const POLL: Duration = Duration::from_millis(250);

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RunArgs {
    /// .rbxl/.rbxlx file
    pub place_file: String,
    pub script: String,
    #[serde(default = "default_timeout_ms")]
    #[schemars(range(min = 1000, max = 600_000))]
    pub timeout_ms: u64,
    /// false: no syntax check
    #[schemars(extend("default" = true))]
    #[serde(default = "super::check_by_default", skip_serializing)]
    pub check: bool,
}

fn default_timeout_ms() -> u64 {
    120_000
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
    pub success: bool,
    /// The script's returns (nil as null, in place; an Instance as its full name).
    pub returns: Vec<Json>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the script printed, in order.
    pub logs: Vec<RunLog>,
    pub duration_ms: u64,
    /// `plugin` (over studio-bridge's socket) or `outputFile` (Studio's --outputFile).
    pub via: String,
}

#[derive(Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunLog {
    pub level: String,
    pub body: String,
}

pub struct Run;

impl Command for Run {
    type Args = RunArgs;
    type Result = RunResult;
    const SPEC: Spec = Spec {
        name: "run",
        description: "Run Luau in a place file in a new Studio that then quits: returns, errors, output.",
        needs_session: false,
        default_context: Context::Edit,
        timeout: Duration::from_secs(640),
        kind: Kind::Destructive,
        capabilities: super::Capabilities::of(&[super::Capability::Launch, super::Capability::Code]),
        idempotent: false,
        open_world: true,
        positional: &["placeFile", "script"],
        truncation_hint: "",
        follow_event: None,
        example: "studio-bridge run ./MyGame.rbxl 'return #workspace:GetChildren()'",
        from_file: Some("script"),
        flag_help: &[
            ("script", "Luau to run; its returns come back"),
            ("timeoutMs", "How long Studio may take, start to quit"),
        ],
    };

    async fn run(args: RunArgs, cx: &Invocation) -> Result<Output, ToolError> {
        if !(1000..=MAX_TIMEOUT_MS).contains(&args.timeout_ms) {
            return Err(ToolError::invalid_args(format!(
                "`timeoutMs` must be between 1000 and {MAX_TIMEOUT_MS}."
            )));
        }
        if args.check {
            super::exec::check_syntax(&args.script)?;
        }
        let file = place_file(&args.place_file)?;
        let token = uuid::Uuid::new_v4().simple().to_string();
        let files = RunFiles::new(&token).map_err(|e| {
            ToolError::new(
                ErrorCode::PluginError,
                format!("the run's script could not be written: {e}"),
            )
        })?;
        std::fs::write(&files.script, wrapper(&token, &args.script)).map_err(|e| {
            ToolError::new(
                ErrorCode::PluginError,
                format!("{} could not be written: {e}", files.script.display()),
            )
        })?;
        let arguments = studio::run_arguments(&file, &files.script, &files.output);
        let outcome = run_in_studio(cx, &Place::File(file), &arguments, &token, &files, args.timeout_ms).await;
        files.remove();
        let result = outcome?;
        Ok(Output::json(serde_json::to_value(result).unwrap_or_default()))
    }
}

/// The run's files in the temporary directory: the wrapped script and Studio's output.
struct RunFiles {
    script: PathBuf,
    output: PathBuf,
}

impl RunFiles {
    fn new(token: &str) -> std::io::Result<RunFiles> {
        let dir = std::env::temp_dir();
        Ok(RunFiles {
            script: std::path::absolute(dir.join(format!("studio-bridge-run-{token}.luau")))?,
            output: std::path::absolute(dir.join(format!("studio-bridge-run-{token}.log")))?,
        })
    }

    fn remove(&self) {
        let _ = std::fs::remove_file(&self.script);
        let _ = std::fs::remove_file(&self.output);
    }
}

/// The marker of this run's lines in Studio's output.
fn mark(token: &str) -> String {
    format!("[studio-bridge run {token}]")
}

/// The script Studio runs: `script` as the body of a function, its result printed as one
/// marked line of JSON (each return through HttpService:JSONEncode, which "can be used
/// regardless of whether HTTP requests are enabled"; an Instance as its full name, anything
/// JSON cannot hold as its tostring), then the wait for the acknowledgement.
fn wrapper(token: &str, script: &str) -> String {
    let mut wrapped = wrapper_head(token);
    wrapped.push_str(script);
    let mark = mark(token);
    wrapped.push_str(&format!(
        r#"
end
local outcome = table.pack(xpcall(body, function(message)
	return tostring(message)
end))
if outcome[1] then
	local returns = {{}}
	for i = 2, outcome.n do
		table.insert(returns, encode(outcome[i]))
	end
	print("{mark} result " .. '{{"success":true,"returns":[' .. table.concat(returns, ",") .. "]}}")
else
	print("{mark} result " .. '{{"success":false,"returns":[],"error":' .. encode(outcome[2]) .. "}}")
end
local waitUntil = os.clock() + {ACK_WAIT_S}
while game:GetAttribute("{ACK_ATTRIBUTE}") ~= "{token}" and os.clock() < waitUntil do
	task.wait(0.1)
end
"#
    ));
    wrapped
}

/// The wrapper up to the script's first line.
fn wrapper_head(token: &str) -> String {
    let mark = mark(token);
    format!(
        r#"-- studio-bridge run: the script below, wrapped so that studio-bridge can read its result.
local HttpService = game:GetService("HttpService")
-- One value as JSON: JSONEncode takes a table, so the value goes in a one-item array whose
-- brackets are then cut off.
local function encode(value: any): string
	if value == nil then
		return "null"
	elseif typeof(value) == "Instance" then
		value = value:GetFullName()
	end
	local ok, text = pcall(function()
		return HttpService:JSONEncode({{ value }})
	end)
	if not ok then
		text = HttpService:JSONEncode({{ tostring(value) }})
	end
	return string.sub(text, 2, -2)
end
print("{mark} start")
local function body(...)
"#
    )
}

/// `text` (an error) with the wrapper's chunk name and line numbers, wherever Studio names
/// them (`[string "/tmp/studio-bridge-run-<token>.luau"]:21:`, or the bare path), made the
/// script's own: `script:1:`.
fn in_script_lines(text: &str, token: &str) -> String {
    let offset = wrapper_head(token).lines().count();
    let file = format!("studio-bridge-run-{token}.luau");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(&file) {
        // The chunk name starts at `[string "` before the file, else at the path's start.
        let before = &rest[..at];
        let start = before
            .rfind("[string \"")
            .or_else(|| before.rfind(|c: char| c.is_whitespace()).map(|i| i + 1))
            .unwrap_or(0);
        let mut end = at + file.len();
        if rest[end..].starts_with("\"]") {
            end += 2;
        }
        let digits: String = rest[end..]
            .strip_prefix(':')
            .unwrap_or("")
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        out.push_str(&rest[..start]);
        match digits.parse::<usize>() {
            Ok(line) if line > offset => {
                out.push_str(&format!("script:{}", line - offset));
                end += 1 + digits.len();
            }
            _ => out.push_str("script"),
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// What the marked lines say, once the result line is among them.
#[derive(Debug, PartialEq)]
struct Read {
    result: Json,
    logs: Vec<RunLog>,
}

/// The run's result from its lines (level, text): what was printed between the start line
/// and the result line, and the result. None until the result line is there.
fn read_lines<'a>(token: &str, lines: impl IntoIterator<Item = (&'a str, &'a str)>) -> Option<Read> {
    let mark = mark(token);
    let start = format!("{mark} start");
    let result = format!("{mark} result ");
    let mut logs = Vec::new();
    let mut started = false;
    for (level, text) in lines {
        if let Some(at) = text.find(&result) {
            let json = serde_json::from_str(&text[at + result.len()..]).ok()?;
            return Some(Read { result: json, logs });
        }
        if text.contains(&start) {
            started = true;
        } else if started {
            logs.push(RunLog {
                level: level.to_owned(),
                body: text.to_owned(),
            });
        }
    }
    None
}

/// Starts Studio on the run and waits for its result, from the plugin or the output file.
async fn run_in_studio(
    cx: &Invocation,
    place: &Place,
    arguments: &[std::ffi::OsString],
    token: &str,
    files: &RunFiles,
    timeout_ms: u64,
) -> Result<RunResult, ToolError> {
    let mut spawned = Spawned::launch(cx, place, arguments).await?;
    let started_at = spawned.started_at;
    let deadline = started_at + Duration::from_millis(timeout_ms);
    let mut session: Option<String> = None;
    let mut script_ran = false;
    let failure = loop {
        if session.is_none()
            && let Some(found) = spawned.session(cx).await
        {
            session = Some(found.session_id);
        }
        if let Some(session_id) = &session {
            match read_from_plugin(cx, session_id, token).await {
                Ok(Some(read)) => {
                    report(cx, 3.0, "the script ran; Studio is quitting".to_owned());
                    acknowledge(cx, session_id, token).await;
                    if !process::exited_within(&spawned.identity, QUIT_GRACE).await {
                        tracing::warn!(
                            pid = spawned.identity.pid,
                            "Studio did not quit after the run; ending it"
                        );
                        spawned.abandon().await;
                    } else {
                        spawned.forget();
                    }
                    return Ok(finish(read, "plugin", started_at, token));
                }
                Ok(None) => {}
                Err(started) => script_ran |= started,
            }
        }
        if let Some(status) = spawned.exited() {
            spawned.forget();
            let text = std::fs::read_to_string(&files.output).unwrap_or_default();
            return match read_lines(token, text.lines().map(|line| ("Output", line))) {
                Some(read) => Ok(finish(read, "outputFile", started_at, token)),
                None => Err(ToolError::new(
                    ErrorCode::SessionLost,
                    format!(
                        "Studio exited ({status}) without the script's result ({}; {}). Its output: {}.",
                        stage(&spawned),
                        if session.is_some() {
                            "its plugin connected"
                        } else {
                            "no plugin connected"
                        },
                        spawned.log.display()
                    ),
                )),
            };
        }
        if tokio::time::Instant::now() >= deadline {
            let how_far = match (&session, script_ran) {
                (Some(_), true) => {
                    "the process started, the plugin loaded and the script started, but it did not finish"
                }
                (Some(_), false) => "the process started and the plugin loaded, but the script had not started",
                (None, _) => stage(&spawned),
            };
            break ToolError::new(
                ErrorCode::Timeout,
                format!(
                    "The run did not finish within {} s ({how_far}), so its Studio was ended. Its output: {}.",
                    timeout_ms / 1000,
                    spawned.log.display()
                ),
            );
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            () = cx.hooks.cancel.cancelled() => {
                break ToolError::new(ErrorCode::Cancelled, "The run was cancelled; its Studio was ended.");
            }
        }
    };
    spawned.abandon().await;
    Err(failure)
}

fn finish(read: Read, via: &str, started: tokio::time::Instant, token: &str) -> RunResult {
    let success = read.result.get("success") == Some(&Json::Bool(true));
    RunResult {
        success,
        returns: read
            .result
            .get("returns")
            .and_then(Json::as_array)
            .cloned()
            .unwrap_or_default(),
        error: read
            .result
            .get("error")
            .and_then(Json::as_str)
            .map(|error| in_script_lines(error, token)),
        logs: read.logs,
        duration_ms: started.elapsed().as_millis() as u64,
        via: via.to_owned(),
    }
}

/// The run's lines from the session's log (`logs` from the start of its buffer). Ok(None):
/// no result yet; Err(true): the script has started, Err(false): not yet.
async fn read_from_plugin(cx: &Invocation, session_id: &str, token: &str) -> Result<Option<Read>, bool> {
    // The plugin's own lines ("[StudioBridge] …") are left out; the marks are not its own.
    let args = serde_json::json!({"since": 0, "count": 10000});
    let Ok(reply) = cx
        .bridge
        .call(edit_call(session_id, "logs", &args), cx.hooks.clone())
        .await
    else {
        return Err(false);
    };
    let logs = reply.value.decode().map(value::into_json).unwrap_or(Json::Null);
    let entries: Vec<(&str, &str)> = logs
        .get("entries")
        .and_then(Json::as_array)
        .map(|entries| {
            entries
                .iter()
                .filter_map(|e| Some((e.get("level")?.as_str()?, e.get("body")?.as_str()?)))
                .collect()
        })
        .unwrap_or_default();
    match read_lines(token, entries.iter().copied()) {
        Some(read) => Ok(Some(read)),
        None => Err(entries
            .iter()
            .any(|(_, body)| body.contains(&format!("{} start", mark(token))))),
    }
}

/// Tells the wrapper its result was read, so it ends and Studio quits.
async fn acknowledge(cx: &Invocation, session_id: &str, token: &str) {
    let script = format!("game:SetAttribute(\"{ACK_ATTRIBUTE}\", \"{token}\")");
    let args = serde_json::json!({"script": script});
    if let Err(error) = cx
        .bridge
        .call(edit_call(session_id, "exec", &args), cx.hooks.clone())
        .await
    {
        tracing::warn!(%error, "could not tell the run's script that its result was read; Studio quits when its wait ends");
    }
}

impl Render for Run {
    /// What the script printed, then its returns or its error (as test_run's).
    fn render(_args: &Json, result: &Json, out: Style, err: Style) -> Option<Rendered> {
        let mut rendered = Rendered::default();
        for log in result.get("logs")?.as_array()? {
            let _ = writeln!(
                rendered.stdout,
                "{}",
                render::log_line(log.get("level")?.as_str()?, log.get("body")?.as_str()?, out)
            );
        }
        if let Some(error) = result.get("error").and_then(Json::as_str) {
            let _ = writeln!(
                rendered.stderr,
                "{}",
                err.red(&format!("error: {}", render::clean(error)))
            );
        } else {
            for value in result.get("returns")?.as_array()? {
                let _ = writeln!(rendered.stdout, "{}", render::numbers(std::slice::from_ref(value)));
            }
        }
        Some(rendered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_result_is_read_between_the_marks() {
        let token = "abc";
        let lines = [
            ("Output", "[studio-bridge run other] start"),
            ("Output", "before the run"),
            ("Output", "[studio-bridge run abc] start"),
            ("Output", "hello"),
            ("Warning", "careful"),
            (
                "Output",
                r#"[studio-bridge run abc] result {"success":true,"returns":[1,null,"x"]}"#,
            ),
            ("Output", "after"),
        ];
        let read = read_lines(token, lines).unwrap();
        assert_eq!(read.result["returns"], serde_json::json!([1, null, "x"]));
        let bodies: Vec<&str> = read.logs.iter().map(|l| l.body.as_str()).collect();
        assert_eq!(bodies, ["hello", "careful"]);
        assert_eq!(read.logs[1].level, "Warning");
        // Until the result line is there, there is no result.
        assert_eq!(read_lines(token, lines[..5].iter().copied()), None);
        // A prefix an output file may put before each line is allowed.
        let prefixed = [
            ("Output", "12:00:01 -- [studio-bridge run abc] start"),
            (
                "Output",
                r#"12:00:02 -- [studio-bridge run abc] result {"success":false,"returns":[],"error":"boom"}"#,
            ),
        ];
        assert_eq!(read_lines(token, prefixed).unwrap().result["error"], "boom");
    }

    #[test]
    fn errors_name_the_scripts_own_lines() {
        let token = "abc";
        let offset = wrapper_head(token).lines().count();
        let wrapped = wrapper(token, "local a = 1\nerror('stuck')");
        let line = wrapped.lines().position(|l| l == "error('stuck')").unwrap() + 1;
        assert_eq!(line - offset, 2, "the script's second line");
        let lune = format!("[string \"/tmp/studio-bridge-run-abc.luau\"]:{line}: stuck");
        assert_eq!(in_script_lines(&lune, token), "script:2: stuck");
        let bare = format!("/tmp/studio-bridge-run-abc.luau:{line}: stuck");
        assert_eq!(in_script_lines(&bare, token), "script:2: stuck");
        assert_eq!(in_script_lines("no chunk here", token), "no chunk here");
    }

    #[test]
    fn the_wrapper_is_valid_luau_with_the_script_inside() {
        let script = "local x = ...\nreturn 1, nil, workspace -- a comment at the end";
        let wrapped = wrapper("abc", script);
        crate::luau::syntax::check(&wrapped).expect("the wrapper parses");
        assert!(wrapped.contains(script));
        assert!(wrapped.contains("[studio-bridge run abc] start"));
        assert!(Path::new(&RunFiles::new("abc").unwrap().script).is_absolute());
    }
}

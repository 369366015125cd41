//! Luau Execution: a script run in a fresh server of a place (or of one of its versions) on
//! Roblox's servers. A task is created, polled until it is COMPLETE, FAILED or CANCELLED,
//! and its logs are read in the STRUCTURED view, page by page.
//!
//! Polling honours the quotas (GetLuauExecutionSessionTask: 45 a minute per key owner or
//! IP): it starts at 1 s and slows to one poll every 3 s, so that a long task stays under
//! 20 a minute and several can run at once.

use std::time::Duration;

use reqwest::Method;
use serde::Deserialize;
use serde_json::{Value as Json, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Cloud, Request};
use crate::protocol::ToolError;

const WRITE_SCOPE: &str = "universe.place.luau-execution-session:write";
const READ_SCOPE: &str = "universe.place.luau-execution-session:read";
/// The logs are asked for in pages of this many chunks (the API's maximum is 10,000).
const LOG_PAGE: u32 = 1000;
/// At most this many pages of logs are read; a task that printed more says so.
const LOG_PAGES: usize = 20;

/// Where a task runs.
#[derive(Debug, Clone, Copy)]
pub struct Place {
    pub universe: u64,
    pub place: u64,
    pub version: Option<u64>,
}

/// A task as the API returns it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub path: String,
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub error: Option<TaskError>,
    #[serde(default)]
    pub output: Option<TaskOutput>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct TaskError {
    #[serde(default)]
    pub code: String,
    #[serde(default)]
    pub message: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct TaskOutput {
    #[serde(default)]
    pub results: Vec<Json>,
}

impl Task {
    pub fn finished(&self) -> bool {
        matches!(self.state.as_str(), "COMPLETE" | "FAILED" | "CANCELLED")
    }
}

/// One printed line: `level` is Output, Info, Warning or Error (the engine's MessageType).
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    pub level: &'static str,
    pub body: String,
    pub time: String,
}

impl LogLine {
    pub fn to_json(&self) -> Json {
        json!({ "level": self.level, "body": self.body, "time": self.time })
    }
}

/// The largest binary input the API takes: 100 MiB.
pub const MAX_BINARY_INPUT: u64 = 100 * 1024 * 1024;

/// Uploads `bytes` as a binary input of `universe` (valid 15 minutes): its resource path,
/// which a task names to get the bytes as `({...})[1].BinaryInput`, a buffer. The bytes go
/// to the presigned `uploadUri` the API answers with, without the API key.
pub async fn binary_input(
    cloud: &Cloud,
    universe: u64,
    bytes: bytes::Bytes,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<String, ToolError> {
    let request = Request::new(
        Method::POST,
        format!("/cloud/v2/universes/{universe}/luau-execution-session-task-binary-inputs"),
        WRITE_SCOPE,
        format!("universe {universe}"),
    )
    .json(json!({ "size": bytes.len() }));
    let answer = cloud.send(&request, deadline, cancel).await?;
    let field = |name: &str| answer.json.get(name).and_then(Json::as_str).map(str::to_owned);
    let (Some(path), Some(uri)) = (field("path"), field("uploadUri")) else {
        return Err(ToolError::new(
            crate::protocol::ErrorCode::PluginError,
            format!("Open Cloud's binary input names no path or uploadUri: {}", answer.text),
        ));
    };
    cloud.upload(&uri, bytes, deadline, cancel).await?;
    Ok(path)
}

/// Creates the task: `script` runs with Open Cloud's `timeout` (the script's own limit),
/// with the binary input at `input` (a path from [`binary_input`]) when given.
pub async fn create(
    cloud: &Cloud,
    place: Place,
    script: &str,
    input: Option<&str>,
    timeout: Duration,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Task, ToolError> {
    let mut path = format!("/cloud/v2/universes/{}/places/{}", place.universe, place.place);
    if let Some(version) = place.version {
        path.push_str(&format!("/versions/{version}"));
    }
    path.push_str("/luau-execution-session-tasks");
    let what = match place.version {
        Some(version) => format!(
            "universe {}'s place {} at version {version}",
            place.universe, place.place
        ),
        None => format!("universe {}'s place {}", place.universe, place.place),
    };
    let mut body = json!({ "script": script, "timeout": format!("{}s", timeout.as_secs().max(1)) });
    if let Some(input) = input {
        body["binaryInput"] = Json::String(input.to_owned());
    }
    let request = Request::new(Method::POST, path, WRITE_SCOPE, what).json(body);
    let answer = cloud.send(&request, deadline, cancel).await?;
    parse_task(&answer.json)
}

/// The task as it is now.
pub async fn get(
    cloud: &Cloud,
    task_path: &str,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Task, ToolError> {
    let request = Request::new(
        Method::GET,
        format!("/cloud/v2/{task_path}"),
        READ_SCOPE,
        format!("task {task_path}"),
    );
    let answer = cloud.send(&request, deadline, cancel).await?;
    parse_task(&answer.json)
}

/// Polls until the task is finished, calling `moved` with each new state (QUEUED,
/// PROCESSING, …).
pub async fn wait(
    cloud: &Cloud,
    mut task: Task,
    deadline: Instant,
    cancel: &CancellationToken,
    mut moved: impl FnMut(&str),
) -> Result<Task, ToolError> {
    let mut polls = 0u32;
    let mut last = task.state.clone();
    moved(&last);
    while !task.finished() {
        let pause = Duration::from_millis(match polls {
            0 => 1000,
            1 => 1500,
            2 => 2000,
            _ => 3000,
        });
        polls += 1;
        if Instant::now() + pause > deadline {
            return Err(still_running(&task, "the call's deadline came first"));
        }
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = cancel.cancelled() => return Err(still_running(&task, "the call was cancelled")),
        }
        task = get(cloud, &task.path, deadline, cancel).await.map_err(|mut error| {
            if matches!(
                error.code,
                crate::protocol::ErrorCode::Cancelled | crate::protocol::ErrorCode::Timeout
            ) {
                error = still_running(&task, "the call stopped waiting");
            }
            error
        })?;
        if task.state != last {
            last = task.state.clone();
            moved(&last);
        }
    }
    Ok(task)
}

/// The task's logs, in order, with whether more were left unread.
pub async fn logs(
    cloud: &Cloud,
    task_path: &str,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<(Vec<LogLine>, bool), ToolError> {
    let mut lines = Vec::new();
    let mut token: Option<String> = None;
    for _ in 0..LOG_PAGES {
        let mut request = Request::new(
            Method::GET,
            format!("/cloud/v2/{task_path}/logs"),
            READ_SCOPE,
            format!("the logs of task {task_path}"),
        )
        .query("view", "STRUCTURED")
        .query("maxPageSize", LOG_PAGE.to_string());
        if let Some(token) = &token {
            request = request.query("pageToken", token.clone());
        }
        let answer = cloud.send(&request, deadline, cancel).await?;
        for chunk in answer
            .json
            .get("luauExecutionSessionTaskLogs")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
        {
            for message in chunk
                .get("structuredMessages")
                .and_then(Json::as_array)
                .into_iter()
                .flatten()
            {
                lines.push(LogLine {
                    level: level(message.get("messageType").and_then(Json::as_str).unwrap_or("")),
                    body: message.get("message").and_then(Json::as_str).unwrap_or("").to_owned(),
                    time: message
                        .get("createTime")
                        .and_then(Json::as_str)
                        .unwrap_or("")
                        .to_owned(),
                });
            }
        }
        token = answer
            .json
            .get("nextPageToken")
            .and_then(Json::as_str)
            .filter(|t| !t.is_empty())
            .map(str::to_owned);
        if token.is_none() {
            return Ok((lines, false));
        }
    }
    Ok((lines, true))
}

/// The engine's MessageType name for the API's `messageType`.
fn level(message_type: &str) -> &'static str {
    match message_type {
        "INFO" => "Info",
        "WARNING" => "Warning",
        "ERROR" => "Error",
        _ => "Output",
    }
}

fn parse_task(json: &Json) -> Result<Task, ToolError> {
    Task::deserialize(json).map_err(|e| {
        ToolError::new(
            crate::protocol::ErrorCode::PluginError,
            format!("Open Cloud's task could not be read ({e}); nothing more is known about it."),
        )
    })
}

/// The error for a task this call stops waiting for: it may still run on Roblox's side.
fn still_running(task: &Task, why: &str) -> ToolError {
    let code = if why.contains("cancelled") {
        crate::protocol::ErrorCode::Cancelled
    } else {
        crate::protocol::ErrorCode::Timeout
    };
    ToolError::new(
        code,
        format!(
            "Stopped waiting for the Luau task ({why}) while it was {}; it may still run on Roblox's servers: {}",
            task.state, task.path
        ),
    )
    .with_details(json!({ "task": task.path, "state": task.state }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_types_are_the_engine_s_names() {
        assert_eq!(level("OUTPUT"), "Output");
        assert_eq!(level("INFO"), "Info");
        assert_eq!(level("WARNING"), "Warning");
        assert_eq!(level("ERROR"), "Error");
        assert_eq!(level("MESSAGE_TYPE_UNSPECIFIED"), "Output");
    }

    #[test]
    fn a_task_is_finished_in_its_three_final_states() {
        let task = |state: &str| Task {
            path: "p".into(),
            state: state.into(),
            error: None,
            output: None,
        };
        for state in ["COMPLETE", "FAILED", "CANCELLED"] {
            assert!(task(state).finished(), "{state}");
        }
        for state in ["QUEUED", "PROCESSING", "STATE_UNSPECIFIED"] {
            assert!(!task(state).finished(), "{state}");
        }
    }
}

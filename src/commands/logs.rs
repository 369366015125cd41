//! `logs`: Studio's output, from the plugin's ring buffer of LogService messages.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Command, Invocation, Kind, Output, Spec};
use crate::protocol::{Context, ToolError};

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LogsArgs {
    #[serde(default = "default_count")]
    #[schemars(range(max = 10000))]
    pub count: u32,
    #[serde(default)]
    pub direction: Direction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels: Option<Vec<Level>>,
    #[serde(default)]
    pub include_internal: bool,
    /// Entries after this seq, oldest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
}

fn default_count() -> u32 {
    50
}

#[derive(Debug, Default, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Head,
    #[default]
    Tail,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
pub enum Level {
    Print,
    Info,
    Warning,
    Error,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogsResult {
    pub entries: Vec<LogEntry>,
    /// Entries in the buffer in all.
    pub total: u64,
    pub buffer_capacity: u64,
    /// Pass as `since` to get only newer entries.
    pub next_since: u64,
    /// Lines after `since` that the buffer no longer holds (overwritten before they were read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct LogEntry {
    pub seq: u64,
    pub level: String,
    pub body: String,
    /// Unix milliseconds.
    pub timestamp: f64,
}

pub struct Logs;

impl Command for Logs {
    type Args = LogsArgs;
    type Result = LogsResult;
    const SPEC: Spec = Spec {
        name: "logs",
        description: "Read Studio's output. Pass the last nextSince as since for only what is new.",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(10),
        kind: Kind::Read,
        capabilities: super::Capabilities::of(&[super::Capability::Read]),
        idempotent: true,
        open_world: false,
        positional: &[],
        truncation_hint: "Ask for fewer entries (count), filter by levels, or page with since.",
        follow_event: Some("log"),
    };

    async fn run(args: LogsArgs, cx: &Invocation) -> Result<Output, ToolError> {
        if !(1..=10_000).contains(&args.count) {
            return Err(ToolError::invalid_args("`count` must be between 1 and 10000."));
        }
        cx.forward(&Self::SPEC, &args).await
    }
}

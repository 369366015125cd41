//! `cloud_message`: publishes a message on a MessagingService topic to the universe's live
//! servers (Open Cloud's `:publishMessage`), e.g. to tell them about a change.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::cloud_place::{self, Where};
use super::{Capabilities, Capability, Command, Invocation, Kind, Output, Render, Spec};
use crate::cloud::universe::{self, MAX_MESSAGE, MAX_TOPIC};
use crate::protocol::{Context, ToolError};

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CloudMessageArgs {
    pub topic: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub universe: Option<i64>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct CloudMessageResult {
    pub published: bool,
}

pub struct CloudMessage;

impl Command for CloudMessage {
    type Args = CloudMessageArgs;
    type Result = CloudMessageResult;
    const SPEC: Spec = Spec {
        name: "cloud_message",
        description: "Send a MessagingService message to the game's live servers (Open Cloud).",
        needs_session: false,
        default_context: Context::Edit,
        timeout: Duration::from_secs(30),
        kind: Kind::Write,
        capabilities: Capabilities::of(&[Capability::Cloud, Capability::Write]),
        idempotent: false,
        open_world: true,
        positional: &["topic", "message"],
        truncation_hint: "",
        follow_event: None,
        example: "studio-bridge cloud message Announcements 'Restarting in 5 minutes' --universe 123",
        from_file: None,
        flag_help: &[
            ("topic", "The MessagingService topic (at most 80 characters)"),
            ("message", "The message (at most 1,024 characters)"),
            ("universe", "The universe (default: the open Studio's)"),
        ],
    };

    async fn run(args: CloudMessageArgs, cx: &Invocation) -> Result<Output, ToolError> {
        if args.topic.is_empty() || args.topic.chars().count() > MAX_TOPIC {
            return Err(ToolError::invalid_args(format!(
                "`topic` must be 1 to {MAX_TOPIC} characters (MessagingService's limit)."
            )));
        }
        if args.message.chars().count() > MAX_MESSAGE {
            return Err(ToolError::invalid_args(format!(
                "`message` is over MessagingService's {MAX_MESSAGE} characters; send less (an id the servers look up)."
            )));
        }
        let Where { universe, .. } = cloud_place::resolve(cx, args.universe, None, false).await?;
        let (cloud, deadline) = cloud_place::client(Self::SPEC.timeout)?;
        universe::publish_message(&cloud, universe, &args.topic, &args.message, deadline, &cx.hooks.cancel).await?;
        Ok(Output::json(json!({ "published": true })))
    }
}

impl Render for CloudMessage {}

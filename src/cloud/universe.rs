//! A universe's live servers: `:publishMessage` (MessagingService's topics, from outside)
//! and `:restartServers` (servers on older versions, after a publish).

use reqwest::Method;
use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Cloud, Request};
use crate::protocol::ToolError;

/// MessagingService's limits, which the API shares: a topic of at most 80 characters, a
/// message of at most 1,024.
pub const MAX_TOPIC: usize = 80;
pub const MAX_MESSAGE: usize = 1024;

pub async fn publish_message(
    cloud: &Cloud,
    universe: u64,
    topic: &str,
    message: &str,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<(), ToolError> {
    let request = Request::new(
        Method::POST,
        format!("/cloud/v2/universes/{universe}:publishMessage"),
        "universe-messaging-service:publish",
        format!("universe {universe}"),
    )
    .json(json!({ "topic": topic, "message": message }));
    cloud.send(&request, deadline, cancel).await.map(|_| ())
}

/// Restarts the universe's servers that run an older version (`closeAllVersions: false`).
pub async fn restart_servers(
    cloud: &Cloud,
    universe: u64,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<(), ToolError> {
    let request = Request::new(
        Method::POST,
        format!("/cloud/v2/universes/{universe}:restartServers"),
        "universe:write",
        format!("universe {universe}"),
    )
    .json(json!({}));
    cloud.send(&request, deadline, cancel).await.map(|_| ())
}

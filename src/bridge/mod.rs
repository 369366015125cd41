//! The bridge: everything between a command and a Studio plugin.
//!
//! Adapters (MCP, CLI) see only [`Bridge`]: list sessions, call an action, cancel it (by
//! cancelling the call's token), subscribe to events. Whether this process hosts the
//! plugins itself or reaches a host elsewhere is decided here and nowhere else.

pub mod connection;
pub mod host;
pub mod origin;
pub mod registry;
pub mod resolve;

use std::sync::Arc;
use std::time::Duration;

use rmpv::Value as Msgpack;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

pub use registry::SessionInfo;
pub use resolve::Target;

use crate::protocol::{Context, ToolError};
use registry::Registry;

/// One call of a plugin action.
#[derive(Debug, Clone)]
pub struct Call {
    pub target: Target,
    pub action: String,
    pub args: Msgpack,
    /// The context used when the target instance is in Play and the caller named none.
    pub default_context: Context,
    /// The host's deadline for the whole call, waiting for a session included.
    pub timeout: Duration,
    /// The `timeoutMs` the plugin is given, if shorter than what is left of the deadline.
    pub plugin_timeout: Option<Duration>,
}

/// A progress report from a plugin, forwarded to the caller.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// What a caller can do to a call in flight.
#[derive(Debug, Clone, Default)]
pub struct CallHooks {
    pub progress: Option<mpsc::UnboundedSender<Progress>>,
    /// Cancelling this token sends `cancel` to the plugin and fails the call with `cancelled`.
    pub cancel: CancellationToken,
}

/// An `event` a plugin sent (a state change or a log line).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEvent {
    pub session_id: String,
    pub event: String,
    pub data: serde_json::Value,
}

/// The one interface adapters use to reach Studio.
#[derive(Clone)]
pub struct Bridge {
    inner: Inner,
}

#[derive(Clone)]
enum Inner {
    /// This process hosts the plugins.
    Host(Arc<Registry>),
}

impl Bridge {
    pub(crate) fn hosting(registry: Arc<Registry>) -> Bridge {
        Bridge {
            inner: Inner::Host(registry),
        }
    }

    pub async fn sessions(&self) -> Result<Vec<SessionInfo>, ToolError> {
        match &self.inner {
            Inner::Host(registry) => Ok(registry.sessions()),
        }
    }

    pub async fn call(&self, call: Call, hooks: CallHooks) -> Result<Msgpack, ToolError> {
        match &self.inner {
            Inner::Host(registry) => registry.call(call, hooks).await,
        }
    }

    pub fn subscribe(&self) -> broadcast::Receiver<SessionEvent> {
        match &self.inner {
            Inner::Host(registry) => registry.subscribe_events(),
        }
    }
}

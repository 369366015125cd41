//! The wire contract between the bridge host, Studio plugins and peer processes
//! (see `docs/protocol.md`): message types, the error codes agents branch on, and
//! the msgpack ⇄ JSON value mapping.

pub mod error;
pub mod frame;
pub mod messages;
pub mod peer;
pub mod raw;
pub mod value;

pub use error::{ErrorCode, ToolError};

/// Version of the wire protocol spoken on `/v1/plugin` and `/v1/client`. A plugin whose
/// `hello` names another version is rejected with `protocol_mismatch`.
pub const PROTOCOL_VERSION: u64 = 1;

/// The version of this binary, reported in `welcome` and `/v1/health`.
pub const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The port the bridge host listens on unless `--port`/`STUDIO_BRIDGE_PORT` says otherwise.
pub const DEFAULT_PORT: u16 = 38741;

/// Which DataModel of a Studio process a session is: the edit DataModel, or the server or
/// client DataModel of a Play test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Context {
    Edit,
    Server,
    Client,
}

impl Context {
    pub fn as_str(self) -> &'static str {
        match self {
            Context::Edit => "edit",
            Context::Server => "server",
            Context::Client => "client",
        }
    }

    pub fn parse(text: &str) -> Option<Context> {
        match text {
            "edit" => Some(Context::Edit),
            "server" => Some(Context::Server),
            "client" => Some(Context::Client),
            _ => None,
        }
    }
}

impl std::fmt::Display for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a call ran: the session that answered it. Every result a session produced says
/// so (TOOLS.md, What the agent sees), and a peer learns it from the host's `result`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    pub session_id: String,
    pub context: Context,
}

/// What a caller asked for. All parts optional: the common case is an agent with one
/// Studio open that names nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Context>,
}

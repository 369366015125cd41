//! Error codes are part of the contract: agents branch on them, so they are stable
//! snake_case strings, and every message says what to do next.

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    NoSessions,
    SessionNotFound,
    AmbiguousInstance,
    ContextUnavailable,
    SessionLost,
    Timeout,
    Cancelled,
    Busy,
    PluginError,
    NotFound,
    InvalidArgs,
    UnknownAction,
    MessageTooLarge,
    HostLost,
    PermissionDenied,
    Conflict,
    /// A plugin's answer to a `defaulted` request while a playtest starts: it did not run
    /// it. The host resolves the call again, so an agent never sees this code.
    ContextChanged,
    /// A script's source failed the host's Luau syntax check; nothing was sent to Studio.
    SyntaxError,
    /// A write to a script the project's sourcemap maps to a file (a sync tool would
    /// overwrite it); the message names the file to edit instead.
    FileBacked,
    /// `input`, `ui`, `character` outside a Play client DataModel.
    NotInPlay,
    /// The engine refused a step of `input` (details.step, 1-based).
    InputRefused,
    /// `ui`: the target is hidden, outside the viewport or covered; nothing was sent.
    NotClickable,
    /// `ui`: several elements match the target; nothing was sent.
    Ambiguous,
    /// This Studio lacks an engine member the tool needs (`details.member`, `Class.Member`,
    /// and `details.engine`, the engine's words); nothing was attempted.
    Unsupported,
    /// A person paused studio-bridge in Studio's Studio Bridge panel; nothing was done.
    Paused,
    /// A person in Studio denied the call, or did not answer within its deadline; nothing
    /// was written.
    Denied,
    /// Open Cloud refused the API key (401), or the key lacks a scope the call needs (403):
    /// the message names the key's source or the scope.
    Auth,
    /// A script run by Open Cloud's Luau Execution failed (`details` carries its logs).
    ScriptError,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::NoSessions => "no_sessions",
            ErrorCode::SessionNotFound => "session_not_found",
            ErrorCode::AmbiguousInstance => "ambiguous_instance",
            ErrorCode::ContextUnavailable => "context_unavailable",
            ErrorCode::SessionLost => "session_lost",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::Busy => "busy",
            ErrorCode::PluginError => "plugin_error",
            ErrorCode::NotFound => "not_found",
            ErrorCode::InvalidArgs => "invalid_args",
            ErrorCode::UnknownAction => "unknown_action",
            ErrorCode::MessageTooLarge => "message_too_large",
            ErrorCode::HostLost => "host_lost",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::Conflict => "conflict",
            ErrorCode::ContextChanged => "context_changed",
            ErrorCode::SyntaxError => "syntax_error",
            ErrorCode::FileBacked => "file_backed",
            ErrorCode::NotInPlay => "not_in_play",
            ErrorCode::InputRefused => "input_refused",
            ErrorCode::NotClickable => "not_clickable",
            ErrorCode::Ambiguous => "ambiguous",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::Paused => "paused",
            ErrorCode::Denied => "denied",
            ErrorCode::Auth => "auth",
            ErrorCode::ScriptError => "script_error",
        }
    }

    /// Reads a code a plugin sent. A plugin may invent codes of its own; those are
    /// reported as `plugin_error` with the original code kept in `details`.
    pub fn parse(text: &str) -> Option<ErrorCode> {
        serde_json::from_value(Json::String(text.to_owned())).ok()
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure of a tool call, as the agent sees it: `{"error": {code, message, details?}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolError {
    pub code: ErrorCode,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Json>,
}

impl ToolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
            details: None,
        }
    }

    pub fn with_details(mut self, details: Json) -> Self {
        self.details = Some(details);
        self
    }

    /// Sets one key of `details`, keeping the others (details that are not an object are
    /// replaced by one).
    pub fn set_detail(&mut self, key: &str, value: Json) {
        match &mut self.details {
            Some(Json::Object(details)) => {
                details.insert(key.to_owned(), value);
            }
            _ => self.details = Some(Json::Object([(key.to_owned(), value)].into_iter().collect())),
        }
    }

    pub fn invalid_args(message: impl Into<String>) -> Self {
        ToolError::new(ErrorCode::InvalidArgs, message)
    }

    /// The `{"error": {...}}` object that is both the text and the structured content
    /// of a failed tool call.
    pub fn to_json(&self) -> Json {
        serde_json::json!({ "error": self })
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ToolError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_through_their_wire_names() {
        for code in [
            ErrorCode::NoSessions,
            ErrorCode::SessionNotFound,
            ErrorCode::AmbiguousInstance,
            ErrorCode::ContextUnavailable,
            ErrorCode::SessionLost,
            ErrorCode::Timeout,
            ErrorCode::Cancelled,
            ErrorCode::Busy,
            ErrorCode::PluginError,
            ErrorCode::NotFound,
            ErrorCode::InvalidArgs,
            ErrorCode::UnknownAction,
            ErrorCode::MessageTooLarge,
            ErrorCode::HostLost,
            ErrorCode::PermissionDenied,
            ErrorCode::SyntaxError,
            ErrorCode::NotInPlay,
            ErrorCode::InputRefused,
            ErrorCode::NotClickable,
            ErrorCode::Ambiguous,
            ErrorCode::Unsupported,
            ErrorCode::Paused,
            ErrorCode::Denied,
        ] {
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
            assert_eq!(serde_json::to_value(code).unwrap(), Json::String(code.as_str().into()));
        }
        assert_eq!(ErrorCode::parse("made_up"), None);
    }
}

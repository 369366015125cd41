//! Luau on the host: the checks a script passes before anything is sent to Studio.
//!
//! This floor sits beside `protocol`, below the command table: it knows Luau, nothing of
//! sessions, the wire or tool errors (tests/floors.rs holds it there). The commands turn
//! what it finds into their answers. Syntax is checked in this binary (Luau's own parser);
//! lint diagnostics and formatting run the project's own selene and stylua ([`tool`] says
//! why).

pub mod format;
pub mod lint;
pub mod syntax;
pub mod tool;

pub use syntax::{SyntaxError, check};

/// The version of the Luau compiler bundled in this binary (`0.740`), as the `mlua` crate's
/// vendored sources name it; `studio-bridge --version` prints it.
pub fn version() -> &'static str {
    mlua::ffi::luau_version().unwrap_or("unknown")
}

/// `{errors: [{line, column?, message}]}`: the details of a `syntax_error`.
pub fn details(errors: &[SyntaxError]) -> serde_json::Value {
    serde_json::json!({ "errors": errors })
}

/// The first error as Luau's `loadstring(source, chunk)` words it, `[string "exec"]:3: …`:
/// the form the plugin gives for the same script.
pub fn chunk_message(chunk: &str, errors: &[SyntaxError]) -> String {
    match errors.first() {
        Some(error) => format!("[string \"{chunk}\"]:{}: {}", error.line, error.message),
        None => format!("[string \"{chunk}\"]: syntax error"),
    }
}

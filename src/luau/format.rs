//! `format: true` on a script write: the project's own `stylua` formats the new source, with
//! the project's `stylua.toml` (looked for from the working directory, the project's, up
//! through its parents, as `stylua --search-parent-directories` does), so the result is
//! byte for byte what `stylua -` gives in the project.
//!
//! Why the executable and not the `stylua` crate: see [`super::tool`] (binary size, and the
//! project's pinned version and config give what its CI gives). Unlike lint diagnostics, a
//! missing or failing stylua fails the call: the caller asked for formatting.

use super::tool::Tool;

pub const STYLUA: Tool = Tool {
    name: "stylua",
    env: "STUDIO_BRIDGE_STYLUA",
    install: "add it to the project's toolchain (`rokit add JohnnyMorganz/StyLua`) or `cargo install stylua --features luau`",
};

/// `source` as stylua formats it; `Err` says why not, in words for an error message.
pub async fn format(source: &str) -> Result<String, String> {
    let ran = STYLUA.run(["--search-parent-directories", "-"], source).await?;
    if !ran.success {
        return Err(format!("stylua could not format it: {}", ran.complaint()));
    }
    Ok(ran.stdout)
}

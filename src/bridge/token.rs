//! The peer token: what proves a `/v1/client` connection comes from the same user.
//!
//! `/v1/client` can do everything an agent can, so a local process of another user (or
//! a browser, already stopped by the Origin guard) must not reach it. The host writes 32
//! random bytes, hex, to a per-user file that only that user can read (`secret_file.rs`,
//! which stores the pairing secret too), and peers send it as `Authorization: Bearer`.
//! Plugins need none: Studio plugins cannot read files, and `/v1/plugin` is guarded by
//! Host/Origin alone (PROTOCOL.md).

use std::path::PathBuf;

/// Where the token for `port` lives: `$XDG_RUNTIME_DIR/studio-bridge/<port>.token`, else
/// the user's cache directory, else the temp directory.
pub fn token_path(port: u16) -> PathBuf {
    let base = dirs::runtime_dir()
        .or_else(dirs::cache_dir)
        .unwrap_or_else(std::env::temp_dir);
    base.join("studio-bridge").join(format!("{port}.token"))
}

/// Compares a presented `Authorization` header with the token in constant time, so the
/// comparison leaks nothing about how much of a guess was right.
pub fn authorized(header: Option<&str>, token: &str) -> bool {
    let Some(presented) = header.and_then(|h| h.strip_prefix("Bearer ")) else {
        return false;
    };
    constant_time_eq(presented.trim().as_bytes(), token.as_bytes())
}

/// Equality that takes the same time wherever the first difference is, so a comparison
/// leaks nothing about how much of a guess was right (only whether the lengths match).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bearer_token_is_authorized() {
        assert!(authorized(Some("Bearer abc"), "abc"));
        assert!(!authorized(Some("Bearer abd"), "abc"));
        assert!(!authorized(Some("Bearer ab"), "abc"));
        assert!(!authorized(Some("abc"), "abc"));
        assert!(!authorized(None, "abc"));
    }
}

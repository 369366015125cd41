//! The user's studio-bridge config directory, where the policy file and the pairing secret
//! live. It sits below the policy and the bridge, which both read it, and names no other
//! module.

use std::path::PathBuf;

/// The user's studio-bridge config directory: `$STUDIO_BRIDGE_CONFIG_DIR` if set, else
/// `studio-bridge` in the platform's config directory (`~/.config` on Linux).
pub fn config_dir() -> Option<PathBuf> {
    match std::env::var_os("STUDIO_BRIDGE_CONFIG_DIR") {
        Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
        _ => dirs::config_dir().map(|d| d.join("studio-bridge")),
    }
}

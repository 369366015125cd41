//! The Studio plugin that ships inside this binary, and installing it.
//!
//! `build.rs` assembles `plugin/src` into `StudioBridge.rbxm`; it is embedded here, so the
//! binary is all a user needs. `install-plugin` writes it into Studio's plugins folder
//! (found by roblox_install) or to `--out`; `mcp` and `serve` do the same at start when the
//! installed copy differs. The write is atomic (temp file + rename), so Studio never loads
//! half a plugin. No MCP client's config file is ever touched.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The plugin model, as built from `plugin/src`.
pub static PLUGIN_RBXM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/StudioBridge.rbxm"));

/// The file name in Studio's plugins folder.
pub const PLUGIN_FILE_NAME: &str = "StudioBridge.rbxm";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Installed {
    /// Written (new, or replacing a different copy).
    Written(PathBuf),
    /// The file there already was this plugin.
    UpToDate(PathBuf),
}

/// Studio's plugins folder, or why it cannot be found (Linux, WSL without
/// `ROBLOX_STUDIO_PATH`, Studio not installed).
pub fn studio_plugins_dir() -> Result<PathBuf, String> {
    roblox_install::RobloxStudio::locate()
        .map(|studio| studio.plugins_path().to_path_buf())
        .map_err(|error| error.to_string())
}

/// Where `--out PATH` means: a directory gets `StudioBridge.rbxm` inside it.
pub fn target_file(out: &Path) -> PathBuf {
    if out.is_dir() || out.extension().is_none() {
        out.join(PLUGIN_FILE_NAME)
    } else {
        out.to_path_buf()
    }
}

/// Writes the embedded plugin to `file` unless an identical copy is already there.
pub fn install(file: &Path) -> std::io::Result<Installed> {
    if std::fs::read(file).is_ok_and(|existing| existing == PLUGIN_RBXM) {
        return Ok(Installed::UpToDate(file.to_path_buf()));
    }
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let temp = dir.join(format!(".{PLUGIN_FILE_NAME}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut handle = std::fs::File::create(&temp)?;
        handle.write_all(PLUGIN_RBXM)?;
        handle.sync_all()?;
        std::fs::rename(&temp, file)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written.map(|()| Installed::Written(file.to_path_buf()))
}

/// At `mcp`/`serve` start: install or update the plugin in Studio's plugins folder, or
/// say once why not. Never fails the caller: the bridge is useful without it (a plugin
/// installed by hand, a Studio on another machine).
pub fn install_at_start() {
    match studio_plugins_dir() {
        Ok(dir) => match install(&dir.join(PLUGIN_FILE_NAME)) {
            Ok(Installed::Written(path)) => {
                tracing::info!(path = %path.display(), "installed the Studio plugin; restart Studio (or reload plugins) to load it")
            }
            Ok(Installed::UpToDate(path)) => tracing::debug!(path = %path.display(), "the Studio plugin is up to date"),
            Err(error) => tracing::warn!(dir = %dir.display(), %error, "could not install the Studio plugin"),
        },
        Err(reason) => tracing::warn!(
            %reason,
            "Roblox Studio was not found on this machine, so the plugin was not installed. Where Studio runs, run `studio-bridge install-plugin` (or `install-plugin --out <plugins folder>`)."
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_plugin_is_a_binary_roblox_model() {
        assert!(PLUGIN_RBXM.starts_with(b"<roblox!"), "not an .rbxm");
        assert!(PLUGIN_RBXM.len() > 1000);
    }

    #[test]
    fn install_writes_once_then_reports_up_to_date() {
        let dir = std::env::temp_dir().join(format!("sb-install-{}", std::process::id()));
        let file = target_file(&dir.join("nested").join("plugins"));
        assert_eq!(file.file_name().and_then(|n| n.to_str()), Some(PLUGIN_FILE_NAME));
        assert_eq!(install(&file).unwrap(), Installed::Written(file.clone()));
        assert_eq!(std::fs::read(&file).unwrap(), PLUGIN_RBXM);
        assert_eq!(install(&file).unwrap(), Installed::UpToDate(file.clone()));
        std::fs::write(&file, b"an older plugin").unwrap();
        assert_eq!(install(&file).unwrap(), Installed::Written(file.clone()));
        let _ = std::fs::remove_dir_all(dir);
    }
}

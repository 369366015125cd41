//! The Studio plugin that ships inside this binary, and installing it.
//!
//! `build.rs` assembles `plugin/src` into `StudioBridge.rbxm`; it is embedded here, so the
//! binary is all a user needs. `install-plugin` writes it into Studio's plugins folder
//! (found by roblox_install) or to `--out`; `mcp` and `serve` do the same at start when the
//! installed copy differs. The write is atomic (temp file + rename), so Studio never loads
//! half a plugin. No MCP client's config file is ever touched.
//!
//! The installed copy is paired (`bridge::pairing`): it carries this user's secret as a
//! `StringValue` named `Pairing` under the plugin's root script. A StringValue rather than
//! an attribute because the plugin reads it with plain instance API at start
//! (`script.Parent.Pairing.Value`) and every tool that reads models (Lune's roblox
//! library, rbx-dom) round-trips it as it is; the installed file is private to the user
//! (0600 on Unix), as the plugins folder already is.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use rbx_dom_weak::InstanceBuilder;

use crate::bridge::pairing;

/// The plugin model, as built from `plugin/src`.
pub static PLUGIN_RBXM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/StudioBridge.rbxm"));

/// The file name in Studio's plugins folder.
pub const PLUGIN_FILE_NAME: &str = "StudioBridge.rbxm";

/// The name of the `StringValue` under the plugin's root that holds the pairing secret.
pub const PAIRING_VALUE: &str = "Pairing";

/// The embedded plugin with `secret` written into it, as an installed copy holds it.
pub fn paired_model(secret: &str) -> Result<Vec<u8>, String> {
    let mut dom =
        rbx_binary::from_reader(PLUGIN_RBXM).map_err(|e| format!("the embedded plugin does not decode: {e}"))?;
    let root = match dom.root().children() {
        [root] => *root,
        _ => return Err("the embedded plugin does not have one root".into()),
    };
    dom.insert(
        root,
        InstanceBuilder::new("StringValue")
            .with_name(PAIRING_VALUE)
            .with_property("Value", secret.to_owned()),
    );
    let mut bytes = Vec::new();
    rbx_binary::to_writer(&mut bytes, &dom, &[root]).map_err(|e| format!("encoding the paired plugin: {e}"))?;
    Ok(bytes)
}

/// The pairing secret an installed plugin model carries, if any.
pub fn secret_in_model(bytes: &[u8]) -> Option<String> {
    let dom = rbx_binary::from_reader(bytes).ok()?;
    let root = dom.get_by_ref(*dom.root().children().first()?)?;
    let value = root
        .children()
        .iter()
        .filter_map(|r| dom.get_by_ref(*r))
        .find(|i| i.name == PAIRING_VALUE && i.class == "StringValue")?;
    match value.properties.get(&"Value".into()) {
        Some(rbx_dom_weak::types::Variant::String(secret)) => Some(secret.clone()),
        _ => None,
    }
}

/// The current secret (created when there is none yet, or a new one with `rotate`), or
/// why there can be none. The message never holds the secret.
pub fn current_secret(rotate: bool) -> Result<String, String> {
    let path = pairing::secret_path()
        .ok_or("this platform has no config directory for the pairing secret; set STUDIO_BRIDGE_CONFIG_DIR")?;
    let made = if rotate {
        pairing::rotate_secret(&path)
    } else {
        pairing::ensure_secret(&path)
    };
    made.map_err(|e| format!("cannot write the pairing secret at {}: {e}", path.display()))
}

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

/// Writes the embedded plugin, paired with `secret`, to `file` unless an identical copy
/// is already there.
pub fn install(file: &Path, secret: &str) -> std::io::Result<Installed> {
    let model = paired_model(secret).map_err(std::io::Error::other)?;
    if std::fs::read(file).is_ok_and(|existing| existing == model) {
        return Ok(Installed::UpToDate(file.to_path_buf()));
    }
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let temp = dir.join(format!(".{PLUGIN_FILE_NAME}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(0o600);
        }
        let mut handle = options.open(&temp)?;
        handle.write_all(&model)?;
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
        Ok(dir) => match current_secret(false)
            .map_err(std::io::Error::other)
            .and_then(|secret| install(&dir.join(PLUGIN_FILE_NAME), &secret))
        {
            Ok(Installed::Written(path)) => {
                tracing::info!(path = %path.display(), "installed the Studio plugin; restart Studio (or reload plugins) to load it")
            }
            Ok(Installed::UpToDate(path)) => tracing::debug!(path = %path.display(), "the Studio plugin is up to date"),
            Err(error) => tracing::warn!(dir = %dir.display(), %error, "could not install the Studio plugin"),
        },
        // Expected where Studio does not run (Linux: a devcontainer, CI, a remote host), so
        // said once at info there; on Windows and macOS it is worth a warning.
        Err(reason) if cfg!(target_os = "linux") => tracing::info!(
            %reason,
            "Roblox Studio does not run on Linux, so the plugin was not installed here. Where Studio runs, run `studio-bridge install-plugin` (or `install-plugin --out <plugins folder>`)."
        ),
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
        assert_eq!(
            secret_in_model(PLUGIN_RBXM),
            None,
            "the embedded model carries no secret"
        );
    }

    #[test]
    fn install_writes_once_then_reports_up_to_date() {
        let dir = std::env::temp_dir().join(format!("sb-install-{}", std::process::id()));
        let file = target_file(&dir.join("nested").join("plugins"));
        assert_eq!(file.file_name().and_then(|n| n.to_str()), Some(PLUGIN_FILE_NAME));
        assert_eq!(install(&file, "s1").unwrap(), Installed::Written(file.clone()));
        assert_eq!(secret_in_model(&std::fs::read(&file).unwrap()).as_deref(), Some("s1"));
        assert_eq!(install(&file, "s1").unwrap(), Installed::UpToDate(file.clone()));
        std::fs::write(&file, b"an older plugin").unwrap();
        assert_eq!(install(&file, "s1").unwrap(), Installed::Written(file.clone()));
        // A rotated secret rewrites the install.
        assert_eq!(install(&file, "s2").unwrap(), Installed::Written(file.clone()));
        assert_eq!(secret_in_model(&std::fs::read(&file).unwrap()).as_deref(), Some("s2"));
        let _ = std::fs::remove_dir_all(dir);
    }
}

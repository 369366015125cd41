//! The paired plugin: what proves a `/v1/plugin` connection is the plugin this user
//! installed, not any local process claiming to be a Studio.
//!
//! `install-plugin` (and `mcp`'s automatic install) writes a per-user secret, 32 random
//! bytes as hex, to `<config dir>/plugin-secret` (readable by this user only) and into the
//! installed model; the plugin sends it as `pairing` in its `hello`. A host that requires
//! pairing reads the file at each `hello`, so a rotated secret (`install-plugin
//! --rotate-secret`) refuses old installs at once, and compares in constant time. The
//! secret is never logged and never part of an error message.

use std::path::{Path, PathBuf};

use super::token;

/// The secret's file name inside the config directory.
pub const SECRET_FILE: &str = "plugin-secret";

/// The user's studio-bridge config directory: `$STUDIO_BRIDGE_CONFIG_DIR` if set, else
/// `studio-bridge` in the platform's config directory (`~/.config` on Linux).
pub fn config_dir() -> Option<PathBuf> {
    match std::env::var_os("STUDIO_BRIDGE_CONFIG_DIR") {
        Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
        _ => dirs::config_dir().map(|d| d.join("studio-bridge")),
    }
}

/// Where the pairing secret lives, if this platform has a config directory.
pub fn secret_path() -> Option<PathBuf> {
    config_dir().map(|d| d.join(SECRET_FILE))
}

/// The secret in `path`, if there is one.
pub fn read_secret(path: &Path) -> Option<String> {
    token::read(path)
}

/// The secret in `path`, created (0600 on Unix) when there is none yet. Two installs
/// racing to create it agree on one: the new file is linked into place only if no other
/// got there first.
pub fn ensure_secret(path: &Path) -> std::io::Result<String> {
    if let Some(secret) = read_secret(path) {
        return Ok(secret);
    }
    let fresh = token::generate()?;
    let staged = path.with_file_name(format!(".{SECRET_FILE}.{}.new", std::process::id()));
    token::write(&staged, &fresh)?;
    let linked = std::fs::hard_link(&staged, path);
    let _ = std::fs::remove_file(&staged);
    match linked {
        Ok(()) => Ok(fresh),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            read_secret(path).ok_or_else(|| std::io::Error::other(format!("{} is empty", path.display())))
        }
        Err(error) => Err(error),
    }
}

/// Replaces the secret in `path` with a new one: every plugin installed before is refused.
pub fn rotate_secret(path: &Path) -> std::io::Result<String> {
    let fresh = token::generate()?;
    token::write(path, &fresh)?;
    Ok(fresh)
}

/// Whether a host requires the plugin's `hello` to carry the current secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pairing {
    /// Refuse a plugin without the secret in this file (read at each `hello`).
    Required(PathBuf),
    /// `--allow-unpaired`: accept any plugin (the Lune Studio, a hand-installed plugin).
    AllowUnpaired,
}

impl Pairing {
    /// The default: the secret in the user's config directory.
    pub fn required() -> Pairing {
        match secret_path() {
            Some(path) => Pairing::Required(path),
            // No config directory: nothing can be paired, so everything is refused.
            None => Pairing::Required(PathBuf::new()),
        }
    }

    /// `Ok` when `presented` may connect; else the message the plugin shows its user
    /// (naming neither secret).
    pub fn check(&self, presented: Option<&str>) -> Result<(), String> {
        let Pairing::Required(path) = self else {
            return Ok(());
        };
        let Some(secret) = read_secret(path) else {
            return Err(format!(
                "studio-bridge refused this plugin: this machine has no pairing secret yet ({} is missing). Reinstall the plugin with studio-bridge install-plugin, then restart Studio.",
                path.display()
            ));
        };
        match presented {
            Some(presented) if token::constant_time_eq(presented.as_bytes(), secret.as_bytes()) => Ok(()),
            Some(_) => Err(
                "studio-bridge refused this plugin: it carries a different pairing secret (an older install: the secret was rotated). Reinstall the plugin with studio-bridge install-plugin, then restart Studio.".into(),
            ),
            None => Err(
                "studio-bridge refused this plugin: it is not paired with this studio-bridge. Reinstall the plugin with studio-bridge install-plugin, then restart Studio.".into(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        std::env::temp_dir()
            .join(format!("sb-pairing-{name}-{}", std::process::id()))
            .join(SECRET_FILE)
    }

    #[test]
    fn ensure_creates_once_then_keeps_and_rotate_replaces() {
        let path = temp("ensure");
        let first = ensure_secret(&path).unwrap();
        assert_eq!(first.len(), 64);
        assert_eq!(ensure_secret(&path).unwrap(), first);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        let rotated = rotate_secret(&path).unwrap();
        assert_ne!(rotated, first);
        assert_eq!(read_secret(&path).as_deref(), Some(rotated.as_str()));
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn required_pairing_accepts_only_the_current_secret_and_never_names_it() {
        let path = temp("check");
        let pairing = Pairing::Required(path.clone());
        let missing = pairing.check(Some("anything")).unwrap_err();
        assert!(missing.contains("install-plugin"), "{missing}");
        let secret = ensure_secret(&path).unwrap();
        assert_eq!(pairing.check(Some(&secret)), Ok(()));
        let stranger = pairing.check(None).unwrap_err();
        assert!(
            stranger
                .to_lowercase()
                .contains("reinstall the plugin with studio-bridge install-plugin"),
            "{stranger}"
        );
        let old = pairing.check(Some(&secret[1..])).unwrap_err();
        assert!(!old.contains(&secret) && !stranger.contains(&secret));
        assert_eq!(Pairing::AllowUnpaired.check(None), Ok(()));
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }
}

//! A per-user secret file: 32 random bytes from the OS as hex, written so that only this
//! user can read it. Holds both the peer token (`token.rs`) and the pairing secret
//! (`pairing.rs`).

use std::io::Write as _;
use std::path::Path;

/// A fresh token: 32 bytes from the OS, hex.
pub fn generate() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(format!("no OS randomness: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes `token` to `path` atomically, readable by this user only, replacing any stale
/// token.
pub fn write(path: &Path, token: &str) -> std::io::Result<()> {
    let temp = staged(path, token)?;
    std::fs::rename(&temp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temp);
    })
}

/// Writes `token` to `path` unless a token is there already (another process may have
/// made it first): returns the token now in `path`, this one or the one found.
pub fn write_unless_present(path: &Path, token: &str) -> std::io::Result<String> {
    if let Some(existing) = read(path) {
        return Ok(existing);
    }
    let temp = staged(path, token)?;
    // A hard link fails where `path` exists, so that of two first writers one wins and
    // both use its token.
    let linked = std::fs::hard_link(&temp, path);
    let _ = std::fs::remove_file(&temp);
    match linked {
        Ok(()) => Ok(token.to_owned()),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            read(path).ok_or_else(|| std::io::Error::other(format!("{} exists but holds no token", path.display())))
        }
        Err(error) => Err(error),
    }
}

/// `token` in a new file beside `path`, under a random name that no one else can have
/// made first (`create_new`: a link planted there is never followed), readable by this
/// user only, in a directory that is this user's own and no one else's (mode 0700 on
/// Unix; refused otherwise). On Windows the directory is the user's local app data,
/// which the default per-user ACL already keeps to them.
fn staged(path: &Path, token: &str) -> std::io::Result<std::path::PathBuf> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("token path has no parent"))?;
    std::fs::create_dir_all(dir)?;
    let mut name = [0u8; 8];
    getrandom::fill(&mut name).map_err(|e| std::io::Error::other(format!("no OS randomness: {e}")))?;
    let name: String = name.iter().map(|b| format!("{b:02x}")).collect();
    let temp = dir.join(format!(".{name}.tmp"));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(&temp)?;
    let written = private_dir(dir, &file)
        .and_then(|()| file.write_all(token.as_bytes()))
        .and_then(|()| file.sync_all());
    if let Err(error) = written {
        drop(file);
        let _ = std::fs::remove_file(&temp);
        return Err(error);
    }
    Ok(temp)
}

/// Makes `dir` this user's alone (mode 0700), or refuses it when another user owns it:
/// the new `file`'s owner is who we are.
#[cfg(unix)]
fn private_dir(dir: &Path, file: &std::fs::File) -> std::io::Result<()> {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let us = file.metadata()?.uid();
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() || meta.uid() != us {
        return Err(std::io::Error::other(format!(
            "{} is not a directory of this user's own (owner uid {}, ours {us}); remove it or set XDG_RUNTIME_DIR / STUDIO_BRIDGE_CONFIG_DIR elsewhere",
            dir.display(),
            meta.uid()
        )));
    }
    if meta.permissions().mode() & 0o777 != 0o700 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

#[cfg(not(unix))]
fn private_dir(_dir: &Path, _file: &std::fs::File) -> std::io::Result<()> {
    Ok(())
}

/// Reads the token a host wrote, if any.
pub fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_64_hex_chars_and_differ() {
        let a = generate().unwrap();
        let b = generate().unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn written_tokens_are_private_and_replace_stale_ones() {
        let dir = std::env::temp_dir().join(format!("sb-token-test-{}", std::process::id()));
        let path = dir.join("1234.token");
        write(&path, "stale").unwrap();
        write(&path, "fresh").unwrap();
        assert_eq!(read(&path).as_deref(), Some("fresh"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_first_token_is_kept_and_the_directory_made_private() {
        let dir = std::env::temp_dir().join(format!("sb-token-keep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let path = dir.join("mcp-http.token");
        assert_eq!(write_unless_present(&path, "first").unwrap(), "first");
        assert_eq!(
            write_unless_present(&path, "second").unwrap(),
            "first",
            "the token there is kept"
        );
        assert_eq!(read(&path).as_deref(), Some("first"));
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "no staged file is left: {leftovers:?}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "the directory is made this user's alone");
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}

//! The Open Cloud API key: from `ROBLOX_API_KEY`, else the file `studio-bridge cloud login`
//! saved (0600, beside the pairing secret). The key is a secret: it is held in a type whose
//! `Debug` says only where it came from, so that no log line, result or error can carry it
//! by accident, and errors name its source, never its text.

use std::fmt;
use std::path::PathBuf;

use crate::bridge::secret_file;
use crate::config::config_dir;

/// The environment variable that carries a key (CI's secret, a shell's export).
pub const ENV: &str = "ROBLOX_API_KEY";
/// The saved key's file name inside the config directory.
pub const FILE: &str = "open-cloud-key";

/// Where a key came from, as errors name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Env,
    File(PathBuf),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Env => write!(f, "the {ENV} environment variable"),
            Source::File(path) => write!(f, "{} (saved by `studio-bridge cloud login`)", path.display()),
        }
    }
}

/// An API key and where it came from.
#[derive(Clone)]
pub struct ApiKey {
    secret: String,
    pub source: Source,
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApiKey(from {})", self.source)
    }
}

impl ApiKey {
    pub fn new(secret: String, source: Source) -> ApiKey {
        ApiKey { secret, source }
    }

    /// The key's text, for the `x-api-key` header only.
    pub(super) fn secret(&self) -> &str {
        &self.secret
    }
}

/// Where `cloud login` saves the key, if this platform has a config directory.
pub fn path() -> Option<PathBuf> {
    config_dir().map(|dir| dir.join(FILE))
}

/// The configured key: `ROBLOX_API_KEY` when set and not empty, else the saved one.
pub fn find() -> Option<ApiKey> {
    if let Some(secret) = std::env::var(ENV)
        .ok()
        .map(|k| k.trim().to_owned())
        .filter(|k| !k.is_empty())
    {
        return Some(ApiKey::new(secret, Source::Env));
    }
    let path = path()?;
    let secret = secret_file::read(&path)?;
    Some(ApiKey::new(secret, Source::File(path)))
}

/// Why `text` cannot be a key, if it cannot: a key is one line of printable ASCII (an HTTP
/// header's value), and Open Cloud's keys are long.
pub fn invalid(text: &str) -> Option<&'static str> {
    if text.is_empty() {
        return Some("no key was given on stdin");
    }
    if !text.bytes().all(|b| b.is_ascii_graphic()) {
        return Some("a key is one line of printable characters, with no spaces");
    }
    if text.len() < 20 {
        return Some("that is too short to be an Open Cloud API key (copy the whole key from the Creator Dashboard)");
    }
    None
}

/// Saves `secret` for later processes (0600, written atomically) and returns where.
pub fn save(secret: &str) -> std::io::Result<PathBuf> {
    let path = path().ok_or_else(|| std::io::Error::other("this platform has no config directory"))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    secret_file::write(&path, secret)?;
    Ok(path)
}

/// Removes the saved key: whether there was one, and where it was looked for.
pub fn remove() -> std::io::Result<(bool, Option<PathBuf>)> {
    let Some(path) = path() else {
        return Ok((false, None));
    };
    match std::fs::remove_file(&path) {
        Ok(()) => Ok((true, Some(path))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((false, Some(path))),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_debug_prints_its_source_not_its_text() {
        let key = ApiKey::new("SECRET-abcdefghijklmnopqrstuvwxyz".into(), Source::Env);
        let shown = format!("{key:?}");
        assert!(!shown.contains("SECRET"), "{shown}");
        assert!(shown.contains(ENV), "{shown}");
    }

    #[test]
    fn keys_are_one_printable_line_of_some_length() {
        assert!(invalid("").is_some());
        assert!(invalid("short").is_some());
        assert!(invalid("abc def ghi jkl mno pqr stu").is_some());
        assert!(invalid("abcdefghijklmnopqrstuvwxyz\u{7}").is_some());
        assert_eq!(invalid("abcdefghijklmnopqrstuvwxyz0123456789+/="), None);
    }
}

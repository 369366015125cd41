//! Studio from outside (`open`, `run`, `close`): starting Studio through its documented
//! command line, knowing each Studio studio-bridge started, and ending only those.
//!
//! Why a module of its own: these are the only places studio-bridge starts or ends a
//! program on the person's desktop, and each step is checked against what the operating
//! system says, never against a name:
//! - [`studio`] finds the executable and writes the arguments Studio documents
//!   (Roblox/creator-docs, `studio/command-line-interface.md`), nothing else;
//! - [`process`] starts it detached (it outlives a CLI call, and its stdout never reaches
//!   MCP's), and knows a process by its id plus the start time the OS gives, so a reused
//!   id is never taken for our Studio;
//! - [`opened`] keeps the Studios studio-bridge opened in a file of the config directory,
//!   so that any later process (`close` from the CLI, an agent's `mcp`) can find, report
//!   and close them.

pub mod opened;
pub mod process;
pub mod studio;

use std::path::{Path, PathBuf};

/// The lock file Studio keeps beside a place file while the place is open in it
/// (`MyGame.rbxl.lock`; Rojo's project templates ignore `*.rbxl.lock` for that reason).
pub fn lock_path(place: &Path) -> PathBuf {
    let mut name = place.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_sits_beside_the_place() {
        assert_eq!(
            lock_path(Path::new("/home/a/My Game.rbxl")),
            PathBuf::from("/home/a/My Game.rbxl.lock")
        );
    }
}

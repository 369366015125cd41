//! `studio-bridge cloud login` and `cloud logout`: the Open Cloud API key kept for later
//! calls (`crate::cloud::key`). The key is read from stdin, with no echo on a terminal,
//! so it never lands in the shell's history or a process list; it is never printed back.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use crate::cloud::key;

/// Reads a key from stdin and saves it (0600).
pub fn login() -> ExitCode {
    let terminal = std::io::stdin().is_terminal();
    let read = if terminal {
        eprint!("Open Cloud API key (input hidden): ");
        let _ = std::io::stderr().flush();
        rpassword::read_password()
    } else {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).map(|_| line)
    };
    let secret = match read {
        Ok(text) => text.trim().to_owned(),
        Err(error) => {
            eprintln!("error: could not read the key from stdin: {error}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(why) = key::invalid(&secret) {
        eprintln!("error: {why}. Nothing was saved.");
        return ExitCode::FAILURE;
    }
    match key::save(&secret) {
        Ok(path) => {
            eprintln!(
                "Saved the Open Cloud API key to {} (readable by you only).",
                path.display()
            );
            if std::env::var_os(key::ENV).is_some() {
                eprintln!("Note: {} is set, and wins over the saved key while it is.", key::ENV);
            }
            eprintln!("Restart your agent's MCP server so that it offers the cloud tools.");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: could not save the key: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Removes the saved key.
pub fn logout() -> ExitCode {
    match key::remove() {
        Ok((true, Some(path))) => {
            eprintln!("Removed the saved Open Cloud API key ({}).", path.display());
            ExitCode::SUCCESS
        }
        Ok((_, path)) => {
            let place = path.map(|p| format!(" at {}", p.display())).unwrap_or_default();
            eprintln!("No Open Cloud API key was saved{place}; nothing to remove.");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: could not remove the saved key: {error}");
            ExitCode::FAILURE
        }
    }
}

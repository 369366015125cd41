//! The floors (main → cli / mcp / terminal → commands → policy → bridge → protocol,
//! ARCHITECTURE.md): nothing in the policy, the bridge or the wire format reaches up into
//! the command table or an adapter, the bridge and the wire format do not reach into the
//! policy, and the wire format does not reach into the bridge. The Luau checks (`luau`) sit
//! beside the wire format, below the commands: neither reaches into the other. The command
//! table never reaches into an adapter (cli, mcp, terminal), nor into `subcommands`, the
//! adapters' clap glue. `human` (`render`, `luau`), the library every command renders its
//! own result with, sits below the commands: it names nothing above the wire format, so a
//! command stays its own file and its Luau action. Read from the source, so
//! an arrow back up fails here before it can grow into a cycle.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, subfolders included (or `dir.rs`, a module in one file).
fn sources(dir: &Path) -> Vec<PathBuf> {
    let file = dir.with_extension("rs");
    if !dir.is_dir() && file.is_file() {
        return vec![file];
    }
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("source folder") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            found.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
    found
}

/// The top-level modules a file names through a path from the crate root:
/// `crate::x`, `crate::{x, y::z}`, and `super::x` from a folder's `mod.rs` (or
/// `super::super::x` from a file beside it), whose `super` is the crate root.
fn root_modules_named(text: &str, is_folder_root: bool) -> Vec<String> {
    let prefixes: &[&str] = if is_folder_root {
        &["crate::", "super::"]
    } else {
        &["crate::", "super::super::"]
    };
    let mut names = Vec::new();
    for prefix in prefixes {
        for (at, _) in text.match_indices(prefix) {
            // `super::super::x` also contains `super::x`; only whole prefixes count.
            let before = &text[..at];
            if *prefix == "super::" && before.ends_with("super::") {
                continue;
            }
            let rest = &text[at + prefix.len()..];
            let group = if let Some(inner) = rest.strip_prefix('{') {
                inner.split('}').next().unwrap_or_default()
            } else {
                rest
            };
            for item in group.split(',') {
                let name: String = item
                    .trim_start()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    names.push(name);
                }
                if !rest.starts_with('{') {
                    break;
                }
            }
        }
    }
    names
}

fn offences(src: &Path) -> Vec<String> {
    let adapters = ["commands", "cli", "mcp", "terminal", "subcommands", "human"];
    let mut offences = Vec::new();
    for (dir, above) in [
        ("policy", adapters.to_vec()),
        ("bridge", [&adapters[..], &["policy"]].concat()),
        ("protocol", [&adapters[..], &["policy", "bridge", "luau"]].concat()),
        // Luau checks sit beside the wire format: they know Luau, not sessions or errors.
        ("luau", [&adapters[..], &["policy", "bridge", "protocol"]].concat()),
        // The config directory sits below the policy and the bridge, which both read it.
        (
            "config",
            [&adapters[..], &["policy", "bridge", "protocol", "luau"]].concat(),
        ),
        // The sourcemap (the project's files behind scripts) sits below the command table,
        // beside the Luau checks: it knows paths and files, nothing of sessions or the wire.
        (
            "sourcemap",
            [&adapters[..], &["policy", "bridge", "protocol", "luau", "config"]].concat(),
        ),
        // Studio from outside (open, run, close) knows processes, Studio's command line and
        // its own list of opened Studios in the config directory; never a call or a session.
        (
            "launch",
            [&adapters[..], &["policy", "bridge", "protocol", "luau"]].concat(),
        ),
        // Open Cloud knows HTTP, the API key and Roblox's resources; the policy reads
        // whether a key is configured, so it sits below the policy.
        ("cloud", [&adapters[..], &["policy", "launch"]].concat()),
        // The window capture (the screenshot's host path) knows windows and pixels only.
        (
            "capture",
            [&adapters[..], &["policy", "bridge", "protocol", "luau", "config"]].concat(),
        ),
        // The command table sits below every adapter and their clap glue.
        ("commands", ["cli", "mcp", "terminal", "subcommands"].to_vec()),
        // The rendering library sits below the command table.
        (
            "human",
            [
                "commands",
                "cli",
                "mcp",
                "terminal",
                "subcommands",
                "policy",
                "bridge",
                "config",
            ]
            .to_vec(),
        ),
        // The adapters' clap glue reads the table, never an adapter.
        ("subcommands", ["cli", "mcp", "terminal"].to_vec()),
    ] {
        for path in sources(&src.join(dir)) {
            let text = std::fs::read_to_string(&path).expect("source file");
            // `super` is the crate root from a folder's mod.rs and from a file beside lib.rs.
            let is_folder_root = path.file_name().is_some_and(|n| n == "mod.rs") || path.parent() == Some(src);
            for name in root_modules_named(&text, is_folder_root) {
                if above.contains(&name.as_str()) {
                    offences.push(format!("{} reaches up into crate::{name}", path.display()));
                }
            }
        }
    }
    offences
}

#[test]
fn policy_bridge_and_protocol_never_reach_up() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for (module, files) in [("policy", 2), ("subcommands", 2), ("bridge/registry", 2)] {
        assert_eq!(
            sources(&src.join(module)).len(),
            files,
            "src/{module} is read, all {files} of its files"
        );
    }
    let offences = offences(&src);
    assert!(offences.is_empty(), "{offences:#?}");
}

#[test]
fn every_spelling_of_an_arrow_back_up_is_caught() {
    let names = |text: &str, root: bool| root_modules_named(text, root);
    assert_eq!(names("use crate::commands::find;", false), ["commands"]);
    assert_eq!(names("use crate::{protocol::Ran, mcp};", false), ["protocol", "mcp"]);
    assert_eq!(names("let c = crate::human::render::x();", false), ["human"]);
    assert_eq!(names("use super::super::cli;", false), ["cli"]);
    assert_eq!(names("use super::registry;", false), Vec::<String>::new());
    assert_eq!(names("use super::terminal;", true), ["terminal"]);
    assert_eq!(names("use crate::subcommands::arguments;", false), ["subcommands"]);
}

//! Every integration test, as one test binary: each file beside this one is a module of it.
//!
//! One binary, not one a file: each `tests/*.rs` linked on its own was about forty links of
//! the whole crate and its dependencies, the longest part of a CI run on two cores, and each
//! compiled `support/` again. The files stay one subject each; `cargo test --test integration
//! <file>::` runs one of them.

mod support;

#[path = "cli.rs"]
mod cli;
#[path = "cli_human.rs"]
mod cli_human;
#[path = "debugger.rs"]
mod debugger;
#[path = "doctor.rs"]
mod doctor;
#[path = "e2e.rs"]
mod e2e;
#[path = "e2e_calls.rs"]
mod e2e_calls;
#[path = "e2e_errors.rs"]
mod e2e_errors;
#[path = "e2e_limits.rs"]
mod e2e_limits;
#[path = "e2e_policy.rs"]
mod e2e_policy;
#[path = "e2e_resources.rs"]
mod e2e_resources;
#[path = "e2e_sessions.rs"]
mod e2e_sessions;
#[path = "floods.rs"]
mod floods;
#[path = "floors.rs"]
mod floors;
#[path = "fuzz.rs"]
mod fuzz;
#[path = "http_guard.rs"]
mod http_guard;
#[path = "inspector.rs"]
mod inspector;
#[path = "luau_gate.rs"]
mod luau_gate;
#[path = "lune_specs.rs"]
mod lune_specs;
#[path = "mcp_http.rs"]
mod mcp_http;
#[path = "mcp_reader.rs"]
mod mcp_reader;
#[path = "open_cloud.rs"]
mod open_cloud;
#[path = "pairing.rs"]
mod pairing;
#[path = "peers.rs"]
mod peers;
#[path = "play_guard.rs"]
mod play_guard;
#[path = "plugin_model.rs"]
mod plugin_model;
#[path = "policy.rs"]
mod policy;
#[path = "processes.rs"]
mod processes;
#[path = "real_plugin.rs"]
mod real_plugin;
#[path = "real_plugin_files.rs"]
mod real_plugin_files;
#[path = "real_plugin_first_contact.rs"]
mod real_plugin_first_contact;
#[path = "real_plugin_lint.rs"]
mod real_plugin_lint;
#[path = "real_plugin_long_tail.rs"]
mod real_plugin_long_tail;
#[path = "real_plugin_operations.rs"]
mod real_plugin_operations;
#[path = "real_plugin_pairing.rs"]
mod real_plugin_pairing;
#[path = "real_plugin_panel.rs"]
mod real_plugin_panel;
#[path = "real_plugin_peers.rs"]
mod real_plugin_peers;
#[path = "real_plugin_play.rs"]
mod real_plugin_play;
#[path = "real_plugin_player.rs"]
mod real_plugin_player;
#[path = "real_plugin_scripts.rs"]
mod real_plugin_scripts;
#[path = "real_plugin_writes.rs"]
mod real_plugin_writes;
#[path = "screenshot_studio.rs"]
mod screenshot_studio;
#[path = "screenshot_window.rs"]
mod screenshot_window;
// The stand-in Studio quits on SIGTERM, as Studio does on Unix.
#[cfg(unix)]
#[path = "studio_launch.rs"]
mod studio_launch;
// A POSIX pseudo-terminal (rexpect, a Unix-only dev-dependency).
#[cfg(unix)]
#[path = "terminal.rs"]
mod terminal;

/// With `autotests = false`, a file in `tests/` that no line above names would never run:
/// every one is a module of this binary.
#[test]
fn every_test_file_is_a_module_of_this_binary() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let root = std::fs::read_to_string(dir.join("integration.rs")).expect("read tests/integration.rs");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("read tests/") {
        let name = entry.expect("entry").file_name().to_string_lossy().into_owned();
        if name.ends_with(".rs") && name != "integration.rs" && !root.contains(&format!("#[path = \"{name}\"]")) {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "tests/integration.rs does not name {missing:?}: add `#[path = \"<file>\"] mod <name>;`"
    );
}

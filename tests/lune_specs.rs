//! The plugin's Luau specs (msgpack, base64, codec, paths, log buffer, every action, the
//! connection, Play brokering), run under Lune on the source and on the embedded .rbxm.

use crate::support;

use support::lune::{lune, repo};

/// The spec runs open fake hosts on ports of their own picking: one run at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run_specs(extra: &[&str]) -> (u32, u32, String) {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let lune = lune();
    // The Play spec starts a second Lune (the headless Studio) by name.
    let mut path = vec![lune.parent().unwrap().to_path_buf()];
    path.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    let output = std::process::Command::new(&lune)
        .env("PATH", std::env::join_paths(path).unwrap())
        .current_dir(repo())
        .args(["run", "tests/lune/run-specs.luau", "--"])
        .args(extra)
        .output()
        .expect("run lune");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let summary = stdout
        .lines()
        .rev()
        .find(|l| l.contains(" passed, "))
        .unwrap_or_else(|| panic!("no summary line:\n{stdout}\n{stderr}"));
    let numbers: Vec<u32> = summary
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    assert!(
        output.status.success() || numbers.get(1).copied().unwrap_or(1) > 0,
        "lune failed without failures:\n{stderr}"
    );
    (numbers[0], numbers[1], stdout)
}

#[test]
fn luau_specs_pass_on_the_plugin_source() {
    let (passed, failed, output) = run_specs(&[]);
    assert_eq!(failed, 0, "{output}");
    assert!(passed >= 150, "only {passed} specs ran:\n{output}");
}

#[test]
fn luau_specs_pass_on_the_embedded_rbxm() {
    let dir = std::env::temp_dir().join(format!("sb-specs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rbxm = dir.join("StudioBridge.rbxm");
    std::fs::write(&rbxm, studio_bridge::plugin_install::PLUGIN_RBXM).unwrap();
    let (passed, failed, output) = run_specs(&["--rbxm", rbxm.to_str().unwrap()]);
    assert_eq!(failed, 0, "{output}");
    assert!(passed >= 150, "only {passed} specs ran:\n{output}");
    let _ = std::fs::remove_dir_all(dir);
}

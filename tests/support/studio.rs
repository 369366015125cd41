//! What every test of the real plugin starts from (TESTING.md layer 5): the plugin installed
//! by the binary's own `install-plugin`, paired with [`paired_config_dir`]'s secret, in a
//! headless Studio under Lune, with a paired `mcp` host.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use super::free_port;
use super::lune::HeadlessStudio;
use super::mcp_client::{Mcp, binary, install_plugin, paired_config_dir};

/// Installs the plugin with the binary itself, into a fresh folder, paired with the secret
/// in [`paired_config_dir`] (which the hosts of these tests check).
pub async fn installed_plugin() -> PathBuf {
    let file = install_plugin(&paired_config_dir(), &[]).await;
    assert_eq!(
        studio_bridge::plugin_install::secret_in_model(&std::fs::read(&file).unwrap()),
        Some(paired_secret()),
        "the installed model carries the current secret"
    );
    file
}

/// The pairing secret the installed plugins carry.
pub fn paired_secret() -> String {
    std::fs::read_to_string(paired_config_dir().join("plugin-secret"))
        .expect("install-plugin wrote the secret")
        .trim()
        .to_owned()
}

/// The installed plugin in a headless Studio in Edit, connected to a fresh paired host.
pub async fn edit_studio() -> (PathBuf, Mcp, HeadlessStudio) {
    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn_paired(port, &[]).await;
    let mut studio = HeadlessStudio::start(port, &rbxm, "edit");
    studio
        .wait_for_line("[harness] connected context=edit", Duration::from_secs(30))
        .await;
    (rbxm, mcp, studio)
}

/// The contexts `studio_sessions` lists, in its order.
pub async fn contexts(mcp: &Mcp) -> Vec<String> {
    let listed = mcp.ok("studio_sessions", json!({})).await;
    listed["sessions"]
        .as_array()
        .expect("a session list")
        .iter()
        .map(|s| s["context"].as_str().expect("a context").to_owned())
        .collect()
}

/// Polls `studio_sessions` until it lists exactly `wanted` (in its order).
pub async fn wait_for_contexts(mcp: &Mcp, wanted: &[&str], what: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let now = contexts(mcp).await;
        if now == wanted {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what}: sessions are {now:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Calls `tool` and prints the MCP exchange (the `tools/call` params and the result) as
/// JSON, for `--nocapture` readers; returns the structured content.
pub async fn exchange(mcp: &Mcp, tool: &str, args: serde_json::Value) -> serde_json::Value {
    let result = mcp.call(tool, args.clone()).await;
    eprintln!(
        "--> {}\n<-- {}",
        json!({"method": "tools/call", "params": {"name": tool, "arguments": args}}),
        serde_json::to_string(&result).unwrap()
    );
    assert_ne!(result.is_error, Some(true), "{tool} failed: {result:?}");
    result.structured_content.clone().expect("structuredContent")
}

/// Runs `script` with `exec`, which must succeed; returns its first value.
pub async fn run_luau(mcp: &Mcp, script: &str) -> serde_json::Value {
    let out = mcp.ok("studio_exec", json!({ "script": script })).await;
    assert_eq!(out["success"], true, "{out}");
    out["returns"][0].clone()
}

/// A paired `studio-bridge serve` host on `port`, quiet, killed on drop: what a CLI command
/// or the terminal joins as a peer, as it would beside an agent.
pub fn serve(port: u16) -> tokio::process::Child {
    tokio::process::Command::new(binary())
        .args(["serve", "--no-install-plugin", "--port", &port.to_string()])
        .env("STUDIO_BRIDGE_CONFIG_DIR", paired_config_dir())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn studio-bridge serve")
}

/// The RGB pixels of a screenshot's image block, checked to be an RGB PNG (opaque) of `size`.
pub fn rgb_pixels(shot: &rmcp::model::CallToolResult, size: (u32, u32)) -> Vec<u8> {
    use base64::Engine as _;
    let image = shot.content.iter().find_map(|c| c.as_image()).expect("an image block");
    let png = base64::engine::general_purpose::STANDARD.decode(&image.data).unwrap();
    let mut reader = png::Decoder::new(std::io::Cursor::new(png)).read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let frame = reader.next_frame(&mut pixels).unwrap();
    assert_eq!(
        (frame.width, frame.height, frame.color_type),
        (size.0, size.1, png::ColorType::Rgb)
    );
    pixels
}

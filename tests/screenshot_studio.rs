//! The screenshot's studio path (issue #46): Studio's own capture (StudioCaptureService),
//! tried first, in the edit DataModel and in a Play client, at any size; its permission asked
//! once and a refusal respected. The real plugin under Lune, whose test Studio models the
//! service (tests/lune/lib/StudioCapture.luau: frame pixel (x, y) = (x % 256, y % 256,
//! 255 - (x + y) % 256), the GUI's 64×32 rectangle at (8, 8)); the fallbacks without it are
//! tests/real_plugin.rs (viewport) and tests/screenshot_window.rs (window).

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::free_port;
use support::lune::HeadlessStudio;
use support::mcp_client::Mcp;
use support::studio::{installed_plugin, rgb_pixels, run_luau};

/// The test Studio's frame at (x, y).
fn frame(x: u32, y: u32) -> [u8; 3] {
    [(x % 256) as u8, (y % 256) as u8, (255 - (x + y) % 256) as u8]
}

/// Three points away from the GUI's rectangle, corners included.
const POINTS: [(u32, u32); 3] = [(100, 50), (1919, 1079), (700, 333)];

async fn a_screenshot_from_studio(mcp: &Mcp, context: &str) {
    let shot = mcp
        .call("studio_screenshot", json!({"maxWidth": 1920, "context": context}))
        .await;
    assert_ne!(shot.is_error, Some(true), "{context}: {shot:?}");
    let result = shot.structured_content.clone().unwrap();
    eprintln!("<-- {result}");
    assert_eq!(result["source"], "studio", "{context}: {result}");
    assert_eq!(
        (result["width"].as_u64(), result["height"].as_u64()),
        (Some(1920), Some(1080))
    );
    let pixels = rgb_pixels(&shot, (1920, 1080));
    for (x, y) in POINTS {
        let at = ((y * 1920 + x) * 3) as usize;
        assert_eq!(pixels[at..at + 3], frame(x, y), "{context}: pixel ({x}, {y})");
    }
    // The GUI is in it (the person's view).
    let at = ((10 * 1920 + 10) * 3) as usize;
    assert_eq!(pixels[at..at + 3], [250, 250, 250], "{context}: the GUI's rectangle");

    // At the default width the plugin scales (ScaleAsync) and sends 1280 wide.
    let small = mcp.ok("studio_screenshot", json!({"context": context})).await;
    assert_eq!(small["source"], "studio", "{small}");
    assert_eq!(
        (small["width"].as_u64(), small["height"].as_u64()),
        (Some(1280), Some(720)),
        "{small}"
    );
}

#[tokio::test]
async fn at_1920x1080_studio_captures_itself_in_edit() {
    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn_paired(port, &[]).await;
    let mut studio = HeadlessStudio::start_with(port, &rbxm, "edit", &["--viewport", "1920x1080"]);
    studio
        .wait_for_line("[harness] connected context=edit", Duration::from_secs(30))
        .await;
    // Nothing asked for the permission before a screenshot did.
    let asked = r#"return game:GetService("StudioCaptureService"):GetAttribute("TestPermissionRequests")"#;
    assert_eq!(run_luau(&mcp, asked).await, json!(null));
    a_screenshot_from_studio(&mcp, "edit").await;
    assert_eq!(run_luau(&mcp, asked).await, json!(1), "asked once, then granted");
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

#[tokio::test]
async fn in_play_a_client_captures_through_studio() {
    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn_paired(port, &[]).await;
    let mut studio = HeadlessStudio::start_with(port, &rbxm, "play", &["--viewport", "1920x1080"]);
    studio.wait_connected(&["edit", "server", "client"]).await;
    a_screenshot_from_studio(&mcp, "client").await;
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

/// The person says no: `unsupported`, saying where to allow it, and asked only once; no
/// other path captures behind the refusal.
#[tokio::test]
async fn a_refused_permission_is_unsupported_once_asked() {
    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn_paired(port, &[]).await;
    let mut studio = HeadlessStudio::start_configured(
        port,
        &rbxm,
        "edit",
        &["--viewport", "320x180"],
        &[],
        &[("STUDIO_BRIDGE_TEST_CAPTURE_PERMISSION", "ask-refuse")],
    );
    studio
        .wait_for_line("[harness] connected context=edit", Duration::from_secs(30))
        .await;
    for _ in 0..2 {
        let error = mcp.err("studio_screenshot", json!({})).await;
        eprintln!("<-- {error}");
        assert_eq!(error["code"], "unsupported", "{error}");
        assert_eq!(error["details"]["reason"], "permission_refused", "{error}");
        assert_eq!(
            error["details"]["member"], "StudioCaptureService.CaptureScreenshot",
            "{error}"
        );
        let message = error["message"].as_str().unwrap();
        assert!(message.contains("permission was refused"), "{message}");
        assert!(
            message.contains("Plugin Management"),
            "says where to allow it: {message}"
        );
    }
    let asked = r#"return game:GetService("StudioCaptureService"):GetAttribute("TestPermissionRequests")"#;
    assert_eq!(run_luau(&mcp, asked).await, json!(1), "the refusal was remembered");
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

/// `camera` (#44): the capture is taken from the chosen camera, which the result names, and
/// the person's camera is where it was afterwards; a focus frames an instance; a path that
/// names nothing is `not_found`, with the camera untouched.
#[tokio::test]
async fn a_chosen_camera_is_used_and_the_persons_is_put_back() {
    let (rbxm, mcp, _studio) = crate::support::studio::edit_studio().await;
    let camera = "local c = workspace.CurrentCamera.CFrame return {c:GetComponents()}";
    let before = run_luau(&mcp, camera).await;
    // The same CFrame, to a float32's precision (the engine keeps CFrames in float32).
    let same = |now: serde_json::Value| {
        let (a, b) = (now.as_array().unwrap().clone(), before.as_array().unwrap().clone());
        a.len() == b.len()
            && a.iter()
                .zip(&b)
                .all(|(x, y)| (x.as_f64().unwrap() - y.as_f64().unwrap()).abs() < 1e-5)
    };

    let shot = crate::support::studio::exchange(
        &mcp,
        "studio_screenshot",
        json!({"camera": {"position": [0, 40, 60], "lookAt": [0, 0, 0]}}),
    )
    .await;
    assert_eq!(shot["camera"]["position"], json!([0, 40, 60]), "{shot}");
    assert_eq!(shot["camera"]["lookAt"], json!([0, 0, 0]), "{shot}");
    assert_eq!(shot["camera"]["restored"], true, "{shot}");
    assert!(same(run_luau(&mcp, camera).await), "the person's camera is back");

    run_luau(
        &mcp,
        "local p = Instance.new('Part') p.Name = 'Tower' p.Size = Vector3.new(4, 10, 4) \
         p.CFrame = CFrame.new(100, 5, 0) p.Parent = workspace return true",
    )
    .await;
    let framed = mcp
        .ok("studio_screenshot", json!({"camera": {"focus": "Workspace.Tower"}}))
        .await;
    assert_eq!(
        framed["camera"]["lookAt"],
        json!([100, 5, 0]),
        "it looks at the tower's centre: {framed}"
    );
    assert!(same(run_luau(&mcp, camera).await));

    let missing = mcp
        .err("studio_screenshot", json!({"camera": {"focus": "Workspace.Nowhere"}}))
        .await;
    assert_eq!(missing["code"], "not_found", "{missing}");
    let both = mcp
        .call("studio_screenshot", json!({"camera": {"position": [0, 1, 2]}}))
        .await;
    assert_eq!(both.is_error, Some(true), "a position needs its lookAt: {both:?}");
    assert!(same(run_luau(&mcp, camera).await));
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

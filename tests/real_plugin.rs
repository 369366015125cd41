//! The real plugin (TESTING.md layer 5): the embedded .rbxm, installed by the binary's own
//! `install-plugin`, running unchanged in a headless Studio under Lune, connected to the
//! real `studio-bridge mcp`, and every tool called over MCP in Edit; the screenshot's pixels.
//! Each capability has a file of its own beside this one: real_plugin_scripts.rs (find and
//! the script tools), real_plugin_writes.rs (writes, undo and redo), real_plugin_play.rs
//! (playtests, `test_run`, exec in Play), real_plugin_peers.rs (more than one process) and
//! real_plugin_pairing.rs.

use crate::support;

use std::time::Duration;

use base64::Engine as _;
use serde_json::json;
use support::free_port;
use support::lune::HeadlessStudio;
use support::mcp_client::Mcp;
use support::studio::{edit_studio, installed_plugin};

#[tokio::test]
async fn every_tool_is_answered_by_the_real_plugin_in_edit() {
    let (rbxm, mcp, _studio) = edit_studio().await;

    let sessions = mcp.ok("studio_sessions", json!({})).await;
    let session = &sessions["sessions"][0];
    assert_eq!(session["context"], "edit");
    assert_eq!(session["state"], "Edit");
    assert_eq!(session["status"], "connected");
    assert_eq!(sessions["sessions"].as_array().unwrap().len(), 1);

    let state = mcp.ok("studio_state", json!({})).await;
    assert_eq!(state["state"], "Edit");
    assert!(state["placeName"].is_string());

    let exec = mcp
        .ok(
            "studio_exec",
            json!({"script": "print('hello from exec')\nwarn('careful')\nreturn 1 + 1, nil, 'x'"}),
        )
        .await;
    assert_eq!(exec["success"], true, "{exec}");
    assert_eq!(exec["returns"], json!([2, null, "x"]));
    assert_eq!(
        exec["logs"],
        json!([{"level": "Print", "body": "hello from exec"}, {"level": "Warning", "body": "careful"}])
    );

    let failed = mcp
        .ok(
            "studio_exec",
            json!({"script": "local a = 1\nlocal t = nil\nreturn t.field"}),
        )
        .await;
    assert_eq!(failed["success"], false);
    let message = failed["error"].as_str().unwrap();
    assert!(message.contains(":3:"), "the runtime error keeps its line: {message}");
    let syntax = mcp
        .ok("studio_exec", json!({"script": "return +", "check": false}))
        .await;
    assert_eq!(syntax["success"], false);
    assert!(syntax["error"].as_str().unwrap().contains(":1:"), "{syntax}");

    let logs = mcp.ok("studio_logs", json!({"count": 20})).await;
    let bodies: Vec<&str> = logs["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["body"].as_str())
        .collect();
    assert!(bodies.contains(&"hello from exec"), "{bodies:?}");
    let since = logs["nextSince"].clone();
    mcp.ok("studio_exec", json!({"script": "print('after the cursor')"}))
        .await;
    let newer = mcp.ok("studio_logs", json!({"since": since})).await;
    let bodies: Vec<&str> = newer["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["body"].as_str())
        .collect();
    assert_eq!(bodies, ["after the cursor"]);

    // A part with an awkward name round-trips through exec's Instance value and query.
    let made = mcp
        .ok(
            "studio_exec",
            json!({"script": "local p = Instance.new('Part')\np.Name = 'My.Part'\np.Position = Vector3.new(1, 2, 3)\np.Parent = workspace\nreturn p, #workspace:GetChildren()"}),
        )
        .await;
    assert_eq!(made["returns"][0]["type"], "Instance", "{made}");
    let path = made["returns"][0]["value"]["path"].as_str().unwrap().to_owned();
    assert!(path.contains("[\"My.Part\"]"), "{path}");
    let count = made["returns"][1].as_u64().unwrap();
    let part = mcp
        .ok(
            "studio_query",
            json!({"path": path, "properties": ["Position", "Name"]}),
        )
        .await;
    assert_eq!(part["instance"]["className"], "Part");
    assert_eq!(
        part["instance"]["properties"]["Position"],
        json!({"type": "Vector3", "value": [1, 2, 3]})
    );
    assert_eq!(part["instance"]["properties"]["Name"], "My.Part");
    let workspace = mcp
        .ok("studio_query", json!({"path": "Workspace", "children": true}))
        .await;
    assert_eq!(workspace["instance"]["childCount"].as_u64(), Some(count));
    assert_eq!(
        workspace["instance"]["children"].as_array().unwrap().len() as u64,
        count
    );

    let missing = mcp.err("studio_query", json!({"path": "Workspace.Nope"})).await;
    assert_eq!(missing["code"], "not_found");

    let shot = mcp.call("studio_screenshot", json!({"maxWidth": 64})).await;
    assert_ne!(shot.is_error, Some(true), "{shot:?}");
    let size = shot.structured_content.clone().unwrap();
    assert!(size["width"].as_u64().unwrap() <= 64);
    let image = shot.content.iter().find_map(|c| c.as_image()).expect("an image block");
    let png = base64::engine::general_purpose::STANDARD.decode(&image.data).unwrap();
    let reader = png::Decoder::new(std::io::Cursor::new(png)).read_info().unwrap();
    assert_eq!(u64::from(reader.info().width), size["width"].as_u64().unwrap());
    assert_eq!(u64::from(reader.info().height), size["height"].as_u64().unwrap());

    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

/// Issue #28: in a Studio without StudioCaptureService, a 320x180 Edit viewport (within
/// EditableImage's 1024x1024) comes from the plugin (`source: "viewport"`), unscaled at the default and scaled at a small `maxWidth`,
/// with exactly the test Studio's pixels, scaled by nearest neighbour at pixel centres.
#[tokio::test]
async fn screenshot_of_a_320x180_edit_viewport_comes_from_the_plugin_with_its_pixels() {
    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn_paired(port, &[]).await;
    // A Studio without its own capture: the EditableImage path (the studio path is
    // tests/screenshot_studio.rs).
    let mut studio = HeadlessStudio::start_lacking(
        port,
        &rbxm,
        "edit",
        &["--viewport", "320x180"],
        &["StudioCaptureService"],
    );
    studio
        .wait_for_line("[harness] connected context=edit", Duration::from_secs(30))
        .await;
    for (args, width, height) in [(json!({}), 320u32, 180u32), (json!({"maxWidth": 100}), 100, 56)] {
        let shot = mcp.call("studio_screenshot", args.clone()).await;
        assert_ne!(shot.is_error, Some(true), "{shot:?}");
        let size = shot.structured_content.clone().unwrap();
        let image = shot.content.iter().find_map(|c| c.as_image()).expect("an image block");
        eprintln!(
            "--> {}\n<-- image/png ({} base64 bytes) + {}",
            json!({"method": "tools/call", "params": {"name": "studio_screenshot", "arguments": args}}),
            image.data.len(),
            size
        );
        assert_eq!(size["source"], "viewport", "{size}");
        assert_eq!(size.get("blank"), None, "{size}");
        assert_eq!(
            (size["width"].as_u64(), size["height"].as_u64()),
            (Some(width.into()), Some(height.into()))
        );
        let png = base64::engine::general_purpose::STANDARD.decode(&image.data).unwrap();
        let mut reader = png::Decoder::new(std::io::Cursor::new(png)).read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        let frame = reader.next_frame(&mut pixels).unwrap();
        assert_eq!((frame.width, frame.height), (width, height));
        // opaque, so written as RGB (src/image.rs)
        assert_eq!(frame.color_type, png::ColorType::Rgb);
        // the shim's image: pixel (x, y) = (x % 256, y % 256, (x + y) % 256, 255)
        let sample = |dst: u32, dst_len: u32, src_len: u32| {
            (((f64::from(dst) + 0.5) * f64::from(src_len) / f64::from(dst_len)).floor() as u32).min(src_len - 1)
        };
        for y in 0..height {
            let sy = sample(y, height, 180);
            for x in 0..width {
                let sx = sample(x, width, 320);
                let at = ((y * width + x) * 3) as usize;
                let want = [(sx % 256) as u8, (sy % 256) as u8, ((sx + sy) % 256) as u8];
                assert_eq!(pixels[at..at + 3], want, "pixel ({x}, {y}) of {width}x{height}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

/// Issue #28: at 1920x1080, in a Studio without its own capture, the plugin does not try its path (EditableImage holds at most
/// 1024x1024); the host takes the window path, and with no display to find a window on, the
/// call fails saying why no window could be captured, never with an EditableImage error.
/// (tests/screenshot_window.rs captures a real window on an X server.)
// Linux only: the message names X11's DISPLAY, and elsewhere the window path is another.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn at_1920x1080_with_no_window_to_capture_the_error_says_why() {
    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn_paired_with_env(port, &[], &[("DISPLAY", None), ("WAYLAND_DISPLAY", None)]).await;
    // Without Studio's own capture, which would take it (tests/screenshot_studio.rs).
    let mut studio = HeadlessStudio::start_lacking(
        port,
        &rbxm,
        "edit",
        &["--viewport", "1920x1080"],
        &["StudioCaptureService"],
    );
    studio
        .wait_for_line("[harness] connected context=edit", Duration::from_secs(30))
        .await;
    let error = mcp.err("studio_screenshot", json!({})).await;
    eprintln!("<-- {error}");
    assert_eq!(error["code"], "not_found", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("1920×1080"),
        "says why the plugin did not capture: {message}"
    );
    assert!(message.contains("DISPLAY is not set"), "says why no window: {message}");
    assert!(!message.contains("CreateEditableImageAsync"), "{message}");
    assert_eq!(error["details"]["reason"], "viewport_too_large");
    assert_eq!(error["details"]["placeName"], "HarnessPlace");
    assert_eq!(error["details"]["viewportWidth"], 1920);
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

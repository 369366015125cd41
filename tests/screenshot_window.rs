//! The screenshot's window path on a real X server (issue #28): Xvfb, three windows on it (one
//! titled like the session's Studio, one like another place's Studio, one not Studio at all),
//! each painted with known pixels; the real plugin under Lune at a 1920×1080 viewport (past
//! the 1024×1024 an EditableImage holds) sends the host to the window path, and the image
//! that comes back is exactly the session's window. Then that window closes and the call
//! fails saying which Studio windows it saw.
//!
//! Needs `Xvfb` (Debian's xvfb package; `.ci/run` installs it): fails without it, unless
//! STUDIO_BRIDGE_ALLOW_SKIP=1.
#![cfg(target_os = "linux")]

use crate::support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;
use support::free_port;
use support::lune::HeadlessStudio;
use support::mcp_client::Mcp;
use support::studio::{installed_plugin, rgb_pixels};
use x11rb::connection::Connection;
use x11rb::protocol::xproto::{
    AtomEnum, ConnectionExt as _, CreateGCAux, CreateWindowAux, ImageFormat, PropMode, Window, WindowClass,
};
use x11rb::rust_connection::RustConnection;
use x11rb::wrapper::ConnectionExt as _;

/// An Xvfb server on a display number it picks itself (-displayfd), killed on drop.
struct Xvfb {
    child: Child,
    display: String,
}

impl Xvfb {
    fn start() -> Option<Xvfb> {
        let found =
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).any(|dir| dir.join("Xvfb").is_file());
        if !found {
            support::missing_tool("Xvfb (Debian package xvfb) is not on PATH");
            return None;
        }
        let mut child = Command::new("Xvfb")
            .args(["-displayfd", "1", "-screen", "0", "1600x1000x24", "-nolisten", "tcp"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start Xvfb");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("Xvfb stdout"))
            .read_line(&mut line)
            .expect("Xvfb's display number");
        let number: u32 = line.trim().parse().unwrap_or_else(|_| panic!("Xvfb printed {line:?}"));
        Some(Xvfb {
            child,
            display: format!(":{number}"),
        })
    }
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The colour of pixel (x, y) of the window painted with `seed`.
fn pattern(seed: u32, x: u32, y: u32) -> [u8; 3] {
    [
        ((x * 3 + seed) % 256) as u8,
        ((y * 5 + seed * 7) % 256) as u8,
        ((x + y + seed * 13) % 256) as u8,
    ]
}

/// Creates, names and maps a window at (x, y), then paints `pattern(seed, …)` into it.
fn painted_window(
    conn: &RustConnection,
    screen: usize,
    title: &str,
    at: (i16, i16),
    size: (u16, u16),
    seed: u32,
) -> Window {
    let root = &conn.setup().roots[screen];
    let window = conn.generate_id().unwrap();
    conn.create_window(
        root.root_depth,
        window,
        root.root,
        at.0,
        at.1,
        size.0,
        size.1,
        0,
        WindowClass::INPUT_OUTPUT,
        0,
        &CreateWindowAux::new(),
    )
    .unwrap();
    conn.change_property8(
        PropMode::REPLACE,
        window,
        AtomEnum::WM_NAME,
        AtomEnum::STRING,
        title.as_bytes(),
    )
    .unwrap();
    conn.change_property32(
        PropMode::REPLACE,
        window,
        conn.intern_atom(false, b"_NET_WM_PID").unwrap().reply().unwrap().atom,
        AtomEnum::CARDINAL,
        &[std::process::id()],
    )
    .unwrap();
    conn.map_window(window).unwrap();
    let gc = conn.generate_id().unwrap();
    conn.create_gc(gc, window, &CreateGCAux::new()).unwrap();
    // ZPixmap, 32 bits a pixel, 0x00RRGGBB in the server's byte order; in strips that fit a
    // request without BIG-REQUESTS.
    let little = conn.setup().image_byte_order == x11rb::protocol::xproto::ImageOrder::LSB_FIRST;
    let (width, height) = (u32::from(size.0), u32::from(size.1));
    let rows_per_strip = (60_000 / width).max(1);
    let mut y0 = 0;
    while y0 < height {
        let rows = rows_per_strip.min(height - y0);
        let mut data = Vec::with_capacity((width * rows * 4) as usize);
        for y in y0..y0 + rows {
            for x in 0..width {
                let [r, g, b] = pattern(seed, x, y);
                let pixel = (u32::from(r) << 16) | (u32::from(g) << 8) | u32::from(b);
                data.extend_from_slice(&if little {
                    pixel.to_le_bytes()
                } else {
                    pixel.to_be_bytes()
                });
            }
        }
        conn.put_image(
            ImageFormat::Z_PIXMAP,
            window,
            gc,
            size.0,
            rows as u16,
            0,
            y0 as i16,
            0,
            root.root_depth,
            &data,
        )
        .unwrap();
        y0 += rows;
    }
    conn.sync().unwrap();
    window
}

#[tokio::test]
async fn at_1920x1080_the_studio_window_is_captured_with_its_pixels() {
    let Some(xvfb) = Xvfb::start() else { return };
    let (conn, screen) = x11rb::connect(Some(&xvfb.display)).expect("connect to Xvfb");
    // The session's place is the test Studio's default place, "HarnessPlace".
    let studio_window = painted_window(&conn, screen, "HarnessPlace - Roblox Studio", (0, 0), (1000, 700), 1);
    painted_window(&conn, screen, "Other Place - Roblox Studio", (1050, 0), (500, 300), 2);
    painted_window(
        &conn,
        screen,
        "HarnessPlace notes - Text Editor",
        (1050, 400),
        (500, 300),
        3,
    );

    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn_paired_with_env(port, &[], &[("DISPLAY", Some(&xvfb.display))]).await;
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

    let shot = mcp.call("studio_screenshot", json!({})).await;
    assert_ne!(shot.is_error, Some(true), "{shot:?}");
    let result = shot.structured_content.clone().unwrap();
    eprintln!("<-- {result}");
    assert_eq!(result["source"], "window", "{result}");
    assert_eq!(result["reason"], "viewport_too_large", "{result}");
    assert_eq!(result["window"], "HarnessPlace - Roblox Studio", "{result}");
    assert_eq!(
        (result["width"].as_u64(), result["height"].as_u64()),
        (Some(1000), Some(700))
    );
    assert_eq!(result.get("blank"), None, "{result}");
    let pixels = rgb_pixels(&shot, (1000, 700));
    for y in 0..700 {
        for x in 0..1000 {
            let at = ((y * 1000 + x) * 3) as usize;
            assert_eq!(pixels[at..at + 3], pattern(1, x, y), "pixel ({x}, {y})");
        }
    }

    // Scaled like any screenshot: the window path honours maxWidth.
    let small = mcp.ok("studio_screenshot", json!({"maxWidth": 500})).await;
    assert_eq!(
        (small["width"].as_u64(), small["height"].as_u64()),
        (Some(500), Some(350)),
        "{small}"
    );

    // The session's window closes: the other Studio's is never taken instead.
    conn.destroy_window(studio_window).unwrap();
    conn.sync().unwrap();
    let error = mcp.err("studio_screenshot", json!({})).await;
    eprintln!("<-- {error}");
    assert_eq!(error["code"], "not_found", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("\"HarnessPlace\""), "{message}");
    assert!(message.contains("\"Other Place - Roblox Studio\""), "{message}");
    assert!(!message.contains("Text Editor"), "{message}");
    assert!(!message.contains("CreateEditableImageAsync"), "{message}");
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

/// In Play, without Studio's own capture, the plugin does not capture (a Play client's
/// EditableImage captures come back black): a call to the client, and one to the edit
/// DataModel while the test runs, both come back from the Studio window, said to be so
/// (`reason: "play"`).
#[tokio::test]
async fn in_play_the_studio_window_is_captured_for_client_and_edit() {
    let Some(xvfb) = Xvfb::start() else { return };
    let (conn, screen) = x11rb::connect(Some(&xvfb.display)).expect("connect to Xvfb");
    painted_window(&conn, screen, "HarnessPlace - Roblox Studio", (100, 50), (640, 400), 4);

    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn_paired_with_env(port, &[], &[("DISPLAY", Some(&xvfb.display))]).await;
    let mut studio = HeadlessStudio::start_lacking(
        port,
        &rbxm,
        "play",
        &["--viewport", "320x180"],
        &["StudioCaptureService"],
    );
    studio.wait_connected(&["edit", "server", "client"]).await;
    for context in ["client", "edit"] {
        let shot = mcp.call("studio_screenshot", json!({"context": context})).await;
        assert_ne!(shot.is_error, Some(true), "{context}: {shot:?}");
        let result = shot.structured_content.clone().unwrap();
        eprintln!("<-- {result}");
        assert_eq!(result["source"], "window", "{result}");
        assert_eq!(result["reason"], "play", "{result}");
        assert_eq!(result["context"], context, "{result}");
        let pixels = rgb_pixels(&shot, (640, 400));
        for (x, y) in [(0u32, 0u32), (639, 0), (0, 399), (639, 399), (320, 200), (17, 301)] {
            let at = ((y * 640 + x) * 3) as usize;
            assert_eq!(pixels[at..at + 3], pattern(4, x, y), "{context}: pixel ({x}, {y})");
        }
    }
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

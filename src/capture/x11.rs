//! X11 (Roblox Studio under Wine on Linux): windows listed from the window manager's
//! `_NET_CLIENT_LIST` (or the root's children where no manager keeps one), titles from
//! `_NET_WM_NAME` / `WM_NAME`, processes from `_NET_WM_PID` and /proc, pixels by GetImage.
//! A pure-Rust client (x11rb's RustConnection): nothing to install but an X server.

use x11rb::connection::Connection;
use x11rb::protocol::xproto::{Atom, AtomEnum, ConnectionExt as _, ImageFormat, ImageOrder, MapState, Setup, Window};
use x11rb::rust_connection::RustConnection;

use super::{CaptureError, WindowInfo};

fn connect() -> Result<(RustConnection, usize), CaptureError> {
    let Some(display) = std::env::var_os("DISPLAY") else {
        return Err(CaptureError::Unavailable(
            "No X display to capture Studio's window from: DISPLAY is not set. On Linux Studio runs under Wine on X11; run studio-bridge in the same desktop session as Studio (or set DISPLAY to its display).".to_owned(),
        ));
    };
    x11rb::connect(None).map_err(|e| {
        CaptureError::Unavailable(format!(
            "Could not connect to the X display {} to capture Studio's window: {e}. Check DISPLAY and that the X server accepts this user.",
            display.to_string_lossy()
        ))
    })
}

fn failed(what: &str, e: impl std::fmt::Display) -> CaptureError {
    CaptureError::Unavailable(format!("The X server failed to {what}: {e}."))
}

fn atom(conn: &RustConnection, name: &str) -> Result<Atom, CaptureError> {
    conn.intern_atom(false, name.as_bytes())
        .map_err(|e| failed("name an atom", e))?
        .reply()
        .map(|r| r.atom)
        .map_err(|e| failed("name an atom", e))
}

struct Atoms {
    client_list: Atom,
    name: Atom,
    utf8: Atom,
    pid: Atom,
}

/// A property's bytes, or None when the window lacks it (or has gone).
fn property(conn: &RustConnection, window: Window, property: Atom, kind: Atom) -> Option<Vec<u8>> {
    let reply = conn
        .get_property(false, window, property, kind, 0, u32::MAX / 4)
        .ok()?
        .reply()
        .ok()?;
    (reply.type_ != u32::from(AtomEnum::NONE)).then_some(reply.value)
}

fn title(conn: &RustConnection, atoms: &Atoms, window: Window) -> String {
    property(conn, window, atoms.name, atoms.utf8)
        .or_else(|| property(conn, window, AtomEnum::WM_NAME.into(), AtomEnum::STRING.into()))
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default()
}

fn pid(conn: &RustConnection, atoms: &Atoms, window: Window) -> Option<u32> {
    let bytes = property(conn, window, atoms.pid, AtomEnum::CARDINAL.into())?;
    let raw: [u8; 4] = bytes.get(..4)?.try_into().ok()?;
    Some(u32::from_ne_bytes(raw))
}

/// The executable's name from /proc (Wine's processes show the .exe's name).
fn process_name(pid: Option<u32>) -> String {
    pid.and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).ok())
        .map(|name| name.trim().to_owned())
        .unwrap_or_default()
}

/// The windows a user would call top-level: the manager's client list, or else the root's
/// mapped children (and, for a child without a title, its first titled child: a frame).
fn top_level(conn: &RustConnection, root: Window, atoms: &Atoms) -> Result<Vec<Window>, CaptureError> {
    if let Some(bytes) = property(conn, root, atoms.client_list, AtomEnum::WINDOW.into()) {
        let listed: Vec<Window> = bytes
            .chunks_exact(4)
            .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        if !listed.is_empty() {
            return Ok(listed);
        }
    }
    let tree = conn
        .query_tree(root)
        .map_err(|e| failed("list windows", e))?
        .reply()
        .map_err(|e| failed("list windows", e))?;
    let mut found = Vec::new();
    for child in tree.children {
        if !title(conn, atoms, child).is_empty() {
            found.push(child);
        } else if let Ok(Ok(inner)) = conn.query_tree(child).map(|c| c.reply()) {
            found.extend(inner.children.into_iter().find(|w| !title(conn, atoms, *w).is_empty()));
        }
    }
    Ok(found)
}

pub(super) fn windows() -> Result<Vec<WindowInfo>, CaptureError> {
    let (conn, screen) = connect()?;
    let root = conn.setup().roots[screen].root;
    let atoms = Atoms {
        client_list: atom(&conn, "_NET_CLIENT_LIST")?,
        name: atom(&conn, "_NET_WM_NAME")?,
        utf8: atom(&conn, "UTF8_STRING")?,
        pid: atom(&conn, "_NET_WM_PID")?,
    };
    let mut out = Vec::new();
    for window in top_level(&conn, root, &atoms)? {
        // A window that closes while it is listed is left out, not an error.
        let Ok(Ok(attributes)) = conn.get_window_attributes(window).map(|c| c.reply()) else {
            continue;
        };
        let Ok(Ok(geometry)) = conn.get_geometry(window).map(|c| c.reply()) else {
            continue;
        };
        let viewable = attributes.map_state == MapState::VIEWABLE;
        let pid = pid(&conn, &atoms, window);
        out.push(WindowInfo {
            id: window,
            title: title(&conn, &atoms, window),
            process: process_name(pid),
            pid,
            // An unmapped (minimised) window has nothing to capture.
            width: if viewable { u32::from(geometry.width) } else { 0 },
            height: if viewable { u32::from(geometry.height) } else { 0 },
        });
    }
    Ok(out)
}

/// The window's pixels as RGBA: the part of it on the screen (GetImage requires that).
pub(super) fn capture(window: &WindowInfo) -> Result<(u32, u32, Vec<u8>), CaptureError> {
    let (conn, screen) = connect()?;
    let setup = conn.setup();
    let root = setup.roots[screen].root;
    let (screen_w, screen_h) = (
        i32::from(setup.roots[screen].width_in_pixels),
        i32::from(setup.roots[screen].height_in_pixels),
    );
    let gone = |e: &dyn std::fmt::Display| {
        CaptureError::NoWindow(format!(
            "The Studio window \"{}\" closed or changed while it was captured ({e}). Retry.",
            window.title
        ))
    };
    let geometry = conn
        .get_geometry(window.id)
        .map_err(|e| gone(&e))?
        .reply()
        .map_err(|e| gone(&e))?;
    let at = conn
        .translate_coordinates(window.id, root, 0, 0)
        .map_err(|e| gone(&e))?
        .reply()
        .map_err(|e| gone(&e))?;
    // The window's rectangle clipped to the screen, in the window's coordinates.
    let (x0, y0) = (i32::from(at.dst_x), i32::from(at.dst_y));
    let left = (-x0).max(0);
    let top = (-y0).max(0);
    let right = i32::from(geometry.width).min(screen_w - x0);
    let bottom = i32::from(geometry.height).min(screen_h - y0);
    if right <= left || bottom <= top {
        return Err(CaptureError::NoWindow(format!(
            "The Studio window \"{}\" is off the screen. Move it onto the screen and retry.",
            window.title
        )));
    }
    let (width, height) = ((right - left) as u16, (bottom - top) as u16);
    let image = conn
        .get_image(
            ImageFormat::Z_PIXMAP,
            window.id,
            left as i16,
            top as i16,
            width,
            height,
            !0,
        )
        .map_err(|e| gone(&e))?
        .reply()
        .map_err(|e| gone(&e))?;
    let rgba = to_rgba(
        setup,
        image.depth,
        image.visual,
        u32::from(width),
        u32::from(height),
        &image.data,
    )?;
    Ok((u32::from(width), u32::from(height), rgba))
}

/// A ZPixmap of a TrueColor visual at 32 bits per pixel (what X servers use for depths 24
/// and 32) to RGBA, by the visual's channel masks and the server's byte order.
fn to_rgba(
    setup: &Setup,
    depth: u8,
    visual: u32,
    width: u32,
    height: u32,
    data: &[u8],
) -> Result<Vec<u8>, CaptureError> {
    let unsupported = |what: String| {
        CaptureError::Unavailable(format!(
            "The Studio window's pixels are in a format this capture does not read ({what}); a 24- or 32-bit TrueColor display is needed."
        ))
    };
    let format = setup.pixmap_formats.iter().find(|f| f.depth == depth);
    let bits = format.map(|f| f.bits_per_pixel).unwrap_or(0);
    if bits != 32 {
        return Err(unsupported(format!("depth {depth}, {bits} bits per pixel")));
    }
    let masks = setup
        .roots
        .iter()
        .flat_map(|s| &s.allowed_depths)
        .flat_map(|d| &d.visuals)
        .find(|v| v.visual_id == visual)
        .map(|v| (v.red_mask, v.green_mask, v.blue_mask))
        .ok_or_else(|| unsupported(format!("unknown visual {visual}")))?;
    if data.len() < (width as usize) * (height as usize) * 4 {
        return Err(unsupported(format!("{} bytes for {width}×{height}", data.len())));
    }
    let channel = |pixel: u32, mask: u32| -> u8 {
        if mask == 0 {
            return 0;
        }
        let value = (pixel & mask) >> mask.trailing_zeros();
        let bits = (mask >> mask.trailing_zeros()).count_ones();
        if bits >= 8 {
            (value >> (bits - 8)) as u8
        } else {
            ((value * 255) / ((1 << bits) - 1)) as u8
        }
    };
    let little = setup.image_byte_order == ImageOrder::LSB_FIRST;
    let mut out = Vec::with_capacity((width as usize) * (height as usize) * 4);
    for px in data[..(width as usize) * (height as usize) * 4].chunks_exact(4) {
        let raw = [px[0], px[1], px[2], px[3]];
        let pixel = if little {
            u32::from_le_bytes(raw)
        } else {
            u32::from_be_bytes(raw)
        };
        out.extend_from_slice(&[
            channel(pixel, masks.0),
            channel(pixel, masks.1),
            channel(pixel, masks.2),
            255,
        ]);
    }
    Ok(out)
}

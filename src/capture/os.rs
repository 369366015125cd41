//! Windows and macOS through `xcap`: Windows Graphics Capture on Windows, CoreGraphics'
//! window capture on macOS (xcap 0.9's backend there). Not compiled or run on the Linux
//! machines this project is tested on: kept to listing and one capture call.

use super::{CaptureError, WindowInfo};

/// The setting that gates window titles and pixels, named in every error it may cause.
#[cfg(target_os = "macos")]
const PERMISSION: &str = "System Settings → Privacy & Security → Screen Recording";

fn failed(what: &str, e: xcap::XCapError) -> CaptureError {
    #[cfg(target_os = "macos")]
    {
        CaptureError::Permission(format!(
            "macOS refused to {what} ({e}). Allow the terminal or editor that runs studio-bridge in {PERMISSION}, then restart it."
        ))
    }
    #[cfg(not(target_os = "macos"))]
    {
        CaptureError::Unavailable(format!("Windows failed to {what}: {e}."))
    }
}

/// macOS's Screen Recording permission, checked before any window is listed: without it
/// macOS lists windows with their titles hidden, and the error would be "no Studio
/// window". Asked for once a process (macOS shows its prompt, or opens the setting), then
/// only checked.
#[cfg(target_os = "macos")]
mod screen_recording {
    // CoreGraphics, macOS 10.15 and later: `bool CGPreflightScreenCaptureAccess(void)` and
    // `bool CGRequestScreenCaptureAccess(void)`.
    #[link(name = "CoreGraphics", kind = "framework")]
    unsafe extern "C" {
        fn CGPreflightScreenCaptureAccess() -> bool;
        fn CGRequestScreenCaptureAccess() -> bool;
    }

    static ASKED: std::sync::Once = std::sync::Once::new();

    /// Whether this process may capture the screen now.
    pub(super) fn allowed() -> bool {
        // SAFETY: both take nothing and return a bool; no memory is shared.
        if unsafe { CGPreflightScreenCaptureAccess() } {
            return true;
        }
        ASKED.call_once(|| {
            // SAFETY: as above.
            unsafe {
                CGRequestScreenCaptureAccess();
            }
        });
        false
    }
}

pub(super) fn windows() -> Result<Vec<WindowInfo>, CaptureError> {
    #[cfg(target_os = "macos")]
    if !screen_recording::allowed() {
        return Err(CaptureError::Permission(format!(
            "macOS has not allowed studio-bridge to record the screen, so it cannot capture Studio's window. Allow the terminal or editor that runs studio-bridge in {PERMISSION}, then restart it."
        )));
    }
    let listed = xcap::Window::all().map_err(|e| failed("list the open windows", e))?;
    let windows: Vec<WindowInfo> = listed
        .iter()
        .filter_map(|w| {
            let minimised = w.is_minimized().unwrap_or(false);
            Some(WindowInfo {
                id: w.id().ok()?,
                title: w.title().unwrap_or_default(),
                process: w.app_name().unwrap_or_default(),
                pid: w.pid().ok(),
                width: if minimised { 0 } else { w.width().unwrap_or(0) },
                height: if minimised { 0 } else { w.height().unwrap_or(0) },
            })
        })
        .collect();
    // Without Screen Recording, macOS lists windows but hides their titles.
    #[cfg(target_os = "macos")]
    if !windows.is_empty() && windows.iter().all(|w| w.title.is_empty()) {
        return Err(CaptureError::Permission(format!(
            "macOS hides window titles from studio-bridge, so it cannot find Studio's window. Allow the terminal or editor that runs studio-bridge in {PERMISSION}, then restart it."
        )));
    }
    Ok(windows)
}

pub(super) fn capture(window: &WindowInfo) -> Result<(u32, u32, Vec<u8>), CaptureError> {
    let listed = xcap::Window::all().map_err(|e| failed("list the open windows", e))?;
    let found = listed
        .into_iter()
        .find(|w| w.id().ok() == Some(window.id))
        .ok_or_else(|| {
            CaptureError::NoWindow(format!(
                "The Studio window \"{}\" closed while it was captured. Retry.",
                window.title
            ))
        })?;
    let image = found
        .capture_image()
        .map_err(|e| failed("capture Studio's window", e))?;
    let (width, height) = (image.width(), image.height());
    Ok((width, height, image.into_raw()))
}

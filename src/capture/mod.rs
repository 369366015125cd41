//! Screenshots of the Studio window, taken by the host through the operating system.
//!
//! Why this exists: the plugin can only read a capture through an EditableImage, which the
//! engine reference caps at 1024×1024, and a Play client's captures come back black in
//! current Studio builds (TOOLS.md). So for a Play context or a larger viewport the plugin
//! reports its place name instead of pixels, and the host captures the window of the
//! session's Studio: the one whose title names that place ("<Place> - Roblox Studio").
//!
//! Backends: X11 (`x11`, Studio under Wine on Linux; pure Rust, no system library) and `xcap`
//! on Windows (Windows Graphics Capture) and macOS (`os`). The window chooser ([`choose`])
//! is a pure function over the listed windows, the same on every platform.
//!
//! No engine API tells a plugin where its viewport sits inside the Studio window, so the
//! whole window is captured, never a guessed crop of it.

#[cfg(any(windows, target_os = "macos"))]
mod os;
#[cfg(target_os = "linux")]
mod x11;

use std::fmt;

/// One top-level window as the platform lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowInfo {
    /// The platform's handle (an X11 window id, an xcap window id).
    pub id: u32,
    pub title: String,
    /// The executable's name, where the platform says it ("" otherwise).
    pub process: String,
    pub pid: Option<u32>,
    pub width: u32,
    pub height: u32,
}

/// A captured window: RGBA rows from the top-left.
#[derive(Debug)]
pub struct Frame {
    pub width: u32,
    pub height: u32,
    pub rgba: Vec<u8>,
    /// The captured window's title.
    pub title: String,
}

/// Why no window could be captured; each says what to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaptureError {
    /// No Studio window shows the place (or several do).
    NoWindow(String),
    /// The operating system refused: the message names the setting to change.
    Permission(String),
    /// No way to list windows here (no X display, an unsupported platform) or the capture failed.
    Unavailable(String),
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaptureError::NoWindow(m) | CaptureError::Permission(m) | CaptureError::Unavailable(m) => f.write_str(m),
        }
    }
}

/// What Studio appends to the place name in its window title.
const TITLE_SUFFIX: &str = " - Roblox Studio";

/// Whether a window belongs to Roblox Studio: by its title, or by its process where the
/// platform names it: RobloxStudioBeta.exe under Wine, RobloxStudio on macOS, and on
/// Windows xcap's `app_name`, which is the executable's file description ("Roblox
/// Studio"), so spaces and case are ignored.
fn is_studio(window: &WindowInfo) -> bool {
    let process: String = window
        .process
        .chars()
        .filter(|c| !c.is_whitespace())
        .flat_map(char::to_lowercase)
        .collect();
    window.title.ends_with(TITLE_SUFFIX) || process.starts_with("robloxstudio")
}

/// The place name a Studio title shows: "Baseplate - Roblox Studio" → "Baseplate"; a local
/// file's extension and an unsaved-changes mark are dropped.
fn place_in_title(title: &str) -> &str {
    let place = title.strip_suffix(TITLE_SUFFIX).unwrap_or(title).trim();
    let place = place.trim_end_matches('*').trim_end();
    place
        .strip_suffix(".rbxl")
        .or_else(|| place.strip_suffix(".rbxlx"))
        .unwrap_or(place)
}

/// Chooses the session's Studio window: the visible Studio window whose title names
/// `place` (the plugin's `game.Name`). Several windows of one Studio for the place (a
/// dialog beside the main window) resolve to the largest; Studios of other places are
/// never chosen. Errors say what was seen, so the agent knows why.
pub fn choose<'a>(windows: &'a [WindowInfo], place: &str) -> Result<&'a WindowInfo, CaptureError> {
    let studios: Vec<&WindowInfo> = windows
        .iter()
        .filter(|w| is_studio(w) && w.width > 0 && w.height > 0)
        .collect();
    let wanted = place_in_title(place);
    let matching: Vec<&WindowInfo> = studios
        .iter()
        .copied()
        .filter(|w| place_in_title(&w.title) == wanted)
        .collect();
    let processes: Vec<Option<u32>> = {
        let mut pids: Vec<Option<u32>> = matching.iter().map(|w| w.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    };
    match matching.as_slice() {
        [] if studios.is_empty() => Err(CaptureError::NoWindow(format!(
            "No Roblox Studio window is open on this desktop ({} top-level windows listed). Studio must run on the same machine and desktop as studio-bridge, not minimised.",
            windows.len()
        ))),
        [] => Err(CaptureError::NoWindow(format!(
            "No Roblox Studio window's title names the place \"{place}\"; Studio windows seen: {}. Bring that place's Studio window up (not minimised) and retry.",
            studios
                .iter()
                .map(|w| format!("\"{}\"", w.title))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        [only] => Ok(only),
        several if processes.len() == 1 && processes[0].is_some() => Ok(several
            .iter()
            .copied()
            .max_by_key(|w| u64::from(w.width) * u64::from(w.height))
            .unwrap_or(several[0])),
        several => Err(CaptureError::NoWindow(format!(
            "{} Roblox Studio windows show a place named \"{place}\", so the window cannot tell which session this is. Rename the place (game.Name) in one of them, or close the other, and retry.",
            several.len()
        ))),
    }
}

/// Lists the top-level windows, chooses the session's Studio window for `place` and captures it.
pub fn capture_studio_window(place: &str) -> Result<Frame, CaptureError> {
    #[cfg(any(windows, target_os = "macos"))]
    use os as backend;
    #[cfg(target_os = "linux")]
    use x11 as backend;
    #[cfg(any(target_os = "linux", windows, target_os = "macos"))]
    {
        let windows = backend::windows()?;
        let window = choose(&windows, place)?;
        let (width, height, rgba) = backend::capture(window)?;
        Ok(Frame {
            width,
            height,
            rgba,
            title: window.title.clone(),
        })
    }
    #[cfg(not(any(target_os = "linux", windows, target_os = "macos")))]
    {
        let _ = place;
        Err(CaptureError::Unavailable(
            "Capturing the Studio window is supported on Windows, macOS and Linux (X11) only.".to_owned(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(id: u32, title: &str, process: &str, pid: u32, size: (u32, u32)) -> WindowInfo {
        WindowInfo {
            id,
            title: title.to_owned(),
            process: process.to_owned(),
            pid: Some(pid),
            width: size.0,
            height: size.1,
        }
    }

    fn desktop() -> Vec<WindowInfo> {
        vec![
            window(1, "Terminal", "gnome-terminal", 10, (800, 600)),
            window(2, "Baseplate - Roblox Studio", "RobloxStudioBeta.exe", 20, (1920, 1040)),
            window(3, "Obby.rbxl - Roblox Studio", "RobloxStudioBeta.exe", 30, (1600, 900)),
            window(4, "Roblox Studio docs - Firefox", "firefox", 40, (1200, 800)),
            window(5, "Racing* - Roblox Studio", "RobloxStudioBeta.exe", 50, (1280, 720)),
        ]
    }

    #[test]
    fn the_studio_whose_title_names_the_place_is_chosen_among_several() {
        let windows = desktop();
        assert_eq!(choose(&windows, "Baseplate").map(|w| w.id), Ok(2));
        // a local file's title shows its extension; unsaved changes add a star
        assert_eq!(choose(&windows, "Obby").map(|w| w.id), Ok(3));
        assert_eq!(choose(&windows, "Obby.rbxl").map(|w| w.id), Ok(3));
        assert_eq!(choose(&windows, "Racing").map(|w| w.id), Ok(5));
    }

    #[test]
    fn another_places_studio_is_never_taken() {
        let windows = desktop();
        let Err(CaptureError::NoWindow(message)) = choose(&windows, "Castle") else {
            panic!("expected no window");
        };
        assert!(message.contains("\"Castle\""), "{message}");
        assert!(message.contains("\"Baseplate - Roblox Studio\""), "{message}");
        // a browser tab mentioning Roblox Studio is not a Studio window
        assert!(!message.contains("Firefox"), "{message}");
        // a substring of another place's name is not that place
        assert!(choose(&windows, "Base").is_err());
    }

    #[test]
    fn studio_is_known_by_its_process_as_each_platform_names_it() {
        for process in ["RobloxStudioBeta.exe", "RobloxStudio", "Roblox Studio", "ROBLOX STUDIO"] {
            assert!(is_studio(&window(1, "Untitled", process, 1, (800, 600))), "{process}");
        }
        assert!(!is_studio(&window(1, "Untitled", "Roblox Player", 1, (800, 600))));
    }

    #[test]
    fn no_studio_at_all_says_so() {
        let windows = vec![window(1, "Terminal", "bash", 1, (800, 600))];
        let Err(CaptureError::NoWindow(message)) = choose(&windows, "Baseplate") else {
            panic!("expected no window");
        };
        assert!(message.contains("No Roblox Studio window is open"), "{message}");
        assert!(matches!(choose(&[], "Baseplate"), Err(CaptureError::NoWindow(_))));
    }

    #[test]
    fn minimised_windows_are_skipped_and_one_studios_largest_window_wins() {
        let windows = vec![
            window(1, "Baseplate - Roblox Studio", "RobloxStudioBeta.exe", 20, (0, 0)),
            window(2, "Baseplate - Roblox Studio", "RobloxStudioBeta.exe", 20, (400, 300)),
            window(3, "Baseplate - Roblox Studio", "RobloxStudioBeta.exe", 20, (1920, 1040)),
        ];
        assert_eq!(choose(&windows, "Baseplate").map(|w| w.id), Ok(3));
        assert!(choose(&windows[..1], "Baseplate").is_err());
    }

    #[test]
    fn two_studios_showing_the_same_place_are_ambiguous() {
        let windows = vec![
            window(1, "Baseplate - Roblox Studio", "RobloxStudioBeta.exe", 20, (1920, 1040)),
            window(2, "Baseplate - Roblox Studio", "RobloxStudioBeta.exe", 21, (1920, 1040)),
        ];
        let Err(CaptureError::NoWindow(message)) = choose(&windows, "Baseplate") else {
            panic!("expected ambiguity");
        };
        assert!(message.contains("2 Roblox Studio windows"), "{message}");
    }
}

//! Which Studio to start and what to tell it: the executable, found as the person's Studio
//! finds itself (or named by `STUDIO_BRIDGE_STUDIO`), and only the arguments Studio
//! documents (Roblox/creator-docs, `content/en-us/studio/command-line-interface.md`):
//! "Any arguments not documented here are for internal use only and are subject to change
//! without notice."

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Names the Studio executable to start, over any found installation (a test's stand-in,
/// a Studio under Wine, a second install).
pub const STUDIO_VARIABLE: &str = "STUDIO_BRIDGE_STUDIO";

/// What Studio opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A local `.rbxl` / `.rbxlx` file, by its absolute path (`--task EditFile
    /// --localPlaceFile`: "Absolute path to a local .rbxl or .rbxlx place file").
    File(PathBuf),
    /// A published place (`--task EditPlace`, or `EditPlaceRevision` with a version).
    Published {
        place: u64,
        universe: u64,
        version: Option<u64>,
    },
}

impl Place {
    /// How a person names it: the file, or `place P (universe U)`.
    pub fn describe(&self) -> String {
        match self {
            Place::File(path) => path.display().to_string(),
            Place::Published {
                place,
                universe,
                version,
            } => match version {
                Some(v) => format!("place {place} version {v} (universe {universe})"),
                None => format!("place {place} (universe {universe})"),
            },
        }
    }

    /// The place's `.lock` file, for a local file.
    pub fn lock(&self) -> Option<PathBuf> {
        match self {
            Place::File(path) => Some(super::lock_path(path)),
            Place::Published { .. } => None,
        }
    }
}

/// A script to open once the place is open: its path in the DataModel as the command line
/// takes it (`/` separators, "absolute require-by-string semantics":
/// `Workspace/MyFolder/MyScript`), and a line to highlight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptToOpen {
    pub path: String,
    pub line: Option<u32>,
}

impl ScriptToOpen {
    /// `PATH[:LINE]`, where PATH is a studio-bridge path (`ServerScriptService.Main`,
    /// `game.Workspace.Door`) or already `/`-separated.
    pub fn parse(text: &str) -> Result<ScriptToOpen, String> {
        let (path, line) = match text.rsplit_once(':') {
            Some((path, line)) if !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit()) => {
                let line: u32 = line
                    .parse()
                    .ok()
                    .filter(|l| *l >= 1)
                    .ok_or_else(|| format!("the line in {text:?} must be a number from 1"))?;
                (path, Some(line))
            }
            _ => (text, None),
        };
        let path = path
            .strip_prefix("game.")
            .or_else(|| path.strip_prefix("game/"))
            .unwrap_or(path);
        let path = if path.contains('/') {
            path.to_owned()
        } else {
            path.replace('.', "/")
        };
        if path.is_empty() || path.split('/').any(str::is_empty) {
            return Err(format!(
                "{text:?} is not a script path: give it as ServerScriptService.Main or ServerScriptService/Main, with :LINE to go to a line"
            ));
        }
        Ok(ScriptToOpen { path, line })
    }
}

/// The arguments that open `place` for editing, and `script` in it.
pub fn open_arguments(place: &Place, script: Option<&ScriptToOpen>) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    match place {
        Place::File(path) => {
            args.extend(["--task".into(), "EditFile".into(), "--localPlaceFile".into()]);
            args.push(path.as_os_str().to_owned());
        }
        Place::Published {
            place,
            universe,
            version,
        } => {
            let task = if version.is_some() {
                "EditPlaceRevision"
            } else {
                "EditPlace"
            };
            args.extend(["--task".into(), task.into()]);
            args.extend(["--placeId".into(), place.to_string().into()]);
            args.extend(["--universeId".into(), universe.to_string().into()]);
            if let Some(version) = version {
                args.extend(["--placeVersion".into(), version.to_string().into()]);
            }
        }
    }
    if let Some(script) = script {
        args.extend(["--openScriptPath".into(), script.path.clone().into()]);
        if let Some(line) = script.line {
            // "--endLine: Ending line of the highlight range. 1-based and exclusive."
            args.extend(["--startLine".into(), line.to_string().into()]);
            args.extend(["--endLine".into(), (line + 1).to_string().into()]);
        }
    }
    args
}

/// The arguments that run `script` (an absolute `.luau` path) in the local place `file`,
/// write its output to `output` and quit.
pub fn run_arguments(file: &Path, script: &Path, output: &Path) -> Vec<OsString> {
    vec![
        "--task".into(),
        "RunScript".into(),
        "--localPlaceFile".into(),
        file.as_os_str().to_owned(),
        "--runScriptFile".into(),
        script.as_os_str().to_owned(),
        "--outputFile".into(),
        output.as_os_str().to_owned(),
        "--quitAfterExecution".into(),
    ]
}

/// No Studio was found; `looked` says where, for the `not_found` error.
#[derive(Debug)]
pub struct NotFound {
    pub looked: Vec<String>,
}

impl NotFound {
    pub fn message(&self) -> String {
        format!(
            "Roblox Studio was not found (looked at: {}). Install Studio, or set {STUDIO_VARIABLE} to its executable.",
            self.looked.join("; ")
        )
    }
}

/// The Studio executable: `STUDIO_BRIDGE_STUDIO`, else the newest installed Studio
/// (Windows: the newest `%LOCALAPPDATA%\Roblox\Versions\*\RobloxStudioBeta.exe`, then where
/// Studio's registry key points; macOS: `/Applications/RobloxStudio.app`, then
/// `~/Applications`), found as `roblox_install` finds it.
pub fn locate() -> Result<PathBuf, NotFound> {
    let mut looked = Vec::new();
    if let Some(named) = std::env::var_os(STUDIO_VARIABLE) {
        let path = PathBuf::from(named);
        if path.is_file() {
            return Ok(path);
        }
        looked.push(format!("{STUDIO_VARIABLE}={} (no such file)", path.display()));
        return Err(NotFound { looked });
    }
    looked.push(format!("{STUDIO_VARIABLE} (not set)"));
    if cfg!(windows)
        && let Some(local) = dirs::data_local_dir()
    {
        let versions = local.join("Roblox").join("Versions");
        if let Some(newest) = newest_in_versions(&versions) {
            return Ok(newest);
        }
        looked.push(format!("{}\\*\\RobloxStudioBeta.exe", versions.display()));
    }
    match roblox_install::RobloxStudio::locate() {
        Ok(studio) if studio.application_path().is_file() => return Ok(studio.application_path().to_owned()),
        Ok(studio) => looked.push(studio.application_path().display().to_string()),
        Err(error) => looked.push(format!("Roblox's install ({error})")),
    }
    if cfg!(target_os = "macos")
        && let Some(home) = dirs::home_dir()
    {
        let app = home.join("Applications/RobloxStudio.app/Contents/MacOS/RobloxStudio");
        if app.is_file() {
            return Ok(app);
        }
        looked.push(app.display().to_string());
    }
    Err(NotFound { looked })
}

/// The most recently modified `Versions\<version>\RobloxStudioBeta.exe` (Studio's updater
/// adds a folder per version and may leave old ones).
fn newest_in_versions(versions: &Path) -> Option<PathBuf> {
    std::fs::read_dir(versions)
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| entry.path().join("RobloxStudioBeta.exe"))
        .filter_map(|exe| Some((exe.metadata().ok()?.modified().ok()?, exe)))
        .max_by_key(|(modified, _)| *modified)
        .map(|(_, exe)| exe)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: Vec<OsString>) -> Vec<String> {
        args.into_iter().map(|a| a.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn each_target_is_the_documented_task() {
        let file = strings(open_arguments(&Place::File("/p/My Game.rbxl".into()), None));
        assert_eq!(file, ["--task", "EditFile", "--localPlaceFile", "/p/My Game.rbxl"]);
        let place = Place::Published {
            place: 74265016723074,
            universe: 7127583708,
            version: None,
        };
        let script = ScriptToOpen::parse("ServerScriptService.Main:12").unwrap();
        assert_eq!(
            strings(open_arguments(&place, Some(&script))),
            [
                "--task",
                "EditPlace",
                "--placeId",
                "74265016723074",
                "--universeId",
                "7127583708",
                "--openScriptPath",
                "ServerScriptService/Main",
                "--startLine",
                "12",
                "--endLine",
                "13"
            ]
        );
        let revision = Place::Published {
            place: 1,
            universe: 2,
            version: Some(3),
        };
        assert_eq!(
            strings(open_arguments(&revision, None)),
            [
                "--task",
                "EditPlaceRevision",
                "--placeId",
                "1",
                "--universeId",
                "2",
                "--placeVersion",
                "3"
            ]
        );
        assert_eq!(
            strings(run_arguments(
                Path::new("/p/a.rbxl"),
                Path::new("/t/s.luau"),
                Path::new("/t/o.log")
            )),
            [
                "--task",
                "RunScript",
                "--localPlaceFile",
                "/p/a.rbxl",
                "--runScriptFile",
                "/t/s.luau",
                "--outputFile",
                "/t/o.log",
                "--quitAfterExecution"
            ]
        );
    }

    #[test]
    fn script_paths_take_either_separator_and_an_optional_line() {
        let parsed = ScriptToOpen::parse("game.Workspace.Door").unwrap();
        assert_eq!(parsed.path, "Workspace/Door");
        assert_eq!(parsed.line, None);
        let parsed = ScriptToOpen::parse("ServerScriptService/Game.Loop:3").unwrap();
        assert_eq!(parsed.path, "ServerScriptService/Game.Loop");
        assert_eq!(parsed.line, Some(3));
        assert!(
            ScriptToOpen::parse("Workspace..Door")
                .unwrap_err()
                .contains("not a script path")
        );
        assert!(ScriptToOpen::parse("Workspace.Door:0").unwrap_err().contains("from 1"));
    }
}

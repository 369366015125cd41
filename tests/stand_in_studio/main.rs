//! TEST-ONLY: a stand-in for the Roblox Studio executable, for the tests of `open`, `run`
//! and `close` (tests/studio_launch.rs). studio-bridge starts it as it would start Studio
//! (`STUDIO_BRIDGE_STUDIO` names it), so it takes exactly the arguments Studio documents
//! (Roblox/creator-docs, `content/en-us/studio/command-line-interface.md`), case-insensitive
//! as the page says, and refuses any other (exit 2): a test passes only if studio-bridge
//! speaks Studio's documented command line. Then it starts the Lune test Studio
//! (tests/lune/studio.luau) with the installed plugin on that place, writes the place's
//! `.lock` while it has the place open, and removes it when asked to quit (SIGTERM).
//!
//! Its environment (set by the test, inherited through studio-bridge):
//! - `STUDIO_BRIDGE_STAND_IN_PORT`: the bridge port the plugin connects to;
//! - `STUDIO_BRIDGE_STAND_IN_RBXM`: the plugin model (the installed, paired plugin);
//! - `LUNE`: the lune binary (default `lune` on PATH);
//! - `STUDIO_BRIDGE_STAND_IN_MODE`: `hang` (never loads the place, ignores SIGTERM),
//!   `crash` (exits 3 a moment after its plugin started, leaving its lock), `wedge` (its
//!   plugin stops a moment after it started, the process runs on: a frozen Studio),
//!   `slow=MS` (waits before loading), `no-plugin` (no studio-bridge plugin loads), or unset;
//! - `STUDIO_BRIDGE_STAND_IN_ARGS`: a file each start appends its arguments to, one line.

#[cfg(unix)]
fn main() {
    unix::main();
}

#[cfg(not(unix))]
fn main() {
    eprintln!("the stand-in Studio runs on Unix only (the tests that use it are Unix-only)");
    std::process::exit(2);
}

#[cfg(unix)]
mod unix {
    use std::collections::HashMap;
    use std::io::Write as _;
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, ExitCode, Stdio};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    /// Documented arguments that take a value.
    const VALUED: &[&str] = &[
        "task",
        "placeid",
        "universeid",
        "placeversion",
        "targetinstanceid",
        "annotationid",
        "localplacefile",
        "openscriptpath",
        "openscriptfromid",
        "startline",
        "endline",
        "startcharacter",
        "endcharacter",
        "runscriptfile",
        "outputfile",
        "assetid",
        "api",
        "fullapi",
        "apiv2",
    ];
    /// Documented arguments without a value.
    const SWITCHES: &[&str] = &["quitafterexecution"];

    static QUIT: AtomicBool = AtomicBool::new(false);

    extern "C" fn on_term(_: libc::c_int) {
        QUIT.store(true, Ordering::SeqCst);
    }

    fn refuse(message: &str) -> ! {
        eprintln!("stand-in Studio: {message}");
        std::process::exit(2);
    }

    /// The arguments by lower-cased name, and the positional file if any.
    fn parse(args: &[String]) -> (HashMap<String, String>, Option<String>) {
        let mut named = HashMap::new();
        let mut positional = None;
        let mut i = 0;
        while i < args.len() {
            let arg = &args[i];
            if let Some(name) = arg.strip_prefix("--") {
                let name = name.to_ascii_lowercase();
                if SWITCHES.contains(&name.as_str()) {
                    named.insert(name, String::new());
                    i += 1;
                } else if VALUED.contains(&name.as_str()) {
                    let Some(value) = args.get(i + 1) else {
                        refuse(&format!("--{name} needs a value"));
                    };
                    if named.insert(name.clone(), value.clone()).is_some() {
                        refuse(&format!("--{name} given twice"));
                    }
                    i += 2;
                } else {
                    refuse(&format!("unknown argument {arg}"));
                }
            } else if positional.is_none() && named.is_empty() {
                positional = Some(arg.clone());
                i += 1;
            } else {
                refuse(&format!("unexpected argument {arg}"));
            }
        }
        (named, positional)
    }

    fn absolute_file(value: &str, what: &str, extensions: &[&str]) -> PathBuf {
        let path = PathBuf::from(value);
        if !path.is_absolute() {
            refuse(&format!("{what} must be an absolute path, got {value}"));
        }
        let extension = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or_default()
            .to_ascii_lowercase();
        if !extensions.contains(&extension.as_str()) {
            refuse(&format!(
                "{what} must be a {} file, got {value}",
                extensions.join(" or ")
            ));
        }
        if !path.is_file() {
            refuse(&format!("{what} {value} does not exist"));
        }
        path
    }

    fn number(named: &HashMap<String, String>, name: &str) -> Option<u64> {
        named.get(name).map(|v| {
            v.parse()
                .unwrap_or_else(|_| refuse(&format!("--{name} must be a number, got {v}")))
        })
    }

    /// What to open and run, checked against the documented tasks.
    struct Launch {
        place: Option<PathBuf>,
        run: Option<(PathBuf, Option<PathBuf>, bool)>,
    }

    fn checked(named: &HashMap<String, String>, positional: Option<String>) -> Launch {
        let allowed = |names: &[&str]| {
            for name in named.keys() {
                if !names.contains(&name.as_str()) {
                    refuse(&format!("--{name} is not an argument of this task"));
                }
            }
        };
        if let Some(file) = positional {
            allowed(&[]);
            return Launch {
                place: Some(absolute_file(&file, "the place file", &["rbxl", "rbxlx"])),
                run: None,
            };
        }
        let Some(task) = named.get("task") else {
            refuse("no --task and no place file");
        };
        let published = |version: bool| {
            number(named, "placeid").unwrap_or_else(|| refuse("--placeId is required"));
            number(named, "universeid").unwrap_or_else(|| refuse("--universeId is required"));
            if version {
                number(named, "placeversion").unwrap_or_else(|| refuse("--placeVersion is required"));
            }
        };
        let script_args = [
            "openscriptpath",
            "openscriptfromid",
            "startline",
            "endline",
            "startcharacter",
            "endcharacter",
        ];
        if ["startline", "endline", "startcharacter", "endcharacter"]
            .iter()
            .any(|n| named.contains_key(*n))
            && !named.contains_key("openscriptpath")
            && !named.contains_key("openscriptfromid")
        {
            refuse("a highlight needs --openScriptPath or --openScriptFromId");
        }
        match task.to_ascii_lowercase().as_str() {
            "editfile" => {
                allowed(&["task", "localplacefile"]);
                let file = named
                    .get("localplacefile")
                    .unwrap_or_else(|| refuse("--localPlaceFile is required"));
                Launch {
                    place: Some(absolute_file(file, "--localPlaceFile", &["rbxl", "rbxlx"])),
                    run: None,
                }
            }
            "editplace" | "editplacerevision" => {
                let revision = task.eq_ignore_ascii_case("editplacerevision");
                let mut names = vec!["task", "placeid", "universeid", "targetinstanceid", "annotationid"];
                names.extend(script_args);
                if revision {
                    names.push("placeversion");
                }
                allowed(&names);
                published(revision);
                Launch { place: None, run: None }
            }
            "runscript" => {
                allowed(&[
                    "task",
                    "runscriptfile",
                    "outputfile",
                    "quitafterexecution",
                    "localplacefile",
                    "placeid",
                    "universeid",
                ]);
                if named.contains_key("placeid") || named.contains_key("universeid") {
                    published(false);
                }
                let script = named
                    .get("runscriptfile")
                    .unwrap_or_else(|| refuse("--runScriptFile is required"));
                let script = absolute_file(script, "--runScriptFile", &["lua", "luau"]);
                let place = named
                    .get("localplacefile")
                    .map(|file| absolute_file(file, "--localPlaceFile", &["rbxl", "rbxlx"]));
                Launch {
                    place,
                    run: Some((
                        script,
                        named.get("outputfile").map(PathBuf::from),
                        named.contains_key("quitafterexecution"),
                    )),
                }
            }
            other => refuse(&format!("unknown --task {other}")),
        }
    }

    fn lock_of(place: &Path) -> PathBuf {
        let mut name = place.as_os_str().to_owned();
        name.push(".lock");
        PathBuf::from(name)
    }

    fn start_lune(launch: &Launch, mode: &str) -> Child {
        let repo = env!("CARGO_MANIFEST_DIR");
        let lune = std::env::var("LUNE").unwrap_or_else(|_| "lune".into());
        let port = std::env::var("STUDIO_BRIDGE_STAND_IN_PORT")
            .unwrap_or_else(|_| refuse("STUDIO_BRIDGE_STAND_IN_PORT is not set"));
        let mut command = Command::new(lune);
        command
            .current_dir(repo)
            .args(["run", "tests/lune/studio.luau", "--", "--port", &port]);
        if let Ok(rbxm) = std::env::var("STUDIO_BRIDGE_STAND_IN_RBXM") {
            command.args(["--rbxm", &rbxm]);
        }
        if mode == "no-plugin" {
            command.arg("--no-plugin");
        }
        if let Some(place) = &launch.place {
            command.arg("--place").arg(place);
        }
        if let Some((script, output, quit)) = &launch.run {
            command.arg("--run-script").arg(script);
            if let Some(output) = output {
                command.arg("--output-file").arg(output);
            }
            if *quit {
                command.arg("--quit-after-execution");
            }
        }
        command
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| refuse(&format!("could not start lune: {e}")))
    }

    pub fn main() {
        let args: Vec<String> = std::env::args().skip(1).collect();
        if let Ok(log) = std::env::var("STUDIO_BRIDGE_STAND_IN_ARGS")
            && let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(log)
        {
            let _ = writeln!(file, "{}", args.join(" "));
        }
        let (named, positional) = parse(&args);
        let launch = checked(&named, positional);
        let mode = std::env::var("STUDIO_BRIDGE_STAND_IN_MODE").unwrap_or_default();
        if mode == "hang" {
            // SAFETY: setting a signal's disposition to ignore touches no memory of ours.
            unsafe {
                libc::signal(libc::SIGTERM, libc::SIG_IGN);
            }
            loop {
                std::thread::sleep(Duration::from_secs(60));
            }
        }
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(libc::SIGTERM, on_term as *const () as libc::sighandler_t);
        }
        if let Some(ms) = mode.strip_prefix("slow=").and_then(|ms| ms.parse().ok()) {
            std::thread::sleep(Duration::from_millis(ms));
        }
        let lock = launch.place.as_deref().map(lock_of);
        if let Some(lock) = &lock {
            if lock.exists() {
                refuse(&format!(
                    "{} is locked: the place is open in another Studio",
                    lock.display()
                ));
            }
            std::fs::write(lock, std::process::id().to_string()).unwrap_or_else(|e| refuse(&format!("lock: {e}")));
        }
        let mut lune = start_lune(&launch, &mode);
        let crash_at = (mode == "crash").then(|| std::time::Instant::now() + Duration::from_millis(2500));
        let wedge_at = (mode == "wedge").then(|| std::time::Instant::now() + Duration::from_millis(2500));
        let code = loop {
            if wedge_at.is_some_and(|at| std::time::Instant::now() >= at) {
                // The plugin goes quiet; the process (and its lock) stay.
                let _ = lune.kill();
                let _ = lune.wait();
                while !QUIT.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(50));
                }
                break ExitCode::SUCCESS;
            }
            if QUIT.load(Ordering::SeqCst) {
                let _ = lune.kill();
                let _ = lune.wait();
                break ExitCode::SUCCESS;
            }
            if crash_at.is_some_and(|at| std::time::Instant::now() >= at) {
                let _ = lune.kill();
                let _ = lune.wait();
                // A crash leaves the lock behind.
                std::process::exit(3);
            }
            if let Ok(Some(status)) = lune.try_wait() {
                break if status.success() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                };
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        if let Some(lock) = &lock {
            let _ = std::fs::remove_file(lock);
        }
        std::process::exit(if code == ExitCode::SUCCESS { 0 } else { 1 });
    }
}

//! `studio-bridge doctor`: what stands between an agent and Studio on this machine, and the
//! fix for each problem found.
//!
//! It checks, in order: who owns the bridge port (a studio-bridge host, with its version
//! and pid from `/v1/health`; another program; nobody), the peer token file, the plugin
//! pairing secret (where it lives and its permissions, never its value), whether the host
//! proves it holds that secret as the plugin requires (a port squatter cannot), Studio's plugins
//! folder, the installed plugin (whether it is this binary's plugin and carries the
//! current secret), when a host runs, the sessions connected to it (joined as a peer, as
//! `studio-bridge sessions` does), and the project's sourcemap (`--sourcemap`, else
//! `sourcemap.json` here) and how many scripts it maps to files, and whether the project's
//! selene and stylua are found (script writes' diagnostics and `format`). Each check is ok, warn (worth knowing, nothing
//! to fix) or problem (with the exact command that fixes it); the exit code is 1 when any
//! check is a problem. Nothing here hosts the bridge or writes a file.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::ArgMatches;
use serde::Serialize;

use super::HostOptions;
use crate::bridge::peer::ConnectError;
use crate::bridge::probe::{self, Owner};
use crate::bridge::{self, Mode, RefusedPlugin, SessionInfo, SessionList, StartError, pairing, token};
use crate::human::render::Style;
use crate::plugin_install::{self, PLUGIN_FILE_NAME, PLUGIN_RBXM};
use crate::protocol::SERVER_VERSION;
use crate::sourcemap;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// Worth knowing, nothing to fix (no host running yet, no Studio connected yet).
    Warn,
    /// Something that keeps an agent from Studio; `fix` says what to run.
    Problem,
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    /// `false` only for a problem.
    pub ok: bool,
    pub detail: String,
    /// The command (or step) that fixes a problem.
    pub fix: Option<String>,
}

impl Check {
    fn ok(name: &'static str, detail: String) -> Check {
        Check {
            name,
            status: Status::Ok,
            ok: true,
            detail,
            fix: None,
        }
    }

    fn warn(name: &'static str, detail: String) -> Check {
        Check {
            name,
            status: Status::Warn,
            ok: true,
            detail,
            fix: None,
        }
    }

    fn problem(name: &'static str, detail: String, fix: String) -> Check {
        Check {
            name,
            status: Status::Problem,
            ok: false,
            detail,
            fix: Some(fix),
        }
    }
}

/// The whole report, as `--json` prints it.
#[derive(Debug, Serialize)]
pub struct Report {
    /// `false` when any check is a problem (and the exit code is 1).
    pub ok: bool,
    pub version: &'static str,
    pub port: u16,
    pub checks: Vec<Check>,
    /// The sessions connected now, when a host runs (else empty).
    pub sessions: Vec<SessionInfo>,
}

/// `studio-bridge doctor [--json] [--plugin PATH] [--port N]`.
pub async fn run(matches: &ArgMatches, options: &HostOptions) -> ExitCode {
    let plugin_out = matches.get_one::<PathBuf>("plugin").cloned();
    let report = diagnose(options, plugin_out.as_deref()).await;
    let text = if matches.get_flag("json") {
        serde_json::to_string(&report)
            .map(|json| json + "\n")
            .unwrap_or_default()
    } else {
        human(&report, Style::stdout())
    };
    let mut stdout = std::io::stdout().lock();
    if stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()).is_err() || !report.ok {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Runs every check. `plugin_out` is `--plugin` (where `install-plugin --out` wrote it).
pub async fn diagnose(options: &HostOptions, plugin_out: Option<&Path>) -> Report {
    let port = options.port;
    let owner = probe::probe(port).await;
    let hosted = matches!(owner, Owner::Bridge { .. });
    let pairing_off = matches!(owner, Owner::Bridge { pairing_off: true, .. });
    let mut checks = vec![port_check(port, &owner)];
    if pairing_off {
        checks.push(Check::warn(
            "host-pairing",
            "the host accepts plugins without the pairing secret (it runs with --allow-unpaired): any program on this machine can connect to it as a Studio".into(),
        ));
    }

    let token_path = token::token_path(port);
    let token_file = inspect_private_file(&token_path);
    let joined = match (&owner, &token_file) {
        (Owner::Bridge { .. }, FileState::Private(token)) => Some(list_sessions(options, token.clone()).await),
        _ => None,
    };
    checks.push(token_check(&token_path, &token_file, &owner, joined.as_ref()));

    let secret_path = pairing::secret_path();
    let secret = secret_path.as_deref().map(inspect_private_file);
    checks.push(relaxed(
        secret_check(secret_path.as_deref(), secret.as_ref()),
        pairing_off,
    ));
    if let (Owner::Bridge { .. }, Some(FileState::Private(secret))) = (&owner, secret.as_ref()) {
        checks.push(proof_check(port, probe::host_proof(port, secret).await));
    }

    let install = install_command(plugin_out);
    let file = match plugin_out {
        Some(out) => {
            let file = plugin_install::target_file(out);
            let dir = file.parent().unwrap_or(out).to_path_buf();
            checks.push(Check::ok(
                "plugins-folder",
                format!("{} (from --plugin)", dir.display()),
            ));
            Some(file)
        }
        None => match plugin_install::studio_plugins_dir() {
            Ok(dir) => {
                checks.push(if dir.is_dir() {
                    Check::ok(
                        "plugins-folder",
                        format!("Studio's plugins folder is {}", dir.display()),
                    )
                } else {
                    Check::warn(
                        "plugins-folder",
                        format!(
                            "Studio's plugins folder is {}, which does not exist yet (install-plugin creates it)",
                            dir.display()
                        ),
                    )
                });
                Some(dir.join(PLUGIN_FILE_NAME))
            }
            Err(reason) => {
                checks.push(Check::problem(
                    "plugins-folder",
                    format!("Roblox Studio's plugins folder was not found on this machine ({reason})"),
                    "run `studio-bridge install-plugin` where Studio is installed, or `studio-bridge install-plugin --out <Studio's plugins folder>` (Windows: %LOCALAPPDATA%\\Roblox\\Plugins, macOS: ~/Documents/Roblox/Plugins) and check it with `studio-bridge doctor --plugin <that folder>`".into(),
                ));
                None
            }
        },
    };
    if let Some(file) = file {
        let current = match &secret {
            Some(FileState::Private(secret) | FileState::TooOpen(secret, _)) => Some(secret.as_str()),
            _ => None,
        };
        checks.extend(
            plugin_checks(&file, current, &install)
                .into_iter()
                .map(|check| match check.name {
                    "pairing" => relaxed(check, pairing_off),
                    _ => check,
                }),
        );
    }

    let mut sessions = Vec::new();
    if hosted {
        match joined {
            Some(Ok(list)) => {
                checks.push(sessions_check(&list.sessions));
                if let Some(refused) = &list.refused {
                    checks.push(refused_check(refused));
                }
                sessions = list.sessions;
            }
            Some(Err(reason)) => checks.push(Check::problem(
                "sessions",
                format!("could not list the sessions through the host: {reason}"),
                restart_host(&owner),
            )),
            // No usable token: the token check already says why and what to do.
            None => {}
        }
    }
    checks.push(sourcemap_check(options.sourcemap().status()));
    let selene = &crate::luau::lint::SELENE;
    let stylua = &crate::luau::format::STYLUA;
    let config = if Path::new("selene.toml").is_file() {
        "this folder's selene.toml"
    } else {
        "studio-bridge's Roblox std (no selene.toml here)"
    };
    checks.push(luau_tool_check(
        selene.name,
        selene.find(),
        &format!("script writes carry its diagnostics, with {config}"),
        &format!("{}: script writes carry no diagnostics", selene.missing()),
    ));
    checks.push(luau_tool_check(
        stylua.name,
        stylua.find(),
        "script_edit's format: true runs it",
        &format!("{}: script_edit's format: true fails", stylua.missing()),
    ));
    let key_path = crate::cloud::key::path();
    let key_file = key_path.as_deref().map(inspect_private_file);
    checks.push(cloud_key_check(
        std::env::var(crate::cloud::key::ENV).is_ok_and(|k| !k.trim().is_empty()),
        key_path.as_deref(),
        key_file.as_ref(),
    ));
    Report {
        ok: checks.iter().all(|c| c.ok),
        version: SERVER_VERSION,
        port,
        checks,
        sessions,
    }
}

/// The sourcemap this directory's `mcp` would read (TOOLS.md, "Your files"): none is
/// normal for a project without a sync tool; one that does not parse is a problem.
fn sourcemap_check(status: sourcemap::Status) -> Check {
    const REGENERATE: &str = "rojo sourcemap default.project.json -o sourcemap.json";
    match status {
        sourcemap::Status::Loaded { path, scripts } => Check::ok(
            "sourcemap",
            format!(
                "{} maps {} to files: results name them, and script_edit of them is refused (edit the file)",
                path.display(),
                match scripts {
                    1 => "1 script".to_owned(),
                    n => format!("{n} scripts"),
                }
            ),
        ),
        sourcemap::Status::Missing(path) => Check::warn(
            "sourcemap",
            format!(
                "no sourcemap at {}: results name Studio paths only (a Rojo project writes one with `{REGENERATE}`; or pass --sourcemap PATH)",
                path.display()
            ),
        ),
        sourcemap::Status::Bad { path, problem } => Check::problem(
            "sourcemap",
            format!("the sourcemap {}: {problem}", path.display()),
            format!("write it again: `{REGENERATE}` (add --watch to keep it current)"),
        ),
    }
}

/// The project's selene or stylua, which `mcp` runs in this folder (src/luau/tool.rs): where
/// it was found and what it does, or what is missing without it. A warning at most: both are
/// optional.
fn luau_tool_check(name: &'static str, found: Option<PathBuf>, does: &str, without: &str) -> Check {
    match found {
        Some(path) => Check::ok(name, format!("{}: {does}", path.display())),
        None => Check::warn(name, without.to_owned()),
    }
}

/// Where the Open Cloud API key comes from (docs/cloud.md). No key is normal: the cloud
/// tools are then not offered. A saved key others can read, or one that cannot be read, is
/// a problem; the key itself is never printed.
fn cloud_key_check(from_env: bool, path: Option<&Path>, file: Option<&FileState>) -> Check {
    let name = "open-cloud";
    if from_env {
        return Check::ok(
            name,
            format!(
                "an Open Cloud API key comes from {} (it wins over a saved one): the cloud tools are offered",
                crate::cloud::key::ENV
            ),
        );
    }
    let shown = path.map_or_else(|| "the config directory".to_owned(), |p| p.display().to_string());
    match file {
        Some(FileState::Private(_)) => Check::ok(
            name,
            format!("an Open Cloud API key is saved in {shown}: the cloud tools are offered"),
        ),
        Some(FileState::TooOpen(_, mode)) => Check::problem(
            name,
            format!("the Open Cloud API key in {shown} can be read by other users (mode {mode:o})"),
            format!("chmod 600 {shown}, or run `studio-bridge cloud logout` and `studio-bridge cloud login` again"),
        ),
        Some(FileState::Unreadable(why)) => Check::problem(
            name,
            format!("the Open Cloud API key in {shown} cannot be read: {why}"),
            "run `studio-bridge cloud logout`, then `studio-bridge cloud login`".into(),
        ),
        Some(FileState::Empty) => Check::problem(
            name,
            format!("{shown} holds no Open Cloud API key"),
            "run `studio-bridge cloud login`, or `studio-bridge cloud logout` to remove the file".into(),
        ),
        Some(FileState::Missing) | None => Check::ok(
            name,
            format!(
                "no Open Cloud API key, so the cloud tools are not offered (optional: {} or `studio-bridge cloud login`; docs/cloud.md)",
                crate::cloud::key::ENV
            ),
        ),
    }
}

/// What a private file (the token, the secret) looks like. Its content is only ever
/// compared, never printed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum FileState {
    Missing,
    Unreadable(String),
    Empty,
    /// Readable by this user only (always so where there are no Unix permissions).
    Private(String),
    /// Readable, but others may read it too: its mode.
    TooOpen(String, u32),
}

fn inspect_private_file(path: &Path) -> FileState {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text.trim().to_owned(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return FileState::Missing,
        Err(error) => return FileState::Unreadable(error.to_string()),
    };
    if text.is_empty() {
        return FileState::Empty;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        match std::fs::metadata(path) {
            Ok(meta) if meta.permissions().mode() & 0o077 != 0 => {
                return FileState::TooOpen(text, meta.permissions().mode() & 0o777);
            }
            Ok(_) => {}
            Err(error) => return FileState::Unreadable(error.to_string()),
        }
    }
    FileState::Private(text)
}

/// A pairing problem, as a warning when the running host does not require pairing: that
/// host accepts the plugin anyway, but one started without `--allow-unpaired` will not.
fn relaxed(check: Check, pairing_off: bool) -> Check {
    if !pairing_off || check.ok {
        return check;
    }
    Check {
        status: Status::Warn,
        ok: true,
        detail: format!(
            "{} (the running host accepts it anyway: it runs with --allow-unpaired; a host without that flag refuses it)",
            check.detail
        ),
        ..check
    }
}

/// What to tell the user about a host: its version and pid.
fn host_name(version: &str, pid: Option<u32>) -> String {
    match pid {
        Some(pid) => format!("studio-bridge {version} (pid {pid})"),
        None => format!("studio-bridge {version} (pid not reported: an older build)"),
    }
}

fn restart_host(owner: &Owner) -> String {
    match owner {
        Owner::Bridge { pid: Some(pid), .. } | Owner::IncompatibleBridge { pid: Some(pid), .. } => format!(
            "restart the host: stop studio-bridge (pid {pid}), e.g. `{}`, then start your agent (or `studio-bridge serve`) again",
            kill_command(*pid)
        ),
        _ => {
            "restart the studio-bridge host: quit the agent (or `studio-bridge serve`) hosting it, then start it again"
                .into()
        }
    }
}

fn kill_command(pid: u32) -> String {
    if cfg!(windows) {
        format!("taskkill /PID {pid}")
    } else {
        format!("kill {pid}")
    }
}

fn port_check(port: u16, owner: &Owner) -> Check {
    let addr = format!("127.0.0.1:{port}");
    match owner {
        Owner::Bridge { version, pid, .. } if version == SERVER_VERSION => {
            Check::ok("port", format!("{addr} is hosted by {}", host_name(version, *pid)))
        }
        Owner::Bridge { version, pid, .. } => Check::warn(
            "port",
            format!(
                "{addr} is hosted by {}, another build than this {SERVER_VERSION} (same protocol, so they work together)",
                host_name(version, *pid)
            ),
        ),
        Owner::IncompatibleBridge { version, protocol, pid } => Check::problem(
            "port",
            format!(
                "{addr} is held by {}, which speaks protocol {protocol}, not {}: this binary cannot join it",
                host_name(version, *pid),
                crate::protocol::PROTOCOL_VERSION
            ),
            format!("use one studio-bridge version everywhere: {}", restart_host(owner)),
        ),
        Owner::Other(found) => Check::problem(
            "port",
            format!("{addr} is held by another program, not studio-bridge ({found})"),
            format!(
                "stop the program listening on port {port} (find it with `{}`), or run studio-bridge on another port everywhere (--port or STUDIO_BRIDGE_PORT)",
                listener_command(port)
            ),
        ),
        Owner::Nobody => Check::warn(
            "port",
            format!(
                "nothing listens on {addr}: no studio-bridge host is running (your agent's `studio-bridge mcp`, or `studio-bridge serve`, hosts it)"
            ),
        ),
    }
}

/// The command that names the process listening on `port`, on this platform.
fn listener_command(port: u16) -> String {
    if cfg!(windows) {
        format!("netstat -ano | findstr :{port}")
    } else {
        format!("lsof -nP -iTCP:{port} -sTCP:LISTEN")
    }
}

/// Whether the host on the port proved it holds this user's pairing secret, as the plugin
/// requires before it serves anything (PROTOCOL.md, "Pairing is mutual").
fn proof_check(port: u16, proof: probe::HostProof) -> Check {
    match proof {
        probe::HostProof::Proven => Check::ok(
            "host-proof",
            "the host proved it holds this user's pairing secret (the plugin will serve it)".into(),
        ),
        probe::HostProof::Unproven(what) => Check::problem(
            "host-proof",
            format!(
                "127.0.0.1:{port} is held by a process that says it is studio-bridge but cannot prove it is this user's ({what}): the plugin serves it nothing. It may be another user's studio-bridge, a port forwarded from a container or WSL, or a program posing as one"
            ),
            format!(
                "stop the process listening on port {port} (find it with `{}`), or run your studio-bridge on another port (--port or STUDIO_BRIDGE_PORT, and the plugin's port setting)",
                listener_command(port)
            ),
        ),
    }
}

fn token_check(path: &Path, state: &FileState, owner: &Owner, joined: Option<&Result<SessionList, String>>) -> Check {
    let shown = path.display();
    let word = shell_word(path);
    let hosted = matches!(owner, Owner::Bridge { .. });
    match state {
        FileState::Missing if hosted => Check::problem(
            "token",
            format!(
                "{shown} is missing: other studio-bridge processes (a second agent, the CLI) cannot join the running host"
            ),
            restart_host(owner),
        ),
        FileState::Missing => Check::ok(
            "token",
            format!("{shown}: none, as expected with no host running (a host writes it at start)"),
        ),
        FileState::Unreadable(error) => Check::problem(
            "token",
            format!("{shown} cannot be read ({error})"),
            format!(
                "make it readable by you only (`chmod 600 {word}`), or {}",
                restart_host(owner)
            ),
        ),
        FileState::Empty => Check::problem("token", format!("{shown} is empty"), restart_host(owner)),
        FileState::TooOpen(_, mode) => Check::problem(
            "token",
            format!("{shown} is readable by other users (mode {mode:o}): they could drive your Studio"),
            format!("chmod 600 {word}"),
        ),
        FileState::Private(_) if !hosted => Check::warn(
            "token",
            format!("{shown} is left from a host that did not exit cleanly; the next host replaces it"),
        ),
        FileState::Private(_) => match joined {
            Some(Err(reason)) if reason.contains(REFUSED_PROOF) => Check::problem(
                "token",
                format!("{shown} (private) is not the running host's token: the host refused it"),
                restart_host(owner),
            ),
            Some(Err(reason)) if reason.contains(UNPROVEN_HOLDER) => Check::problem(
                "token",
                format!(
                    "the process holding the port answers /v1/health as studio-bridge but did not prove it holds {shown}: it is not your studio-bridge, and nothing was sent to it ({reason})"
                ),
                "stop that process (the `port` check names its pid where it says one), or use another port with --port"
                    .into(),
            ),
            _ => Check::ok("token", format!("{shown} (readable by you only)")),
        },
    }
}

fn secret_check(path: Option<&Path>, state: Option<&FileState>) -> Check {
    let (Some(path), Some(state)) = (path, state) else {
        return Check::problem(
            "secret",
            "this platform has no config directory for the plugin pairing secret".into(),
            "set STUDIO_BRIDGE_CONFIG_DIR to a folder only you can read, then run `studio-bridge install-plugin`"
                .into(),
        );
    };
    let shown = path.display();
    let word = shell_word(path);
    match state {
        FileState::Missing => Check::problem(
            "secret",
            format!("the plugin pairing secret ({shown}) does not exist: the host refuses every plugin"),
            "studio-bridge install-plugin".into(),
        ),
        FileState::Unreadable(error) => Check::problem(
            "secret",
            format!("the plugin pairing secret ({shown}) cannot be read ({error})"),
            format!(
                "make it readable by you (`chmod 600 {word}`), or make a new one: `studio-bridge install-plugin --rotate-secret`"
            ),
        ),
        FileState::Empty => Check::problem(
            "secret",
            format!("the plugin pairing secret ({shown}) is empty"),
            "studio-bridge install-plugin --rotate-secret".into(),
        ),
        FileState::TooOpen(_, mode) => Check::problem(
            "secret",
            format!("the plugin pairing secret ({shown}) is readable by other users (mode {mode:o})"),
            format!("chmod 600 {word} && studio-bridge install-plugin --rotate-secret"),
        ),
        FileState::Private(_) => Check::ok(
            "secret",
            format!("the plugin pairing secret is at {shown} (readable by you only; its value is never shown)"),
        ),
    }
}

/// The command that installs the plugin where doctor looked for it.
fn install_command(plugin_out: Option<&Path>) -> String {
    match plugin_out {
        Some(out) => format!("studio-bridge install-plugin --out {}", shell_word(out)),
        None => "studio-bridge install-plugin".into(),
    }
}

/// A path as one shell word: quoted when it holds spaces or quotes.
fn shell_word(path: &Path) -> String {
    let text = path.display().to_string();
    if text.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'') {
        format!("\"{}\"", text.replace('"', "\\\""))
    } else {
        text
    }
}

/// `plugin` (is it this binary's plugin?) and, when it can be read, `pairing` (does it
/// carry the current secret?). `current` is the secret; it is compared, never shown.
fn plugin_checks(file: &Path, current: Option<&str>, install: &str) -> Vec<Check> {
    let shown = file.display();
    let then = "then restart Studio (or reload plugins)";
    let bytes = match std::fs::read(file) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return vec![Check::problem(
                "plugin",
                format!("the studio-bridge plugin is not installed ({shown} does not exist)"),
                format!("{install}, {then}"),
            )];
        }
        Err(error) => {
            return vec![Check::problem(
                "plugin",
                format!("{shown} cannot be read ({error})"),
                format!("{install}, {then}"),
            )];
        }
    };
    let carried = plugin_install::secret_in_model(&bytes);
    // An install is the embedded model with the secret added; rebuilding that from the
    // secret it carries tells whether the rest is this binary's plugin, byte for byte.
    let expected = match &carried {
        Some(secret) => plugin_install::paired_model(secret).ok(),
        None => Some(PLUGIN_RBXM.to_vec()),
    };
    let mut checks = vec![if expected.as_deref() == Some(bytes.as_slice()) {
        Check::ok(
            "plugin",
            format!("{shown} is the plugin of this studio-bridge {SERVER_VERSION}"),
        )
    } else {
        Check::problem(
            "plugin",
            format!(
                "{shown} does not match this binary's plugin (an older studio-bridge installed it, or it was modified)"
            ),
            format!("{install}, {then}"),
        )
    }];
    checks.push(match (carried, current) {
        (None, _) => Check::problem(
            "pairing",
            "the installed plugin carries no pairing secret: the host refuses it".into(),
            format!("{install}, {then}"),
        ),
        (Some(_), None) => Check::problem(
            "pairing",
            "the installed plugin carries a pairing secret, but this machine has none to match it".into(),
            format!("{install}, {then}"),
        ),
        (Some(carried), Some(current)) if token::constant_time_eq(carried.as_bytes(), current.as_bytes()) => Check::ok(
            "pairing",
            "the installed plugin carries the current pairing secret".into(),
        ),
        (Some(_), Some(_)) => Check::problem(
            "pairing",
            "the installed plugin carries an older pairing secret (it was rotated since): the host refuses it".into(),
            format!("{install}, {then}"),
        ),
    });
    checks
}

/// How [`list_sessions`] says the host refused this user's proof of the token.
const REFUSED_PROOF: &str = "the host refused the token";
/// How [`list_sessions`] says the port's holder did not prove itself.
const UNPROVEN_HOLDER: &str = "the port's holder did not prove itself";

/// Joins the running host as a peer with `token` and lists its sessions.
async fn list_sessions(options: &HostOptions, token: String) -> Result<SessionList, String> {
    let mode = Mode::Remote {
        addr: format!("127.0.0.1:{}", options.port),
        token,
    };
    let joined = tokio::time::timeout(Duration::from_secs(10), async {
        let running = match bridge::start(options.bridge_options(mode)).await {
            Ok(running) => running,
            Err(StartError::Connect(ConnectError::Unauthorized)) => {
                return Err(REFUSED_PROOF.to_owned());
            }
            Err(StartError::Connect(error @ ConnectError::Unproven { .. })) => {
                return Err(format!("{UNPROVEN_HOLDER}: {error}"));
            }
            Err(error) => return Err(error.to_string()),
        };
        let listed = running.bridge.session_list(Duration::from_secs(4)).await;
        running.shutdown().await;
        listed.map_err(|error| error.message)
    })
    .await;
    joined.unwrap_or_else(|_| Err("the host did not answer within 10 s".into()))
}

/// The last plugin the host refused: a Studio open but not listed, and why.
fn refused_check(refused: &RefusedPlugin) -> Check {
    let ago = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
        .saturating_sub(refused.at_ms)
        / 1000;
    Check::problem(
        "refused",
        format!(
            "a Studio plugin (place {:?}) connected {ago} s ago and was refused: {}",
            refused.place_name, refused.why
        ),
        "reinstall the plugin with `studio-bridge install-plugin` and restart Studio (a plugin installed for another user, or before a rotated secret, is refused)".into(),
    )
}

fn sessions_check(sessions: &[SessionInfo]) -> Check {
    if sessions.is_empty() {
        return Check::warn(
            "sessions",
            "no Studio is connected: open Studio with the plugin installed (restart Studio after installing it)".into(),
        );
    }
    let listed: Vec<String> = sessions
        .iter()
        .map(|s| {
            format!(
                "{} ({}, {}, {:?}, {}, plugin {})",
                s.session_id,
                s.context.as_str(),
                s.state,
                s.place_name,
                s.status,
                s.plugin_version
            )
        })
        .collect();
    Check::ok(
        "sessions",
        format!("{} connected: {}", sessions.len(), listed.join("; ")),
    )
}

/// One line per check, a mark first; the fix under each problem.
pub fn human(report: &Report, style: Style) -> String {
    let mut out = String::new();
    for check in &report.checks {
        let mark = match check.status {
            Status::Ok => style.blue("ok     "),
            Status::Warn => style.yellow("warn   "),
            Status::Problem => style.red("problem"),
        };
        out.push_str(&format!("{mark} {:<14} {}\n", check.name, check.detail));
        if let Some(fix) = &check.fix {
            out.push_str(&format!("{:23}{} {fix}\n", "", style.bold("fix:")));
        }
    }
    let problems = report.checks.iter().filter(|c| !c.ok).count();
    out.push_str(&match problems {
        0 => "all is well\n".to_owned(),
        1 => "1 problem found\n".to_owned(),
        n => format!("{n} problems found\n"),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sb-doctor-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("file")
    }

    #[cfg(unix)]
    #[test]
    fn the_open_cloud_key_is_optional_private_and_never_shown() {
        let path = Path::new("/cfg/open-cloud-key");
        let secret = "SECRET-abcdefghijklmnopqrstuvwxyz".to_owned();
        assert_eq!(
            cloud_key_check(false, Some(path), Some(&FileState::Missing)).status,
            Status::Ok
        );
        let env = cloud_key_check(true, Some(path), Some(&FileState::TooOpen(secret.clone(), 0o644)));
        assert_eq!(env.status, Status::Ok, "the environment's key wins");
        let saved = cloud_key_check(false, Some(path), Some(&FileState::Private(secret.clone())));
        assert_eq!(saved.status, Status::Ok);
        let open = cloud_key_check(false, Some(path), Some(&FileState::TooOpen(secret.clone(), 0o644)));
        assert_eq!(open.status, Status::Problem);
        assert!(
            open.detail.contains("644") && open.fix.as_deref().unwrap().contains("chmod 600"),
            "{open:?}"
        );
        for check in [saved, open] {
            assert!(!check.detail.contains(&secret) && !check.fix.unwrap_or_default().contains(&secret));
        }
    }

    #[test]
    fn a_private_file_readable_by_others_is_too_open() {
        use std::os::unix::fs::PermissionsExt as _;
        let path = temp("open");
        std::fs::write(&path, "value\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(inspect_private_file(&path), FileState::TooOpen("value".into(), 0o644));
        let check = secret_check(Some(&path), Some(&inspect_private_file(&path)));
        assert_eq!(check.status, Status::Problem);
        assert!(
            check.fix.as_deref().unwrap_or_default().contains("chmod 600"),
            "{check:?}"
        );
        assert!(!check.detail.contains("value"), "the secret's value is never shown");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(inspect_private_file(&path), FileState::Private("value".into()));
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn a_luau_tool_is_named_where_found_and_a_warning_saying_what_is_lost_when_not() {
        let found = luau_tool_check("selene", Some(PathBuf::from("/tools/selene")), "lints", "none");
        assert_eq!(
            (found.status, found.detail.as_str()),
            (Status::Ok, "/tools/selene: lints")
        );
        let missing = luau_tool_check("stylua", None, "formats", "stylua not found: format fails");
        assert_eq!(missing.status, Status::Warn);
        assert!(missing.ok, "a warning, not a problem: {missing:?}");
        assert_eq!(missing.detail, "stylua not found: format fails");
    }

    #[test]
    fn a_missing_token_is_expected_without_a_host_and_a_problem_with_one() {
        let path = Path::new("/nowhere/38741.token");
        assert_eq!(
            token_check(path, &FileState::Missing, &Owner::Nobody, None).status,
            Status::Ok
        );
        let host = Owner::Bridge {
            version: SERVER_VERSION.into(),
            pid: Some(42),
            pairing_off: false,
        };
        let check = token_check(path, &FileState::Missing, &host, None);
        assert_eq!(check.status, Status::Problem);
        assert!(
            check.fix.as_deref().unwrap_or_default().contains("kill 42") || cfg!(windows),
            "{check:?}"
        );
    }

    #[test]
    fn human_output_marks_each_check_and_puts_the_fix_under_a_problem() {
        let report = Report {
            ok: false,
            version: SERVER_VERSION,
            port: 1,
            checks: vec![
                Check::ok("port", "fine".into()),
                Check::problem("plugin", "missing".into(), "studio-bridge install-plugin".into()),
            ],
            sessions: Vec::new(),
        };
        let text = human(&report, Style::default());
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("ok ") && lines[0].contains("port") && lines[0].ends_with("fine"),
            "{text}"
        );
        assert!(lines[1].starts_with("problem plugin"), "{text}");
        assert_eq!(lines[2].trim(), "fix: studio-bridge install-plugin");
        assert_eq!(lines[3], "1 problem found");
    }
}

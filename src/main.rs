//! The `studio-bridge` binary: parses the command line and runs `mcp`, `serve` or one
//! command of the table (see the library crate for everything else).

use std::io::IsTerminal as _;
use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

use studio_bridge::bridge::{self, Mode};
use studio_bridge::cli::{self, HostOptions};
use studio_bridge::plugin_install::{self, Installed};
use studio_bridge::policy::Policy;
use studio_bridge::{mcp, protocol, terminal};

fn main() -> ExitCode {
    let matches = cli::command().get_matches();
    let Some((name, sub)) = matches.subcommand() else {
        return ExitCode::FAILURE;
    };
    // `studio-bridge cloud <verb>`: login and logout, or an Open Cloud command of the table.
    let (name, sub) = match (name, sub.subcommand()) {
        ("cloud", Some(("login", _))) => return cli::cloud::login(),
        ("cloud", Some(("logout", _))) => return cli::cloud::logout(),
        ("cloud", Some((verb, sub))) => (cli::cloud_command(verb), sub),
        ("cloud", None) => return ExitCode::FAILURE,
        _ => (name, sub),
    };
    let default_level = if matches!(name, "mcp" | "serve") {
        "info"
    } else {
        "warn"
    };
    init_logging(
        sub.get_one::<String>("log-level")
            .map(String::as_str)
            .unwrap_or(default_level),
    );
    let options = HostOptions::from_matches(sub);

    // One thread runs everything async: a call crosses no thread on its way through the
    // host (a hand-off between worker threads costs more than the rest of a small call),
    // and what takes milliseconds of CPU (decoding and converting large results, PNG
    // encoding) runs on the blocking pool instead, so it holds up no other call. The
    // terminal keeps worker threads: its line editor blocks in `block_in_place`.
    let mut builder = if name == "terminal" {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    // The blocking pool's threads run at a lower priority than the async thread: a 10 MB
    // conversion is bulk work, and where cores are few it should wait for the small calls,
    // not they for it.
    builder.on_thread_start(lower_priority_of_this_thread);
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    // The policy first, for every surface that runs commands (an agent with a shell can
    // run the CLI and the terminal too): a bad config, glob or capability name stops here,
    // before anything starts.
    let policy = match name {
        "serve" | "install-plugin" | "completions" | "doctor" => Policy::default(),
        _ => match cli::load_policy(sub) {
            Ok(policy) => policy,
            Err(message) => {
                eprintln!("error: {message}");
                return ExitCode::FAILURE;
            }
        },
    };
    runtime.block_on(async {
        match name {
            "mcp" => {
                // Started by hand: say what it is for, once, and go on serving.
                if std::io::stdin().is_terminal() && sub.get_one::<std::net::SocketAddr>("http").is_none() {
                    eprintln!("{MCP_BY_HAND}");
                }
                tracing::info!("policy: {}", policy.summary());
                if !sub.get_flag("no-install-plugin") && sub.get_one::<String>("remote").is_none() {
                    plugin_install::install_at_start();
                }
                report(
                    run_mcp(
                        &options,
                        policy,
                        sub.get_one::<String>("remote").map(String::as_str),
                        sub.get_one::<std::path::PathBuf>("token-file").map(|p| p.as_path()),
                        sub.get_one::<std::net::SocketAddr>("http").copied(),
                        sub.get_flag("rotate-token"),
                    )
                    .await,
                )
            }
            "serve" => {
                if !sub.get_flag("no-install-plugin") {
                    plugin_install::install_at_start();
                }
                report(run_serve(&options).await)
            }
            "install-plugin" => report(run_install_plugin(
                sub.get_one::<std::path::PathBuf>("out"),
                sub.get_flag("rotate-secret"),
            )),
            "completions" => cli::print_completions(sub),
            "doctor" if sub.get_flag("studio") => cli::studio_probe::run(sub, &options).await,
            "doctor" => cli::doctor::run(sub, &options).await,
            "terminal" => terminal::run(sub, options.bridge_options(Mode::Auto), options.limits(), policy).await,
            command => cli::run_command(command, sub, &options, &policy).await,
        }
    })
}

/// What `mcp` says when a person starts it on a terminal.
const MCP_BY_HAND: &str = "studio-bridge mcp speaks MCP on stdin/stdout, for an MCP client that starts it (README: Connect your agent); it waits for one here. To drive Studio yourself, try `studio-bridge terminal` or `studio-bridge --help`.";

/// Logs go to stderr only: stdout of `mcp` is the MCP channel. Colour only on a terminal
/// and without `NO_COLOR`; rmcp's own lines (its service starting and stopping) only at
/// `debug`, where they are what someone debugging wants.
fn init_logging(level: &str) {
    let directives = if matches!(level, "debug" | "trace") || level.contains("rmcp") {
        level.to_owned()
    } else {
        format!("{level},rmcp=warn")
    };
    let filter = EnvFilter::try_new(&directives).unwrap_or_else(|_| EnvFilter::new("info,rmcp=warn"));
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_target(false)
        .init();
}

fn report(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run_mcp(
    options: &HostOptions,
    policy: Policy,
    remote: Option<&str>,
    token_file: Option<&std::path::Path>,
    http: Option<std::net::SocketAddr>,
    rotate_token: bool,
) -> anyhow::Result<()> {
    let mode = match remote {
        Some(addr) => Mode::Remote {
            addr: addr.to_owned(),
            token: remote_token(token_file, options.port)?,
        },
        None => Mode::Auto,
    };
    let running = bridge::start(options.bridge_options(mode)).await?;
    if running.is_host() {
        tracing::info!("hosting the bridge");
    } else {
        tracing::info!("joined the bridge host as a peer");
    }
    // The MCP client closing stdin ends us, host or not; so does SIGTERM. Either way a
    // host hands over to its peers at once.
    let served = match http {
        // Over HTTP until SIGTERM or Ctrl-C; clients come and go.
        Some(addr) => {
            let stop = tokio_util::sync::CancellationToken::new();
            let serving = mcp::http::serve_http(
                running.bridge.clone(),
                options.limits(),
                policy,
                options.sourcemap(),
                addr,
                mcp::http::http_token(mcp::http::http_token_path(options.port), rotate_token)?,
                stop.clone(),
            );
            tokio::pin!(serving);
            tokio::select! {
                served = &mut serving => served,
                () = shutdown_signal() => {
                    stop.cancel();
                    serving.await
                }
            }
        }
        None => tokio::select! {
            served = mcp::serve_stdio(running.bridge.clone(), options.limits(), policy, options.sourcemap()) => served,
            () = shutdown_signal() => Ok(()),
        },
    };
    running.shutdown().await;
    served
}

/// The peer token for `--remote`: `--token-file`, else `STUDIO_BRIDGE_TOKEN`.
fn remote_token(token_file: Option<&std::path::Path>, port: u16) -> anyhow::Result<String> {
    if let Some(path) = token_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read the token file {}: {e}", path.display()))?;
        return Ok(text.trim().to_owned());
    }
    std::env::var("STUDIO_BRIDGE_TOKEN").map(|t| t.trim().to_owned()).map_err(|_| {
        anyhow::anyhow!(
            "--remote needs the host's peer token: pass --token-file PATH or set STUDIO_BRIDGE_TOKEN (the host writes it to {} on its machine)",
            studio_bridge::bridge::token::token_path(port).display()
        )
    })
}

async fn run_serve(options: &HostOptions) -> anyhow::Result<()> {
    let running = bridge::start(options.bridge_options(Mode::HostOnly)).await?;
    let addr = running.host_addr().map(|a| a.to_string()).unwrap_or_default();
    eprintln!(
        "studio-bridge {} serving on {addr} (Ctrl-C to stop)",
        protocol::SERVER_VERSION
    );
    shutdown_signal().await;
    running.shutdown().await;
    Ok(())
}

fn run_install_plugin(out: Option<&std::path::PathBuf>, rotate: bool) -> anyhow::Result<()> {
    let file = match out {
        Some(out) => plugin_install::target_file(out),
        None => plugin_install::studio_plugins_dir()
            .map_err(|reason| {
                anyhow::anyhow!(
                    "cannot find Roblox Studio's plugins folder ({reason}). Pass --out <folder> (on Windows: %LOCALAPPDATA%\\Roblox\\Plugins; on macOS: ~/Documents/Roblox/Plugins), or set ROBLOX_STUDIO_PATH."
                )
            })?
            .join(plugin_install::PLUGIN_FILE_NAME),
    };
    let secret = plugin_install::current_secret(rotate).map_err(|reason| anyhow::anyhow!(reason))?;
    if rotate {
        eprintln!("made a new pairing secret: plugins installed before this one are refused");
    }
    match plugin_install::install(&file, &secret)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", file.display()))?
    {
        Installed::Written(path) => eprintln!(
            "installed the studio-bridge plugin at {} (restart Studio to load it)",
            path.display()
        ),
        Installed::UpToDate(path) => eprintln!("the studio-bridge plugin at {} is up to date", path.display()),
    }
    Ok(())
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Lowers the calling thread's scheduling priority (nice +10). On Linux the nice value
/// belongs to the thread; elsewhere this does nothing.
fn lower_priority_of_this_thread() {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid and setpriority take plain integers and touch only this thread's
    // scheduling attributes; a failure (returned, not raised) leaves the priority as it was.
    unsafe {
        let thread = libc::gettid();
        let _ = libc::setpriority(libc::PRIO_PROCESS, thread as libc::id_t, 10);
    }
}

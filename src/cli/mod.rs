//! The command line: `studio-bridge <command> [args]` for every command of the table,
//! built from each command's input schema (so nothing here knows a command by name),
//! plus the host-side commands `mcp` and `serve`, and `doctor`.

pub mod cloud;
pub mod doctor;
pub mod studio_probe;
pub mod waiting;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use clap::{Arg, ArgAction, ArgMatches};
use serde_json::Value as Json;

use crate::bridge::pairing::Pairing;
use crate::bridge::{self, BridgeOptions, CallHooks, Mode, Target};
use crate::commands::{self, InvocationParts, Limits};
use crate::human::render;
use crate::policy::{Capability, Policy, PolicyFlags};
use crate::protocol::{Context, DEFAULT_PORT};
use crate::sourcemap::Watched;
use crate::subcommands::words::{Surface, in_words_of};
use crate::subcommands::{BRIDGE_HEADING, arguments, cloud_verb, default_image_path, subcommand_for};

/// Options shared by everything that may host the bridge.
#[derive(Debug, Clone)]
pub struct HostOptions {
    pub port: u16,
    pub max_message_mib: usize,
    pub max_result_kib: usize,
    /// `--allow-unpaired`: should this process host, accept plugins without the secret.
    pub allow_unpaired: bool,
    /// `--sourcemap`: the project's sourcemap, else `sourcemap.json` in the working directory.
    pub sourcemap: Option<PathBuf>,
}

impl HostOptions {
    pub fn from_matches(matches: &ArgMatches) -> HostOptions {
        HostOptions {
            port: matches.get_one::<u16>("port").copied().unwrap_or(DEFAULT_PORT),
            max_message_mib: matches.get_one::<usize>("max-message-mib").copied().unwrap_or(64),
            max_result_kib: matches.get_one::<usize>("max-result-kib").copied().unwrap_or(256),
            allow_unpaired: matches.try_get_one::<bool>("allow-unpaired").ok().flatten() == Some(&true),
            sourcemap: matches.try_get_one::<PathBuf>("sourcemap").ok().flatten().cloned(),
        }
    }

    pub fn bridge_options(&self, mode: Mode) -> BridgeOptions {
        BridgeOptions {
            port: self.port,
            max_message_bytes: self.max_message_mib * 1024 * 1024,
            mode,
            pairing: if self.allow_unpaired {
                Pairing::allow_unpaired()
            } else {
                Pairing::required()
            },
        }
    }

    /// This process's sourcemap (TOOLS.md, "Your files"), re-read when it changes.
    pub fn sourcemap(&self) -> Arc<Watched> {
        Watched::new(self.sourcemap.clone())
    }

    pub fn limits(&self) -> Limits {
        Limits {
            max_result_bytes: self.max_result_kib * 1024,
        }
    }
}

/// The policy flags a subcommand takes (see [`crate::policy`]): all of them for `mcp`,
/// `--ignore-config` for the table's commands and the terminal, none elsewhere.
pub fn policy_flags(matches: &ArgMatches) -> PolicyFlags {
    let values = |name: &str| -> Vec<String> {
        matches
            .try_get_many::<String>(name)
            .ok()
            .flatten()
            .map(|values| values.cloned().collect())
            .unwrap_or_default()
    };
    let flag = |name: &str| matches.try_get_one::<bool>(name).ok().flatten() == Some(&true);
    PolicyFlags {
        read_only: flag("read-only"),
        allow: values("allow"),
        deny: values("deny"),
        deny_capabilities: values("deny-capability"),
        config: matches.try_get_one::<PathBuf>("config").ok().flatten().cloned(),
        ignore_config: flag("ignore-config"),
        allow_publish: flag("allow-publish"),
    }
}

/// The policy of a subcommand that has one (`mcp`, the table's commands, `terminal`):
/// its flags and the config file. An error (a bad file, glob or capability name) is said
/// on stderr as is.
pub fn load_policy(matches: &ArgMatches) -> Result<Policy, String> {
    Policy::load(policy_flags(matches), commands::ALL)
}

/// `--ignore-config`, on the table's commands and the terminal.
pub fn ignore_config() -> Arg {
    Arg::new("ignore-config")
        .long("ignore-config")
        .help_heading(BRIDGE_HEADING)
        .action(ArgAction::SetTrue)
        .help("Run without the policy in the config file (config.toml's deny_capabilities, read_only, allow, deny), which applies here as it does to mcp")
}

/// The whole command line.
pub fn command() -> clap::Command {
    let mut root = clap::Command::new("studio-bridge")
        .version(format!("{} (Luau {})", crate::protocol::SERVER_VERSION, crate::luau::version()))
        .about("Lets AI agents see and drive running Roblox Studio sessions (MCP over stdio, or this CLI).")
        .subcommand_required(true)
        .arg_required_else_help(true)
        .arg(
            Arg::new("port")
                .long("port")
                .value_name("PORT")
                .global(true)
                .help_heading(BRIDGE_HEADING)
                .env("STUDIO_BRIDGE_PORT")
                .value_parser(clap::value_parser!(u16))
                .help(format!("Bridge port on 127.0.0.1 [default: {DEFAULT_PORT}]")),
        )
        .arg(
            Arg::new("log-level")
                .long("log-level")
                .value_name("LEVEL")
                .global(true)
                .help_heading(BRIDGE_HEADING)
                .env("STUDIO_BRIDGE_LOG")
                .help("Log level on stderr: error, warn, info, debug, trace (or a tracing filter)"),
        )
        .arg(
            Arg::new("max-message-mib")
                .long("max-message-mib")
                .value_name("MIB")
                .global(true)
                .help_heading(BRIDGE_HEADING)
                .value_parser(clap::value_parser!(usize))
                .help("Largest message accepted from a plugin, in MiB [default: 64]"),
        )
        .arg(
            Arg::new("allow-unpaired")
                .long("allow-unpaired")
                .global(true)
                .help_heading(BRIDGE_HEADING)
                .action(ArgAction::SetTrue)
                .help("When hosting, accept plugins without this user's pairing secret (a headless test Studio, a hand-installed plugin)"),
        )
        .arg(
            Arg::new("sourcemap")
                .long("sourcemap")
                .global(true)
                .help_heading(BRIDGE_HEADING)
                .value_name("PATH")
                .env("STUDIO_BRIDGE_SOURCEMAP")
                .value_parser(clap::value_parser!(PathBuf))
                .help("The project's Rojo sourcemap, to name the files behind scripts in results and logs [default: ./sourcemap.json]"),
        )
        .arg(
            Arg::new("max-result-kib")
                .long("max-result-kib")
                .value_name("KIB")
                .global(true)
                .help_heading(BRIDGE_HEADING)
                .value_parser(clap::value_parser!(usize))
                .help("Largest result returned, in KiB; larger ones are cut and marked truncated [default: 256]"),
        )
        .subcommand(
            clap::Command::new("mcp")
                .about("Serve MCP on stdin/stdout (what an agent's MCP config runs)")
                .arg(
                    Arg::new("remote")
                        .long("remote")
                        .value_name("HOST:PORT")
                        .help("Use the bridge host at HOST:PORT (e.g. from a devcontainer); never host here"),
                )
                .arg(no_install_plugin())
                .arg(
                    Arg::new("http")
                        .long("http")
                        .value_name("127.0.0.1:PORT")
                        .value_parser(clap::value_parser!(std::net::SocketAddr))
                        .help("Serve MCP over Streamable HTTP at http://127.0.0.1:PORT/mcp instead of stdio (loopback only; bearer token required: mcp-http.token, kept across restarts)"),
                )
                .arg(
                    Arg::new("rotate-token")
                        .long("rotate-token")
                        .action(ArgAction::SetTrue)
                        .requires("http")
                        .help("With --http: replace the HTTP bearer token with a new one (clients configured with the old one get 401)"),
                )
                .arg(
                    Arg::new("token-file")
                        .long("token-file")
                        .value_parser(clap::value_parser!(PathBuf))
                        .help("With --remote: file holding the host's peer token (else STUDIO_BRIDGE_TOKEN)"),
                )
                .arg(allow_publish())
                .arg(
                    Arg::new("read-only")
                        .long("read-only")
                        .action(ArgAction::SetTrue)
                        .help("Offer the agent only calls that read Studio: --deny-capability write,code,play,assets,launch"),
                )
                .arg(
                    Arg::new("deny-capability")
                        .long("deny-capability")
                        .value_name("NAME")
                        .action(ArgAction::Append)
                        .help(format!(
                            "Refuse every call that needs NAME, one of {} (repeatable, or comma-separated)",
                            Capability::ALL.map(Capability::name).join(", ")
                        )),
                )
                .arg(
                    Arg::new("allow")
                        .long("allow")
                        .value_name("GLOB")
                        .action(ArgAction::Append)
                        .help("Offer only tools whose name matches a GLOB, e.g. 'studio_script_*' (repeatable)"),
                )
                .arg(
                    Arg::new("deny")
                        .long("deny")
                        .value_name("GLOB")
                        .action(ArgAction::Append)
                        .help("Never offer tools whose name matches GLOB, e.g. studio_exec (repeatable; deny wins)"),
                )
                .arg(
                    Arg::new("config")
                        .long("config")
                        .value_name("PATH")
                        .value_parser(clap::value_parser!(PathBuf))
                        .help("Policy file to read instead of ~/.config/studio-bridge/config.toml; flags add to it"),
                ),
        )
        .subcommand(
            clap::Command::new("serve")
                .about("Run the bridge host in the foreground, with status on stderr")
                .arg(no_install_plugin()),
        )
        .subcommand(
            clap::Command::new("install-plugin")
                .about("Install the Studio plugin into Studio's plugins folder (or --out PATH)")
                .arg(
                    Arg::new("out")
                        .long("out")
                        .value_parser(clap::value_parser!(PathBuf))
                        .help("Write the plugin here (a folder, or a .rbxm file) instead of Studio's plugins folder"),
                )
                .arg(
                    Arg::new("rotate-secret")
                        .long("rotate-secret")
                        .action(ArgAction::SetTrue)
                        .help("Make a new pairing secret first: plugins installed before are refused"),
                ),
        )
        .subcommand(
            clap::Command::new("doctor")
                .about("Check the bridge port, token, pairing secret, installed plugin and sessions; print the fix for each problem (exit 1 if any)")
                .arg(
                    Arg::new("json")
                        .long("json")
                        .action(ArgAction::SetTrue)
                        .help("Print one JSON object: ok, and checks (name, status, ok, detail, fix)"),
                )
                .arg(
                    Arg::new("plugin")
                        .long("plugin")
                        .value_name("PATH")
                        .value_parser(clap::value_parser!(PathBuf))
                        .help("Check the plugin installed here (what install-plugin --out was given) instead of Studio's plugins folder"),
                )
                .arg(
                    Arg::new("studio")
                        .long("studio")
                        .action(ArgAction::SetTrue)
                        .conflicts_with("plugin")
                        .help("Probe the connected Studio instead: every engine member a tool relies on (nothing in the place changes); --json: {studio, plugin, probes}"),
                )
                .arg(
                    Arg::new("play")
                        .long("play")
                        .action(ArgAction::SetTrue)
                        .requires("studio")
                        .help("With --studio: also probe inside a short Play test (its server and client), started and stopped here"),
                )
                .arg(
                    Arg::new("session")
                        .long("session")
                        .requires("studio")
                        .help("With --studio: the session to probe (from `studio-bridge sessions`)"),
                )
                .arg(
                    Arg::new("context")
                        .long("context")
                        .requires("studio")
                        .value_parser(["edit", "server", "client"])
                        .help("With --studio: the DataModel to probe"),
                ),
        )
        .subcommand(
            clap::Command::new("terminal")
                .about("An interactive Luau console attached to one Studio session (.help inside)")
                .arg(
                    Arg::new("session")
                        .long("session")
                        .help("Session id (from `studio-bridge sessions`); asked for when several are open"),
                )
                .arg(
                    Arg::new("context")
                        .long("context")
                        .value_parser(["edit", "server", "client"])
                        .help("DataModel during Play: edit, server or client [default: edit]"),
                )
                .arg(ignore_config()),
        )
        .subcommand(
            clap::Command::new("completions")
                .about("Print a shell completion script (e.g. `studio-bridge completions bash > /etc/bash_completion.d/studio-bridge`)")
                .arg(
                    Arg::new("shell")
                        .required(true)
                        .value_parser(clap::value_parser!(clap_complete::Shell))
                        .help("The shell to complete in"),
                ),
        );
    let mut cloud = clap::Command::new("cloud")
        .about("Roblox's Open Cloud with your API key: run Luau on Roblox's servers, publish, data stores, messages")
        .subcommand_required(true)
        .subcommand(clap::Command::new("login").about(
            "Save an Open Cloud API key (read from stdin, no echo) for later calls; ROBLOX_API_KEY wins over it",
        ))
        .subcommand(clap::Command::new("logout").about("Remove the saved Open Cloud API key"));
    for command in commands::ALL {
        let sub = subcommand_for(*command).arg(ignore_config());
        if cloud_verb(*command).is_some() {
            cloud = cloud.subcommand(if command.spec().name == "cloud_publish" {
                sub.arg(allow_publish())
            } else {
                sub
            });
        } else {
            root = root.subcommand(sub);
        }
    }
    root.subcommand(cloud)
}

/// The table's name of the command `studio-bridge cloud <verb>` runs (`exec` →
/// `cloud_exec`).
pub fn cloud_command(verb: &str) -> &'static str {
    commands::ALL
        .iter()
        .find(|c| cloud_verb(**c).is_some_and(|v| v.replace('_', "-") == verb))
        .map_or("", |c| c.spec().name)
}

/// `--allow-publish`, on `mcp` and `cloud publish`.
fn allow_publish() -> Arg {
    Arg::new("allow-publish")
        .long("allow-publish")
        .action(ArgAction::SetTrue)
        .help("Allow publishing a version live players get (cloud_publish with versionType Published); as allow_publish = true in config.toml")
}

/// `studio-bridge completions <shell>`: the completion script for the whole command line,
/// generated from [`command`] itself, on stdout.
pub fn print_completions(matches: &ArgMatches) -> ExitCode {
    let Some(shell) = matches.get_one::<clap_complete::Shell>("shell").copied() else {
        return ExitCode::FAILURE;
    };
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command(), "studio-bridge", &mut script);
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(&script).and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

fn no_install_plugin() -> Arg {
    Arg::new("no-install-plugin")
        .long("no-install-plugin")
        .action(ArgAction::SetTrue)
        .help("Do not install or update the Studio plugin at start")
}

/// Runs one table command from the command line: hosts the bridge for the length of the
/// call (waiting the startup grace for plugins to connect), prints, and exits 1 on error.
/// A call `policy` refuses (the config file's, unless `--ignore-config`) never starts the
/// bridge.
pub async fn run_command(name: &str, matches: &ArgMatches, options: &HostOptions, policy: &Policy) -> ExitCode {
    let Some(command) = commands::find(&name.replace('-', "_")) else {
        eprintln!("error: unknown command {name}");
        return ExitCode::FAILURE;
    };
    let as_json = matches.get_flag("json");
    let (out_style, err_style) = (render::Style::stdout(), render::Style::stderr());
    let args = match arguments(command, matches).and_then(|args| policy.check(command, &args).map(|()| args)) {
        Ok(args) => args,
        Err(error) => {
            if as_json {
                println!("{}", error.to_json());
            } else {
                print_error(err_style, command.spec().name, &error);
            }
            return ExitCode::FAILURE;
        }
    };
    let running = match join_bridge(options).await {
        Ok(running) => running,
        Err(code) => return code,
    };
    let target = Target {
        // Commands that need no session (`sessions`, `target`) have no such flags.
        session_id: matches.try_get_one::<String>("session").ok().flatten().cloned(),
        instance_id: None,
        context: matches
            .try_get_one::<String>("context")
            .ok()
            .flatten()
            .and_then(|c| Context::parse(c)),
    };
    let files = options.sourcemap();
    let follow = match command.spec().follow_event {
        Some(event) if matches.get_flag("follow") => {
            match running.bridge.subscribe(&target, &[event.to_owned()]).await {
                Ok(events) => Some(events),
                Err(error) => {
                    eprintln!("error[{}]: {}", error.code, render::escape_controls(&error.message));
                    return ExitCode::FAILURE;
                }
            }
        }
        _ => None,
    };
    let announcer = waiting::announce(&running.bridge, &target, name);
    let cancel = tokio_util::sync::CancellationToken::new();
    let parts = InvocationParts {
        bridge: running.bridge.clone(),
        hooks: CallHooks {
            progress: announcer.as_ref().map(waiting::Announcer::progress),
            cancel: cancel.clone(),
        },
        defaults: Arc::new(Mutex::new(Target::default())),
        target,
        policy: Some(Arc::new(policy.report())),
        files: Some(Arc::clone(&files)),
        quiet: false,
    };
    let asked = Json::Object(args.clone());
    // Ctrl-C cancels the call as an agent's cancel does (Studio is asked to stop it; a
    // Studio `open` or `run` started is ended); a second one leaves at once.
    let call = command.invoke(args, parts, options.limits());
    tokio::pin!(call);
    let outcome = loop {
        tokio::select! {
            outcome = &mut call => break outcome,
            interrupted = tokio::signal::ctrl_c() => {
                if interrupted.is_err() || cancel.is_cancelled() {
                    return ExitCode::from(130);
                }
                cancel.cancel();
            }
        }
    };
    drop(announcer);
    let mut stdout = std::io::stdout().lock();
    let status = match &outcome {
        Ok(output) => {
            if let Some(png) = &output.image {
                let path = matches
                    .get_one::<PathBuf>("out")
                    .cloned()
                    .unwrap_or_else(|| default_image_path(name));
                if let Err(error) = std::fs::write(&path, png) {
                    eprintln!("error: cannot write {}: {error}", path.display());
                    return ExitCode::FAILURE;
                }
                eprintln!("wrote {}", path.display());
            }
            // A script error is a result, not a tool error, but the command failed.
            if render::failed(&output.value()) {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(_) => ExitCode::FAILURE,
    };
    let printed = if as_json {
        writeln!(stdout, "{}", crate::mcp::result_json(&outcome))
    } else {
        match &outcome {
            Ok(output) => {
                let rendered = command.render(&asked, &output.value(), out_style, err_style);
                let written = write!(stdout, "{}", rendered.stdout).and_then(|()| stdout.flush());
                eprint!("{}", rendered.stderr);
                written
            }
            Err(error) => {
                print_error(err_style, command.spec().name, error);
                Ok(())
            }
        }
    };
    drop(stdout);
    if printed.is_err() {
        running.shutdown().await;
        return ExitCode::FAILURE;
    }
    if let (Some(mut events), Ok(_)) = (follow, &outcome) {
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                _ = tokio::signal::ctrl_c() => None,
            };
            let Some(mut event) = event else { break };
            if event.event == bridge::GAP_EVENT && !as_json {
                // Said once per failover; stdout keeps to Studio's own lines.
                let message = event.data["message"].as_str().unwrap_or_default();
                eprintln!("{}", err_style.dim(message));
                continue;
            }
            commands::files::locate_entry(&mut event.data, files.current().as_deref());
            let line = if as_json {
                serde_json::json!({ "sessionId": event.session_id, "event": event.event, "data": event.data })
                    .to_string()
            } else {
                render::event_line(&event.data, out_style)
            };
            if writeln!(std::io::stdout().lock(), "{line}").is_err() {
                break;
            }
        }
    }
    running.shutdown().await;
    status
}

/// A tool error as a person reads it on stderr: `error[code]: message`, in the command
/// line's words (`--no-check`, `studio-bridge state`), its Studio text escaped like every
/// other.
fn print_error(err_style: render::Style, command: &str, error: &crate::protocol::ToolError) {
    let message = in_words_of(Surface::Cli, Some(command), &error.message);
    eprintln!(
        "{}",
        err_style.red(&format!("error[{}]: {}", error.code, render::escape_controls(&message)))
    );
}

/// The bridge for one command: beside a running `mcp` this joins its host as a peer; alone,
/// it hosts for the length of the command (the startup grace gives plugins time to
/// reconnect). A failure is said on stderr, and is the exit code.
pub async fn join_bridge(options: &HostOptions) -> Result<bridge::Running, ExitCode> {
    bridge::start(options.bridge_options(Mode::Auto))
        .await
        .map_err(|error| {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value as Json;

    #[test]
    fn every_command_parses_its_flags_into_mcp_arguments() {
        let matches = command()
            .try_get_matches_from([
                "studio-bridge",
                "logs",
                "--count",
                "5",
                "--levels",
                "Error,Warning",
                "--include-internal",
            ])
            .unwrap();
        let (name, sub) = matches.subcommand().unwrap();
        let args = arguments(commands::find(name).unwrap(), sub).unwrap();
        assert_eq!(
            Json::Object(args),
            serde_json::json!({"count": 5, "levels": ["Error", "Warning"], "includeInternal": true})
        );

        let matches = command()
            .try_get_matches_from(["studio-bridge", "exec", "return 1", "--timeout-ms", "500"])
            .unwrap();
        let (name, sub) = matches.subcommand().unwrap();
        let args = arguments(commands::find(name).unwrap(), sub).unwrap();
        assert_eq!(
            Json::Object(args),
            serde_json::json!({"script": "return 1", "timeoutMs": 500})
        );
    }

    #[test]
    fn a_bad_number_names_the_flag() {
        let matches = command()
            .try_get_matches_from(["studio-bridge", "logs", "--count", "many"])
            .unwrap();
        let (name, sub) = matches.subcommand().unwrap();
        let err = arguments(commands::find(name).unwrap(), sub).unwrap_err();
        assert!(err.message.contains("--count"), "{}", err.message);
    }

    #[test]
    fn the_command_line_is_well_formed() {
        command().debug_assert();
    }
}

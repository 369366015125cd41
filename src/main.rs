//! The `studio-bridge` binary: parses the command line and runs `mcp`, `serve` or one
//! command of the table (see the library crate for everything else).

use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

use studio_bridge::bridge::host::Host;
use studio_bridge::cli::{self, HostOptions};
use studio_bridge::{mcp, protocol};

fn main() -> ExitCode {
    let matches = cli::command().get_matches();
    let Some((name, sub)) = matches.subcommand() else {
        return ExitCode::FAILURE;
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

    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        match name {
            "mcp" => report(run_mcp(&options).await),
            "serve" => report(run_serve(&options).await),
            command => cli::run_command(command, sub, &options).await,
        }
    })
}

/// Logs go to stderr only: stdout of `mcp` is the MCP channel.
fn init_logging(level: &str) {
    let filter = EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
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

async fn run_mcp(options: &HostOptions) -> anyhow::Result<()> {
    let host = Host::start(options.host_config()).await?;
    let served = mcp::serve_stdio(host.bridge.clone(), options.limits()).await;
    host.shutdown.cancel();
    served
}

async fn run_serve(options: &HostOptions) -> anyhow::Result<()> {
    let host = Host::start(options.host_config()).await?;
    eprintln!(
        "studio-bridge {} serving on {} (Ctrl-C to stop)",
        protocol::SERVER_VERSION,
        host.addr
    );
    shutdown_signal().await;
    host.shutdown.cancel();
    let _ = host.task.await;
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

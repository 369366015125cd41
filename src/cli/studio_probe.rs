//! `studio-bridge doctor --studio [--play] [--json]`: what this Studio can do, asked of the
//! connected Studio itself (issue #40; TOOLS.md, "First contact").
//!
//! The plugin's `probe` action reads every engine member a tool relies on, and calls it
//! where a harmless call exists; nothing in the place changes and no test starts. With
//! `--play`, a short Play test is started (and stopped, whatever happens) and the probes run
//! again in its server and client DataModels, where some members exist only then (a Run
//! test, which the issue named, has no client: the input and GUI members would go
//! unchecked). The session is
//! resolved as for any command (`--session`, `--context`). One line a probe, or the JSON of
//! the contract with `--json`; exit 1 if any probe failed. This is the first thing a person
//! with a real Studio runs and sends back (docs/field-test.md).

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::ArgMatches;
use serde_json::{Value as Json, json};

use super::HostOptions;
use crate::bridge::{Bridge, Call, CallHooks, Target};
use crate::commands::{self, InvocationParts};
use crate::human::render::{Style, escape_controls};
use crate::protocol::{Context, ToolError, value};

/// The plugin action that runs the probes.
const PROBE_ACTION: &str = "probe";

/// How long one probe run may take (some probes call the engine).
const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

pub async fn run(matches: &ArgMatches, options: &HostOptions) -> ExitCode {
    let json_out = matches.get_flag("json");
    let running = match super::join_bridge(options).await {
        Ok(running) => running,
        Err(code) => return code,
    };
    let target = Target {
        session_id: matches.get_one::<String>("session").cloned(),
        instance_id: None,
        context: matches.get_one::<String>("context").and_then(|c| Context::parse(c)),
    };
    let outcome = report(&running.bridge, &target, matches.get_flag("play"), options).await;
    running.shutdown().await;
    let report = match outcome {
        Ok(report) => report,
        Err(error) => {
            eprintln!("error[{}]: {}", error.code, escape_controls(&error.message));
            return ExitCode::FAILURE;
        }
    };
    let failed = report["probes"]
        .as_array()
        .is_some_and(|probes| probes.iter().any(|p| p["status"] == "failed"));
    let text = if json_out {
        format!("{report}\n")
    } else {
        human(&report, Style::stdout())
    };
    let mut stdout = std::io::stdout().lock();
    if stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()).is_err() || failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The probes of the session `target` names, and with `play` those of a Play test's
/// server and client after them (each marked with its `context`).
async fn report(bridge: &Bridge, target: &Target, play: bool, options: &HostOptions) -> Result<Json, ToolError> {
    let mut report = probe(bridge, target).await?;
    mark(&mut report, "edit");
    if !play {
        return Ok(report);
    }
    let started = play_call(bridge, target, json!({"mode": "start"}), options).await;
    let mut in_play = Vec::new();
    match started {
        Ok(()) => {
            for context in [Context::Server, Context::Client] {
                let inside = Target {
                    context: Some(context),
                    ..target.clone()
                };
                in_play.push((context, probe(bridge, &inside).await));
            }
            // Stopped whatever the probes did; a stop that fails is said, not hidden.
            if let Err(error) = play_call(bridge, target, json!({"mode": "stop"}), options).await {
                eprintln!(
                    "warning: the Play test could not be stopped ({}); stop it in Studio",
                    escape_controls(&error.message)
                );
            }
        }
        Err(error) => in_play.push((Context::Server, Err(error))),
    }
    let probes = report["probes"].as_array_mut().expect("marked above");
    for (context, outcome) in in_play {
        match outcome {
            Ok(mut inside) => {
                mark(&mut inside, context.as_str());
                probes.extend(inside["probes"].as_array().cloned().unwrap_or_default());
            }
            Err(error) => probes.push(json!({
                "name": "play",
                "status": "failed",
                "detail": format!("the Play test for --play could not be probed: {}", error.message),
                "tools": ["play", "test_run"],
                "context": context.as_str(),
            })),
        }
    }
    Ok(report)
}

/// One run of the plugin's `probe` action, its result as the contract has it.
async fn probe(bridge: &Bridge, target: &Target) -> Result<Json, ToolError> {
    let call = Call {
        target: target.clone(),
        action: PROBE_ACTION.to_owned(),
        args: rmpv::Value::Map(Vec::new()),
        default_context: Context::Edit,
        timeout: PROBE_TIMEOUT,
        plugin_timeout: None,
        operation_id: None,
    };
    let reply = bridge.call(call, CallHooks::default()).await.map_err(|mut error| {
        if error.code == crate::protocol::ErrorCode::UnknownAction {
            error.message = format!(
                "{} The installed plugin is older than this studio-bridge: run `studio-bridge install-plugin` and restart Studio.",
                error.message
            );
        }
        error
    })?;
    let result = reply
        .value
        .decode()
        .map(value::into_json)
        .map_err(|e| commands::bad_result(PROBE_ACTION, &format!("its result could not be decoded: {e}")))?;
    if !result["probes"].is_array() {
        return Err(commands::bad_result(PROBE_ACTION, "no `probes` list"));
    }
    Ok(result)
}

/// Marks every probe of `report` with the DataModel it ran in.
fn mark(report: &mut Json, context: &str) {
    if let Some(probes) = report["probes"].as_array_mut() {
        for probe in probes {
            probe["context"] = json!(context);
        }
    }
}

/// `play` through the command table, as the CLI's own `play` runs (its waits included).
async fn play_call(bridge: &Bridge, target: &Target, args: Json, options: &HostOptions) -> Result<(), ToolError> {
    let command = commands::find("play").expect("play is in the table");
    let Json::Object(args) = args else {
        unreachable!("an object")
    };
    let parts = InvocationParts {
        bridge: bridge.clone(),
        hooks: CallHooks::default(),
        defaults: Arc::new(Mutex::new(Target::default())),
        target: Target {
            context: Some(Context::Edit),
            ..target.clone()
        },
        policy: None,
        files: None,
    };
    command.invoke(args, parts, options.limits()).await.map(|_| ())
}

/// One line a probe: its status, its name, its DataModel, and the engine's words or why
/// it was skipped; the tools that depend on a failed one under it.
fn human(report: &Json, style: Style) -> String {
    let mut out = String::new();
    let text = |value: &Json| escape_controls(value.as_str().unwrap_or("?")).into_owned();
    out.push_str(&format!(
        "Studio {} ({}, place {}), plugin {} (SHA-256: {})\n",
        text(&report["studio"]["version"]),
        text(&report["studio"]["placeName"]),
        report["studio"]["placeId"],
        text(&report["plugin"]["version"]),
        text(&report["plugin"]["sha256"]),
    ));
    let probes = report["probes"].as_array().cloned().unwrap_or_default();
    let width = probes
        .iter()
        .map(|p| p["name"].as_str().map_or(0, str::len))
        .max()
        .unwrap_or(0);
    for probe in &probes {
        let status = probe["status"].as_str().unwrap_or("?");
        let mark = match status {
            "ok" => style.blue("ok     "),
            "failed" => style.red("failed "),
            _ => style.yellow("skipped"),
        };
        let name = text(&probe["name"]);
        let mut line = format!("{mark} {name:<width$}  [{}]", text(&probe["context"]));
        let detail = text(&probe["detail"]);
        if status != "ok" && !detail.is_empty() {
            line.push_str(&format!("  {detail}"));
        }
        out.push_str(&line);
        out.push('\n');
        if status == "failed" {
            let tools: Vec<String> = probe["tools"]
                .as_array()
                .map(|t| t.iter().map(text).collect())
                .unwrap_or_default();
            if !tools.is_empty() {
                out.push_str(&format!(
                    "{:8}tools that answer `unsupported`: {}\n",
                    "",
                    tools.join(", ")
                ));
            }
        }
    }
    let failed = probes.iter().filter(|p| p["status"] == "failed").count();
    out.push_str(&match failed {
        0 => format!("all {} probes passed or were skipped\n", probes.len()),
        n => format!(
            "{n} of {} probes failed: send this output with your issue\n",
            probes.len()
        ),
    });
    out
}

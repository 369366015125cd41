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
    collect_capture(&mut report, None, "edit");
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
    let mut captures = Vec::new();
    let probes = report["probes"].as_array_mut().expect("marked above");
    for (context, outcome) in in_play {
        match outcome {
            Ok(mut inside) => {
                mark(&mut inside, context.as_str());
                probes.extend(inside["probes"].as_array().cloned().unwrap_or_default());
                captures.push((context, inside.get("capture").cloned()));
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
    for (context, capture) in captures {
        if let Some(capture) = capture {
            collect_capture(&mut report, Some(capture), context.as_str());
        }
    }
    Ok(report)
}

/// Moves a probe run's `capture` (which path `screenshot` takes there, issue #46) into the
/// report's `captures`, marked with its DataModel: `{context, path, service, canCapture?,
/// permission, tiny?}`. A plugin from before #46 has none.
fn collect_capture(report: &mut Json, capture: Option<Json>, context: &str) {
    let capture = capture.or_else(|| report.as_object_mut().and_then(|r| r.remove("capture")));
    let Some(Json::Object(mut capture)) = capture else {
        return;
    };
    capture.insert("context".into(), Json::String(context.to_owned()));
    match report.get_mut("captures").and_then(Json::as_array_mut) {
        Some(captures) => captures.push(Json::Object(capture)),
        None => report["captures"] = Json::Array(vec![Json::Object(capture)]),
    }
}

/// Which way `screenshot` goes in one DataModel, in a line: the path, the permission, and
/// the tiny capture's outcome.
fn capture_line(capture: &Json) -> String {
    let text = |value: &Json| escape_controls(value.as_str().unwrap_or("?")).into_owned();
    let permission = capture["permission"].as_str().unwrap_or("unavailable");
    let mut line = match capture["path"].as_str().unwrap_or("?") {
        "studio" => "Studio's own capture (StudioCaptureService)".to_owned(),
        "none" => "refused: the screenshot permission was refused; allow it in Studio's Plugin Management (Manage Plugins), then take a screenshot again".to_owned(),
        "viewport" => "the viewport (EditableImage, up to 1024×1024)".to_owned(),
        "window" => "the Studio window, through the operating system".to_owned(),
        other => escape_controls(other).into_owned(),
    };
    if capture["service"] == true && permission == "unasked" {
        line.push_str("; Studio's own capture once its permission is allowed (asked at the first screenshot)");
    } else if capture["service"] != true && capture["path"] != "none" {
        line.push_str("; this Studio has no StudioCaptureService");
    }
    match capture.get("tiny") {
        Some(tiny) if tiny["ok"] == true => {
            line.push_str(&format!("; a {}×{} test capture worked", tiny["width"], tiny["height"]))
        }
        Some(tiny) if tiny["ok"] == false => {
            line.push_str(&format!("; a test capture failed: {}", text(&tiny["error"])))
        }
        _ => {}
    }
    format!("screenshots [{}]: {line}\n", text(&capture["context"]))
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
        // doctor's own probe: the Studio Bridge panel does not list it
        quiet: true,
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
        quiet: true,
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
    for capture in report["captures"].as_array().into_iter().flatten() {
        out.push_str(&capture_line(capture));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_way_screenshots_go_reads_in_a_line() {
        let mut report = json!({"probes": [], "capture": {"path": "studio", "service": true, "canCapture": true,
            "permission": "granted", "tiny": {"ok": true, "width": 16, "height": 9}}});
        collect_capture(&mut report, None, "edit");
        collect_capture(
            &mut report,
            Some(json!({"path": "window", "service": false, "permission": "unavailable"})),
            "client",
        );
        assert!(report.get("capture").is_none(), "{report}");
        let lines: Vec<String> = report["captures"]
            .as_array()
            .unwrap()
            .iter()
            .map(capture_line)
            .collect();
        assert_eq!(
            lines,
            [
                "screenshots [edit]: Studio's own capture (StudioCaptureService); a 16×9 test capture worked\n",
                "screenshots [client]: the Studio window, through the operating system; this Studio has no StudioCaptureService\n",
            ]
        );
        let unasked = json!({"context": "edit", "path": "viewport", "service": true, "canCapture": false, "permission": "unasked"});
        assert_eq!(
            capture_line(&unasked),
            "screenshots [edit]: the viewport (EditableImage, up to 1024×1024); Studio's own capture once its permission is allowed (asked at the first screenshot)\n"
        );
        let refused = json!({"context": "edit", "path": "none", "service": true, "permission": "refused"});
        assert!(capture_line(&refused).contains("refused: the screenshot permission was refused"));
    }
}

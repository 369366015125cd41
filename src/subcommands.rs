//! The table's commands as clap subcommands, shared by the CLI (`studio-bridge <command>`)
//! and the terminal (`.command`), on the adapters' floor above the table (it reads each
//! command's spec and schema; no command reads it): flags come from each command's input schema, so nothing
//! here knows a command by name, and [`arguments`] turns parsed flags back into the
//! arguments object an MCP client would send.

use std::path::PathBuf;

use clap::{Arg, ArgAction, ArgMatches};
use serde_json::{Map, Value as Json};

use crate::commands::DynCommand;
use crate::protocol::ToolError;

/// The clap subcommand for one table command: its own arguments (positional ones as the
/// spec lists them), `--session`/`--context` when it runs in a session, `--follow` when it
/// streams, `--json` and `--out`.
pub fn subcommand_for(command: &dyn DynCommand) -> clap::Command {
    let spec = command.spec();
    let first_sentence = spec.description.split(". ").next().unwrap_or(spec.description);
    // Kebab case on the command line (`script-read`), as shells and clap users expect.
    let mut sub = clap::Command::new(spec.name.replace('_', "-"))
        .about(first_sentence.trim_end_matches('.').to_owned())
        .long_about(spec.description);
    let schema = command.input_schema();
    let properties = own_properties(&schema);
    for (name, property) in &properties {
        let help = property
            .get("description")
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_owned();
        let mut arg = Arg::new(name.clone()).help(help);
        if spec.positional.contains(&name.as_str()) {
            let required = schema
                .get("required")
                .and_then(Json::as_array)
                .is_some_and(|r| r.iter().any(|n| n == name));
            arg = arg.required(required);
        } else {
            arg = arg.long(kebab(name));
            arg = match json_type(property) {
                "boolean" => arg.action(ArgAction::SetTrue),
                // An array of objects (`create --items '{…}' --items '{…}'`) takes one JSON
                // object a flag: its commas are not separators.
                "array" if property.get("items").map(json_type) == Some("object") => arg.action(ArgAction::Append),
                "array" => arg.action(ArgAction::Append).value_delimiter(','),
                _ => arg.action(ArgAction::Set),
            };
        }
        sub = sub.arg(arg);
    }
    if spec.needs_session {
        sub = sub
            .arg(
                Arg::new("session")
                    .long("session")
                    .help("Session id (from `studio-bridge sessions`)"),
            )
            .arg(
                Arg::new("context")
                    .long("context")
                    .value_parser(["edit", "server", "client"])
                    .help("DataModel during Play: edit, server or client"),
            );
    }
    if let Some(event) = spec.follow_event {
        sub = sub.arg(
            Arg::new("follow")
                .long("follow")
                .short('f')
                .action(ArgAction::SetTrue)
                .help(format!(
                    "After the result, keep printing new `{event}` events until interrupted"
                )),
        );
    }
    sub.arg(
        Arg::new("json")
            .long("json")
            .action(ArgAction::SetTrue)
            .help("Print the JSON an MCP client gets"),
    )
    .arg(
        Arg::new("out")
            .long("out")
            .value_parser(clap::value_parser!(PathBuf))
            .help("Where to write an image result (PNG) [default: studio-bridge-<command>-<time>.png]"),
    )
}

/// camelCase → kebab-case, for flag names.
pub fn kebab(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('-');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The JSON type a schema property takes (the non-null one of a nullable type).
fn json_type(property: &Json) -> &str {
    match property.get("type") {
        Some(Json::String(kind)) => kind,
        Some(Json::Array(kinds)) => kinds
            .iter()
            .filter_map(Json::as_str)
            .find(|k| *k != "null")
            .unwrap_or("string"),
        _ => {
            // `anyOf: [{...}, {"type": "null"}]` for optional enums and structs.
            let any_of = property.get("anyOf").and_then(Json::as_array);
            let first = any_of.and_then(|alts| {
                alts.iter()
                    .find(|alt| alt.get("type") != Some(&Json::String("null".into())))
            });
            match first {
                Some(alt) if alt.get("type").is_some() => json_type(alt),
                Some(alt) if alt.get("enum").is_some() => "string",
                _ => "string",
            }
        }
    }
}

/// A command's own arguments from its input schema: everything but `sessionId` and
/// `context`, which the CLI takes as `--session` and `--context`.
fn own_properties(schema: &Map<String, Json>) -> Vec<(String, Json)> {
    let Some(properties) = schema.get("properties").and_then(Json::as_object) else {
        return Vec::new();
    };
    properties
        .iter()
        .filter(|(name, _)| *name != "sessionId" && *name != "context")
        .map(|(name, property)| (name.clone(), property.clone()))
        .collect()
}

/// Turns the parsed command line into the arguments object an MCP client would send.
pub fn arguments(command: &dyn DynCommand, matches: &ArgMatches) -> Result<Map<String, Json>, ToolError> {
    let schema = command.input_schema();
    let properties = own_properties(&schema);
    let mut args = Map::new();
    for (name, property) in &properties {
        let kind = json_type(property);
        if kind == "boolean" {
            if matches.get_flag(name) {
                args.insert(name.clone(), Json::Bool(true));
            }
            continue;
        }
        let Some(values) = matches.get_many::<String>(name) else {
            continue;
        };
        let values: Vec<&String> = values.collect();
        let value = if kind == "array" {
            let item_kind = property.get("items").map(json_type).unwrap_or("string");
            let items: Result<Vec<Json>, ToolError> = values.iter().map(|v| scalar(name, item_kind, v)).collect();
            Json::Array(items?)
        } else {
            scalar(name, kind, values[values.len() - 1])?
        };
        args.insert(name.clone(), value);
    }
    Ok(args)
}

fn scalar(name: &str, kind: &str, text: &str) -> Result<Json, ToolError> {
    let flag = kebab(name);
    match kind {
        "integer" => text
            .parse::<i64>()
            .map(Json::from)
            .map_err(|_| ToolError::invalid_args(format!("--{flag} expects a whole number, not {text:?}"))),
        "number" => text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Json::Number)
            .ok_or_else(|| ToolError::invalid_args(format!("--{flag} expects a number, not {text:?}"))),
        "object" => serde_json::from_str(text)
            .map_err(|e| ToolError::invalid_args(format!("--{flag} expects a JSON object: {e}"))),
        _ => Ok(Json::String(text.to_owned())),
    }
}

/// Where an image result goes when `--out` is not given.
pub fn default_image_path(command: &str) -> PathBuf {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    PathBuf::from(format!("studio-bridge-{command}-{now}.png"))
}

//! The table's commands as clap subcommands, shared by the CLI (`studio-bridge <command>`)
//! and the terminal (`.command`), on the adapters' floor above the table (it reads each
//! command's spec and schema; no command reads it): flags come from each command's input schema, so nothing
//! here knows a command by name, and [`arguments`] turns parsed flags back into the
//! arguments object an MCP client would send.

use std::path::PathBuf;

use clap::{Arg, ArgAction, ArgMatches};
use serde_json::{Map, Value as Json};

pub mod words;

use crate::commands::DynCommand;
use crate::protocol::ToolError;

/// Where the flags that are not the command's own go in `--help`, after its own.
const TARGET_HEADING: &str = "Where it runs";
const OUTPUT_HEADING: &str = "Output";
/// `--instance-id`, which every session command takes.
const INSTANCE_ID_HELP: &str = "Studio instance id (from `studio-bridge sessions`), when several Studios are open";

/// The bridge options (`--port` and the rest, global on the root command).
pub const BRIDGE_HEADING: &str = "Bridge options";

/// The clap subcommand for one table command: its own arguments (positional ones as the
/// spec lists them), `--session`/`--context`/`--instance-id` when it runs in a session,
/// `--follow` when it streams, `--json` and `--out`. Each argument's help is read from its
/// schema: the description, the values an enum takes, the range, the default, and the
/// shape of a structured value; the spec's example closes the help.
/// The verb of an Open Cloud command under `studio-bridge cloud` (`cloud_exec` → `exec`,
/// `datastore` → `datastore`), or None for a command of Studio's own.
pub fn cloud_verb(command: &dyn DynCommand) -> Option<&'static str> {
    let spec = command.spec();
    spec.capabilities
        .contains(crate::policy::Capability::Cloud)
        .then(|| spec.name.strip_prefix("cloud_").unwrap_or(spec.name))
}

pub fn subcommand_for(command: &dyn DynCommand) -> clap::Command {
    let spec = command.spec();
    let first_sentence = spec.description.split(". ").next().unwrap_or(spec.description);
    // Kebab case on the command line (`script-read`), as shells and clap users expect;
    // Open Cloud's commands are verbs of `studio-bridge cloud`.
    let name = cloud_verb(command).unwrap_or(spec.name).replace('_', "-");
    let mut sub = clap::Command::new(name)
        .about(first_sentence.trim_end_matches('.').to_owned())
        .long_about(spec.description)
        .after_help(format!("Example:\n  {}", spec.example));
    let schema = command.input_schema();
    let required = |name: &str| {
        schema
            .get("required")
            .and_then(Json::as_array)
            .is_some_and(|r| r.iter().any(|n| n == name))
    };
    let mut properties = own_properties(&schema);
    // Positional arguments first, in the spec's order: clap numbers them as they come.
    properties.sort_by_key(|(name, _)| spec.positional.iter().position(|p| p == name).unwrap_or(usize::MAX));
    for (name, property) in &properties {
        let kind = flag_kind(property);
        let mut arg = Arg::new(name.clone())
            .help(help_for(spec, name, property))
            .value_name(value_name(name, property));
        if let Some(values) = enum_values(property).or_else(|| property.get("items").and_then(enum_values)) {
            arg = arg.value_parser(kebab_values(&values));
        }
        if spec.positional.contains(&name.as_str()) {
            arg = arg.required(required(name));
            if kind == "array" {
                arg = arg.num_args(1..).action(ArgAction::Append);
            }
            if spec.from_file == Some(name.as_str()) {
                arg = arg.required(false).required_unless_present("file");
            }
        } else if name == "instanceId" {
            arg = arg.long("instance-id").value_name("ID").help_heading(TARGET_HEADING);
        } else if kind == "boolean" && property.get("default") == Some(&Json::Bool(true)) {
            // On unless told: the flag turns it off (`--no-check`).
            arg = arg.long(format!("no-{}", kebab(name))).action(ArgAction::SetTrue);
        } else {
            arg = arg.long(kebab(name));
            arg = match kind {
                "boolean" => arg.action(ArgAction::SetTrue),
                // A JSON array, or one JSON object a flag (`--items '{…}' --items '{…}'`):
                // the commas inside are not separators.
                "array" if item_kind(property) == "object" => arg.action(ArgAction::Append),
                "array" => arg.action(ArgAction::Append).value_delimiter(','),
                _ => arg.action(ArgAction::Set),
            };
        }
        sub = sub.arg(arg);
    }
    if let Some(name) = spec.from_file {
        sub = sub.arg(
            Arg::new("file")
                .long("file")
                .short('F')
                .value_name("FILE")
                .value_parser(clap::value_parser!(PathBuf))
                .conflicts_with(name)
                .help(format!("Read {name} from FILE (`-` or {name} `-`: from stdin)")),
        );
    }
    if spec.needs_session {
        sub = sub
            .arg(
                Arg::new("session")
                    .long("session")
                    .value_name("ID")
                    .help_heading(TARGET_HEADING)
                    .help("Session id (from `studio-bridge sessions`)"),
            )
            .arg(
                Arg::new("context")
                    .long("context")
                    .value_name("CONTEXT")
                    .help_heading(TARGET_HEADING)
                    .value_parser(["edit", "server", "client"])
                    .help(format!(
                        "DataModel during Play [default: {}]",
                        spec.default_context.as_str()
                    )),
            );
    }
    if let Some(event) = spec.follow_event {
        sub = sub.arg(
            Arg::new("follow")
                .long("follow")
                .short('f')
                .action(ArgAction::SetTrue)
                .help_heading(OUTPUT_HEADING)
                .help(format!(
                    "After the result, keep printing new `{event}` events until interrupted"
                )),
        );
    }
    sub.arg(
        Arg::new("json")
            .long("json")
            .action(ArgAction::SetTrue)
            .help_heading(OUTPUT_HEADING)
            .help("Print the JSON an MCP client gets"),
    )
    .arg(
        Arg::new("out")
            .long("out")
            .value_name("PNG")
            .help_heading(OUTPUT_HEADING)
            .value_parser(clap::value_parser!(PathBuf))
            .help("Where to write an image result [default: studio-bridge-<command>-<time>.png]"),
    )
}

/// An argument's help, from its schema: the description (or the spec's words for a
/// person, [`crate::commands::Spec::flag_help`]), the range, the shape of a structured
/// value, and the default (enum values clap lists itself).
fn help_for(spec: &crate::commands::Spec, name: &str, property: &Json) -> String {
    let kind = json_type(property);
    let negated = kind == "boolean" && property.get("default") == Some(&Json::Bool(true));
    let described = spec
        .flag_help
        .iter()
        .find(|(flag, _)| *flag == name)
        .map(|(_, words)| (*words).to_owned())
        .or_else(|| property.get("description").and_then(Json::as_str).map(str::to_owned))
        .or_else(|| (name == "instanceId").then(|| INSTANCE_ID_HELP.to_owned()));
    let mut parts: Vec<String> = Vec::new();
    if let Some(described) = described {
        let described = described.trim_end_matches('.');
        // `false: skip the check` is what the flag does when given: `--no-check`.
        parts.push(match described.strip_prefix("false: ") {
            Some(rest) if negated => capitalised(rest),
            _ => described.to_owned(),
        });
    }
    if negated {
        return parts.join(". ");
    }
    let structured =
        kind == "object" || (kind == "array" && item_kind(property) == "object") || property.get("anyOf").is_some();
    if structured {
        let shape = shape(property);
        if !parts.iter().any(|p| p.contains(&shape)) {
            parts.push(format!("JSON: {shape}"));
        }
    } else if kind == "array" {
        parts.push(format!(
            "{}, comma-separated or repeated",
            words_for(item_kind(property))
        ));
    }
    if let Some(range) = range(property) {
        parts.push(range);
    }
    let mut help = parts.join(". ");
    if let Some(default) = property.get("default") {
        let default = match default {
            Json::String(text) => kebab_value(text),
            other => other.to_string(),
        };
        help.push_str(&format!(" [default: {default}]"));
    }
    help.trim().to_owned()
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// `1–8`, `at most 10000`, `at least 16`: a number's bounds, as the schema says them.
fn range(property: &Json) -> Option<String> {
    let min = property.get("minimum").and_then(Json::as_f64);
    let max = property.get("maximum").and_then(Json::as_f64);
    match (min, max) {
        (Some(min), Some(max)) => Some(format!("{min}–{max}")),
        (None, Some(max)) => Some(format!("at most {max}")),
        (Some(min), None) => Some(format!("at least {min}")),
        (None, None) => None,
    }
}

/// The shape of a structured value, as a person writes it: `{startLine, endLine, text}`,
/// `[{…}, …]`, `PATH or {text?, name?, className?}`.
fn shape(schema: &Json) -> String {
    if let Some(alternatives) = schema.get("anyOf").and_then(Json::as_array) {
        return alternatives.iter().map(shape).collect::<Vec<_>>().join(" or ");
    }
    if let Some(values) = enum_values(schema) {
        return values.iter().map(|v| kebab_value(v)).collect::<Vec<_>>().join("|");
    }
    match json_type(schema) {
        "array" => format!("[{}, …]", schema.get("items").map(shape).unwrap_or_default()),
        "object" => {
            let fields = schema.get("properties").and_then(Json::as_object);
            match fields {
                Some(fields) if !fields.is_empty() => {
                    let required = schema.get("required").and_then(Json::as_array);
                    let names: Vec<String> = fields
                        .keys()
                        .map(|name| {
                            let needed = required.is_some_and(|r| r.iter().any(|n| n == name));
                            if needed { name.clone() } else { format!("{name}?") }
                        })
                        .collect();
                    format!("{{{}}}", names.join(", "))
                }
                // Its fields are in its description (`create`'s items: the budget).
                _ => match schema.get("description").and_then(Json::as_str) {
                    Some(description) if description.starts_with('{') => description.to_owned(),
                    _ => "{…}".to_owned(),
                },
            }
        }
        other => words_for(other).to_owned(),
    }
}

/// What a scalar is called in help text.
fn words_for(kind: &str) -> &'static str {
    match kind {
        "integer" => "whole numbers",
        "number" => "numbers",
        "boolean" => "true|false",
        "object" => "{…}",
        _ => "text",
    }
}

/// The placeholder clap shows for a value: `N`, `PATH`, `JSON`, `TEXT`.
fn value_name(name: &str, property: &Json) -> String {
    let kind = json_type(property);
    let path_like = ["path", "paths", "root", "parent", "set"].contains(&name);
    if enum_values(property).is_some() {
        return kebab(name).to_uppercase();
    }
    match kind {
        "integer" | "number" => "N".to_owned(),
        "object" => "JSON".to_owned(),
        "array" if item_kind(property) == "object" => "JSON".to_owned(),
        "array" if item_kind(property) == "number" => "X,Y,Z".to_owned(),
        _ if property.get("anyOf").is_some() => "VALUE".to_owned(),
        _ if path_like => "PATH".to_owned(),
        _ => kebab(name).to_uppercase(),
    }
}

/// The JSON type of an array's items.
fn item_kind(property: &Json) -> &str {
    property.get("items").map(json_type).unwrap_or("string")
}

/// The values of an enum property (`play`'s modes), as the schema spells them.
fn enum_values(property: &Json) -> Option<Vec<String>> {
    let values = property.get("enum")?.as_array()?;
    Some(values.iter().filter_map(Json::as_str).map(str::to_owned).collect())
}

/// An enum's values on the command line: kebab case (`add-players`, `move-to`), each with
/// its schema spelling as a hidden alias.
fn kebab_values(values: &[String]) -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(values.iter().map(|value| {
        let shown = kebab_value(value);
        let possible = clap::builder::PossibleValue::new(shown.clone());
        if shown == *value {
            possible
        } else {
            possible.alias(value.clone())
        }
    }))
}

/// One enum value in kebab case: `add_players` → `add-players`, `moveTo` → `move-to`.
/// A value that starts with a capital is a Roblox name (`Print`, `Error`) and stays as is.
pub fn kebab_value(value: &str) -> String {
    if value.starts_with(|c: char| c.is_ascii_uppercase()) {
        return value.to_owned();
    }
    kebab(value).replace('_', "-")
}

/// How the command line takes a property: its JSON type, or `anyOf` for a value of
/// several shapes (taken as one text and parsed by [`one_of`]).
fn flag_kind(property: &Json) -> &str {
    if property.get("anyOf").is_some() {
        "anyOf"
    } else {
        json_type(property)
    }
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
    let spec = command.spec();
    let schema = command.input_schema();
    let properties = own_properties(&schema);
    let mut args = Map::new();
    for (name, property) in &properties {
        let kind = flag_kind(property);
        if kind == "boolean" {
            if matches.get_flag(name) {
                // `--no-check` turns off what is on by default; `--force` turns on.
                let on_by_default = property.get("default") == Some(&Json::Bool(true));
                args.insert(name.clone(), Json::Bool(!on_by_default));
            }
            continue;
        }
        let Some(values) = matches.get_many::<String>(name) else {
            continue;
        };
        let values: Vec<&String> = values.collect();
        let flag = flag_name(spec, name);
        let value = if let Some(choices) = enum_values(property) {
            let given = values[values.len() - 1];
            let chosen = choices
                .iter()
                .find(|c| kebab_value(c) == *given || *c == given)
                .cloned()
                .unwrap_or_else(|| given.clone());
            Json::String(chosen)
        } else if kind == "array" && item_kind(property) == "object" {
            let mut items = Vec::new();
            for text in &values {
                match serde_json::from_str::<Json>(text) {
                    Ok(Json::Array(more)) => items.extend(more),
                    Ok(item @ Json::Object(_)) => items.push(item),
                    _ => {
                        return Err(ToolError::invalid_args(format!(
                            "{flag} expects a JSON array of {}, or one such object each time it is given; got {text:?}",
                            property.get("items").map(shape).unwrap_or_default()
                        )));
                    }
                }
            }
            Json::Array(items)
        } else if kind == "array" {
            let item_kind = item_kind(property);
            let choices = property.get("items").and_then(enum_values).unwrap_or_default();
            let values: Vec<String> = values
                .iter()
                .map(|given| {
                    choices
                        .iter()
                        .find(|c| kebab_value(c) == **given)
                        .cloned()
                        .unwrap_or_else(|| (*given).clone())
                })
                .collect();
            let items: Result<Vec<Json>, ToolError> = values.iter().map(|v| scalar(&flag, item_kind, v)).collect();
            Json::Array(items?)
        } else if kind == "anyOf" {
            let alternatives = property
                .get("anyOf")
                .and_then(Json::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            one_of(&flag, alternatives, values[values.len() - 1])?
        } else {
            scalar(&flag, kind, values[values.len() - 1])?
        };
        args.insert(name.clone(), value);
    }
    if let Some(name) = spec.from_file {
        let from = match matches.try_get_one::<PathBuf>("file").ok().flatten() {
            Some(path) => Some(path.clone()),
            None if args.get(name).and_then(Json::as_str) == Some("-") => Some(PathBuf::from("-")),
            None => None,
        };
        if let Some(path) = from {
            args.insert(name.to_owned(), Json::String(read_text(&path)?));
        }
    }
    Ok(args)
}

/// How a person names an argument on the command line: `--count`, or `<query>` for a
/// positional one.
fn flag_name(spec: &crate::commands::Spec, name: &str) -> String {
    if spec.positional.contains(&name) {
        format!("<{}>", kebab(name))
    } else {
        format!("--{}", kebab(name))
    }
}

/// A file's text, or stdin's for `-`.
fn read_text(path: &std::path::Path) -> Result<String, ToolError> {
    use std::io::Read as _;
    let mut text = String::new();
    let read = if path.as_os_str() == "-" {
        std::io::stdin().read_to_string(&mut text).map(|_| ())
    } else {
        std::fs::File::open(path).and_then(|mut file| file.read_to_string(&mut text).map(|_| ()))
    };
    read.map_err(|e| {
        let from = if path.as_os_str() == "-" {
            "stdin".to_owned()
        } else {
            path.display().to_string()
        };
        ToolError::invalid_args(format!("cannot read the script from {from}: {e}"))
    })?;
    Ok(text)
}

/// A value that may take one of several shapes (`ui --target`: a path or `{text?, …}`;
/// `character --to`: `x,y,z` or a path): the first shape it parses as.
fn one_of(flag: &str, alternatives: &[Json], text: &str) -> Result<Json, ToolError> {
    // The most particular shape first: a text is a path only if it is nothing else.
    let mut alternatives: Vec<&Json> = alternatives.iter().collect();
    alternatives.sort_by_key(|alternative| json_type(alternative) == "string");
    for alternative in &alternatives {
        let parsed = match json_type(alternative) {
            "object" if text.trim_start().starts_with('{') => serde_json::from_str::<Json>(text).ok(),
            "array" => {
                let kind = item_kind(alternative);
                text.split(',')
                    .map(|item| scalar(flag, kind, item.trim()).ok())
                    .collect::<Option<Vec<Json>>>()
                    .map(Json::Array)
            }
            "string" => Some(Json::String(text.to_owned())),
            _ => None,
        };
        if let Some(value) = parsed {
            return Ok(value);
        }
    }
    let shapes: Vec<String> = alternatives.iter().map(|a| shape(a)).collect();
    Err(ToolError::invalid_args(format!(
        "{flag} expects {}, not {text:?}",
        shapes.join(" or ")
    )))
}

fn scalar(flag: &str, kind: &str, text: &str) -> Result<Json, ToolError> {
    match kind {
        "integer" => text
            .parse::<i64>()
            .map(Json::from)
            .map_err(|_| ToolError::invalid_args(format!("{flag} expects a whole number, not {text:?}"))),
        "number" => text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Json::Number)
            .ok_or_else(|| ToolError::invalid_args(format!("{flag} expects a number, not {text:?}"))),
        "object" => serde_json::from_str(text)
            .map_err(|e| ToolError::invalid_args(format!("{flag} expects a JSON object: {e}"))),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::{self, ALL};
    use serde_json::json;

    fn command_line() -> clap::Command {
        let mut root = clap::Command::new("studio-bridge").arg(
            Arg::new("port")
                .long("port")
                .global(true)
                .help_heading(BRIDGE_HEADING)
                .help("Bridge port"),
        );
        let mut cloud = clap::Command::new("cloud");
        for command in ALL {
            if cloud_verb(*command).is_some() {
                cloud = cloud.subcommand(subcommand_for(*command));
            } else {
                root = root.subcommand(subcommand_for(*command));
            }
        }
        root.subcommand(cloud)
    }

    /// The words after `studio-bridge` that name a command: `exec`, or `cloud exec`.
    fn words_of(command: &dyn DynCommand) -> Vec<String> {
        match cloud_verb(command) {
            Some(verb) => vec!["cloud".to_owned(), verb.replace('_', "-")],
            None => vec![command.spec().name.replace('_', "-")],
        }
    }

    /// A command's own subcommand in `root`.
    fn sub_of<'a>(root: &'a clap::Command, command: &dyn DynCommand) -> &'a clap::Command {
        let mut sub = root;
        for word in words_of(command) {
            sub = sub.find_subcommand(&word).expect("a command");
        }
        sub
    }

    /// The arguments a command line turns into (`words` after `studio-bridge`).
    fn parsed(words: &[&str]) -> Result<Json, String> {
        let matches = command_line()
            .try_get_matches_from(std::iter::once("studio-bridge").chain(words.iter().copied()))
            .map_err(|e| e.to_string())?;
        let (mut name, mut sub) = matches.subcommand().ok_or("no subcommand")?;
        if name == "cloud" {
            (name, sub) = sub.subcommand().ok_or("no cloud verb")?;
            let command = ALL
                .iter()
                .find(|c| cloud_verb(**c).is_some_and(|v| v.replace('_', "-") == name))
                .ok_or("no cloud command")?;
            return arguments(*command, sub).map(Json::Object).map_err(|e| e.message);
        }
        let command = commands::find(&name.replace('-', "_")).ok_or("no command")?;
        arguments(command, sub).map(Json::Object).map_err(|e| e.message)
    }

    fn help(name: &str) -> String {
        let mut root = command_line();
        root.build();
        root.find_subcommand_mut(name)
            .expect("a command")
            .render_help()
            .to_string()
    }

    #[test]
    fn every_argument_has_words_in_help() {
        for command in ALL {
            let spec = command.spec();
            let schema = command.input_schema();
            let properties = own_properties(&schema);
            for (name, property) in &properties {
                let words = help_for(spec, name, property);
                assert!(!words.is_empty(), "{}: {name} has no help", spec.name);
            }
            for (flag, _) in spec.flag_help {
                assert!(
                    properties.iter().any(|(name, _)| name == flag),
                    "{}: flag_help names {flag}, which is no argument",
                    spec.name
                );
            }
        }
    }

    #[test]
    fn help_shows_values_defaults_shapes_headings_and_an_example() {
        let play = help("play");
        assert!(
            play.contains("[possible values: start, run, stop, add-players]"),
            "{play}"
        );
        assert!(
            play.contains("Example:\n  studio-bridge play start --players 2"),
            "{play}"
        );
        assert!(play.contains("--players <N>") && play.contains("1–8"), "{play}");
        let own = play.find("--players").unwrap();
        let target = play.find("Where it runs:").unwrap();
        let output = play.find("Output:").unwrap();
        let bridge = play.find("Bridge options:").unwrap();
        assert!(own < target && target < output && output < bridge, "{play}");
        assert!(play[bridge..].contains("--port"), "{play}");
        assert!(!play[..bridge].contains("--port"), "{play}");

        let create = help("create");
        assert!(
            create.contains(
                "[{className, parent (may be an earlier item), name?, properties?, attributes?, tags?, source?}, …]"
            ),
            "{create}"
        );
        assert!(
            create.contains("--no-check") && create.contains("No syntax check"),
            "{create}"
        );
        let edit = help("script-edit");
        assert!(edit.contains("[{startLine, endLine, text}, …]"), "{edit}");
        assert!(edit.contains("--force"), "{edit}");
        assert!(edit.contains("--file <FILE>"), "{edit}");
        let logs = help("logs");
        assert!(logs.contains("[default: 50]"), "{logs}");
        assert!(logs.contains("[possible values: head, tail]"), "{logs}");
        assert!(
            logs.contains("[possible values: Print, Info, Warning, Error]"),
            "{logs}"
        );
        let character = help("character");
        assert!(character.contains("move-to, jump"), "{character}");
        assert!(help("delete").contains("<PATH>..."), "{}", help("delete"));
    }

    #[test]
    fn every_example_parses() {
        for command in ALL {
            let spec = command.spec();
            // The example without its note: `… 'x'   (or --file F)`.
            let line = spec.example.split("   (").next().unwrap();
            let mut words: Vec<String> = Vec::new();
            let mut quoted = false;
            for (i, part) in line.split('\'').enumerate() {
                quoted = i % 2 == 1;
                if quoted {
                    words.push(part.to_owned());
                } else {
                    words.extend(part.split_whitespace().map(str::to_owned));
                }
            }
            assert!(!quoted, "{}: unbalanced quotes", spec.name);
            assert_eq!(words[0], "studio-bridge", "{}", spec.name);
            let names = words_of(*command);
            assert_eq!(words[1..=names.len()], names[..], "{}", spec.name);
            let words: Vec<&str> = words[1..].iter().map(String::as_str).collect();
            let args = parsed(&words).unwrap_or_else(|e| panic!("{}: {e}", spec.name));
            // What the example says is what the command accepts.
            let schema = Json::Object(command.input_schema());
            let validator = jsonschema::validator_for(&schema).unwrap();
            let errors: Vec<String> = validator.iter_errors(&args).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{}: {errors:?}", spec.name);
        }
    }

    #[test]
    fn arguments_take_the_shapes_people_expect() {
        assert_eq!(
            parsed(&["delete", "Workspace.A", "Workspace.B"]).unwrap(),
            json!({"paths": ["Workspace.A", "Workspace.B"]})
        );
        assert_eq!(
            parsed(&["play", "add-players", "--players", "2"]).unwrap(),
            json!({"mode": "add_players", "players": 2})
        );
        // The schema's own spelling still works.
        assert_eq!(
            parsed(&["play", "add_players"]).unwrap(),
            json!({"mode": "add_players"})
        );
        assert!(parsed(&["play", "add-player"]).unwrap_err().contains("add-players"));
        assert_eq!(
            parsed(&["character", "move-to", "--to", "10,0,5"]).unwrap(),
            json!({"action": "moveTo", "to": [10.0, 0.0, 5.0]})
        );
        assert_eq!(
            parsed(&["character", "move-to", "--to", "Workspace.Spawn"]).unwrap(),
            json!({"action": "moveTo", "to": "Workspace.Spawn"})
        );
        assert_eq!(
            parsed(&["ui", "click", "--target", r#"{"text": "Play"}"#]).unwrap(),
            json!({"action": "click", "target": {"text": "Play"}})
        );
        assert_eq!(
            parsed(&["ui", "type", "--text", "hi", "--no-clear"]).unwrap(),
            json!({"action": "type", "text": "hi", "clear": false})
        );
        let edits = r#"[{"startLine": 1, "endLine": 1, "text": "a"}, {"startLine": 3, "endLine": 2, "text": "b"}]"#;
        assert_eq!(
            parsed(&["script-edit", "S", "--edits", edits]).unwrap()["edits"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        let one = r#"{"startLine": 1, "endLine": 1, "text": "a"}"#;
        assert_eq!(
            parsed(&["script-edit", "S", "--edits", one, "--edits", one]).unwrap()["edits"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        let bad = parsed(&["script-edit", "S", "--edits", "1,2"]).unwrap_err();
        assert!(
            bad.contains("--edits expects a JSON array of {startLine, endLine, text}"),
            "{bad}"
        );
        assert_eq!(
            parsed(&["script-edit", "S", "--source", "x", "--no-check", "--force"]).unwrap(),
            json!({"path": "S", "source": "x", "check": false, "force": true})
        );
        assert_eq!(
            parsed(&["logs", "--levels", "Error,Warning", "--direction", "head"]).unwrap(),
            json!({"direction": "head", "levels": ["Error", "Warning"]})
        );
        let bad = parsed(&["logs", "--count", "many"]).unwrap_err();
        assert!(bad.contains("--count expects a whole number"), "{bad}");
    }

    #[test]
    fn a_script_comes_from_a_file() {
        let dir = std::env::temp_dir().join(format!("sb-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("s.luau");
        std::fs::write(&file, "return 1 + 1\n").unwrap();
        let path = file.to_str().unwrap();
        assert_eq!(
            parsed(&["exec", "--file", path]).unwrap(),
            json!({"script": "return 1 + 1\n"})
        );
        assert_eq!(
            parsed(&["test-run", "-F", path]).unwrap(),
            json!({"script": "return 1 + 1\n"})
        );
        assert_eq!(
            parsed(&["script-edit", "S", "--file", path]).unwrap(),
            json!({"path": "S", "source": "return 1 + 1\n"})
        );
        // A script, or a file: not both, and not neither.
        assert!(parsed(&["exec", "return 1", "--file", path]).is_err());
        assert!(parsed(&["exec"]).is_err());
        let missing = parsed(&["exec", "--file", "/nonexistent/x.luau"]).unwrap_err();
        assert!(missing.contains("/nonexistent/x.luau"), "{missing}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Every argument the server accepts is in its schema (no field hidden from it), and
    /// every one of the schema's arguments is a flag or a positional on the command line.
    #[test]
    fn one_truth_for_arguments() {
        let sources = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/commands");
        for entry in std::fs::read_dir(&sources).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                assert!(
                    !text.contains("#[schemars(skip)]"),
                    "{} hides a field from its schema",
                    path.display()
                );
            }
        }
        for (command, names) in [
            ("exec", &["check", "env"][..]),
            ("script_edit", &["check", "force"]),
            ("create", &["check"]),
            ("test_run", &["check"]),
        ] {
            let schema = commands::find(command).unwrap().input_schema();
            for name in names {
                assert!(schema["properties"].get(*name).is_some(), "{command}: {name}");
            }
        }
        let root = command_line();
        for command in ALL {
            let sub = sub_of(&root, *command);
            for (name, _) in own_properties(&command.input_schema()) {
                assert!(
                    sub.get_arguments().any(|a| a.get_id() == name.as_str()),
                    "{}: {name}",
                    command.spec().name
                );
            }
        }
    }
}

//! Dot-commands: every command of the table as `.name [args]`, parsed with the CLI's own
//! clap definitions (so the flags are the CLI's, now and for commands added later), plus
//! the terminal's own (`.attach`, `.context`, `.follow`, `.help`, `.exit`). Also their help
//! and tab completion. Nothing here knows a table command by name.

use clap::ArgMatches;

use crate::commands::{self, DynCommand};
use crate::protocol::Context;
use crate::subcommands::subcommand_for;

/// The terminal's own dot-commands, with what they do (`.sessions` is the table's).
pub const OWN: &[(&str, &str, &str)] = &[
    (
        "attach",
        "ID|N",
        "Attach to a session by id, or by its row in .sessions",
    ),
    (
        "context",
        "edit|server|client",
        "Attach to another DataModel of this Studio",
    ),
    (
        "follow",
        "on|off",
        "Stream new log lines of the attached session above the prompt",
    ),
    ("help", "[command]", "List the dot-commands, or one command's flags"),
    ("exit", "", "Leave the terminal (or Ctrl-D)"),
];

/// A parsed dot-command line.
pub enum Dot {
    /// A command of the table with its parsed flags.
    Table(&'static dyn DynCommand, ArgMatches),
    Attach(String),
    Context(Context),
    Follow(bool),
    Help(Option<String>),
    Exit,
    /// Something to tell the person instead (a usage error, or clap's `--help` text).
    Say(String),
}

/// `.name` of a table command: kebab case, as on the command line.
pub fn dot_name(command: &dyn DynCommand) -> String {
    command.spec().name.replace('_', "-")
}

/// The table command a dot-name stands for (`script-read` or `script_read`).
pub fn table_command(name: &str) -> Option<&'static dyn DynCommand> {
    commands::find(&name.replace('-', "_"))
}

/// Every dot-command name: the table's, then the terminal's own.
pub fn all_names() -> Vec<String> {
    let mut names: Vec<String> = commands::ALL.iter().map(|c| dot_name(*c)).collect();
    names.extend(OWN.iter().map(|(name, _, _)| (*name).to_owned()));
    names
}

/// Parses a line that starts with `.`.
pub fn parse(line: &str) -> Dot {
    let words = match split_words(line.trim_start().trim_start_matches('.')) {
        Ok(words) => words,
        Err(message) => return Dot::Say(message),
    };
    let Some((name, rest)) = words.split_first() else {
        return Dot::Help(None);
    };
    match (name.as_str(), rest) {
        ("exit" | "quit", []) => Dot::Exit,
        ("help", []) => Dot::Help(None),
        ("help", [command]) => Dot::Help(Some(command.clone())),
        ("attach", [which]) => Dot::Attach(which.clone()),
        ("context", [context]) => match Context::parse(context) {
            Some(context) => Dot::Context(context),
            None => Dot::Say(format!("usage: .context edit|server|client (not {context:?})")),
        },
        ("follow", [on]) if on == "on" => Dot::Follow(true),
        ("follow", [off]) if off == "off" => Dot::Follow(false),
        (own, _) if OWN.iter().any(|(n, _, _)| *n == own) => {
            let (_, usage, _) = OWN.iter().find(|(n, _, _)| *n == own).copied().unwrap_or_default();
            Dot::Say(format!("usage: .{own} {usage}"))
        }
        (name, rest) => match table_command(name) {
            Some(command) => {
                let clap = subcommand_for(command)
                    .no_binary_name(true)
                    .name(format!(".{}", dot_name(command)));
                match clap.try_get_matches_from(rest) {
                    Ok(matches) => Dot::Table(command, matches),
                    Err(error) => Dot::Say(error.render().to_string()),
                }
            }
            None => Dot::Say(format!(
                "unknown command .{name}{}; .help lists them",
                did_you_mean(name)
                    .map(|n| format!(" (did you mean .{n}?)"))
                    .unwrap_or_default()
            )),
        },
    }
}

fn did_you_mean(name: &str) -> Option<String> {
    all_names()
        .into_iter()
        .map(|candidate| (strsim::jaro(name, &candidate), candidate))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}

/// Splits a dot-command into words as a shell would: whitespace separates, '…' and "…"
/// quote (`.exec "print('a b')"`), and a backslash escapes the next character outside
/// single quotes.
pub fn split_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("unclosed ' in the command".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c) => word.push(c),
                            None => return Err("unclosed \" in the command".into()),
                        },
                        Some(c) => word.push(c),
                        None => return Err("unclosed \" in the command".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(c) = chars.next() {
                    word.push(c);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// `.help`: every dot-command with one line on what it does.
pub fn help_all() -> String {
    let mut rows: Vec<(String, String)> = commands::ALL
        .iter()
        .map(|command| {
            let about = subcommand_for(*command)
                .get_about()
                .map(|a| a.to_string())
                .unwrap_or_default();
            (format!(".{}", dot_name(*command)), about)
        })
        .collect();
    rows.extend(
        OWN.iter()
            .map(|(name, usage, about)| (format!(".{name} {usage}").trim_end().to_owned(), (*about).to_owned())),
    );
    let width = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let mut text = String::from("Lines not starting with . are Luau, run in the attached session (globals persist).\n");
    for (name, about) in rows {
        text.push_str(&format!("  {name:<width$}  {about}\n"));
    }
    text.push_str(".help <command> shows its flags (the same as `studio-bridge <command> --help`).\n");
    text
}

/// `.help <command>`.
pub fn help_one(name: &str) -> String {
    let name = name.trim_start_matches('.');
    if let Some((own, usage, about)) = OWN.iter().find(|(n, _, _)| *n == name) {
        return format!(".{own} {usage}\n  {about}\n");
    }
    match table_command(name) {
        Some(command) => subcommand_for(command)
            .name(format!(".{}", dot_name(command)))
            .no_binary_name(true)
            .render_long_help()
            .to_string(),
        None => format!("unknown command .{name}; .help lists them\n"),
    }
}

/// Tab completion: dot-command names after a leading `.`, then that command's flags (and
/// the values of a flag or terminal command that has a fixed set). Luau lines complete
/// nothing. Returns where the replaced word starts and the candidates.
pub fn complete(line: &str, pos: usize) -> (usize, Vec<String>) {
    let upto = line.get(..pos).unwrap_or(line);
    if !upto.starts_with('.') {
        return (pos, Vec::new());
    }
    let start = upto.rfind(char::is_whitespace).map_or(0, |i| i + 1);
    let current = &upto[start..];
    if start == 0 {
        let prefix = current.trim_start_matches('.');
        let names = all_names()
            .into_iter()
            .filter(|name| name.starts_with(prefix))
            .map(|name| format!(".{name}"))
            .collect();
        return (0, names);
    }
    let words: Vec<&str> = upto[1..start].split_whitespace().collect();
    let Some(name) = words.first().copied() else {
        return (pos, Vec::new());
    };
    let previous = words.last().copied().unwrap_or("");
    let values: Vec<String> = match name {
        "context" if words.len() == 1 => ["edit", "server", "client"].map(String::from).to_vec(),
        "follow" if words.len() == 1 => ["on", "off"].map(String::from).to_vec(),
        "help" if words.len() == 1 => all_names(),
        _ => match table_command(name) {
            Some(command) => {
                let clap = subcommand_for(command);
                let flag_values = previous.strip_prefix("--").and_then(|flag| {
                    clap.get_arguments()
                        .find(|arg| arg.get_long() == Some(flag))
                        .map(|arg| arg.get_possible_values())
                        .filter(|values| !values.is_empty())
                });
                match flag_values {
                    Some(values) => values.iter().map(|v| v.get_name().to_owned()).collect(),
                    None => clap
                        .get_arguments()
                        .filter_map(|arg| arg.get_long())
                        .map(|long| format!("--{long}"))
                        .collect(),
                }
            }
            None => Vec::new(),
        },
    };
    (start, values.into_iter().filter(|v| v.starts_with(current)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_command_is_a_dot_command_in_help_and_completion() {
        let help = help_all();
        let (_, names) = complete(".", 1);
        for command in commands::ALL {
            let name = format!(".{}", dot_name(*command));
            assert!(help.contains(&name), "{name} missing from .help");
            assert!(names.contains(&name), "{name} missing from completion");
            assert!(
                !OWN.iter().any(|(own, _, _)| *own == dot_name(*command)),
                "{name} is shadowed by a terminal command"
            );
            // Reachable: `.name --help` is answered by that command's own clap definition.
            match parse(&format!("{name} --help")) {
                Dot::Say(text) => assert!(text.contains(&name), "{text}"),
                _ => panic!("{name} --help did not answer with its help"),
            }
        }
    }

    #[test]
    fn table_commands_parse_with_the_cli_flags() {
        let Dot::Table(command, matches) = parse(".query Workspace.Part --properties Size,Color") else {
            panic!("not a table command")
        };
        let args = crate::subcommands::arguments(command, &matches).unwrap();
        assert_eq!(
            serde_json::Value::Object(args),
            serde_json::json!({"path": "Workspace.Part", "properties": ["Size", "Color"]})
        );
        let Dot::Table(command, matches) = parse(".script-read \"Workspace.My Script\" --start-line 2") else {
            panic!("not a table command")
        };
        assert_eq!(command.spec().name, "script_read");
        let args = crate::subcommands::arguments(command, &matches).unwrap();
        assert_eq!(args["path"], "Workspace.My Script");
        assert!(matches!(parse(".logs --count many --bogus"), Dot::Say(text) if text.contains("--bogus")));
    }

    #[test]
    fn own_commands_parse() {
        assert!(matches!(parse(".exit"), Dot::Exit));
        assert!(matches!(parse(".context server"), Dot::Context(Context::Server)));
        assert!(matches!(parse(".context studio"), Dot::Say(text) if text.contains("edit|server|client")));
        assert!(matches!(parse(".follow on"), Dot::Follow(true)));
        assert!(matches!(parse(".follow off"), Dot::Follow(false)));
        assert!(matches!(parse(".attach 2"), Dot::Attach(which) if which == "2"));
        assert!(matches!(parse(".help query"), Dot::Help(Some(name)) if name == "query"));
        assert!(matches!(parse(".qurey"), Dot::Say(text) if text.contains(".query")));
    }

    #[test]
    fn words_split_as_a_shell_does() {
        assert_eq!(
            split_words(r#"find 'My Model' --name "a \"b\"" c\ d"#).unwrap(),
            ["find", "My Model", "--name", "a \"b\"", "c d"]
        );
        assert!(split_words("find 'open").is_err());
    }

    #[test]
    fn completion_offers_names_flags_and_values() {
        assert_eq!(complete(".que", 4), (0, vec![".query".to_owned()]));
        let (start, flags) = complete(".query Workspace --prop", 23);
        assert_eq!(start, 17);
        assert_eq!(flags, ["--properties"]);
        let (_, values) = complete(".logs --context s", 17);
        assert_eq!(values, ["server"]);
        assert_eq!(complete(".follow o", 9).1, ["on", "off"]);
        assert_eq!(complete("print(wor", 9).1, Vec::<String>::new());
        let (_, names) = complete(".help scr", 9);
        assert!(names.contains(&"screenshot".to_owned()), "{names:?}");
    }
}

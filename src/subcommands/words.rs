//! One error, three renderings: an error is written once, in an agent's words (tool names
//! and argument names, as MCP has them), and a person at the command line or in the
//! terminal reads it in the words of the surface in front of them.
//!
//! The messages use three forms, and nothing else is rewritten:
//! - a tool's name, `studio_state`: `studio-bridge state` on the command line, `.state` in
//!   the terminal;
//! - a call in backticks, `` `studio_state {operationId: "7f"}` ``: `studio-bridge state
//!   --operation-id 7f`, `.state --operation-id 7f`;
//! - an argument in backticks, `` `check: false` `` or `` `timeoutMs` ``: `--no-check`,
//!   `--timeout-ms`. A bare name is rewritten only when it is an argument of the command
//!   the error came from (a backticked class or script name stays as it is); `name: value`
//!   is rewritten for any command's argument.
//!
//! Kept beside the clap glue because the flags are its own: `sessionId` is `--session`,
//! on-by-default booleans are `--no-<name>`, positional arguments are `<name>`.

use serde_json::Value as Json;

use crate::commands::{self, DynCommand, TOOL_PREFIX};

use super::kebab;

/// Where a message is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// An agent over MCP: the words as written.
    Mcp,
    /// `studio-bridge <command>`.
    Cli,
    /// `studio-bridge terminal`, whose dot-commands take the CLI's flags.
    Terminal,
}

/// `message` in the words of `surface`, for an error of `command` (when known).
pub fn in_words_of(surface: Surface, command: Option<&str>, message: &str) -> String {
    if surface == Surface::Mcp {
        return message.to_owned();
    }
    let command = command.and_then(commands::find);
    let mut out = String::with_capacity(message.len() + 16);
    let mut rest = message;
    while let Some(open) = rest.find('`') {
        let Some(close) = rest[open + 1..].find('`').map(|at| open + 1 + at) else {
            break;
        };
        out.push_str(&tools_in(surface, &rest[..open]));
        let quoted = &rest[open + 1..close];
        match in_backticks(surface, command, quoted) {
            Some(rewritten) => {
                out.push('`');
                out.push_str(&rewritten);
                out.push('`');
            }
            None => {
                out.push('`');
                out.push_str(quoted);
                out.push('`');
            }
        }
        rest = &rest[close + 1..];
    }
    out.push_str(&tools_in(surface, rest));
    if let Some(command) = command {
        let help = match surface {
            Surface::Terminal => format!(".help {}", command_word(command)),
            _ => format!("studio-bridge {} --help", command_word(command)),
        };
        out = out.replace("Check the tool's input schema.", &format!("See `{help}`."));
    }
    out
}

/// A command's name on the command line and in the terminal: `script-read`.
fn command_word(command: &dyn DynCommand) -> String {
    command.spec().name.replace('_', "-")
}

/// How a surface names a command.
fn invocation(surface: Surface, command: &dyn DynCommand) -> String {
    match surface {
        Surface::Terminal => format!(".{}", command_word(command)),
        _ => format!("studio-bridge {}", command_word(command)),
    }
}

/// The tool names in plain text (`Call studio_sessions`), rewritten.
fn tools_in(surface: Surface, text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(TOOL_PREFIX) {
        let starts_word = rest[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        let name_len = rest[at + TOOL_PREFIX.len()..]
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .unwrap_or(rest.len() - at - TOOL_PREFIX.len());
        let name = rest[at + TOOL_PREFIX.len()..at + TOOL_PREFIX.len() + name_len].trim_end_matches('_');
        out.push_str(&rest[..at]);
        // A name quoted from a config file or given to a flag is the user's own text:
        // `deny "studio_query"`, `--deny studio_exec`.
        let quoted = out.ends_with('"') || out.ends_with("--allow ") || out.ends_with("--deny ");
        match commands::find(name).filter(|_| starts_word && !quoted) {
            Some(command) => {
                out.push_str(&invocation(surface, command));
                rest = &rest[at + TOOL_PREFIX.len() + name.len()..];
            }
            None => {
                out.push_str(TOOL_PREFIX);
                rest = &rest[at + TOOL_PREFIX.len()..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// What is between backticks, rewritten if it is a call or an argument.
fn in_backticks(surface: Surface, command: Option<&dyn DynCommand>, quoted: &str) -> Option<String> {
    // `studio_state {operationId: "7f"}`
    if let Some(call) = quoted.strip_prefix(TOOL_PREFIX) {
        let (name, arguments) = match call.split_once(' ') {
            Some((name, arguments)) => (name, arguments.trim()),
            None => (call, ""),
        };
        let called = commands::find(name)?;
        let mut words = invocation(surface, called);
        let inner = arguments
            .strip_prefix('{')
            .and_then(|a| a.strip_suffix('}'))
            .unwrap_or("");
        for pair in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once(':')?;
            words.push(' ');
            words.push_str(&flag(called, key.trim(), Some(value.trim()))?);
        }
        return Some(words);
    }
    // `check: false`, `context: "edit"`: any command's argument.
    if let Some((key, value)) = quoted.split_once(": ") {
        let owner = command
            .filter(|c| has_argument(*c, key))
            .or_else(|| commands::ALL.iter().copied().find(|c| has_argument(*c, key)))?;
        return flag(owner, key, Some(value));
    }
    // `timeoutMs`: an argument of this error's own command.
    let command = command?;
    if has_argument(command, quoted) {
        return flag(command, quoted, None);
    }
    None
}

fn has_argument(command: &dyn DynCommand, name: &str) -> bool {
    command
        .input_schema()
        .get("properties")
        .and_then(Json::as_object)
        .is_some_and(|p| p.contains_key(name))
}

/// An argument as the command line takes it: `--operation-id 7f`, `--no-check`, `<path>`.
fn flag(command: &dyn DynCommand, name: &str, value: Option<&str>) -> Option<String> {
    let schema = command.input_schema();
    let property = schema.get("properties")?.get(name)?;
    let spelled = match name {
        "sessionId" => "--session".to_owned(),
        _ if command.spec().positional.contains(&name) => format!("<{}>", kebab(name)),
        _ => format!("--{}", kebab(name)),
    };
    let Some(value) = value else {
        return Some(spelled);
    };
    let on_by_default = property.get("default") == Some(&Json::Bool(true));
    let words = match value {
        "true" if on_by_default => String::new(),
        "false" if on_by_default => format!("--no-{}", kebab(name)),
        "true" => spelled,
        "false" => String::new(),
        _ => {
            let value = value.trim_matches('"');
            let value = super::kebab_value(value);
            if spelled.starts_with('<') {
                value
            } else if value.contains(char::is_whitespace) {
                format!("{spelled} '{value}'")
            } else {
                format!("{spelled} {value}")
            }
        }
    };
    (!words.is_empty()).then_some(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(command: Option<&str>, message: &str) -> String {
        in_words_of(Surface::Cli, command, message)
    }

    fn terminal(command: Option<&str>, message: &str) -> String {
        in_words_of(Surface::Terminal, command, message)
    }

    #[test]
    fn an_agent_reads_the_message_as_written() {
        let message = "Fix the script, or pass `check: false`. Call studio_sessions.";
        assert_eq!(in_words_of(Surface::Mcp, Some("exec"), message), message);
    }

    #[test]
    fn arguments_become_flags() {
        assert_eq!(
            cli(Some("exec"), "Fix the script, or pass `check: false` for newer syntax."),
            "Fix the script, or pass `--no-check` for newer syntax."
        );
        assert_eq!(
            cli(
                Some("script_edit"),
                "Nothing was written. Pass `force: true` to edit it anyway."
            ),
            "Nothing was written. Pass `--force` to edit it anyway."
        );
        assert_eq!(
            cli(Some("find"), "Retry (exec: pass a larger `timeoutMs`)."),
            "Retry (exec: pass a larger `timeoutMs`).",
            "a bare name is an argument of its own command only"
        );
        assert_eq!(
            cli(Some("exec"), "pass a larger `timeoutMs`"),
            "pass a larger `--timeout-ms`"
        );
        assert_eq!(
            cli(Some("query"), "or pass `context: \"edit\"` to run it there"),
            "or pass `--context edit` to run it there"
        );
        assert_eq!(
            cli(Some("play"), "`players` must be 1 to 8"),
            "`--players` must be 1 to 8"
        );
        assert_eq!(cli(Some("script_read"), "`path` is empty"), "`<path>` is empty");
        // Not an argument: a class's name stays as it is.
        assert_eq!(
            cli(Some("api"), "`class`: unknown class `Prat`"),
            "`--class`: unknown class `Prat`"
        );
        assert_eq!(
            cli(
                Some("exec"),
                "Invalid argument `x` for exec: unknown field. Check the tool's input schema."
            ),
            "Invalid argument `x` for exec: unknown field. See `studio-bridge exec --help`."
        );
    }

    #[test]
    fn tools_and_calls_become_commands() {
        assert_eq!(
            cli(
                None,
                "check with a read tool (e.g. studio_query, studio_script_read) first"
            ),
            "check with a read tool (e.g. studio-bridge query, studio-bridge script-read) first"
        );
        assert_eq!(
            cli(
                None,
                "Its outcome: `studio_state {operationId: \"7f3a\"}` (same session)."
            ),
            "Its outcome: `studio-bridge state --operation-id 7f3a` (same session)."
        );
        assert_eq!(
            terminal(
                None,
                "Its outcome: `studio_state {operationId: \"7f3a\"}`. Call studio_sessions."
            ),
            "Its outcome: `.state --operation-id 7f3a`. Call .sessions."
        );
        assert_eq!(
            terminal(Some("create"), "pass `check: false`. Check the tool's input schema."),
            "pass `--no-check`. See `.help create`."
        );
        // The user's own text: a config file's rule, a flag's value.
        assert_eq!(
            cli(
                None,
                "studio_query is refused: denied by deny \"studio_query\" in c.toml (--deny studio_exec)."
            ),
            "studio-bridge query is refused: denied by deny \"studio_query\" in c.toml (--deny studio_exec)."
        );
        // Not a tool: left alone.
        assert_eq!(
            cli(None, "my_studio_thing and studio_nope"),
            "my_studio_thing and studio_nope"
        );
    }
}

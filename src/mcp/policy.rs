//! The unattended-agent policy: which tools this MCP process offers its agent.
//!
//! It belongs to the MCP process the agent talks to (host or peer alike): the bridge
//! below knows nothing of it. Rules come from `mcp`'s flags and the config file
//! (`<config dir>/studio-bridge/config.toml`, or `--config PATH`):
//!
//! - `read_only`: only calls that read Studio. A tool whose kind is `Read` is offered; a
//!   tool with a reading form (`selection`) is offered and refuses its writing form; every
//!   other tool (`exec` included: it can do anything) is hidden.
//! - `allow`: tool-name globs; when any are given, only matching tools are offered.
//! - `deny`: tool-name globs never offered. Deny wins over allow.
//!
//! Flags add to the file: read-only if either says so, and the allow and deny lists are
//! the union of both. A hidden tool is absent from `tools/list`, and a call to it (or a
//! call in a refused form) answers `permission_denied` naming the rule, before anything
//! reaches the bridge.

use std::path::{Path, PathBuf};

use globset::{Glob, GlobMatcher};
use serde::Deserialize;
use serde_json::{Map, Value as Json, json};

use crate::commands::sessions::ActivePolicy;
use crate::commands::{self, DynCommand, Kind};
use crate::protocol::{ErrorCode, ToolError};

use super::TOOL_PREFIX;

/// The config file's name inside the config directory.
pub const CONFIG_FILE: &str = "config.toml";

/// The user's studio-bridge config directory (shared with the pairing secret, below).
pub use crate::bridge::pairing::config_dir;

/// The policy flags of `mcp`, as given.
#[derive(Debug, Clone, Default)]
pub struct PolicyFlags {
    pub read_only: bool,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    /// `--config PATH`: this file must exist. Without it the default file is read if present.
    pub config: Option<PathBuf>,
}

/// Where a rule was set, as the refusal names it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Origin {
    Flag,
    File(PathBuf),
}

#[derive(Debug)]
struct Rule {
    glob: String,
    matcher: GlobMatcher,
    origin: Origin,
}

impl Rule {
    /// How a refusal names this rule: `--deny studio_exec` or
    /// `deny "studio_exec" in /home/me/.config/studio-bridge/config.toml`.
    fn describe(&self, key: &str) -> String {
        match &self.origin {
            Origin::Flag => format!("--{key} {}", self.glob),
            Origin::File(path) => format!("{key} {:?} in {}", self.glob, path.display()),
        }
    }
}

/// The active policy of one MCP process.
#[derive(Debug, Default)]
pub struct Policy {
    /// Set when read-only, naming who set it (the flag first).
    read_only: Option<Origin>,
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    /// The config file that was read, if any.
    file: Option<PathBuf>,
    /// Whether any policy flag was given.
    flags: bool,
}

/// The config file's keys. Unknown keys are an error, so a typo never loosens the policy.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default, alias = "read-only")]
    read_only: bool,
    #[serde(default)]
    allow: Vec<toml::Spanned<String>>,
    #[serde(default)]
    deny: Vec<toml::Spanned<String>>,
}

impl Policy {
    /// The policy from `flags` and the config file (`--config`, else the default one if it
    /// exists). A file that cannot be read or parsed, or a bad glob, is an error naming the
    /// file, the line and the fix.
    pub fn load(flags: PolicyFlags) -> Result<Policy, String> {
        let file = match &flags.config {
            Some(path) => Some((
                path.clone(),
                std::fs::read_to_string(path).map_err(|e| {
                    format!(
                        "cannot read the config file {} given by --config: {e}. Pass the path of an existing file.",
                        path.display()
                    )
                })?,
            )),
            None => match config_dir().map(|d| d.join(CONFIG_FILE)) {
                Some(path) => match std::fs::read_to_string(&path) {
                    Ok(text) => Some((path, text)),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                    Err(e) => {
                        return Err(format!(
                            "cannot read the config file {}: {e}. Fix its permissions, or pass --config PATH.",
                            path.display()
                        ));
                    }
                },
                None => None,
            },
        };
        Policy::from_parts(&flags, file.as_ref().map(|(p, t)| (p.as_path(), t.as_str())))
    }

    /// The policy from flags and a config file's text.
    fn from_parts(flags: &PolicyFlags, file: Option<(&Path, &str)>) -> Result<Policy, String> {
        let mut policy = Policy {
            flags: flags.read_only || !flags.allow.is_empty() || !flags.deny.is_empty(),
            ..Policy::default()
        };
        if flags.read_only {
            policy.read_only = Some(Origin::Flag);
        }
        for glob in &flags.allow {
            policy.allow.push(rule(glob, Origin::Flag, &format!("--allow {glob}"))?);
        }
        for glob in &flags.deny {
            policy.deny.push(rule(glob, Origin::Flag, &format!("--deny {glob}"))?);
        }
        if let Some((path, text)) = file {
            let config: ConfigFile = toml::from_str(text).map_err(|e| {
                format!(
                    "{} is not a valid studio-bridge config: {}. It takes read_only = true|false, allow = [\"studio_*\", …] and deny = [\"studio_exec\", …].",
                    path.display(),
                    e.to_string().trim_end()
                )
            })?;
            let origin = Origin::File(path.to_path_buf());
            if config.read_only && policy.read_only.is_none() {
                policy.read_only = Some(origin.clone());
            }
            for (key, globs, rules) in [
                ("allow", &config.allow, &mut policy.allow),
                ("deny", &config.deny, &mut policy.deny),
            ] {
                for glob in globs {
                    let line = text[..glob.span().start.min(text.len())].matches('\n').count() + 1;
                    let place = format!("{key} {:?} in {} line {line}", glob.get_ref(), path.display());
                    rules.push(rule(glob.get_ref(), origin.clone(), &place)?);
                }
            }
            policy.file = Some(path.to_path_buf());
        }
        Ok(policy)
    }

    /// Whether `tools/list` offers this command.
    pub fn lists(&self, command: &dyn DynCommand) -> bool {
        let name = tool_name(command);
        self.refuse_name(&name).is_none() && (self.read_only.is_none() || command.can_read_only())
    }

    /// Refuses a call the policy forbids, with `permission_denied` naming the rule.
    pub fn check(&self, command: &dyn DynCommand, args: &Map<String, Json>) -> Result<(), ToolError> {
        let name = tool_name(command);
        if let Some(rule) = self.refuse_name(&name) {
            return Err(denied(&name, &rule, "It is not available to you; do not retry it."));
        }
        if let Some(origin) = &self.read_only {
            let rule = format!("read-only mode ({})", origin_label(origin));
            if !command.can_read_only() {
                return Err(denied(
                    &name,
                    &rule,
                    "It changes Studio, and only tools that read are available; do not retry it.",
                ));
            }
            if command.call_kind(args) != Kind::Read {
                return Err(denied(
                    &name,
                    &rule,
                    "Called like this it changes Studio; call it without the arguments that write (see its input schema) to read only.",
                ));
            }
        }
        Ok(())
    }

    /// The rule that hides a tool by name, if any: a deny glob, else the allow list.
    fn refuse_name(&self, name: &str) -> Option<String> {
        if let Some(rule) = self.deny.iter().find(|r| r.matcher.is_match(name)) {
            return Some(format!("denied by {}", rule.describe("deny")));
        }
        if !self.allow.is_empty() && !self.allow.iter().any(|r| r.matcher.is_match(name)) {
            let rules: Vec<String> = self.allow.iter().map(|r| r.describe("allow")).collect();
            return Some(format!("matched by no allow rule ({})", rules.join(", ")));
        }
        None
    }

    /// The policy as `studio_sessions` reports it.
    pub fn report(&self) -> ActivePolicy {
        let mut sources = Vec::new();
        if self.flags {
            sources.push("flags".to_owned());
        }
        if let Some(path) = &self.file {
            sources.push(path.display().to_string());
        }
        ActivePolicy {
            read_only: self.read_only.is_some(),
            allow: self.allow.iter().map(|r| r.glob.clone()).collect(),
            deny: self.deny.iter().map(|r| r.glob.clone()).collect(),
            source: if sources.is_empty() {
                "defaults (no flags, no config file)".to_owned()
            } else {
                sources.join(" + ")
            },
        }
    }

    /// One line for the log at start (no secrets here: globs and a path).
    pub fn summary(&self) -> String {
        let report = self.report();
        format!(
            "read-only: {}, allow: {:?}, deny: {:?}, from {}",
            report.read_only, report.allow, report.deny, report.source
        )
    }
}

fn tool_name(command: &dyn DynCommand) -> String {
    format!("{TOOL_PREFIX}{}", command.spec().name)
}

fn origin_label(origin: &Origin) -> String {
    match origin {
        Origin::Flag => "--read-only".to_owned(),
        Origin::File(path) => path.display().to_string(),
    }
}

fn denied(tool: &str, rule: &str, next: &str) -> ToolError {
    ToolError::new(
        ErrorCode::PermissionDenied,
        format!("{tool} is refused by this studio-bridge's policy: {rule}. {next} The user sets the policy (mcp flags or config.toml); studio_sessions shows it."),
    )
    .with_details(json!({ "rule": rule }))
}

/// Compiles one glob, refusing a bad one and one that cannot name a tool. `place` says
/// where it was given, for the error.
fn rule(glob: &str, origin: Origin, place: &str) -> Result<Rule, String> {
    if glob.trim().is_empty() {
        return Err(format!(
            "{place}: an empty glob matches no tool. Give a tool name or glob such as studio_exec or studio_script_*."
        ));
    }
    let matcher = Glob::new(glob)
        .map_err(|e| {
            format!(
                "{place}: {glob:?} is not a valid glob ({}). Use * and ? wildcards over tool names, e.g. studio_script_*.",
                e.kind()
            )
        })?
        .compile_matcher();
    let matches_a_tool = commands::ALL
        .iter()
        .any(|c| matcher.is_match(format!("{TOOL_PREFIX}{}", c.spec().name)));
    if !matches_a_tool {
        if !glob.starts_with(TOOL_PREFIX) {
            return Err(format!(
                "{place}: {glob:?} matches no tool. Tool names start with {TOOL_PREFIX} (e.g. {TOOL_PREFIX}exec, {TOOL_PREFIX}script_*); see tools/list."
            ));
        }
        // A tool of another version, perhaps: harmless, but worth a word.
        tracing::warn!("{place}: {glob:?} matches no tool of this studio-bridge version");
    }
    Ok(Rule {
        glob: glob.to_owned(),
        matcher,
        origin,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(read_only: bool, allow: &[&str], deny: &[&str]) -> PolicyFlags {
        PolicyFlags {
            read_only,
            allow: allow.iter().map(|s| (*s).to_owned()).collect(),
            deny: deny.iter().map(|s| (*s).to_owned()).collect(),
            config: None,
        }
    }

    fn listed(policy: &Policy) -> Vec<String> {
        commands::ALL
            .iter()
            .filter(|c| policy.lists(**c))
            .map(|c| tool_name(*c))
            .collect()
    }

    fn command(name: &str) -> &'static dyn DynCommand {
        commands::find(name).unwrap()
    }

    fn args(json: Json) -> Map<String, Json> {
        match json {
            Json::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn no_rules_offer_every_tool() {
        let policy = Policy::from_parts(&PolicyFlags::default(), None).unwrap();
        assert_eq!(listed(&policy).len(), commands::ALL.len());
        assert_eq!(policy.report().source, "defaults (no flags, no config file)");
        assert!(policy.check(command("exec"), &Map::new()).is_ok());
    }

    #[test]
    fn read_only_offers_reading_tools_and_the_reading_form_of_selection() {
        let policy = Policy::from_parts(&flags(true, &[], &[]), None).unwrap();
        let names = listed(&policy);
        for name in [
            "studio_sessions",
            "studio_query",
            "studio_find",
            "studio_logs",
            "studio_selection",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} missing from {names:?}");
        }
        for name in [
            "studio_exec",
            "studio_delete",
            "studio_script_edit",
            "studio_undo",
            "studio_play",
        ] {
            assert!(
                !names.iter().any(|n| n == name),
                "{name} listed in read-only: {names:?}"
            );
        }
        let exec = policy
            .check(command("exec"), &args(json!({"script": "return 1"})))
            .unwrap_err();
        assert_eq!(exec.code, ErrorCode::PermissionDenied);
        assert!(
            exec.message.contains("read-only mode (--read-only)"),
            "{}",
            exec.message
        );
        assert!(policy.check(command("selection"), &Map::new()).is_ok());
        assert!(
            policy
                .check(command("selection"), &args(json!({"sessionId": "A-edit"})))
                .is_ok()
        );
        let set = policy
            .check(command("selection"), &args(json!({"set": ["Workspace"]})))
            .unwrap_err();
        assert_eq!(set.code, ErrorCode::PermissionDenied);
        assert!(set.message.contains("changes Studio"), "{}", set.message);
    }

    #[test]
    fn deny_wins_over_allow_and_names_its_rule() {
        let policy =
            Policy::from_parts(&flags(false, &["studio_*"], &["studio_exec", "studio_script_*"]), None).unwrap();
        let names = listed(&policy);
        assert!(
            !names
                .iter()
                .any(|n| n == "studio_exec" || n.starts_with("studio_script_"))
        );
        assert!(names.iter().any(|n| n == "studio_query"));
        let error = policy.check(command("exec"), &Map::new()).unwrap_err();
        assert!(
            error.message.contains("denied by --deny studio_exec"),
            "{}",
            error.message
        );
        assert_eq!(error.details.unwrap()["rule"], "denied by --deny studio_exec");
        let error = policy.check(command("script_edit"), &Map::new()).unwrap_err();
        assert!(error.message.contains("--deny studio_script_*"), "{}", error.message);
    }

    #[test]
    fn an_allow_list_offers_only_what_it_matches() {
        let policy = Policy::from_parts(&flags(false, &["studio_sessions", "studio_q*"], &[]), None).unwrap();
        assert_eq!(listed(&policy), ["studio_sessions", "studio_query"]);
        let error = policy.check(command("find"), &Map::new()).unwrap_err();
        assert!(
            error
                .message
                .contains("matched by no allow rule (--allow studio_sessions, --allow studio_q*)"),
            "{}",
            error.message
        );
    }

    #[test]
    fn the_file_adds_to_the_flags_and_its_rules_name_the_file() {
        let path = Path::new("/home/me/.config/studio-bridge/config.toml");
        let text = "read_only = true\nallow = [\"studio_*\"]\ndeny = [\n  \"studio_screenshot\",\n]\n";
        let policy = Policy::from_parts(&flags(false, &[], &["studio_logs"]), Some((path, text))).unwrap();
        let report = policy.report();
        assert!(report.read_only);
        assert_eq!(report.allow, ["studio_*"]);
        assert_eq!(report.deny, ["studio_logs", "studio_screenshot"]);
        assert_eq!(report.source, format!("flags + {}", path.display()));
        let error = policy.check(command("screenshot"), &Map::new()).unwrap_err();
        assert!(
            error
                .message
                .contains(&format!("denied by deny \"studio_screenshot\" in {}", path.display())),
            "{}",
            error.message
        );
        let error = policy.check(command("exec"), &Map::new()).unwrap_err();
        assert!(
            error.message.contains(&format!("read-only mode ({})", path.display())),
            "{}",
            error.message
        );
        // The flag names itself when both set read-only.
        let policy = Policy::from_parts(&flags(true, &[], &[]), Some((path, text))).unwrap();
        let error = policy.check(command("exec"), &Map::new()).unwrap_err();
        assert!(
            error.message.contains("read-only mode (--read-only)"),
            "{}",
            error.message
        );
        // The spelling of the flag works in the file too.
        let policy = Policy::from_parts(&PolicyFlags::default(), Some((path, "read-only = true"))).unwrap();
        assert!(policy.report().read_only);
    }

    #[test]
    fn bad_files_and_globs_are_errors_naming_the_place_and_the_fix() {
        let path = Path::new("/tmp/config.toml");
        let error =
            Policy::from_parts(&PolicyFlags::default(), Some((path, "read_only = true\ndney = []\n"))).unwrap_err();
        assert!(
            error.contains("/tmp/config.toml") && error.contains("line 2"),
            "{error}"
        );
        assert!(error.contains("dney") && error.contains("deny = ["), "{error}");

        let error = Policy::from_parts(&PolicyFlags::default(), Some((path, "read_only = \"yes\""))).unwrap_err();
        assert!(error.contains("line 1"), "{error}");

        let error = Policy::from_parts(
            &PolicyFlags::default(),
            Some((path, "allow = [\"studio_*\"]\n\ndeny = [\"studio_[\"]")),
        )
        .unwrap_err();
        assert!(
            error.contains("deny \"studio_[\" in /tmp/config.toml line 3"),
            "{error}"
        );
        assert!(error.contains("not a valid glob"), "{error}");

        let error = Policy::from_parts(&flags(false, &[], &["exec"]), None).unwrap_err();
        assert!(error.starts_with("--deny exec: \"exec\" matches no tool"), "{error}");
        assert!(error.contains("studio_exec"), "{error}");

        let error = Policy::from_parts(&flags(false, &[""], &[]), None).unwrap_err();
        assert!(error.contains("empty glob"), "{error}");

        // A studio_* name this version lacks is a warning, not an error.
        assert!(Policy::from_parts(&flags(false, &[], &["studio_teleport"]), None).is_ok());
    }

    #[test]
    fn a_config_file_named_by_flag_must_exist() {
        let error = Policy::load(PolicyFlags {
            config: Some(PathBuf::from("/nonexistent/studio-bridge.toml")),
            ..PolicyFlags::default()
        })
        .unwrap_err();
        assert!(
            error.contains("/nonexistent/studio-bridge.toml") && error.contains("--config"),
            "{error}"
        );
    }
}

//! The policy: which commands, and which calls of them, this studio-bridge process runs.
//!
//! One policy for every surface: `mcp` applies it to its agent's tools, and the CLI
//! subcommands and the terminal apply the config file's policy too (an agent with a shell
//! can run them; `--ignore-config` is the person's way around it). It belongs to the
//! process a caller talks to (host or peer alike): the bridge below knows nothing of it.
//!
//! Rules come from `mcp`'s flags and the config file (`<config dir>/config.toml`, or
//! `--config PATH`):
//!
//! - `deny_capabilities`: capabilities ([`Capability`]) refused. Every command names the
//!   capabilities its calls need, possibly by argument (`selection` with `set` writes,
//!   `create` with a script `source` is code); a call that needs a denied one is refused.
//! - `read_only`: `write`, `code`, `play`, `assets` and `launch` denied.
//! - Two capabilities are denied unless something allows them: `cloud` while no Open Cloud
//!   API key is configured (`ROBLOX_API_KEY` or `studio-bridge cloud login`), and `publish`
//!   (a version live players get) unless `allow_publish = true` or `--allow-publish`.
//! - `allow`: tool-name globs; when any are given, only matching tools are offered.
//! - `deny`: tool-name globs never offered. Deny wins over allow.
//!
//! Flags add to the file: read-only if either says so, and every list is the union of
//! both. A tool all of whose calls are refused is absent from `tools/list`, and a call to
//! it (or a call in a refused form) answers `permission_denied` naming the rule, before
//! anything reaches the bridge.
//!
//! This module sits below the command table (floors: adapters → commands → policy →
//! bridge → protocol): it knows commands only through [`Governed`], which the table
//! implements.

use std::path::{Path, PathBuf};

use globset::{Glob, GlobMatcher};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json, json};

use crate::config::config_dir;
use crate::protocol::{ErrorCode, ToolError};

mod capability;

pub use capability::{Capabilities, Capability};

/// The config file's name inside the config directory.
pub const CONFIG_FILE: &str = "config.toml";

/// A command as the policy sees it (the command table implements this).
pub trait Governed {
    /// Its MCP tool name (`studio_exec`), which the globs match.
    fn tool_name(&self) -> String;
    /// What every call of it needs (its definition's static set).
    fn capabilities(&self) -> Capabilities;
    /// What a call with these arguments needs: the static set, and what the arguments add.
    fn call_capabilities(&self, args: &Map<String, Json>) -> Capabilities;
}

/// The policy of one process, as `studio_sessions` reports it.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActivePolicy {
    /// Only calls that read: the write, code, play, assets and launch capabilities are refused.
    pub read_only: bool,
    /// Tool-name globs; when any are given, only matching tools are available.
    pub allow: Vec<String>,
    /// Tool-name globs that are never available (deny wins over allow).
    pub deny: Vec<String>,
    /// Capabilities refused by `--deny-capability` or `deny_capabilities` (read, write,
    /// code, play, assets, launch); a call that needs one is refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_capabilities: Vec<String>,
    /// Where the policy came from: flags, a config file, both, or defaults.
    pub source: String,
}

/// The policy flags, as given. `mcp` takes them all; a CLI command and the terminal take
/// only `--ignore-config`.
#[derive(Debug, Clone, Default)]
pub struct PolicyFlags {
    pub read_only: bool,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    /// `--deny-capability`, each value as given (commas split already or not).
    pub deny_capabilities: Vec<String>,
    /// `--config PATH`: this file must exist. Without it the default file is read if present.
    pub config: Option<PathBuf>,
    /// `--ignore-config`: read no config file.
    pub ignore_config: bool,
    /// `--allow-publish`: `cloud_publish` may publish a version live players get.
    pub allow_publish: bool,
}

/// Where a rule was set, as the refusal names it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Origin {
    Flag,
    File(PathBuf),
    /// Denied until something allows it; the words say what.
    Default(&'static str),
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
            Origin::Default(why) => format!("{key} {:?} ({why})", self.glob),
        }
    }
}

/// One denied capability and who denied it.
#[derive(Debug)]
struct CapabilityRule {
    capability: Capability,
    origin: Origin,
    /// Denied by read-only mode rather than by name.
    read_only: bool,
}

impl CapabilityRule {
    /// How a refusal names this rule.
    fn describe(&self) -> String {
        match (&self.origin, self.read_only) {
            (Origin::Default(why), _) => (*why).to_owned(),
            (Origin::Flag, true) => "read-only mode (--read-only)".to_owned(),
            (Origin::File(path), true) => format!("read-only mode ({})", path.display()),
            (Origin::Flag, false) => format!("denied by --deny-capability {}", self.capability),
            (Origin::File(path), false) => {
                format!(
                    "denied by deny_capabilities {:?} in {}",
                    self.capability.name(),
                    path.display()
                )
            }
        }
    }
}

/// What read-only mode denies.
const READ_ONLY_DENIES: [Capability; 5] = [
    Capability::Write,
    Capability::Code,
    Capability::Play,
    Capability::Assets,
    Capability::Launch,
];

/// The active policy of one process.
#[derive(Debug, Default)]
pub struct Policy {
    /// Set when read-only, naming who set it (the flag first).
    read_only: Option<Origin>,
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    /// Denied capabilities, in the order a refusal looks for its rule: the flags'
    /// `--deny-capability`, `--read-only`, then the file's.
    capabilities: Vec<CapabilityRule>,
    /// The config file that was read, if any.
    file: Option<PathBuf>,
    /// Whether any policy flag was given.
    flags: bool,
    /// Whether `--ignore-config` was given.
    ignored_config: bool,
    /// `--allow-publish` or `allow_publish = true`.
    allow_publish: bool,
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
    #[serde(default, alias = "deny-capabilities")]
    deny_capabilities: Vec<toml::Spanned<String>>,
    #[serde(default, alias = "allow-publish")]
    allow_publish: bool,
}

impl Policy {
    /// The policy from `flags` and the config file (`--config`, else the default one if it
    /// exists; none with `--ignore-config`). `tools` are the commands a glob may name. A
    /// file that cannot be read or parsed, a bad glob or an unknown capability is an error
    /// naming the file, the line and the fix.
    pub fn load<C: Governed + ?Sized>(flags: PolicyFlags, tools: &[&C]) -> Result<Policy, String> {
        let file = if flags.ignore_config {
            None
        } else {
            match &flags.config {
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
            }
        };
        let names: Vec<String> = tools.iter().map(|t| t.tool_name()).collect();
        let mut policy = Policy::from_parts(&flags, file.as_ref().map(|(p, t)| (p.as_path(), t.as_str())), &names)?;
        policy.deny_unless_allowed(crate::cloud::key::find().is_some());
        Ok(policy)
    }

    /// The two capabilities denied until something allows them: `cloud` without an API
    /// key, `publish` without `allow_publish`.
    fn deny_unless_allowed(&mut self, key_configured: bool) {
        if !key_configured {
            self.deny_capability(
                Capability::Cloud,
                Origin::Default(
                    "no Open Cloud API key is configured: the user sets ROBLOX_API_KEY or runs `studio-bridge cloud login`, then restarts this server",
                ),
                false,
            );
        }
        if !self.allow_publish {
            self.deny_capability(
                Capability::Publish,
                Origin::Default(
                    "publishing a version live players get is off: the user sets allow_publish = true in config.toml or passes --allow-publish",
                ),
                false,
            );
        }
    }

    /// The policy from flags and a config file's text; `tools` are the tool names a glob
    /// may match.
    fn from_parts(flags: &PolicyFlags, file: Option<(&Path, &str)>, tools: &[String]) -> Result<Policy, String> {
        let mut policy = Policy {
            flags: flags.read_only
                || !flags.allow.is_empty()
                || !flags.deny.is_empty()
                || !flags.deny_capabilities.is_empty(),
            ignored_config: flags.ignore_config,
            allow_publish: flags.allow_publish,
            ..Policy::default()
        };
        for glob in &flags.allow {
            policy
                .allow
                .push(rule(glob, Origin::Flag, &format!("--allow {glob}"), tools)?);
        }
        for glob in &flags.deny {
            policy
                .deny
                .push(rule(glob, Origin::Flag, &format!("--deny {glob}"), tools)?);
        }
        for value in &flags.deny_capabilities {
            for name in value.split(',').map(str::trim) {
                let capability = capability(name, &format!("--deny-capability {value}"))?;
                policy.deny_capability(capability, Origin::Flag, false);
            }
        }
        if flags.read_only {
            policy.set_read_only(Origin::Flag);
        }
        if let Some((path, text)) = file {
            let config: ConfigFile = toml::from_str(text).map_err(|e| {
                format!(
                    "{} is not a valid studio-bridge config: {}. It takes read_only = true|false, allow_publish = true|false, deny_capabilities = [\"code\", …] (of {}), allow = [\"studio_*\", …] and deny = [\"studio_exec\", …].",
                    path.display(),
                    e.to_string().trim_end(),
                    capability_names()
                )
            })?;
            let origin = Origin::File(path.to_path_buf());
            let place = |key: &str, value: &toml::Spanned<String>| {
                let line = text[..value.span().start.min(text.len())].matches('\n').count() + 1;
                format!("{key} {:?} in {} line {line}", value.get_ref(), path.display())
            };
            for (key, globs, rules) in [
                ("allow", &config.allow, &mut policy.allow),
                ("deny", &config.deny, &mut policy.deny),
            ] {
                for glob in globs {
                    rules.push(rule(glob.get_ref(), origin.clone(), &place(key, glob), tools)?);
                }
            }
            for name in &config.deny_capabilities {
                let capability = capability(name.get_ref().trim(), &place("deny_capabilities", name))?;
                policy.deny_capability(capability, origin.clone(), false);
            }
            if config.read_only {
                policy.set_read_only(origin);
            }
            policy.allow_publish |= config.allow_publish;
            policy.file = Some(path.to_path_buf());
        }
        Ok(policy)
    }

    fn set_read_only(&mut self, origin: Origin) {
        if self.read_only.is_none() {
            self.read_only = Some(origin.clone());
        }
        for capability in READ_ONLY_DENIES {
            self.deny_capability(capability, origin.clone(), true);
        }
    }

    fn deny_capability(&mut self, capability: Capability, origin: Origin, read_only: bool) {
        self.capabilities.push(CapabilityRule {
            capability,
            origin,
            read_only,
        });
    }

    /// Whether this command is offered: its name passes the globs and at least one of its
    /// calls (the plainest, which needs only its static set) passes the capabilities.
    pub fn lists<C: Governed + ?Sized>(&self, command: &C) -> bool {
        self.refuse_name(&command.tool_name()).is_none() && self.refuse_capabilities(command.capabilities()).is_none()
    }

    /// Refuses a call the policy forbids, with `permission_denied` naming the rule.
    pub fn check<C: Governed + ?Sized>(&self, command: &C, args: &Map<String, Json>) -> Result<(), ToolError> {
        let name = command.tool_name();
        if let Some(rule) = self.refuse_name(&name) {
            return Err(denied(
                &name,
                &rule,
                None,
                "It is not available to you; do not retry it.",
            ));
        }
        if let Some(refusal) = self.refuse_capabilities(command.capabilities()) {
            let next = if refusal.read_only {
                "It changes Studio, and only tools that read are available; do not retry it.".to_owned()
            } else {
                format!(
                    "It needs the {} capability, which is denied; do not retry it.",
                    refusal.capability
                )
            };
            return Err(denied(&name, &refusal.describe(), Some(refusal.capability), &next));
        }
        if let Some(refusal) = self.refuse_capabilities(command.call_capabilities(args)) {
            let next = if refusal.read_only {
                "Called like this it changes Studio; call it without the arguments that write (see its input schema) to read only.".to_owned()
            } else {
                format!(
                    "Called like this it needs the {} capability, which is denied; call it without the arguments that need it (see its input schema).",
                    refusal.capability
                )
            };
            return Err(denied(&name, &refusal.describe(), Some(refusal.capability), &next));
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

    /// The first rule that denies one of `needs`, if any.
    fn refuse_capabilities(&self, needs: Capabilities) -> Option<&CapabilityRule> {
        self.capabilities.iter().find(|r| needs.contains(r.capability))
    }

    /// Whether the user's policy (flags, config file) refuses anything at all; what is
    /// denied until allowed (`cloud` without a key, `publish`) does not count.
    pub fn is_open(&self) -> bool {
        self.allow.is_empty()
            && self.deny.is_empty()
            && self.capabilities.iter().all(|r| matches!(r.origin, Origin::Default(_)))
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
        let mut denied = Capabilities::NONE;
        // The user's rules: what is denied until allowed (`cloud`, `publish`) is not listed.
        for rule in self
            .capabilities
            .iter()
            .filter(|r| !r.read_only && !matches!(r.origin, Origin::Default(_)))
        {
            denied = denied.with(rule.capability);
        }
        ActivePolicy {
            read_only: self.read_only.is_some(),
            allow: self.allow.iter().map(|r| r.glob.clone()).collect(),
            deny: self.deny.iter().map(|r| r.glob.clone()).collect(),
            deny_capabilities: denied.names().into_iter().map(str::to_owned).collect(),
            source: match (sources.is_empty(), self.ignored_config) {
                (true, false) => "defaults (no flags, no config file)".to_owned(),
                (true, true) => "defaults (config file ignored: --ignore-config)".to_owned(),
                (false, _) => sources.join(" + "),
            },
        }
    }

    /// One line for the log at start (no secrets here: names, globs and a path).
    pub fn summary(&self) -> String {
        let report = self.report();
        format!(
            "read-only: {}, deny capabilities: {:?}, allow: {:?}, deny: {:?}, from {}",
            report.read_only, report.deny_capabilities, report.allow, report.deny, report.source
        )
    }
}

fn capability_names() -> String {
    Capability::ALL.map(Capability::name).join(", ")
}

/// Parses one capability name, refusing an unknown one with the valid names. `place` says
/// where it was given, for the error.
fn capability(name: &str, place: &str) -> Result<Capability, String> {
    Capability::parse(name).ok_or_else(|| {
        format!(
            "{place}: {name:?} is not a capability. The capabilities are {}.",
            capability_names()
        )
    })
}

fn denied(tool: &str, rule: &str, capability: Option<Capability>, next: &str) -> ToolError {
    let details = match capability {
        Some(capability) => json!({ "rule": rule, "capability": capability.name() }),
        None => json!({ "rule": rule }),
    };
    ToolError::new(
        ErrorCode::PermissionDenied,
        format!("{tool} is refused by this studio-bridge's policy: {rule}. {next} The user sets the policy (mcp flags or config.toml); studio_sessions shows it."),
    )
    .with_details(details)
}

/// Compiles one glob, refusing a bad one and one that cannot name a tool. `place` says
/// where it was given, for the error.
fn rule(glob: &str, origin: Origin, place: &str, tools: &[String]) -> Result<Rule, String> {
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
    if !tools.iter().any(|t| matcher.is_match(t)) {
        // Every tool name starts with the same prefix (`studio_`) before the command's name.
        let prefix = tools
            .first()
            .and_then(|t| t.find('_').map(|i| &t[..=i]))
            .unwrap_or("studio_");
        if !glob.starts_with(prefix) {
            return Err(format!(
                "{place}: {glob:?} matches no tool. Tool names start with {prefix} (e.g. {prefix}exec, {prefix}script_*); see tools/list."
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

    /// A command as the policy sees it: `studio_<name>`, its static set, and what a call
    /// with `{"extra": true}` adds.
    struct Tool {
        name: &'static str,
        needs: Capabilities,
        extra: Capabilities,
    }

    impl Governed for Tool {
        fn tool_name(&self) -> String {
            format!("studio_{}", self.name)
        }
        fn capabilities(&self) -> Capabilities {
            self.needs
        }
        fn call_capabilities(&self, args: &Map<String, Json>) -> Capabilities {
            if args.get("extra") == Some(&Json::Bool(true)) {
                self.needs.union(self.extra)
            } else {
                self.needs
            }
        }
    }

    use Capability::{Assets, Code, Play, Read, Write};

    const TOOLS: [Tool; 6] = [
        Tool {
            name: "query",
            needs: Capabilities::of(&[Read]),
            extra: Capabilities::NONE,
        },
        Tool {
            name: "selection",
            needs: Capabilities::of(&[Read]),
            extra: Capabilities::of(&[Write]),
        },
        Tool {
            name: "exec",
            needs: Capabilities::of(&[Code]),
            extra: Capabilities::NONE,
        },
        Tool {
            name: "create",
            needs: Capabilities::of(&[Write]),
            extra: Capabilities::of(&[Code]),
        },
        Tool {
            name: "test_run",
            needs: Capabilities::of(&[Code, Play]),
            extra: Capabilities::NONE,
        },
        Tool {
            name: "insert_asset",
            needs: Capabilities::of(&[Write, Assets]),
            extra: Capabilities::NONE,
        },
    ];

    fn tool(name: &str) -> &'static Tool {
        TOOLS.iter().find(|t| t.name == name).unwrap()
    }

    fn names() -> Vec<String> {
        TOOLS.iter().map(Governed::tool_name).collect()
    }

    fn policy(flags: &PolicyFlags, file: Option<(&Path, &str)>) -> Result<Policy, String> {
        Policy::from_parts(flags, file, &names())
    }

    fn flags(read_only: bool, allow: &[&str], deny: &[&str]) -> PolicyFlags {
        PolicyFlags {
            read_only,
            allow: allow.iter().map(|s| (*s).to_owned()).collect(),
            deny: deny.iter().map(|s| (*s).to_owned()).collect(),
            ..PolicyFlags::default()
        }
    }

    fn denying(capabilities: &[&str]) -> PolicyFlags {
        PolicyFlags {
            deny_capabilities: capabilities.iter().map(|s| (*s).to_owned()).collect(),
            ..PolicyFlags::default()
        }
    }

    fn listed(policy: &Policy) -> Vec<&'static str> {
        TOOLS.iter().filter(|t| policy.lists(*t)).map(|t| t.name).collect()
    }

    fn extra() -> Map<String, Json> {
        let mut args = Map::new();
        args.insert("extra".into(), Json::Bool(true));
        args
    }

    #[test]
    fn no_rules_offer_every_tool() {
        let policy = policy(&PolicyFlags::default(), None).unwrap();
        assert!(policy.is_open());
        assert_eq!(listed(&policy).len(), TOOLS.len());
        assert_eq!(policy.report().source, "defaults (no flags, no config file)");
        assert!(policy.check(tool("exec"), &extra()).is_ok());
    }

    #[test]
    fn a_denied_capability_hides_every_tool_that_always_needs_it_and_refuses_calls_that_do() {
        let policy = policy(&denying(&["code"]), None).unwrap();
        assert_eq!(listed(&policy), ["query", "selection", "create", "insert_asset"]);
        let error = policy.check(tool("exec"), &Map::new()).unwrap_err();
        assert_eq!(error.code, ErrorCode::PermissionDenied);
        assert!(
            error.message.starts_with(
                "studio_exec is refused by this studio-bridge's policy: denied by --deny-capability code."
            ),
            "{}",
            error.message
        );
        let details = error.details.unwrap();
        assert_eq!(details["rule"], "denied by --deny-capability code");
        assert_eq!(details["capability"], "code");
        assert!(policy.check(tool("test_run"), &Map::new()).is_err());
        // create: listed, its plain form runs, the form with code is refused.
        assert!(policy.check(tool("create"), &Map::new()).is_ok());
        let error = policy.check(tool("create"), &extra()).unwrap_err();
        assert!(
            error.message.contains("Called like this it needs the code capability"),
            "{}",
            error.message
        );
        assert_eq!(policy.report().deny_capabilities, ["code"]);
        assert!(!policy.report().read_only);
    }

    #[test]
    fn capabilities_are_comma_separated_or_repeated_and_unknown_ones_are_errors() {
        let policy = policy(&denying(&["play,assets", " write "]), None).unwrap();
        assert_eq!(policy.report().deny_capabilities, ["write", "play", "assets"]);
        assert_eq!(listed(&policy), ["query", "selection", "exec"]);

        let error = self::policy(&denying(&["code,exec"]), None).unwrap_err();
        assert!(
            error.starts_with("--deny-capability code,exec: \"exec\" is not a capability"),
            "{error}"
        );
        assert!(error.contains("read, write, code, play, assets, launch"), "{error}");

        let path = Path::new("/tmp/config.toml");
        let error = self::policy(
            &PolicyFlags::default(),
            Some((
                path,
                "allow = [\"studio_*\"]\ndeny_capabilities = [\n  \"code\",\n  \"scripts\",\n]\n",
            )),
        )
        .unwrap_err();
        assert!(
            error.starts_with(
                "deny_capabilities \"scripts\" in /tmp/config.toml line 4: \"scripts\" is not a capability"
            ),
            "{error}"
        );
        assert!(error.contains("read, write, code, play, assets, launch"), "{error}");
    }

    #[test]
    fn read_only_denies_write_code_play_and_assets_and_keeps_reading_forms() {
        let policy = policy(&flags(true, &[], &[]), None).unwrap();
        assert_eq!(listed(&policy), ["query", "selection"]);
        let exec = policy.check(tool("exec"), &Map::new()).unwrap_err();
        assert_eq!(exec.code, ErrorCode::PermissionDenied);
        assert!(
            exec.message.contains("read-only mode (--read-only)"),
            "{}",
            exec.message
        );
        assert!(exec.message.contains("only tools that read"), "{}", exec.message);
        assert!(policy.check(tool("selection"), &Map::new()).is_ok());
        let set = policy.check(tool("selection"), &extra()).unwrap_err();
        assert!(set.message.contains("changes Studio"), "{}", set.message);
        assert_eq!(set.details.unwrap()["rule"], "read-only mode (--read-only)");
        let report = policy.report();
        assert!(report.read_only);
        assert!(report.deny_capabilities.is_empty(), "read-only's own are not repeated");
        assert_eq!(
            serde_json::to_value(&report).unwrap(),
            json!({"readOnly": true, "allow": [], "deny": [], "source": "flags"})
        );
    }

    #[test]
    fn an_explicit_capability_rule_is_named_before_read_only() {
        let mut both = flags(true, &[], &[]);
        both.deny_capabilities = vec!["code".into()];
        let policy = policy(&both, None).unwrap();
        let error = policy.check(tool("exec"), &Map::new()).unwrap_err();
        assert_eq!(error.details.unwrap()["rule"], "denied by --deny-capability code");
        let error = policy.check(tool("insert_asset"), &Map::new()).unwrap_err();
        assert_eq!(error.details.unwrap()["rule"], "read-only mode (--read-only)");
    }

    #[test]
    fn deny_wins_over_allow_and_names_its_rule() {
        let policy = policy(&flags(false, &["studio_*"], &["studio_exec", "studio_test_*"]), None).unwrap();
        assert_eq!(listed(&policy), ["query", "selection", "create", "insert_asset"]);
        let error = policy.check(tool("exec"), &Map::new()).unwrap_err();
        assert_eq!(error.details.unwrap()["rule"], "denied by --deny studio_exec");
        let error = policy.check(tool("test_run"), &Map::new()).unwrap_err();
        assert!(error.message.contains("--deny studio_test_*"), "{}", error.message);
        // A glob leaves every other call alone, whatever it needs.
        assert!(policy.check(tool("create"), &extra()).is_ok());
    }

    #[test]
    fn an_allow_list_offers_only_what_it_matches() {
        let policy = policy(&flags(false, &["studio_query", "studio_s*"], &[]), None).unwrap();
        assert_eq!(listed(&policy), ["query", "selection"]);
        let error = policy.check(tool("exec"), &Map::new()).unwrap_err();
        assert!(
            error
                .message
                .contains("matched by no allow rule (--allow studio_query, --allow studio_s*)"),
            "{}",
            error.message
        );
    }

    #[test]
    fn the_file_adds_to_the_flags_and_its_rules_name_the_file() {
        let path = Path::new("/home/me/.config/studio-bridge/config.toml");
        let text = "deny_capabilities = [\"code\"]\nallow = [\"studio_*\"]\ndeny = [\n  \"studio_query\",\n]\n";
        let mut given = flags(false, &[], &["studio_selection"]);
        given.deny_capabilities = vec!["assets".into()];
        let policy = policy(&given, Some((path, text))).unwrap();
        let report = policy.report();
        assert!(!report.read_only);
        assert_eq!(report.allow, ["studio_*"]);
        assert_eq!(report.deny, ["studio_selection", "studio_query"]);
        assert_eq!(report.deny_capabilities, ["code", "assets"]);
        assert_eq!(report.source, format!("flags + {}", path.display()));
        let error = policy.check(tool("query"), &Map::new()).unwrap_err();
        assert_eq!(
            error.details.unwrap()["rule"],
            format!("denied by deny \"studio_query\" in {}", path.display())
        );
        let error = policy.check(tool("create"), &extra()).unwrap_err();
        assert_eq!(
            error.details.unwrap()["rule"],
            format!("denied by deny_capabilities \"code\" in {}", path.display())
        );
        let error = policy.check(tool("insert_asset"), &Map::new()).unwrap_err();
        assert_eq!(error.details.unwrap()["rule"], "denied by --deny-capability assets");

        // Read-only in the file names the file; the flag names itself when both set it.
        let policy = self::policy(&PolicyFlags::default(), Some((path, "read_only = true"))).unwrap();
        let error = policy.check(tool("exec"), &Map::new()).unwrap_err();
        assert!(
            error.message.contains(&format!("read-only mode ({})", path.display())),
            "{}",
            error.message
        );
        let policy = self::policy(&flags(true, &[], &[]), Some((path, "read_only = true"))).unwrap();
        let error = policy.check(tool("exec"), &Map::new()).unwrap_err();
        assert!(
            error.message.contains("read-only mode (--read-only)"),
            "{}",
            error.message
        );
        // The flags' spellings work in the file too.
        let policy = self::policy(
            &PolicyFlags::default(),
            Some((path, "read-only = true\ndeny-capabilities = [\"play\"]")),
        )
        .unwrap();
        assert!(policy.report().read_only);
        assert_eq!(policy.report().deny_capabilities, ["play"]);
    }

    #[test]
    fn bad_files_and_globs_are_errors_naming_the_place_and_the_fix() {
        let path = Path::new("/tmp/config.toml");
        let error = policy(&PolicyFlags::default(), Some((path, "read_only = true\ndney = []\n"))).unwrap_err();
        assert!(
            error.contains("/tmp/config.toml") && error.contains("line 2"),
            "{error}"
        );
        assert!(error.contains("dney") && error.contains("deny = ["), "{error}");
        assert!(error.contains("deny_capabilities = ["), "{error}");

        let error = policy(&PolicyFlags::default(), Some((path, "read_only = \"yes\""))).unwrap_err();
        assert!(error.contains("line 1"), "{error}");

        let error = policy(
            &PolicyFlags::default(),
            Some((path, "allow = [\"studio_*\"]\n\ndeny = [\"studio_[\"]")),
        )
        .unwrap_err();
        assert!(
            error.contains("deny \"studio_[\" in /tmp/config.toml line 3"),
            "{error}"
        );
        assert!(error.contains("not a valid glob"), "{error}");

        let error = policy(&flags(false, &[], &["exec"]), None).unwrap_err();
        assert!(error.starts_with("--deny exec: \"exec\" matches no tool"), "{error}");
        assert!(error.contains("studio_exec"), "{error}");

        let error = policy(&flags(false, &[""], &[]), None).unwrap_err();
        assert!(error.contains("empty glob"), "{error}");

        // A studio_* name this version lacks is a warning, not an error.
        assert!(policy(&flags(false, &[], &["studio_teleport"]), None).is_ok());
    }

    #[test]
    fn a_config_file_named_by_flag_must_exist_unless_ignored() {
        let missing = PolicyFlags {
            config: Some(PathBuf::from("/nonexistent/studio-bridge.toml")),
            ..PolicyFlags::default()
        };
        let error = Policy::load(missing.clone(), &TOOLS.each_ref()).unwrap_err();
        assert!(
            error.contains("/nonexistent/studio-bridge.toml") && error.contains("--config"),
            "{error}"
        );
        let ignored = Policy::load(
            PolicyFlags {
                ignore_config: true,
                ..missing
            },
            &TOOLS.each_ref(),
        )
        .unwrap();
        assert!(ignored.is_open());
        assert_eq!(
            ignored.report().source,
            "defaults (config file ignored: --ignore-config)"
        );
    }
}

//! `studio-bridge terminal`: an interactive Luau console attached to one Studio session,
//! the third surface over the command table beside MCP and the CLI. A line is Luau, run
//! with `exec` in an environment of its own (so globals persist); a line starting with `.`
//! is a command of the table (parsed with the CLI's flags) or one of the terminal's own.
//! Like the CLI it joins the bridge as host or peer, so it shares sessions with agents.
//!
//! On a terminal it edits lines with rustyline (history, completion, Ctrl-C, Ctrl-D);
//! with stdin piped it reads line by line without prompts, so it works in scripts, and
//! exits 1 if any line failed.

mod chunk;
mod dot;
mod session;

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::ArgMatches;
use rustyline::Helper;
use rustyline::completion::Completer;
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::FileHistory;
use rustyline::validate::Validator;
use serde_json::{Map, Value as Json};
use tokio_util::sync::CancellationToken;

use crate::bridge::{self, Bridge, BridgeOptions, CallHooks, SessionInfo, Target};
use crate::commands::{self, DynCommand, InvocationParts, Limits, Output};
use crate::human::render::{self, Style, escape_controls};
use crate::policy::{ActivePolicy, Policy};
use crate::protocol::{Context, ErrorCode, ToolError};
use crate::sourcemap::Watched;
use crate::subcommands::words::{Surface, in_words_of};
use crate::subcommands::{arguments, default_image_path};
use dot::Dot;
use session::{Attached, Pick};

/// How long listing sessions may take (covers a new host's startup grace).
const SESSIONS_TIMEOUT: Duration = Duration::from_secs(4);
/// How often the terminal looks whether its session is still there.
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// Where text goes while a line may be being edited: above the prompt on a terminal
/// (rustyline's external printer), else straight to stdout.
#[derive(Clone)]
struct Printer(Option<Arc<Mutex<Box<dyn rustyline::ExternalPrinter + Send>>>>);

impl Printer {
    fn line(&self, text: String) {
        match &self.0 {
            Some(printer) => {
                let mut printer = printer.lock().unwrap_or_else(|p| p.into_inner());
                let _ = printer.print(format!("{text}\n"));
            }
            None => {
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "{text}");
                let _ = stdout.flush();
            }
        }
    }
}

/// What a line read gave.
enum Read {
    Line(String),
    /// Ctrl-C at the prompt.
    Interrupted,
    /// Ctrl-D, or the end of piped input.
    Eof,
}

enum Input {
    Editor(Box<rustyline::Editor<TerminalHelper, FileHistory>>, Option<PathBuf>),
    Piped(std::io::StdinLock<'static>),
}

impl Input {
    fn read(&mut self, prompt: &str) -> Read {
        tokio::task::block_in_place(|| match self {
            Input::Editor(editor, _) => match editor.readline(prompt) {
                Ok(line) => Read::Line(line),
                Err(ReadlineError::Interrupted) => Read::Interrupted,
                Err(_) => Read::Eof,
            },
            Input::Piped(stdin) => {
                let mut line = String::new();
                match stdin.read_line(&mut line) {
                    Ok(0) | Err(_) => Read::Eof,
                    Ok(_) => Read::Line(line.trim_end_matches(['\n', '\r']).to_owned()),
                }
            }
        })
    }

    fn remember(&mut self, entry: &str) {
        if let Input::Editor(editor, path) = self {
            let _ = editor.add_history_entry(entry);
            if let Some(path) = path {
                let _ = editor.save_history(path);
            }
        }
    }
}

/// Completion of dot-commands and their flags from the table (see [`dot::complete`]).
struct TerminalHelper;

impl Completer for TerminalHelper {
    type Candidate = String;

    fn complete(&self, line: &str, pos: usize, _: &rustyline::Context<'_>) -> rustyline::Result<(usize, Vec<String>)> {
        Ok(dot::complete(line, pos))
    }
}

impl Hinter for TerminalHelper {
    type Hint = String;
}
impl Highlighter for TerminalHelper {}
impl Validator for TerminalHelper {}
impl Helper for TerminalHelper {}

fn history_path() -> Option<PathBuf> {
    let dir = dirs::data_dir()?.join("studio-bridge");
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir.join("terminal-history.txt"))
}

struct Terminal {
    bridge: Bridge,
    limits: Limits,
    attached: Arc<Mutex<Attached>>,
    defaults: Arc<Mutex<Target>>,
    printer: Printer,
    /// The config file's policy (unless `--ignore-config`): Luau lines are `exec` calls
    /// under it like any dot-command.
    policy: Policy,
    report: Arc<ActivePolicy>,
    /// The sourcemap (`--sourcemap`, else ./sourcemap.json): files in results and logs.
    files: Arc<Watched>,
    follow: Option<tokio::task::JoinHandle<()>>,
    out: Style,
    err: Style,
    /// Whether any line failed (piped mode exits 1 then).
    failed: bool,
}

/// What running a Luau chunk came to.
enum Ran {
    Done,
    /// The chunk is unfinished: read another line onto it.
    Incomplete,
}

/// `studio-bridge terminal [--session ID] [--context …] [--ignore-config]`, under `policy`.
pub async fn run(matches: &ArgMatches, options: BridgeOptions, limits: Limits, policy: Policy) -> ExitCode {
    let interactive = std::io::stdin().is_terminal();
    let running = match bridge::start(options).await {
        Ok(running) => running,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    let code = attach_and_loop(matches, running.bridge.clone(), limits, policy, interactive).await;
    running.shutdown().await;
    code
}

async fn attach_and_loop(
    matches: &ArgMatches,
    bridge: Bridge,
    limits: Limits,
    policy: Policy,
    interactive: bool,
) -> ExitCode {
    let sessions = match bridge.sessions(SESSIONS_TIMEOUT).await {
        Ok(sessions) => sessions,
        Err(error) => {
            eprintln!("error[{}]: {}", error.code, escape_controls(&error.message));
            return ExitCode::FAILURE;
        }
    };
    let wanted_context = matches.get_one::<String>("context").and_then(|c| Context::parse(c));
    let session_id = matches.get_one::<String>("session").map(String::as_str);
    let mut input = if interactive {
        match rustyline::Editor::<TerminalHelper, FileHistory>::new() {
            Ok(mut editor) => {
                editor.set_helper(Some(TerminalHelper));
                let path = history_path();
                if let Some(path) = &path {
                    let _ = editor.load_history(path);
                }
                Input::Editor(Box::new(editor), path)
            }
            Err(error) => {
                eprintln!("error: cannot set up line editing: {error}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        Input::Piped(std::io::stdin().lock())
    };
    let chosen = match session::pick(&sessions, session_id, wanted_context) {
        Pick::Attach(index) => &sessions[index],
        Pick::None(message) => {
            eprintln!("error: {message}");
            return ExitCode::FAILURE;
        }
        Pick::Choose(indices) => {
            let list = session::choice_lines(&sessions, &indices);
            if !interactive {
                eprintln!("error: several Studio sessions are connected; pass --session ID (or --context):\n{list}");
                return ExitCode::FAILURE;
            }
            eprint!("Several Studio sessions are connected:\n{list}");
            loop {
                match input.read(&format!("attach to which (1-{})? ", indices.len())) {
                    Read::Line(line) => match line.trim().parse::<usize>() {
                        Ok(n) if (1..=indices.len()).contains(&n) => break &sessions[indices[n - 1]],
                        _ => eprintln!("type a number from 1 to {}", indices.len()),
                    },
                    Read::Interrupted | Read::Eof => return ExitCode::SUCCESS,
                }
            }
        }
    };
    let printer = match &mut input {
        Input::Editor(editor, _) => match editor.create_external_printer() {
            Ok(printer) => Printer(Some(Arc::new(Mutex::new(Box::new(printer))))),
            Err(_) => Printer(None),
        },
        Input::Piped(_) => Printer(None),
    };
    let mut terminal = Terminal {
        bridge,
        limits,
        attached: Arc::new(Mutex::new(Attached::new(chosen))),
        defaults: Arc::new(Mutex::new(Target::default())),
        printer,
        report: Arc::new(policy.report()),
        policy,
        files: Watched::new(matches.try_get_one::<PathBuf>("sourcemap").ok().flatten().cloned()),
        follow: None,
        out: Style::stdout(),
        err: Style::stderr(),
        failed: false,
    };
    if interactive {
        eprintln!(
            "attached to {} [{}] (session {}); .help for commands, Ctrl-D to leave",
            escape_controls(&chosen.place_name),
            chosen.context,
            escape_controls(&chosen.session_id)
        );
    }
    let watcher = tokio::spawn(watch(
        terminal.bridge.clone(),
        terminal.attached.clone(),
        terminal.printer.clone(),
    ));
    terminal.repl(&mut input).await;
    watcher.abort();
    if let Some(follow) = terminal.follow.take() {
        follow.abort();
    }
    if terminal.failed && !interactive {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Says when the attached session goes away and when one of the same Studio instance and
/// context is back (calls go to it by instanceId and context, so it is attached again).
async fn watch(bridge: Bridge, attached: Arc<Mutex<Attached>>, printer: Printer) {
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        let Ok(sessions) = bridge.sessions(SESSIONS_TIMEOUT).await else {
            continue;
        };
        let notice = {
            let mut attached = attached.lock().unwrap_or_else(|p| p.into_inner());
            let now = sessions.iter().find(|s| attached.matches(s));
            match (attached.present, now) {
                (true, None) => {
                    attached.present = false;
                    Some(format!(
                        "the {} session of {} went away (Studio closed or Play ended); the terminal re-attaches when it is back",
                        attached.context,
                        escape_controls(&attached.place_name)
                    ))
                }
                (false, Some(session)) => {
                    attached.present = true;
                    attached.place_name = session.place_name.clone();
                    Some(format!(
                        "re-attached to {} [{}] (session {})",
                        escape_controls(&session.place_name),
                        session.context,
                        escape_controls(&session.session_id)
                    ))
                }
                _ => None,
            }
        };
        if let Some(notice) = notice {
            printer.line(notice);
        }
    }
}

impl Terminal {
    fn attached(&self) -> Attached {
        self.attached.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    async fn repl(&mut self, input: &mut Input) {
        let mut chunk = String::new();
        loop {
            let prompt = session::prompt(&self.attached(), !chunk.is_empty());
            let line = match input.read(&prompt) {
                Read::Line(line) => line,
                Read::Interrupted => {
                    chunk.clear();
                    continue;
                }
                Read::Eof => break,
            };
            if chunk.is_empty() {
                let trimmed = line.trim();
                if trimmed.is_empty() {
                    continue;
                }
                if trimmed.starts_with('.') {
                    input.remember(trimmed);
                    if !self.dot(trimmed).await {
                        break;
                    }
                    continue;
                }
            } else {
                chunk.push('\n');
            }
            chunk.push_str(&line);
            match self.luau(&chunk).await {
                Ran::Incomplete => {}
                Ran::Done => {
                    input.remember(&chunk);
                    chunk.clear();
                }
            }
        }
    }

    /// Runs a command of the table if the policy allows the call, cancelling it (the
    /// plugin gets `cancel`) on Ctrl-C.
    async fn invoke(
        &self,
        command: &dyn DynCommand,
        args: Map<String, Json>,
        target: Target,
    ) -> Result<Output, ToolError> {
        self.policy.check(command, &args)?;
        let cancel = CancellationToken::new();
        let announcer = crate::cli::waiting::announce(&self.bridge, &target, &dot::dot_name(command));
        let parts = InvocationParts {
            bridge: self.bridge.clone(),
            hooks: CallHooks {
                progress: announcer.as_ref().map(crate::cli::waiting::Announcer::progress),
                cancel: cancel.clone(),
            },
            defaults: self.defaults.clone(),
            target,
            policy: Some(Arc::clone(&self.report)),
            files: Some(Arc::clone(&self.files)),
            quiet: false,
        };
        let call = command.invoke(args, parts, self.limits);
        tokio::pin!(call);
        let _announcer = announcer;
        loop {
            tokio::select! {
                outcome = &mut call => return outcome,
                interrupted = tokio::signal::ctrl_c() => {
                    if interrupted.is_ok() {
                        cancel.cancel();
                    }
                }
            }
        }
    }

    /// A Luau chunk: `exec` in this attach's environment, rendered as the CLI renders it.
    async fn luau(&mut self, chunk: &str) -> Ran {
        let Some(exec) = commands::find("exec") else {
            return Ran::Done;
        };
        let attached = self.attached();
        let mut args = Map::new();
        args.insert("script".into(), Json::String(chunk.to_owned()));
        args.insert("env".into(), Json::String(attached.env.clone()));
        // The plugin compiles it: its `stage: "compile"` error is how an unfinished chunk
        // is told apart from a broken one (chunk.rs), which the host's check would not say.
        args.insert("check".into(), Json::Bool(false));
        let asked = Json::Object(args.clone());
        let outcome = self.invoke(exec, args, attached.target()).await;
        if let Ok(output) = &outcome
            && chunk::continues(&output.value(), chunk)
        {
            return Ran::Incomplete;
        }
        self.show("exec", &asked, &outcome, false);
        Ran::Done
    }

    /// Prints a result as the CLI does (or its JSON), errors on stderr.
    fn show(&mut self, name: &str, args: &Json, outcome: &Result<Output, ToolError>, as_json: bool) {
        match outcome {
            Ok(output) => {
                let value = output.value();
                if render::failed(&value) {
                    self.failed = true;
                }
                let mut stdout = std::io::stdout().lock();
                if as_json {
                    let _ = writeln!(stdout, "{value}");
                } else {
                    let rendered = match commands::find(name) {
                        Some(command) => command.render(args, &value, self.out, self.err),
                        None => render::finish(None, &value, self.err),
                    };
                    let _ = write!(stdout, "{}", rendered.stdout);
                    let _ = stdout.flush();
                    eprint!("{}", rendered.stderr);
                }
                let _ = stdout.flush();
            }
            Err(error) if error.code == ErrorCode::Cancelled => {
                // Ctrl-C: the person knows what they did; a write says how to learn its fate.
                self.failed = true;
                eprintln!("{}", self.err.dim("cancelled"));
                let operation = error
                    .details
                    .as_ref()
                    .and_then(|d| d.get("operationId"))
                    .and_then(Json::as_str);
                if let Some(operation) = operation {
                    eprintln!(
                        "{}",
                        self.err.dim(&format!(
                            "it may have run; `.state --operation-id {}` tells",
                            escape_controls(operation)
                        ))
                    );
                }
            }
            Err(error) => {
                self.failed = true;
                // In the terminal's words (`.state`, `--no-check`); a plugin's error message
                // may carry Studio's text (a name, a script's error).
                let message = in_words_of(Surface::Terminal, Some(name), &error.message);
                eprintln!(
                    "{}",
                    self.err
                        .red(&format!("error[{}]: {}", error.code, escape_controls(&message)))
                );
            }
        }
    }

    /// A dot-command. Returns false to leave.
    async fn dot(&mut self, line: &str) -> bool {
        match dot::parse(line) {
            Dot::Exit => return false,
            Dot::Say(text) => eprint!("{}", with_newline(text)),
            Dot::Help(None) => print!("{}", dot::help_all()),
            Dot::Help(Some(name)) => print!("{}", dot::help_one(&name)),
            Dot::Context(context) => self.switch_context(context).await,
            Dot::Attach(which) => self.attach(&which).await,
            Dot::Follow(on) => self.set_follow(on).await,
            Dot::Table(command, matches) => self.table(command, &matches).await,
        }
        let _ = std::io::stdout().flush();
        true
    }

    async fn table(&mut self, command: &'static dyn DynCommand, matches: &ArgMatches) {
        let name = command.spec().name;
        let args = match arguments(command, matches) {
            Ok(args) => args,
            Err(error) => {
                self.show(name, &Json::Null, &Err(error), false);
                return;
            }
        };
        // --session/--context on the command win; else the attached session.
        let flag = |id: &str| matches.try_get_one::<String>(id).ok().flatten().cloned();
        let target = match (flag("session"), flag("context")) {
            (None, None) => self.attached().target(),
            (session_id, context) => Target {
                session_id,
                instance_id: None,
                context: context.as_deref().and_then(Context::parse),
            },
        };
        let asked = Json::Object(args.clone());
        let outcome = self.invoke(command, args, target).await;
        if let Ok(Output { image: Some(png), .. }) = &outcome {
            let path = matches
                .try_get_one::<PathBuf>("out")
                .ok()
                .flatten()
                .cloned()
                .unwrap_or_else(|| default_image_path(name));
            match std::fs::write(&path, png) {
                Ok(()) => println!("wrote {}", path.display()),
                Err(error) => eprintln!("error: cannot write {}: {error}", path.display()),
            }
        }
        let as_json = matches.try_get_one::<bool>("json").ok().flatten() == Some(&true);
        self.show(name, &asked, &outcome, as_json);
        let follows = matches.try_get_one::<bool>("follow").ok().flatten() == Some(&true);
        if follows && outcome.is_ok() {
            self.set_follow(true).await;
        }
    }

    async fn switch_context(&mut self, context: Context) {
        let instance_id = self.attached().instance_id;
        match self.bridge.sessions(SESSIONS_TIMEOUT).await {
            Ok(sessions) => match sessions
                .iter()
                .find(|s| s.instance_id == instance_id && s.context == context)
            {
                Some(session) => self.attach_to(session).await,
                None => eprintln!(
                    "this Studio has no {context} DataModel now (start Play for server/client); .sessions lists what is connected"
                ),
            },
            Err(error) => self.show("sessions", &Json::Null, &Err(error), false),
        }
    }

    /// `.attach ID|N`: a sessionId, or the row number in `.sessions`.
    async fn attach(&mut self, which: &str) {
        let sessions = match self.bridge.sessions(SESSIONS_TIMEOUT).await {
            Ok(sessions) => sessions,
            Err(error) => return self.show("sessions", &Json::Null, &Err(error), false),
        };
        let found: Option<&SessionInfo> = match which.parse::<usize>() {
            Ok(n) if n >= 1 => sessions.get(n - 1),
            _ => sessions.iter().find(|s| s.session_id == which),
        };
        match found {
            Some(session) => self.attach_to(session).await,
            None => eprintln!("no session {which}: .sessions lists them (attach by id or row number)"),
        }
    }

    async fn attach_to(&mut self, session: &SessionInfo) {
        *self.attached.lock().unwrap_or_else(|p| p.into_inner()) = Attached::new(session);
        eprintln!(
            "attached to {} [{}] (session {}); globals start fresh",
            escape_controls(&session.place_name),
            session.context,
            escape_controls(&session.session_id)
        );
        if self.follow.is_some() {
            self.set_follow(true).await;
        }
    }

    /// `.follow on|off`: new log lines of the attached session, printed above the prompt.
    async fn set_follow(&mut self, on: bool) {
        if let Some(follow) = self.follow.take() {
            follow.abort();
        }
        if !on {
            return;
        }
        // Following streams what `logs` reads: the policy decides as it does for `logs`.
        if let Some(logs) = commands::find("logs")
            && let Err(error) = self.policy.check(logs, &Map::new())
        {
            return self.show("logs", &Json::Null, &Err(error), false);
        }
        let target = self.attached().target();
        match self.bridge.subscribe(&target, &["log".to_owned()]).await {
            Ok(mut events) => {
                let printer = self.printer.clone();
                let style = self.out;
                let files = Arc::clone(&self.files);
                self.follow = Some(tokio::spawn(async move {
                    while let Some(mut event) = events.recv().await {
                        if event.event == bridge::GAP_EVENT {
                            let message = event.data["message"].as_str().unwrap_or_default();
                            printer.line(style.dim(message));
                        } else {
                            commands::files::locate_entry(&mut event.data, files.current().as_deref());
                            printer.line(render::event_line(&event.data, style));
                        }
                    }
                }));
            }
            Err(error) => self.show("logs", &Json::Null, &Err(error), false),
        }
    }
}

fn with_newline(mut text: String) -> String {
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

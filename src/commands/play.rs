//! `play`: start a playtest (Play or Run) or stop the one running, answered once Studio's
//! real state has changed: the edit plugin sees the test's server DataModel connect over
//! PluginConnectionService, or every test DataModel's connection close (plugin/src/Actions/
//! Play.luau says why the edit DataModel cannot just read its own RunService). A `start`
//! cancelled or past its deadline ends the test it started (plugin/src/Playtest.luau).

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Command, Invocation, Kind, Output, Spec};
use crate::protocol::{Context, ToolError};

/// The most players a test has (StudioTestService: "up to 8 simulated clients per test
/// session").
pub const MAX_PLAYERS: u8 = 8;

/// A start or an add waits for this much longer per client beyond the first: each is a
/// DataModel that loads and says hello (in Studio, possibly a process of its own).
const PER_PLAYER: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Start,
    Run,
    Stop,
    AddPlayers,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlayArgs {
    pub mode: Mode,
    // start: how many clients (=1); add_players: how many more (the guide says so: B9)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 8))]
    pub players: Option<u8>,
}

impl PlayArgs {
    /// Refuses a `players` the mode does not take, before anything is sent.
    fn check(&self) -> Result<(), ToolError> {
        let refuse = |message: String| Err(ToolError::invalid_args(message));
        match (self.mode, self.players) {
            (Mode::Start, Some(n)) if !(1..=MAX_PLAYERS).contains(&n) => refuse(format!(
                "`players` must be 1 to {MAX_PLAYERS} (how many clients the test starts with), got {n}."
            )),
            (Mode::AddPlayers, None) => {
                refuse("mode add_players needs `players`: how many clients to add (1 to 7).".to_owned())
            }
            (Mode::AddPlayers, Some(n)) if !(1..MAX_PLAYERS).contains(&n) => refuse(format!(
                "`players` must be 1 to {} with add_players (a test has at most {MAX_PLAYERS} clients), got {n}.",
                MAX_PLAYERS - 1
            )),
            (Mode::Run | Mode::Stop, Some(_)) => refuse(format!(
                "`players` goes with mode start or add_players, not {}: leave it out{}.",
                if self.mode == Mode::Run { "run" } else { "stop" },
                if self.mode == Mode::Run {
                    " (a Run test has no clients)"
                } else {
                    ""
                }
            )),
            _ => Ok(()),
        }
    }

    /// The call's deadline: the command's own, and more for each client it waits for.
    fn timeout(&self) -> Duration {
        let waited = match (self.mode, self.players) {
            (Mode::Start, Some(n)) => n.saturating_sub(1),
            (Mode::AddPlayers, Some(n)) => n,
            _ => 0,
        };
        Play::SPEC.timeout + PER_PLAYER * u32::from(waited)
    }
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct PlayResult {
    /// Play, Run or Edit, once Studio is in it.
    pub state: String,
    /// start and add_players: every client of the test in the order they joined (the
    /// added ones last), once each has said hello.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clients: Option<Vec<PlayClient>>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlayClient {
    pub session_id: String,
    /// Its LocalPlayer's Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub player: Option<String>,
}

pub struct Play;

impl Command for Play {
    type Args = PlayArgs;
    type Result = PlayResult;
    const SPEC: Spec = Spec {
        name: "play",
        description: "Start a playtest (start: Play, run: server only), add players, or stop any.",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(30),
        kind: Kind::Write,
        capabilities: super::Capabilities::of(&[super::Capability::Play]),
        idempotent: false,
        open_world: false,
        positional: &["mode"],
        truncation_hint: "",
        follow_event: None,
        example: "studio-bridge play start --players 2",
        from_file: None,
        flag_help: &[
            ("mode", "start: Play; run: server only; stop; add-players: more clients"),
            ("players", "start: how many clients; add-players: how many more"),
        ],
    };

    async fn run(args: PlayArgs, cx: &Invocation) -> Result<Output, ToolError> {
        args.check()?;
        let result = cx.call_plugin(&Self::SPEC, &args, args.timeout(), None).await?;
        Ok(Output::plugin(result))
    }
}

use serde_json::Value as Json;

// Human rendering --------------------------------------------------------------------------

use std::fmt::Write as _;

use crate::human::render::{self, Rendered, Style, clean};

impl super::Render for Play {
    /// The state Studio is in, then the test's clients and their players.
    fn render(_args: &Json, result: &Json, out: Style, _err: Style) -> Option<Rendered> {
        let mut rendered = Rendered::default();
        let _ = writeln!(rendered.stdout, "{}", out.bold(&clean(result.get("state")?.as_str()?)));
        if let Some(clients) = result.get("clients").and_then(Json::as_array) {
            let rows = clients
                .iter()
                .map(|c| {
                    let text = |key: &str| clean(c.get(key).and_then(Json::as_str).unwrap_or("–")).into_owned();
                    vec![text("sessionId"), text("player")]
                })
                .collect::<Vec<_>>();
            rendered
                .stdout
                .push_str(&render::table(&["CLIENT", "PLAYER"], &rows, out, |_, _, padded| {
                    padded.to_owned()
                }));
        }
        Some(rendered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ErrorCode;

    fn args(json: serde_json::Value) -> PlayArgs {
        serde_json::from_value(json).unwrap()
    }

    fn refusal(json: serde_json::Value) -> String {
        let error = args(json).check().unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidArgs);
        error.message
    }

    #[test]
    fn players_goes_with_start_and_add_players_within_eight() {
        for ok in [
            serde_json::json!({"mode": "start"}),
            serde_json::json!({"mode": "start", "players": 8}),
            serde_json::json!({"mode": "add_players", "players": 7}),
            serde_json::json!({"mode": "stop"}),
        ] {
            assert!(args(ok.clone()).check().is_ok(), "{ok}");
        }
        let message = refusal(serde_json::json!({"mode": "start", "players": 9}));
        assert!(message.starts_with("`players` must be 1 to 8"), "{message}");
        assert!(refusal(serde_json::json!({"mode": "start", "players": 0})).contains("got 0"));
        let message = refusal(serde_json::json!({"mode": "add_players"}));
        assert!(message.contains("needs `players`"), "{message}");
        let message = refusal(serde_json::json!({"mode": "add_players", "players": 8}));
        assert!(message.contains("1 to 7"), "{message}");
        let message = refusal(serde_json::json!({"mode": "run", "players": 2}));
        assert!(
            message.contains("not run") && message.contains("leave it out"),
            "{message}"
        );
        assert!(refusal(serde_json::json!({"mode": "stop", "players": 1})).contains("not stop"));
    }

    #[test]
    fn each_client_waited_for_adds_to_the_deadline() {
        assert_eq!(args(serde_json::json!({"mode": "start"})).timeout(), Play::SPEC.timeout);
        assert_eq!(
            args(serde_json::json!({"mode": "start", "players": 3})).timeout(),
            Play::SPEC.timeout + PER_PLAYER * 2
        );
        assert_eq!(
            args(serde_json::json!({"mode": "add_players", "players": 1})).timeout(),
            Play::SPEC.timeout + PER_PLAYER
        );
    }

    #[test]
    fn add_players_is_spelled_with_an_underscore() {
        assert_eq!(
            args(serde_json::json!({"mode": "add_players", "players": 1})).mode,
            Mode::AddPlayers
        );
        assert!(serde_json::from_value::<PlayArgs>(serde_json::json!({"mode": "addplayers"})).is_err());
    }
}

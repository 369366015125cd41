//! Script locations in Studio's output: which script and line a message or stack trace
//! names, so a log entry or an error can say `src/server/Foo.server.luau:12` as well.
//!
//! Studio names a script by its full name (names joined by dots, unquoted, without sibling
//! indexes: `GetFullName()` less `game`), in these forms:
//! - an error message: `ServerScriptService.Foo:12: attempt to index nil` (Luau's own
//!   position prefix; a rethrown error can carry several);
//! - the Output window's stack lines (LogService.MessageOut, between `Stack Begin` and
//!   `Stack End`): `Script 'ServerScriptService.Foo', Line 12` and `… - function bar`;
//! - ScriptContext.Error's `stackTrace`: `ServerScriptService.Foo, line 12 - function bar`;
//! - `debug.traceback()`: `ServerScriptService.Foo:12 function bar`.
//!
//! The engine reference leaves the stack formats undefined (debug.traceback: "may change
//! at any time"); these are the forms Studio is known to print, unverified here.
//!
//! Text with a colon and a number is everywhere (`http://host:80:`), so a full name counts
//! only when its first name is a service scripts live in, or a child of the DataModel in
//! the sourcemap. A name with a space in it is not found in the `Foo:12:` forms (the text
//! does not say where the name starts).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Sourcemap, paths};

/// One place a message names: the script's bridge path, the line, and its file when the
/// sourcemap maps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Location {
    pub path: String,
    pub line: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// Children of the DataModel where scripts live or run.
const SCRIPT_HOMES: &[&str] = &[
    "Workspace",
    "ServerScriptService",
    "ServerStorage",
    "ReplicatedStorage",
    "ReplicatedFirst",
    "StarterPlayer",
    "StarterGui",
    "StarterPack",
    "Players",
    "Lighting",
    "SoundService",
    "Chat",
    "TextChatService",
    "Teams",
];

/// Every script location `text` names, in order, each once.
pub fn parse(text: &str, map: Option<&Sourcemap>) -> Vec<Location> {
    let mut found: Vec<Location> = Vec::new();
    for line in text.lines() {
        for (full_name, number) in in_line(line) {
            if !is_script_name(full_name, map) {
                continue;
            }
            let location = locate(full_name, number, map);
            if !found.contains(&location) {
                found.push(location);
            }
        }
    }
    found
}

/// The (full name, line) pairs of one line of text, in any of the forms.
fn in_line(line: &str) -> Vec<(&str, u32)> {
    // Script 'ServerScriptService.Foo', Line 12
    if let Some(at) = line.find("Script '") {
        let rest = &line[at + "Script '".len()..];
        if let Some(end) = rest.find("', Line ")
            && let Some(number) = leading_number(&rest[end + "', Line ".len()..])
        {
            return vec![(&rest[..end], number)];
        }
    }
    // ServerScriptService.Foo, line 12 - function bar
    if let Some(at) = line.find(", line ")
        && let Some(number) = leading_number(&line[at + ", line ".len()..])
    {
        let name = line[..at].trim();
        if !name.contains(char::is_whitespace) {
            return vec![(name, number)];
        }
    }
    // ServerScriptService.Foo:12: message  /  ServerScriptService.Foo:12 function bar
    let mut out = Vec::new();
    let bytes = line.as_bytes();
    for (at, _) in line.match_indices(':') {
        let Some(number) = leading_number(&line[at + 1..]) else {
            continue;
        };
        let digits = line[at + 1..].bytes().take_while(u8::is_ascii_digit).count();
        let after = bytes.get(at + 1 + digits);
        if !matches!(after, None | Some(b':' | b' ')) {
            continue;
        }
        let start = line[..at]
            .rfind(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '(' | ')' | ':'))
            .map_or(0, |i| i + 1);
        let name = &line[start..at];
        if !name.is_empty() {
            out.push((name, number));
        }
    }
    out
}

fn leading_number(text: &str) -> Option<u32> {
    let digits: &str = &text[..text.bytes().take_while(u8::is_ascii_digit).count()];
    digits.parse().ok()
}

fn is_script_name(full_name: &str, map: Option<&Sourcemap>) -> bool {
    let first = full_name.split('.').next().unwrap_or_default();
    full_name.contains('.') && (SCRIPT_HOMES.contains(&first) || map.is_some_and(|m| m.has_top_level(first)))
}

/// A full name as a location: the mapped script's path and file, else the path its names
/// make. A script a player's copy runs (`Players.Ann.PlayerGui.Shop`, a character's
/// `Workspace.Ann.Animate`) is the file of the one it was copied from (`StarterGui.Shop`,
/// `StarterPlayer.StarterCharacterScripts.Animate`), its path still the running copy's.
fn locate(full_name: &str, line: u32, map: Option<&Sourcemap>) -> Location {
    let made = full_name
        .split('.')
        .fold("game".to_owned(), |out, name| paths::join(&out, name, None));
    let Some(map) = map else {
        return Location {
            path: made,
            line,
            file: None,
        };
    };
    if let Some((path, file)) = map.locate(full_name) {
        return Location {
            path: path.to_owned(),
            line,
            file: Some(file.to_owned()),
        };
    }
    let file = copied_from(full_name)
        .iter()
        .find_map(|origin| map.locate(origin).map(|(_, file)| file.to_owned()));
    Location { path: made, line, file }
}

/// Where a player's copy of a script comes from, by the engine's copying rules (Players,
/// StarterGui, StarterPack, StarterPlayer reference pages).
fn copied_from(full_name: &str) -> Vec<String> {
    let names: Vec<&str> = full_name.split('.').collect();
    let rest = |from: usize| names.get(from..).map(|r| r.join(".")).unwrap_or_default();
    match names.as_slice() {
        ["Players", _, "PlayerGui", _, ..] => vec![format!("StarterGui.{}", rest(3))],
        ["Players", _, "Backpack", _, ..] => vec![format!("StarterPack.{}", rest(3))],
        ["Players", _, "PlayerScripts", _, ..] => {
            vec![format!("StarterPlayer.StarterPlayerScripts.{}", rest(3))]
        }
        ["Workspace", _, _, ..] => vec![
            format!("StarterPlayer.StarterCharacterScripts.{}", rest(2)),
            format!("StarterPack.{}", rest(2)),
        ],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::map;
    use super::*;

    fn at(path: &str, line: u32, file: Option<&str>) -> Location {
        Location {
            path: path.to_owned(),
            line,
            file: file.map(str::to_owned),
        }
    }

    #[test]
    fn every_form_studio_prints_names_the_script_and_line() {
        let map = map();
        let map = Some(&map);
        let damage = Some("src/server/Combat/Damage.luau");
        assert_eq!(
            parse(
                "ServerScriptService.Combat.Damage:12: attempt to index nil with 'x'",
                map
            ),
            [at("game.ServerScriptService.Combat.Damage", 12, damage)]
        );
        assert_eq!(
            parse(
                "Script 'ServerScriptService.Combat.Damage', Line 12 - function hit",
                map
            ),
            [at("game.ServerScriptService.Combat.Damage", 12, damage)]
        );
        assert_eq!(
            parse("Script 'ServerScriptService.Combat.Damage', Line 7", map),
            [at("game.ServerScriptService.Combat.Damage", 7, damage)]
        );
        assert_eq!(
            parse(
                "ServerScriptService.Combat.Damage, line 3 - function hit\nServerScriptService.Main, line 9\n",
                map
            ),
            [
                at("game.ServerScriptService.Combat.Damage", 3, damage),
                at("game.ServerScriptService.Main", 9, Some("src/server/Main.server.luau")),
            ]
        );
        assert_eq!(
            parse(
                "boom\nServerScriptService.Combat.Damage:4 function hit\nServerScriptService.Main:20\n",
                map
            ),
            [
                at("game.ServerScriptService.Combat.Damage", 4, damage),
                at("game.ServerScriptService.Main", 20, Some("src/server/Main.server.luau")),
            ],
            "debug.traceback's form"
        );
        assert_eq!(
            parse(
                "ServerScriptService.Main:5: ServerScriptService.Combat.Damage:12: boom",
                map
            ),
            [
                at("game.ServerScriptService.Main", 5, Some("src/server/Main.server.luau")),
                at("game.ServerScriptService.Combat.Damage", 12, damage),
            ],
            "a rethrown error names both"
        );
    }

    #[test]
    fn unmapped_scripts_get_a_path_and_no_file() {
        let map = map();
        assert_eq!(
            parse("Workspace.Door.Opener:3: no key", Some(&map)),
            [at("game.Workspace.Door.Opener", 3, None)]
        );
        assert_eq!(
            parse("ServerScriptService.Combat.Damage:12: x", None),
            [at("game.ServerScriptService.Combat.Damage", 12, None)]
        );
        assert_eq!(
            parse("ServerScriptService.Twin:1: which twin?", Some(&map)),
            [at("game.ServerScriptService.Twin", 1, None)]
        );
    }

    #[test]
    fn text_that_is_no_script_location_gives_none() {
        let map = map();
        for text in [
            "[string \"exec\"]:3: boom",
            "connect to http://localhost:8080: refused",
            "example.com:443: refused",
            "Stack Begin",
            "Stack End",
            "at 12:30: lunch",
            "user_StudioBridge.rbxm.StudioBridge.Main:12: oops",
            "ServerScriptService.Main:x: no number",
            "ServerScriptService.Main:12abc",
        ] {
            assert_eq!(parse(text, Some(&map)), [], "{text}");
        }
    }

    #[test]
    fn a_players_copy_of_a_script_is_the_file_it_was_copied_from() {
        let text = r#"{"name":"G","className":"DataModel","children":[
            {"name":"StarterGui","className":"StarterGui","children":[{"name":"Shop","className":"LocalScript","filePaths":["src/gui/Shop.client.luau"]}]},
            {"name":"StarterPlayer","className":"StarterPlayer","children":[{"name":"StarterCharacterScripts","className":"StarterCharacterScripts","children":[
                {"name":"Run","className":"LocalScript","filePaths":["src/char/Run.client.luau"]}]}]}]}"#;
        let map = Sourcemap::parse(text, std::path::Path::new("")).unwrap();
        assert_eq!(
            parse("Players.Ann.PlayerGui.Shop:8: x", Some(&map)),
            [at(
                "game.Players.Ann.PlayerGui.Shop",
                8,
                Some("src/gui/Shop.client.luau")
            )]
        );
        assert_eq!(
            parse("Workspace.Ann.Run:2: x", Some(&map)),
            [at("game.Workspace.Ann.Run", 2, Some("src/char/Run.client.luau"))]
        );
    }
}

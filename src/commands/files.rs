//! The project's files in results (TOOLS.md, "Your files"): the one mechanism that adds
//! the sourcemap's `file` to the script paths a result carries and `locations` to the
//! messages it carries, applied where results are produced ([`super::DynCommand::invoke`]).
//! Each command says in its own file where its result names scripts ([`Files`]); nothing
//! here knows a command.

use serde_json::{Map, Value as Json};

use crate::protocol::raw::{RawValue, Reader, Token, skip};
use crate::protocol::{ErrorCode, ToolError};
use crate::sourcemap::{Sourcemap, locations};

/// Where a command's result names scripts or carries Studio's messages.
#[derive(Debug, Clone, Copy)]
pub struct Files {
    /// A top-level `path` (script_read): `file` beside it.
    pub path: bool,
    /// Arrays of objects with a `path` (and maybe a `className`: find, script_search):
    /// `file` on each mapped one. A dotted key reaches into an object (test_run's
    /// `coverage.scripts`).
    pub path_objects: &'static [&'static str],
    /// Arrays of path strings (create's `created`): `files: {path: file}` for the mapped ones.
    pub path_lists: &'static [&'static str],
    /// Top-level messages (exec's `error`): `locations` beside them.
    pub messages: &'static [&'static str],
    /// Arrays of log entries (`{body, …}`: logs' `entries`, test_run's `logs`):
    /// `locations` on each entry that names a script.
    pub entries: &'static [&'static str],
    /// Only a failed result (`success: false`) carries what is to be added: a successful
    /// one is handed on as it came, undecoded (exec's hot path).
    pub only_failures: bool,
}

impl Files {
    /// Names no script: the result is handed on as it came.
    pub const NONE: Files = Files {
        path: false,
        path_objects: &[],
        path_lists: &[],
        messages: &[],
        entries: &[],
        only_failures: false,
    };

    pub fn is_none(&self) -> bool {
        !self.path
            && self.path_objects.is_empty()
            && self.path_lists.is_empty()
            && self.messages.is_empty()
            && self.entries.is_empty()
    }

    /// Whether a plugin's result needs reading at all.
    pub fn applies_to(&self, raw: &RawValue) -> bool {
        !self.is_none() && (!self.only_failures || success_of(raw) == Some(false))
    }

    /// Adds what the sourcemap and Studio's messages say to `result`, in place.
    pub fn annotate(&self, result: &mut Json, map: Option<&Sourcemap>) {
        let Json::Object(object) = result else { return };
        if let Some(map) = map {
            if self.path
                && let Some(file) = object
                    .get("path")
                    .and_then(Json::as_str)
                    .and_then(|p| map.file_of(p, None))
            {
                object.insert("file".into(), Json::String(file.to_owned()));
            }
            for key in self.path_objects {
                let mut steps = key.split('.');
                let first = steps.next().and_then(|step| object.get_mut(step));
                let array = steps.try_fold(first, |at, step| Some(at?.get_mut(step))).flatten();
                for item in array.and_then(Json::as_array_mut).into_iter().flatten() {
                    mark(item, map);
                }
            }
            let mut files = Map::new();
            for key in self.path_lists {
                for path in object.get(*key).and_then(Json::as_array).into_iter().flatten() {
                    if let Some(path) = path.as_str()
                        && let Some(file) = map.file_of(path, None)
                    {
                        files.insert(path.to_owned(), Json::String(file.to_owned()));
                    }
                }
            }
            if !files.is_empty() {
                object.insert("files".into(), Json::Object(files));
            }
        }
        let mut found = Vec::new();
        for key in self.messages {
            if let Some(text) = object.get(*key).and_then(Json::as_str) {
                found.extend(locations::parse(text, map));
            }
        }
        if !found.is_empty() {
            object.insert("locations".into(), serde_json::to_value(found).unwrap_or_default());
        }
        for key in self.entries {
            for entry in object.get_mut(*key).and_then(Json::as_array_mut).into_iter().flatten() {
                locate_entry(entry, map);
            }
        }
    }
}

/// `file` on an object with a `path` the map knows (of its `className`, when it says).
fn mark(item: &mut Json, map: &Sourcemap) {
    let Json::Object(object) = item else { return };
    let class = object.get("className").and_then(Json::as_str);
    if let Some(file) = object
        .get("path")
        .and_then(Json::as_str)
        .and_then(|p| map.file_of(p, class))
    {
        object.insert("file".into(), Json::String(file.to_owned()));
    }
}

/// `locations` on a log entry (`{body, …}`) whose body names a script: a `log` event
/// streamed by `logs --follow` as well as an entry of a result.
pub fn locate_entry(entry: &mut Json, map: Option<&Sourcemap>) {
    let Json::Object(object) = entry else { return };
    let Some(body) = object.get("body").and_then(Json::as_str) else {
        return;
    };
    let found = locations::parse(body, map);
    if !found.is_empty() {
        object.insert("locations".into(), serde_json::to_value(found).unwrap_or_default());
    }
}

/// `file_backed` for a write to a script the sourcemap maps: the sync tool puts the file
/// in Studio and would overwrite the edit, so the agent edits the file (or says `force`).
pub fn refuse_file_backed(path: &str, map: Option<&Sourcemap>) -> Result<(), ToolError> {
    let Some(file) = map.and_then(|m| m.file_of(path, None)) else {
        return Ok(());
    };
    Err(ToolError::new(
        ErrorCode::FileBacked,
        format!(
            "{path} is synced from {file}: edit {file} instead; your sync tool puts it in Studio (and would overwrite an edit made here). Nothing was written. Pass `force: true` to edit it in Studio anyway."
        ),
    )
    .with_details(serde_json::json!({ "path": path, "file": file })))
}

/// A result's top-level `success`, read from its bytes without decoding them.
fn success_of(raw: &RawValue) -> Option<bool> {
    let bytes = raw.as_bytes();
    let mut reader = Reader::new(bytes);
    let Ok(Token::Map(n)) = reader.next_token() else {
        return None;
    };
    for _ in 0..n {
        let key = reader.next_token().ok()?;
        if matches!(key, Token::Str(b"success")) {
            return match reader.next_token().ok()? {
                Token::Bool(b) => Some(b),
                _ => None,
            };
        }
        let end = skip(bytes, reader.pos()).ok()?;
        reader.seek(end);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sourcemap::tests::map;
    use serde_json::json;

    const FILE: &str = "src/server/Main.server.luau";

    #[test]
    fn every_mapped_path_gains_its_file_and_unmapped_ones_none() {
        let map = map();
        let mut read = json!({"source": "x", "path": "game.ServerScriptService.Main"});
        Files {
            path: true,
            ..Files::NONE
        }
        .annotate(&mut read, Some(&map));
        assert_eq!(read["file"], FILE);

        let mut unmapped = json!({"source": "x", "path": "game.Workspace.Local"});
        Files {
            path: true,
            ..Files::NONE
        }
        .annotate(&mut unmapped, Some(&map));
        assert_eq!(unmapped.get("file"), None);

        let mut found = json!({"matches": [
            {"path": "game.ServerScriptService.Main", "className": "Script"},
            {"path": "game.ServerScriptService.Main[1]", "className": "Part"},
            {"path": "game.Workspace.Local", "className": "Script"}], "truncated": false});
        Files {
            path_objects: &["matches"],
            ..Files::NONE
        }
        .annotate(&mut found, Some(&map));
        assert_eq!(found["matches"][0]["file"], FILE);
        assert_eq!(found["matches"][1].get("file"), None, "a Part beside the script");
        assert_eq!(found["matches"][2].get("file"), None);

        let mut created = json!({"created": ["game.ServerScriptService.Main", "game.Workspace.Part"]});
        Files {
            path_lists: &["created"],
            ..Files::NONE
        }
        .annotate(&mut created, Some(&map));
        assert_eq!(created["files"], json!({"game.ServerScriptService.Main": FILE}));
        let mut none = json!({"created": ["game.Workspace.Part"]});
        Files {
            path_lists: &["created"],
            ..Files::NONE
        }
        .annotate(&mut none, Some(&map));
        assert_eq!(none.get("files"), None, "no empty map");

        // A dotted key reaches into an object: test_run's coverage.
        let mut covered = json!({"coverage": {"scripts": [
            {"path": "game.ServerScriptService.Main", "covered": [1]},
            {"path": "game.Workspace.Local", "covered": [2]}], "totals": {"scripts": 2}}});
        Files {
            path_objects: &["coverage.scripts"],
            ..Files::NONE
        }
        .annotate(&mut covered, Some(&map));
        assert_eq!(covered["coverage"]["scripts"][0]["file"], FILE);
        assert_eq!(covered["coverage"]["scripts"][1].get("file"), None);
        let mut refused = json!({"coverage": {"error": "EnableCoverage is not enabled"}});
        Files {
            path_objects: &["coverage.scripts"],
            ..Files::NONE
        }
        .annotate(&mut refused, Some(&map));
        assert_eq!(refused, json!({"coverage": {"error": "EnableCoverage is not enabled"}}));
    }

    #[test]
    fn messages_and_entries_gain_locations_with_or_without_a_map() {
        let map = map();
        let files = Files {
            messages: &["error"],
            entries: &["logs"],
            ..Files::NONE
        };
        let mut failed = json!({"success": false, "error": "ServerScriptService.Main:3: boom",
            "logs": [{"level": "Print", "body": "hi"}, {"level": "Info", "body": "Script 'ServerScriptService.Main', Line 3"}]});
        files.annotate(&mut failed, Some(&map));
        assert_eq!(
            failed["locations"],
            json!([{"path": "game.ServerScriptService.Main", "line": 3, "file": FILE}])
        );
        assert_eq!(failed["logs"][0].get("locations"), None);
        assert_eq!(
            failed["logs"][1]["locations"],
            json!([{"path": "game.ServerScriptService.Main", "line": 3, "file": FILE}])
        );
        let mut bare = json!({"error": "ServerScriptService.Main:3: boom"});
        files.annotate(&mut bare, None);
        assert_eq!(
            bare["locations"],
            json!([{"path": "game.ServerScriptService.Main", "line": 3}])
        );
    }

    #[test]
    fn a_mapped_script_is_refused_naming_its_file_and_an_unmapped_one_is_not() {
        let map = map();
        let refused = refuse_file_backed("game.ServerScriptService.Main", Some(&map)).unwrap_err();
        assert_eq!(refused.code, ErrorCode::FileBacked);
        assert!(
            refused.message.contains(&format!("edit {FILE} instead")),
            "{}",
            refused.message
        );
        assert!(refused.message.contains("force: true"), "{}", refused.message);
        assert_eq!(refused.details.unwrap()["file"], FILE);
        assert!(refuse_file_backed("game.Workspace.Local", Some(&map)).is_ok());
        assert!(refuse_file_backed("game.ServerScriptService.Main", None).is_ok());
    }

    #[test]
    fn only_a_failed_result_is_read_when_only_failures_carry_locations() {
        let files = Files {
            messages: &["error"],
            only_failures: true,
            ..Files::NONE
        };
        let raw = |value: Json| RawValue::encode(&crate::protocol::value::from_json(&value));
        assert!(!files.applies_to(&raw(json!({"returns": [1], "success": true}))));
        assert!(files.applies_to(&raw(json!({"returns": [[1, {"a": 2}]], "logs": [], "success": false}))));
        assert!(!files.applies_to(&raw(json!({"returns": []}))));
        assert!(!Files::NONE.applies_to(&raw(json!({"success": false}))));
        assert!(
            Files {
                path: true,
                ..Files::NONE
            }
            .applies_to(&raw(json!({"path": "x"})))
        );
    }
}

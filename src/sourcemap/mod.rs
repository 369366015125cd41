//! The project's files behind Studio's scripts, from a Rojo sourcemap.
//!
//! Most projects keep their code in files and a sync tool (Rojo, Argon) puts it in Studio;
//! an agent edits those files, not Studio. Studio speaks only in instance paths
//! (`ServerScriptService.Combat.Damage:42`), so this module reads the `sourcemap.json` the
//! sync tool writes (a tree of `{name, className, filePaths?, children?}`) and answers two
//! questions: which file is the script at a bridge path (`file_of`, for results and for
//! refusing `script_edit` of a synced script), and which file is the script Studio names
//! in its output by its full name (`locate`, for [`locations`]).
//!
//! It sits below the command table beside `luau`: it knows paths and files, nothing of
//! sessions, the wire or the adapters. [`Watched`] is the one copy a process keeps: it
//! re-reads the file when its modification time or length changes, checked on each use,
//! and keeps the old map (with one warning on stderr) when the new one does not parse.

pub mod locations;
mod paths;

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::Deserialize;

pub use paths::{Segment, format_path, parse_path};

/// The file name sync tools write and `mcp` looks for in its working directory.
pub const FILE_NAME: &str = "sourcemap.json";

/// Classes whose source a file holds.
const SCRIPT_CLASSES: [&str; 3] = ["Script", "LocalScript", "ModuleScript"];

/// One node of the file as Rojo writes it (`src/cli/sourcemap.rs` in rojo: camelCase,
/// `filePaths` and `children` left out when empty).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawNode {
    name: String,
    class_name: String,
    #[serde(default)]
    file_paths: Vec<String>,
    #[serde(default)]
    children: Vec<RawNode>,
}

#[derive(Debug)]
struct Node {
    name: String,
    class_name: String,
    /// Its Luau source among `filePaths`, relative to the sourcemap's folder.
    file: Option<String>,
    children: Vec<usize>,
    /// Its bridge path, were the map Studio's whole tree (`game.Workspace.Twin[2]`).
    path: String,
}

/// A parsed sourcemap, indexed for lookups by bridge path and by full name.
#[derive(Debug)]
pub struct Sourcemap {
    nodes: Vec<Node>,
    /// Nodes with a file, by their full name as Studio prints it (`ServerScriptService.Foo`).
    by_full_name: HashMap<String, Vec<usize>>,
    /// The top-level names under the DataModel, to tell a script's full name in Studio's
    /// output from other text with a colon and a number.
    top_level: Vec<String>,
    scripts: usize,
}

impl Sourcemap {
    /// Reads a sourcemap's text; file paths are made relative to `folder` (the sourcemap's
    /// own folder) where they are absolute and inside it. Only a place's map (its root a
    /// DataModel) maps bridge paths.
    pub fn parse(text: &str, folder: &Path) -> Result<Sourcemap, String> {
        let root: RawNode = serde_json::from_str(text).map_err(|e| format!("not a Rojo sourcemap: {e}"))?;
        if root.class_name != "DataModel" {
            return Err(format!(
                "its root is a {} named {:?}, not a DataModel: it maps a model project, not a place (run `rojo sourcemap` on the place's project file)",
                root.class_name, root.name
            ));
        }
        let mut map = Sourcemap {
            nodes: Vec::new(),
            by_full_name: HashMap::new(),
            top_level: root.children.iter().map(|c| c.name.clone()).collect(),
            scripts: 0,
        };
        map.nodes.push(Node {
            name: root.name.clone(),
            class_name: root.class_name.clone(),
            file: None,
            children: Vec::new(),
            path: "game".to_owned(),
        });
        map.add_children(0, root.children, "", folder);
        Ok(map)
    }

    fn add_children(&mut self, parent: usize, children: Vec<RawNode>, full_prefix: &str, folder: &Path) {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for child in &children {
            *counts.entry(child.name.as_str()).or_default() += 1;
        }
        let counts: HashMap<String, usize> = counts.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        let mut seen: HashMap<String, usize> = HashMap::new();
        for child in children {
            let index = if counts.get(&child.name).copied().unwrap_or(0) > 1 {
                let k = seen.entry(child.name.clone()).or_default();
                *k += 1;
                Some(*k)
            } else {
                None
            };
            let path = paths::join(&self.nodes[parent].path, &child.name, index);
            let full_name = if full_prefix.is_empty() {
                child.name.clone()
            } else {
                format!("{full_prefix}.{}", child.name)
            };
            let file = if SCRIPT_CLASSES.contains(&child.class_name.as_str()) {
                luau_file(&child.file_paths, folder)
            } else {
                None
            };
            let id = self.nodes.len();
            if file.is_some() {
                self.scripts += 1;
                self.by_full_name.entry(full_name.clone()).or_default().push(id);
            }
            self.nodes.push(Node {
                name: child.name,
                class_name: child.class_name,
                file,
                children: Vec::new(),
                path,
            });
            self.nodes[parent].children.push(id);
            self.add_children(id, child.children, &full_name, folder);
        }
    }

    /// How many scripts it maps to a file.
    pub fn scripts(&self) -> usize {
        self.scripts
    }

    /// The file of the script at a bridge path (`game.` optional, `Name[i]` for the i-th
    /// sibling of that name), or `None`. Same-named siblings are told apart as paths index
    /// them, by their order among the siblings of that name; where the map lists only one
    /// of the name (it leaves out what is not a script), that one is the one. With
    /// `class_name` (a result that says it), a node of another class is not it.
    pub fn file_of(&self, path: &str, class_name: Option<&str>) -> Option<&str> {
        let node = self.node_at(path)?;
        if class_name.is_some_and(|class| class != node.class_name) {
            return None;
        }
        node.file.as_deref()
    }

    fn node_at(&self, path: &str) -> Option<&Node> {
        let segments = parse_path(path).ok()?;
        let mut at = 0;
        for segment in &segments {
            let named: Vec<usize> = self.nodes[at]
                .children
                .iter()
                .copied()
                .filter(|&c| self.nodes[c].name == segment.name)
                .collect();
            at = match (named.len(), segment.index) {
                (0, _) => return None,
                (1, _) => named[0],
                (_, None) => named[0],
                (_, Some(i)) => *named.get(i.checked_sub(1)?)?,
            };
        }
        if at == 0 { None } else { Some(&self.nodes[at]) }
    }

    /// The script Studio names by its full name (`ServerScriptService.Foo`, as its output
    /// prints it: names joined by dots, unquoted, no sibling index): its bridge path and
    /// file, when exactly one mapped script has that full name.
    pub fn locate(&self, full_name: &str) -> Option<(&str, &str)> {
        match self.by_full_name.get(full_name).map(Vec::as_slice) {
            Some(&[one]) => {
                let node = &self.nodes[one];
                Some((node.path.as_str(), node.file.as_deref()?))
            }
            _ => None,
        }
    }

    /// Whether `name` is a child of the DataModel in this map.
    pub fn has_top_level(&self, name: &str) -> bool {
        self.top_level.iter().any(|n| n == name)
    }
}

/// A node's file: its Luau source among `filePaths` (never the `.meta.json` or
/// `.model.json` listed beside it), relative to the sourcemap's folder.
fn luau_file(file_paths: &[String], folder: &Path) -> Option<String> {
    let found = file_paths.iter().find(|p| {
        let lower = p.to_ascii_lowercase();
        lower.ends_with(".luau") || lower.ends_with(".lua")
    })?;
    let path = Path::new(found);
    if path.is_absolute() {
        let folder = normalize(folder);
        if let Ok(relative) = normalize(path).strip_prefix(&folder) {
            return Some(relative.to_string_lossy().into_owned());
        }
    }
    Some(found.clone())
}

/// `path` without `.` components (the folder of `./sourcemap.json` is `.`).
fn normalize(path: &Path) -> PathBuf {
    path.components().filter(|c| *c != Component::CurDir).collect()
}

/// What [`Watched`] found, for `doctor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// No file at the path.
    Missing(PathBuf),
    /// Read: how many scripts it maps.
    Loaded { path: PathBuf, scripts: usize },
    /// The file is there but does not parse (a map read earlier may still be in use).
    Bad { path: PathBuf, problem: String },
}

/// The sourcemap of one process: where it is, and the map last read from it, re-read when
/// the file's modification time or length changes (checked on each [`Watched::current`]).
#[derive(Debug)]
pub struct Watched {
    path: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// (modified, len) of the file as last read, or `None` when it was missing.
    stamp: Option<(Option<SystemTime>, u64)>,
    checked: bool,
    map: Option<Arc<Sourcemap>>,
    problem: Option<String>,
}

impl Watched {
    /// The sourcemap at `path`, or `sourcemap.json` in the working directory.
    pub fn new(path: Option<PathBuf>) -> Arc<Watched> {
        let path = path.unwrap_or_else(|| PathBuf::from(FILE_NAME));
        Arc::new(Watched {
            path,
            state: Mutex::new(State::default()),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// [`Watched::current`] from async code: the file's stamp is looked at here, and a
    /// changed file is read and parsed on the blocking pool (a 20 MB map takes about half a
    /// second), so that no other call on the async thread waits for it, nor for its lock.
    pub async fn current_off_thread(self: &Arc<Self>) -> Option<Arc<Sourcemap>> {
        if let Ok(state) = self.state.try_lock()
            && state.checked
            && state.stamp == stamp_of(&self.path)
        {
            return state.map.clone();
        }
        let watched = Arc::clone(self);
        tokio::task::spawn_blocking(move || watched.current())
            .await
            .unwrap_or_default()
    }

    /// The map as the file is now: read again if it changed since the last call. A file
    /// that does not parse is said once on stderr and the map read before it is kept; a
    /// file that is gone maps nothing.
    pub fn current(&self) -> Option<Arc<Sourcemap>> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let stamp = stamp_of(&self.path);
        if state.checked && stamp == state.stamp {
            return state.map.clone();
        }
        state.checked = true;
        state.stamp = stamp;
        if stamp.is_none() {
            if state.map.take().is_some() {
                tracing::info!("the sourcemap {} is gone: results name no files", self.path.display());
            }
            state.problem = None;
            return None;
        }
        let folder = self.path.parent().unwrap_or(Path::new("")).to_path_buf();
        let parsed = std::fs::read_to_string(&self.path)
            .map_err(|e| format!("cannot be read: {e}"))
            .and_then(|text| Sourcemap::parse(&text, &folder));
        match parsed {
            Ok(map) => {
                tracing::debug!("read the sourcemap {}: {} scripts", self.path.display(), map.scripts());
                state.map = Some(Arc::new(map));
                state.problem = None;
            }
            Err(problem) => {
                let kept = if state.map.is_some() {
                    "the map read before is kept"
                } else {
                    "results name no files until it is fixed"
                };
                tracing::warn!("the sourcemap {}: {problem}; {kept}", self.path.display());
                state.problem = Some(problem);
            }
        }
        state.map.clone()
    }

    /// What is at the path now, for `doctor`.
    pub fn status(&self) -> Status {
        let map = self.current();
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let path = self.path.clone();
        match (&state.stamp, &state.problem, map) {
            (None, _, _) => Status::Missing(path),
            (Some(_), Some(problem), _) => Status::Bad {
                path,
                problem: problem.clone(),
            },
            (Some(_), None, Some(map)) => Status::Loaded {
                path,
                scripts: map.scripts(),
            },
            (Some(_), None, None) => Status::Missing(path),
        }
    }
}

/// A file's (modified, len), or `None` when it is missing: what says it changed.
fn stamp_of(path: &Path) -> Option<(Option<SystemTime>, u64)> {
    std::fs::metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| (m.modified().ok(), m.len()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A place's map as `rojo sourcemap` writes it: scripts and their ancestors only, a
    /// script's `.meta.json` listed beside its source, twins, an init script.
    pub(crate) const MAP: &str = r#"{"name":"Game","className":"DataModel","filePaths":["default.project.json"],"children":[
        {"name":"ServerScriptService","className":"ServerScriptService","children":[
            {"name":"Combat","className":"Folder","children":[
                {"name":"Damage","className":"ModuleScript","filePaths":["src/server/Combat/Damage.meta.json","src/server/Combat/Damage.luau"]}]},
            {"name":"Main","className":"Script","filePaths":["src/server/Main.server.luau"]},
            {"name":"Twin","className":"Script","filePaths":["src/server/Twin/init.server.luau"]},
            {"name":"Twin","className":"ModuleScript","filePaths":["src/server/Twin.luau"]},
            {"name":"Data","className":"ModuleScript","filePaths":["src/server/Data.json"]},
            {"name":"Props","className":"Folder","filePaths":["src/server/Props.model.json"]}]},
        {"name":"ReplicatedStorage","className":"ReplicatedStorage","children":[
            {"name":"My.Module","className":"ModuleScript","filePaths":["src/shared/My.Module.lua"]}]}]}"#;

    pub(crate) fn map() -> Sourcemap {
        Sourcemap::parse(MAP, Path::new("")).unwrap()
    }

    #[test]
    fn a_scripts_file_is_its_luau_source_never_its_meta_or_model_json() {
        let map = map();
        assert_eq!(
            map.file_of("game.ServerScriptService.Combat.Damage", None),
            Some("src/server/Combat/Damage.luau")
        );
        assert_eq!(
            map.file_of("ServerScriptService.Main", Some("Script")),
            Some("src/server/Main.server.luau")
        );
        assert_eq!(map.file_of("ServerScriptService.Data", None), None, "a JSON module");
        assert_eq!(map.file_of("ServerScriptService.Props", None), None, "a model file");
        assert_eq!(map.file_of("ServerScriptService.Combat", None), None, "a folder");
        assert_eq!(map.file_of("ServerScriptService.Missing", None), None);
        assert_eq!(map.file_of("game", None), None);
        assert_eq!(map.file_of("not a [path", None), None);
        assert_eq!(
            map.file_of(r#"ReplicatedStorage["My.Module"]"#, None),
            Some("src/shared/My.Module.lua")
        );
        assert_eq!(map.scripts(), 5);
    }

    #[test]
    fn twins_are_told_apart_by_order_and_class() {
        let map = map();
        assert_eq!(
            map.file_of("ServerScriptService.Twin[1]", None),
            Some("src/server/Twin/init.server.luau")
        );
        assert_eq!(
            map.file_of("ServerScriptService.Twin[2]", None),
            Some("src/server/Twin.luau")
        );
        assert_eq!(
            map.file_of("ServerScriptService.Twin", None),
            Some("src/server/Twin/init.server.luau")
        );
        assert_eq!(map.file_of("ServerScriptService.Twin[3]", None), None);
        assert_eq!(map.file_of("ServerScriptService.Twin[2]", Some("Script")), None);
        // Studio has a Part named Main beside the script the map lists alone.
        assert_eq!(
            map.file_of("ServerScriptService.Main[2]", Some("Script")),
            Some("src/server/Main.server.luau")
        );
        assert_eq!(map.file_of("ServerScriptService.Main[1]", Some("Part")), None);
    }

    #[test]
    fn full_names_locate_a_unique_script() {
        let map = map();
        assert_eq!(
            map.locate("ServerScriptService.Combat.Damage"),
            Some((
                "game.ServerScriptService.Combat.Damage",
                "src/server/Combat/Damage.luau"
            ))
        );
        assert_eq!(
            map.locate("ReplicatedStorage.My.Module"),
            Some((r#"game.ReplicatedStorage["My.Module"]"#, "src/shared/My.Module.lua"))
        );
        assert_eq!(map.locate("ServerScriptService.Twin"), None, "two scripts share it");
        assert_eq!(map.locate("ServerScriptService.Combat"), None);
        assert!(map.has_top_level("ServerScriptService"));
    }

    #[test]
    fn absolute_paths_are_made_relative_to_the_sourcemaps_folder() {
        let text = r#"{"name":"G","className":"DataModel","children":[{"name":"S","className":"ServerScriptService","children":[
            {"name":"A","className":"Script","filePaths":["/p/src/A.server.luau"]},
            {"name":"B","className":"Script","filePaths":["/elsewhere/B.server.luau"]}]}]}"#;
        let map = Sourcemap::parse(text, Path::new("/p")).unwrap();
        assert_eq!(map.file_of("S.A", None), Some("src/A.server.luau"));
        assert_eq!(map.file_of("S.B", None), Some("/elsewhere/B.server.luau"));
    }

    #[test]
    fn a_model_projects_map_or_bad_json_is_refused_with_the_reason() {
        let model = r#"{"name":"Plugin","className":"Folder","children":[]}"#;
        let err = Sourcemap::parse(model, Path::new("")).unwrap_err();
        assert!(err.contains("not a DataModel"), "{err}");
        let err = Sourcemap::parse("{", Path::new("")).unwrap_err();
        assert!(err.starts_with("not a Rojo sourcemap"), "{err}");
        let err = Sourcemap::parse(r#"{"name":"G"}"#, Path::new("")).unwrap_err();
        assert!(err.contains("className"), "{err}");
    }

    #[test]
    fn a_change_is_seen_by_the_next_call_and_a_bad_file_keeps_the_old_map() {
        let dir = std::env::temp_dir().join(format!("sb-sourcemap-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join(FILE_NAME);
        let _ = std::fs::remove_file(&path);
        let watched = Watched::new(Some(path.clone()));
        assert!(watched.current().is_none());
        assert_eq!(watched.status(), Status::Missing(path.clone()));

        std::fs::write(&path, MAP).unwrap();
        let first = watched.current().expect("read");
        assert_eq!(first.scripts(), 5);
        assert_eq!(
            watched.status(),
            Status::Loaded {
                path: path.clone(),
                scripts: 5
            }
        );
        let renamed = MAP.replace("src/server/Main.server.luau", "src/server/Entry.server.luau");
        std::fs::write(&path, &renamed).unwrap();
        let second = watched.current().expect("read again");
        assert_eq!(
            second.file_of("ServerScriptService.Main", None),
            Some("src/server/Entry.server.luau")
        );

        std::fs::write(&path, "{ half").unwrap();
        let kept = watched.current().expect("the old map is kept");
        assert_eq!(
            kept.file_of("ServerScriptService.Main", None),
            Some("src/server/Entry.server.luau")
        );
        assert!(matches!(watched.status(), Status::Bad { .. }));

        std::fs::remove_file(&path).unwrap();
        assert!(watched.current().is_none(), "a removed sourcemap maps nothing");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A changed sourcemap is read on the blocking pool: while one is read (its lock held
    /// elsewhere), the async thread runs other tasks. On a one-thread runtime, the other
    /// task here is what lets the read finish: had the read blocked the runtime's thread,
    /// the lock would go only when its holder gave up waiting, unreleased by that task.
    #[tokio::test(flavor = "current_thread")]
    async fn a_sourcemap_read_holds_up_no_other_task() {
        let dir = std::env::temp_dir().join(format!("sb-sourcemap-async-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join(FILE_NAME);
        std::fs::write(&path, MAP).unwrap();
        let watched = Watched::new(Some(path));
        let (locked_tx, locked_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let holder = {
            let watched = Arc::clone(&watched);
            std::thread::spawn(move || {
                let _state = watched.state.lock().unwrap();
                locked_tx.send(()).unwrap();
                // Released by the other task, or, if it never ran, after 5 s.
                release_rx.recv_timeout(std::time::Duration::from_secs(5)).is_ok()
            })
        };
        locked_rx.recv().unwrap();
        let reading = tokio::spawn({
            let watched = Arc::clone(&watched);
            async move { watched.current_off_thread().await }
        });
        let other = tokio::spawn(async move {
            release_tx.send(()).unwrap();
        });
        let map = reading.await.unwrap().expect("the map, once the lock is free");
        other.await.unwrap();
        assert_eq!(map.scripts(), 5);
        assert!(
            holder.join().unwrap(),
            "the other task ran while the sourcemap was being read"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

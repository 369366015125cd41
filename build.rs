//! Builds the Studio plugin model `$OUT_DIR/StudioBridge.rbxm` from `plugin/src`.
//!
//! File rules (Rojo's): `init.server.luau` makes its folder a `Script`, `init.luau` a
//! `ModuleScript`, `X.server.luau` is a `Script` X, `X.client.luau` a `LocalScript` X, any other
//! `X.luau` a `ModuleScript` X; a folder without an init file is a `Folder`.
//!
//! The plugin's sources use Luau string requires (`require("./Codec")`, `require("../Codec")`,
//! `require("@self/State")`) so that Lune runs them as they are. Studio only has instance
//! requires, so every `require("<literal>")` is rewritten here:
//!   "./A/B"    -> script.Parent.A.B
//!   "../A"     -> script.Parent.Parent.A   (each further "../" adds .Parent)
//!   "@self/A"  -> script.A
//! These are Luau's require-by-string semantics mapped onto the instance tree: a module's "./"
//! is its parent instance, also for init files (an init file *is* its folder's instance).
//! Every rewritten target is checked against the tree; a require that does not resolve, or any
//! other form of `require` with a string literal, fails the build with the file and line.
//! (darklua's `convert_require` does the same job; see plugin/README.md for why it is not
//! used here.)

use std::collections::BTreeMap;
use std::env;
use std::fs;
use std::path::{Path, PathBuf};

use rbx_dom_weak::{InstanceBuilder, WeakDom};

/// One script or folder of the plugin tree, before it becomes an instance.
#[derive(Debug)]
struct Node {
    name: String,
    class: &'static str,
    source: Option<String>,
    /// file the source came from (for error messages)
    file: Option<PathBuf>,
    children: Vec<Node>,
}

fn split_name(file_name: &str) -> Option<(&str, &'static str)> {
    const SUFFIXES: [(&str, &str); 6] = [
        (".server.luau", "Script"),
        (".client.luau", "LocalScript"),
        (".server.lua", "Script"),
        (".client.lua", "LocalScript"),
        (".luau", "ModuleScript"),
        (".lua", "ModuleScript"),
    ];
    SUFFIXES
        .iter()
        .find_map(|(suffix, class)| file_name.strip_suffix(suffix).map(|base| (base, *class)))
}

fn read_tree(dir: &Path, name: &str) -> Result<Node, String> {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    let mut node = Node {
        name: name.to_owned(),
        class: "Folder",
        source: None,
        file: None,
        children: Vec::new(),
    };
    for path in &entries {
        let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if path.is_file()
            && let Some(("init", class)) = split_name(file_name)
        {
            node.class = class;
            node.source = Some(fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?);
            node.file = Some(path.clone());
        }
    }
    for path in &entries {
        let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if path.is_dir() {
            node.children.push(read_tree(path, file_name)?);
        } else if let Some((base, class)) = split_name(file_name)
            && base != "init"
        {
            node.children.push(Node {
                name: base.to_owned(),
                class,
                source: Some(fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?),
                file: Some(path.clone()),
                children: Vec::new(),
            });
        }
    }
    Ok(node)
}

/// Turns a require path into an instance expression relative to `script`, given `exists`
/// to check the resolved chain. `up` counts the `.Parent` steps taken from `script`.
fn require_expression(path: &str) -> Result<(usize, Vec<String>), String> {
    let mut parts = path.split('/');
    let first = parts.next().unwrap_or_default();
    let mut up = match first {
        "." => 1,
        ".." => 2,
        "@self" => 0,
        _ => {
            return Err(format!(
                "require(\"{path}\"): only \"./\", \"../\" and \"@self/\" paths are supported"
            ));
        }
    };
    let mut names = Vec::new();
    for part in parts {
        match part {
            "" | "." => {}
            ".." => {
                if !names.is_empty() {
                    return Err(format!("require(\"{path}\"): \"..\" after a name is not supported"));
                }
                up += 1;
            }
            name => {
                let name = split_name(name).map(|(b, _)| b).unwrap_or(name);
                names.push(name.to_owned());
            }
        }
    }
    if names.is_empty() {
        return Err(format!("require(\"{path}\"): the path names no module"));
    }
    Ok((up, names))
}

/// Members of the instances a require walks through (Instance, LuaSourceContainer, Script,
/// ModuleScript): `script.Clone` is the method, not a module named Clone, so a module with
/// one of these names is reached with `:FindFirstChild`.
const INSTANCE_MEMBERS: &[&str] = &[
    "AddTag",
    "AncestryChanged",
    "Archivable",
    "AttributeChanged",
    "Capabilities",
    "Changed",
    "ChildAdded",
    "ChildRemoved",
    "ClassName",
    "ClearAllChildren",
    "Clone",
    "DescendantAdded",
    "DescendantRemoving",
    "Destroy",
    "Destroying",
    "Disabled",
    "Enabled",
    "FindFirstAncestor",
    "FindFirstAncestorOfClass",
    "FindFirstAncestorWhichIsA",
    "FindFirstChild",
    "FindFirstChildOfClass",
    "FindFirstChildWhichIsA",
    "FindFirstDescendant",
    "GetActor",
    "GetAttribute",
    "GetAttributeChangedSignal",
    "GetAttributes",
    "GetChildren",
    "GetDebugId",
    "GetDescendants",
    "GetFullName",
    "GetPropertyChangedSignal",
    "GetStyled",
    "GetTags",
    "HasTag",
    "IsA",
    "IsAncestorOf",
    "IsDescendantOf",
    "IsPropertyModified",
    "LinkedSource",
    "Name",
    "Parent",
    "Remove",
    "RemoveTag",
    "ResetPropertyToDefault",
    "RobloxLocked",
    "RunContext",
    "Sandboxed",
    "ScriptGuid",
    "SetAttribute",
    "Source",
    // Not a member of these classes in Studio, but Lune (the test Studio's engine) answers
    // `.Terrain` on every instance as Workspace.Terrain and raises; `:FindFirstChild` reads
    // the same in both (Actions/Terrain.luau).
    "Terrain",
    "UniqueId",
    "WaitForChild",
];

fn index_expr(name: &str) -> String {
    let is_ident = !name.is_empty()
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if INSTANCE_MEMBERS.contains(&name) {
        format!(":FindFirstChild(\"{name}\")")
    } else if is_ident {
        format!(".{name}")
    } else {
        format!("[\"{}\"]", name.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

/// Rewrites every `require("...")` / `require('...')` in `source`. `resolve(up, names)` says
/// whether the target exists. Returns the new source or "line N: message".
fn rewrite_requires(source: &str, resolve: &dyn Fn(usize, &[String]) -> bool) -> Result<String, String> {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(at) = rest.find("require(") {
        let line = source.len() - rest.len() + at;
        let (before, after) = rest.split_at(at + "require(".len());
        out.push_str(before);
        let trimmed = after.trim_start();
        let quote = trimmed.chars().next();
        if quote != Some('"') && quote != Some('\'') {
            // an instance require already (e.g. require(script.Parent.X)): leave it
            rest = after;
            continue;
        }
        let quote = quote.unwrap();
        let body = &trimmed[1..];
        let end = body
            .find(quote)
            .ok_or_else(|| format!("line {}: unterminated require string", line_of(source, line)))?;
        let path = &body[..end];
        let after_string = body[end + 1..].trim_start();
        if !after_string.starts_with(')') {
            return Err(format!(
                "line {}: require(\"{path}\" ...) must be a single string literal",
                line_of(source, line)
            ));
        }
        let (up, names) = require_expression(path).map_err(|e| format!("line {}: {e}", line_of(source, line)))?;
        if !resolve(up, &names) {
            return Err(format!(
                "line {}: require(\"{path}\") does not resolve to a module in plugin/src",
                line_of(source, line)
            ));
        }
        out.push_str("script");
        for _ in 0..up {
            out.push_str(".Parent");
        }
        for name in &names {
            out.push_str(&index_expr(name));
        }
        out.push(')');
        rest = &after_string[1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn line_of(source: &str, byte: usize) -> usize {
    source[..byte].matches('\n').count() + 1
}

/// Paths (from the root) of every node, for resolving requires.
fn collect_paths(node: &Node, prefix: &mut Vec<String>, all: &mut BTreeMap<Vec<String>, &'static str>) {
    all.insert(prefix.clone(), node.class);
    for child in &node.children {
        prefix.push(child.name.clone());
        collect_paths(child, prefix, all);
        prefix.pop();
    }
}

fn rewrite_tree(
    node: &mut Node,
    at: &mut Vec<String>,
    all: &BTreeMap<Vec<String>, &'static str>,
) -> Result<(), String> {
    if let Some(source) = &node.source {
        let here = at.clone();
        let resolve = |up: usize, names: &[String]| -> bool {
            if up > here.len() {
                return false;
            }
            let mut target: Vec<String> = here[..here.len() - up].to_vec();
            target.extend(names.iter().cloned());
            matches!(all.get(&target), Some(&"ModuleScript"))
        };
        let file = node.file.as_ref().map(|f| f.display().to_string()).unwrap_or_default();
        node.source = Some(rewrite_requires(source, &resolve).map_err(|e| format!("{file}: {e}"))?);
    }
    for child in &mut node.children {
        at.push(child.name.clone());
        rewrite_tree(child, at, all)?;
        at.pop();
    }
    Ok(())
}

fn builder(node: &Node) -> InstanceBuilder {
    let mut b = InstanceBuilder::new(node.class).with_name(node.name.clone());
    if let Some(source) = &node.source {
        b = b.with_property("Source", source.clone());
    }
    for child in &node.children {
        b = b.with_child(builder(child));
    }
    b
}

/// Reads `src_dir`, rewrites requires, and returns the .rbxm bytes (root named `root_name`).
fn build_model(src_dir: &Path, root_name: &str) -> Result<Vec<u8>, String> {
    let mut root = read_tree(src_dir, root_name)?;
    if root.class != "Script" {
        return Err(format!(
            "{}: needs an init.server.luau (the plugin's entry Script)",
            src_dir.display()
        ));
    }
    let mut all = BTreeMap::new();
    collect_paths(&root, &mut Vec::new(), &mut all);
    rewrite_tree(&mut root, &mut Vec::new(), &all)?;
    let mut dom = WeakDom::new(InstanceBuilder::new("Folder").with_name("Root"));
    let root_ref = dom.insert(dom.root_ref(), builder(&root));
    let mut bytes = Vec::new();
    rbx_binary::to_writer(&mut bytes, &dom, &[root_ref]).map_err(|e| format!("encoding the .rbxm: {e}"))?;
    Ok(bytes)
}

fn watch(dir: &Path) {
    println!("cargo:rerun-if-changed={}", dir.display());
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                watch(&path);
            } else {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
}

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let src_dir = manifest_dir.join("plugin").join("src");
    watch(&src_dir);
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("StudioBridge.rbxm");
    match build_model(&src_dir, "StudioBridge") {
        Ok(bytes) => fs::write(&out, bytes).unwrap_or_else(|e| panic!("writing {}: {e}", out.display())),
        Err(e) => panic!("building the Studio plugin from plugin/src failed: {e}"),
    }
    embed_windows_manifest(&manifest_dir);
}

/// The Windows manifest (`src/windows/studio-bridge.exe.manifest`: per-monitor DPI
/// awareness, which xcap's window capture needs on a scaled display) embedded into the
/// executable by the MSVC linker, so no resource compiler or crate is needed. Other
/// targets, and the GNU toolchain on Windows, get none (said as a build warning there).
fn embed_windows_manifest(manifest_dir: &Path) {
    if env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("windows") {
        return;
    }
    let manifest = manifest_dir.join(WINDOWS_MANIFEST);
    println!("cargo:rerun-if-changed={}", manifest.display());
    if env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("msvc") {
        println!("cargo:rustc-link-arg-bins=/MANIFEST:EMBED");
        println!("cargo:rustc-link-arg-bins=/MANIFESTINPUT:{}", manifest.display());
    } else {
        println!(
            "cargo:warning=no application manifest embedded (not the MSVC linker): window screenshots may time out on scaled displays"
        );
    }
}

/// Where the Windows application manifest lives, from the package root.
const WINDOWS_MANIFEST: &str = "src/windows/studio-bridge.exe.manifest";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_windows_manifest_declares_per_monitor_dpi_awareness() {
        let text =
            fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(WINDOWS_MANIFEST)).expect("the manifest");
        assert!(text.starts_with("<?xml"), "an XML document");
        assert!(text.contains(">PerMonitorV2, PerMonitor</dpiAwareness>"), "{text}");
        assert!(text.contains(">true/pm</dpiAware>"), "the pre-1607 form too: {text}");
        assert_eq!(text.matches("<assembly").count(), text.matches("</assembly>").count());
    }

    fn ok_all(_: usize, _: &[String]) -> bool {
        true
    }

    #[test]
    fn rewrites_relative_and_self_requires() {
        let src = "local A = require(\"./A\")\nlocal B = require('../B/C')\nlocal S = require(\"@self/S\")";
        let out = rewrite_requires(src, &ok_all).unwrap();
        assert_eq!(
            out,
            "local A = require(script.Parent.A)\nlocal B = require(script.Parent.Parent.B.C)\nlocal S = require(script.S)"
        );
    }

    #[test]
    fn leaves_instance_requires_and_other_text_alone() {
        let src = "local x = require(script.Parent.X)\nlocal s = \"not a require\"";
        assert_eq!(rewrite_requires(src, &ok_all).unwrap(), src);
    }

    #[test]
    fn strips_extensions_and_quotes_odd_names() {
        let out = rewrite_requires("require(\"./my-mod.luau\")", &ok_all).unwrap();
        assert_eq!(out, "require(script.Parent[\"my-mod\"])");
        let out = rewrite_requires("require(\"./Clone\")", &ok_all).unwrap();
        assert_eq!(
            out, "require(script.Parent:FindFirstChild(\"Clone\"))",
            "not the Clone method"
        );
    }

    #[test]
    fn refuses_unresolvable_and_unsupported_paths() {
        assert!(
            rewrite_requires("require(\"./Missing\")", &|_, _| false)
                .unwrap_err()
                .contains("does not resolve")
        );
        assert!(
            rewrite_requires("\n\nrequire(\"@lune/fs\")", &ok_all)
                .unwrap_err()
                .starts_with("line 3")
        );
        assert!(rewrite_requires("require(\"./A\" .. x)", &ok_all).is_err());
    }

    #[test]
    fn builds_the_tree_with_rojo_rules() {
        let dir = std::env::temp_dir().join(format!("rbxm-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("Actions")).unwrap();
        fs::write(dir.join("init.server.luau"), "local M = require(\"@self/Main\")").unwrap();
        fs::write(dir.join("Main.luau"), "local A = require(\"./Actions\") return {}").unwrap();
        fs::write(
            dir.join("Actions/init.luau"),
            "local S = require(\"@self/State\") local M = require(\"./Main\") return {}",
        )
        .unwrap();
        fs::write(
            dir.join("Actions/State.luau"),
            "local M = require(\"../Main\") return {}",
        )
        .unwrap();
        let bytes = build_model(&dir, "StudioBridge").unwrap();
        let dom = rbx_binary::from_reader(bytes.as_slice()).unwrap();
        let root = dom.get_by_ref(dom.root().children()[0]).unwrap();
        assert_eq!(root.class.as_str(), "Script");
        let names: Vec<_> = root
            .children()
            .iter()
            .map(|r| dom.get_by_ref(*r).unwrap().name.clone())
            .collect();
        assert_eq!(names, vec!["Actions", "Main"]);
        let actions = dom.get_by_ref(root.children()[0]).unwrap();
        assert_eq!(actions.class.as_str(), "ModuleScript");
        let state = dom.get_by_ref(actions.children()[0]).unwrap();
        match state.properties.get(&"Source".into()) {
            Some(rbx_dom_weak::types::Variant::String(s)) => {
                assert_eq!(s, "local M = require(script.Parent.Parent.Main) return {}")
            }
            other => panic!("unexpected Source {other:?}"),
        }
        // a require of something that is not a ModuleScript fails the build
        fs::write(dir.join("Bad.luau"), "require(\"./Nope\")").unwrap();
        assert!(
            build_model(&dir, "StudioBridge")
                .unwrap_err()
                .contains("Bad.luau: line 1")
        );
        let _ = fs::remove_dir_all(&dir);
    }
}

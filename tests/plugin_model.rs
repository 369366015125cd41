//! The embedded plugin model: read back with rbx_binary and checked against plugin/src,
//! plus build.rs's own unit tests (build scripts are not tested by `cargo test`, so the
//! script is compiled here as a module).

#[allow(dead_code)]
#[path = "../build.rs"]
mod build_script;

use std::collections::BTreeSet;
use std::path::Path;

use rbx_dom_weak::WeakDom;
use rbx_dom_weak::types::Variant;
use studio_bridge::plugin_install::PLUGIN_RBXM;

fn model() -> WeakDom {
    rbx_binary::from_reader(PLUGIN_RBXM).expect("the embedded .rbxm decodes")
}

fn source(dom: &WeakDom, referent: rbx_dom_weak::types::Ref) -> Option<String> {
    match dom.get_by_ref(referent)?.properties.get(&"Source".into())? {
        Variant::String(text) => Some(text.clone()),
        _ => None,
    }
}

/// `Actions/Exec.luau` → `StudioBridge.Actions.Exec`, as the tree should have it.
fn expected_paths(dir: &Path, prefix: &str, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            let child = format!("{prefix}.{name}");
            out.insert(child.clone());
            expected_paths(&path, &child, out);
        } else if let Some(stem) = name.strip_suffix(".luau") {
            let stem = stem.trim_end_matches(".server").trim_end_matches(".client");
            if stem != "init" {
                out.insert(format!("{prefix}.{stem}"));
            }
        }
    }
}

#[test]
fn the_model_has_one_script_per_plugin_source_file() {
    let dom = model();
    let roots = dom.root().children();
    assert_eq!(roots.len(), 1, "one root instance");
    let root = dom.get_by_ref(roots[0]).unwrap();
    assert_eq!((root.name.as_str(), root.class.as_str()), ("StudioBridge", "Script"));

    let mut found = BTreeSet::new();
    let mut stack = vec![(roots[0], "StudioBridge".to_string())];
    while let Some((referent, path)) = stack.pop() {
        let instance = dom.get_by_ref(referent).unwrap();
        if referent != roots[0] {
            found.insert(path.clone());
            assert!(
                ["ModuleScript", "Folder"].contains(&instance.class.as_str()),
                "{path} is a {}",
                instance.class
            );
        }
        if let Some(text) = source(&dom, referent) {
            assert!(
                !text.contains("require(\"") && !text.contains("require('"),
                "{path} still has a string require"
            );
        }
        for child in instance.children() {
            stack.push((*child, format!("{path}.{}", dom.get_by_ref(*child).unwrap().name)));
        }
    }
    let mut expected = BTreeSet::new();
    expected_paths(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin/src"),
        "StudioBridge",
        &mut expected,
    );
    assert_eq!(found, expected);
    for action in ["State", "Logs", "Query", "Exec", "Screenshot"] {
        assert!(
            found.contains(&format!("StudioBridge.Actions.{action}")),
            "no {action} action"
        );
    }
}

#[test]
fn rojo_project_and_tool_pins_agree_with_the_build() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let project: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("plugin.project.json")).unwrap()).unwrap();
    assert_eq!(
        project["name"], "StudioBridge",
        "the .rbxm root is named StudioBridge too"
    );
    assert_eq!(project["tree"]["$path"], "plugin/src", "build.rs builds plugin/src");
    let rokit = std::fs::read_to_string(root.join("rokit.toml")).unwrap();
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    for tool in ["lune", "stylua", "selene"] {
        let pinned = rokit
            .lines()
            .find(|l| l.starts_with(&format!("{tool} =")))
            .and_then(|l| l.rsplit('@').next())
            .map(|v| v.trim_matches(|c| c == '"' || c == ' '))
            .unwrap_or_else(|| panic!("rokit.toml pins no {tool}"));
        assert!(
            ci.contains(&format!("{tool} {pinned}")),
            ".ci/run does not install {tool} {pinned}"
        );
    }
}

//! The real plugin's script tools (TESTING.md layer 5): `find`, `script_read`,
//! `script_edit` and `script_search`, answered by the embedded .rbxm in a headless Studio
//! under Lune, through the real `studio-bridge mcp`.

use crate::support;

use serde_json::json;
use support::studio::{edit_studio, exchange};

#[tokio::test]
async fn find_and_script_read_are_answered_by_the_real_plugin() {
    let (rbxm, mcp, _studio) = edit_studio().await;

    // A small tree with classes, tags, an attribute and a script to find and read.
    let made = mcp
        .ok(
            "studio_exec",
            json!({"script": "local f = Instance.new('Folder')\nf.Name = 'Finds'\n\
                local m = Instance.new('Model')\nm.Name = 'Crate'\nm.Parent = f\n\
                local p = Instance.new('Part')\np.Name = 'Lid'\np:AddTag('Loot')\np.Parent = m\n\
                local w = Instance.new('WedgePart')\nw.Name = 'crate.ramp'\nw:SetAttribute('Slope', 30)\nw.Parent = f\n\
                local s = Instance.new('Script')\ns.Name = 'Opener'\ns.Source = 'local a = 1\\nlocal b = 2\\nreturn a + b\\n'\ns.Parent = m\n\
                f.Parent = workspace\nreturn #f:GetDescendants()"}),
        )
        .await;
    assert_eq!(made["returns"], json!([4]), "{made}");

    let all = exchange(&mcp, "studio_find", json!({"root": "Workspace.Finds"})).await;
    let paths: Vec<&str> = all["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "game.Workspace.Finds.Crate",
            "game.Workspace.Finds.Crate.Lid",
            "game.Workspace.Finds.Crate.Opener",
            "game.Workspace.Finds[\"crate.ramp\"]",
        ],
        "depth-first pre-order: {all}"
    );
    assert_eq!(all["truncated"], false);
    let parts = mcp
        .ok(
            "studio_find",
            json!({"root": "Workspace.Finds", "className": "BasePart"}),
        )
        .await;
    assert_eq!(parts["matches"].as_array().unwrap().len(), 2, "IsA: {parts}");
    let named = mcp
        .ok("studio_find", json!({"root": "Workspace.Finds", "name": "CRATE"}))
        .await;
    assert_eq!(named["matches"].as_array().unwrap().len(), 2, "any case: {named}");
    let tagged = mcp.ok("studio_find", json!({"tag": "Loot"})).await;
    assert_eq!(
        tagged["matches"],
        json!([{"path": "game.Workspace.Finds.Crate.Lid", "className": "Part"}])
    );
    let sloped = mcp.ok("studio_find", json!({"attribute": "Slope"})).await;
    assert_eq!(sloped["matches"][0]["className"], "WedgePart");
    let cut = mcp
        .ok("studio_find", json!({"root": "Workspace.Finds", "limit": 1}))
        .await;
    assert_eq!(cut["truncated"], true);
    assert!(cut["truncatedHint"].is_string(), "{cut}");
    let bad = mcp.err("studio_find", json!({"pattern": "[a"})).await;
    assert_eq!(bad["code"], "invalid_args");
    assert!(bad["message"].as_str().unwrap().contains("pattern"), "{bad}");
    let nowhere = mcp.err("studio_find", json!({"root": "Workspace.Nope"})).await;
    assert_eq!(nowhere["code"], "not_found");

    let script_path = paths[2];
    let whole = mcp.ok("studio_script_read", json!({"path": script_path})).await;
    assert_eq!(whole["source"], "local a = 1\nlocal b = 2\nreturn a + b\n");
    assert_eq!(whole["lineCount"], 3);
    assert_eq!(whole["path"], script_path);
    let ranged = exchange(
        &mcp,
        "studio_script_read",
        json!({"path": script_path, "startLine": 2, "endLine": 3}),
    )
    .await;
    assert_eq!(ranged["source"], "local b = 2\nreturn a + b");
    assert_eq!(ranged["hash"], whole["hash"], "the whole source's hash");
    let past = mcp
        .err("studio_script_read", json!({"path": script_path, "startLine": 4}))
        .await;
    assert_eq!(past["code"], "invalid_args");
    assert!(past["message"].as_str().unwrap().contains("lineCount"), "{past}");
    let part = mcp
        .err("studio_script_read", json!({"path": "Workspace.Finds.Crate.Lid"}))
        .await;
    assert_eq!(part["code"], "invalid_args");

    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

#[tokio::test]
async fn script_edit_and_script_search_are_answered_by_the_real_plugin() {
    let (rbxm, mcp, _studio) = edit_studio().await;

    let made = mcp
        .ok(
            "studio_exec",
            json!({"script": "local f = Instance.new('Folder')\nf.Name = 'Edits'\n\
                local s = Instance.new('Script')\ns.Name = 'Counter'\ns.Source = 'local count = 0\\nlocal step = 1\\nreturn count\\n'\ns.Parent = f\n\
                local m = Instance.new('ModuleScript')\nm.Name = 'Util'\nm.Source = '-- TODO: tidy\\nreturn {}\\n'\nm.Parent = f\n\
                f.Parent = game:GetService('ServerStorage')\nreturn #f:GetChildren()"}),
        )
        .await;
    assert_eq!(made["returns"], json!([2]), "{made}");
    let path = "game.ServerStorage.Edits.Counter";

    let read = mcp.ok("studio_script_read", json!({"path": path})).await;
    let edited = exchange(
        &mcp,
        "studio_script_edit",
        json!({
            "path": path,
            "edits": [
                {"startLine": 1, "endLine": 0, "text": "--!strict"},
                {"startLine": 2, "endLine": 2, "text": "local step = 2"},
            ],
            "expectedHash": read["hash"],
        }),
    )
    .await;
    assert_eq!(edited["lineCount"], 4, "{edited}");
    assert_eq!(edited["path"], path);
    let after = mcp.ok("studio_script_read", json!({"path": path})).await;
    assert_eq!(
        after["source"],
        "--!strict\nlocal count = 0\nlocal step = 2\nreturn count\n"
    );
    assert_eq!(after["hash"], edited["hash"], "the result's hash is the new source's");

    // The first read's hash is stale now: conflict, nothing written.
    let args = json!({"path": path, "source": "return nil\n", "expectedHash": read["hash"]});
    let stale = mcp.call("studio_script_edit", args.clone()).await;
    eprintln!(
        "--> {}\n<-- {}",
        json!({"method": "tools/call", "params": {"name": "studio_script_edit", "arguments": args}}),
        serde_json::to_string(&stale).unwrap()
    );
    let conflict = mcp.err("studio_script_edit", args).await;
    assert_eq!(conflict["code"], "conflict", "{conflict}");
    let unchanged = mcp.ok("studio_script_read", json!({"path": path})).await;
    assert_eq!(unchanged["source"], after["source"], "nothing written");

    let replaced = mcp
        .ok(
            "studio_script_edit",
            json!({"path": path, "find": "count", "replace": "total", "count": 2}),
        )
        .await;
    assert_eq!(replaced["lineCount"], 4);
    let wrong = mcp
        .err(
            "studio_script_edit",
            json!({"path": path, "find": "total", "replace": "n"}),
        )
        .await;
    assert_eq!(wrong["code"], "invalid_args");
    assert!(wrong["message"].as_str().unwrap().contains("occurs 2 times"), "{wrong}");

    let found = exchange(
        &mcp,
        "studio_script_search",
        json!({"query": "TOTAL|todo", "root": "ServerStorage.Edits"}),
    )
    .await;
    assert_eq!(found["matches"], json!([]), "plain text: | is not an alternation");
    let found = exchange(
        &mcp,
        "studio_script_search",
        json!({"query": "^%-%- todo", "regex": true, "root": "ServerStorage.Edits"}),
    )
    .await;
    assert_eq!(
        found["matches"],
        json!([{"path": "game.ServerStorage.Edits.Util", "line": 1, "text": "-- TODO: tidy"}])
    );
    let totals = mcp
        .ok("studio_script_search", json!({"query": "total", "limit": 1}))
        .await;
    assert_eq!(
        totals["matches"],
        json!([{"path": path, "line": 2, "text": "local total = 0"}])
    );
    assert_eq!(totals["truncated"], true);
    let bad = mcp
        .err("studio_script_search", json!({"query": "[a", "regex": true}))
        .await;
    assert_eq!(bad["code"], "invalid_args");
    assert!(bad["message"].as_str().unwrap().contains("query"), "{bad}");

    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

#[tokio::test]
async fn line_and_find_edits_are_checked_as_the_new_source_and_dry_run_writes_nothing() {
    let (rbxm, mcp, _studio) = edit_studio().await;
    mcp.ok(
        "studio_exec",
        json!({"script": "local s = Instance.new('Script')\ns.Name = 'Gate'\n\
            s.Source = 'local a = 1\\nlocal b = 2\\nreturn a + b\\n'\n\
            s.Parent = game:GetService('ServerStorage')"}),
    )
    .await;
    let path = "game.ServerStorage.Gate";
    let before = mcp.ok("studio_script_read", json!({"path": path})).await;

    // Two lines inserted above, then line 2 of the old source broken: Luau names line 4
    // of the new source, and nothing is written.
    let broken = mcp
        .err(
            "studio_script_edit",
            json!({"path": path, "edits": [
                {"startLine": 1, "endLine": 0, "text": "--!strict\n-- gate"},
                {"startLine": 2, "endLine": 2, "text": "local b = = 2"},
            ]}),
        )
        .await;
    assert_eq!(broken["code"], "syntax_error", "{broken}");
    assert_eq!(broken["details"]["errors"][0]["line"], 4, "{broken}");
    let found = mcp
        .err(
            "studio_script_edit",
            json!({"path": path, "find": "return a + b", "replace": "return a +"}),
        )
        .await;
    assert_eq!(found["code"], "syntax_error", "{found}");
    assert_eq!(
        found["details"]["errors"][0]["line"], 4,
        "the error is past the last line: {found}"
    );
    let unchanged = mcp.ok("studio_script_read", json!({"path": path})).await;
    assert_eq!(unchanged["source"], before["source"], "nothing written");
    assert_eq!(unchanged["hash"], before["hash"]);

    // A dry run answers the hash the write then gives, and writes nothing (it opens no
    // recording either: plugin/tests/ScriptEdit.spec.luau).
    let edit = json!({"path": path, "find": "local b = 2", "replace": "local b = 3"});
    let mut dry = edit.clone();
    dry["dryRun"] = json!(true);
    let would = exchange(&mcp, "studio_script_edit", dry).await;
    assert_eq!(would["dryRun"], true, "{would}");
    let still = mcp.ok("studio_script_read", json!({"path": path})).await;
    assert_eq!(still["source"], before["source"], "a dry run writes nothing");

    let wrote = mcp.ok("studio_script_edit", edit).await;
    assert_eq!(wrote["hash"], would["hash"], "{wrote}");
    let after = mcp.ok("studio_script_read", json!({"path": path})).await;
    assert_eq!(after["source"], "local a = 1\nlocal b = 3\nreturn a + b\n");
    let undone = mcp.ok("studio_undo", json!({})).await;
    assert_eq!(undone["done"], 1, "one undo step: {undone}");
    let restored = mcp.ok("studio_script_read", json!({"path": path})).await;
    assert_eq!(restored["source"], before["source"]);

    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

/// Big places (#42; TOOLS.md, "Big places"): a cut `find` or `script_search` says how far it
/// got (`scanned`) and where to go on (`resumeAfter`); passed back, the next call continues
/// the same walk after it, and the pages together are the whole answer, each match once.
#[tokio::test]
async fn a_cut_find_and_search_go_on_where_they_stopped() {
    let (_rbxm, mcp, _studio) = edit_studio().await;
    let made = support::studio::run_luau(
        &mcp,
        r#"local folder = Instance.new("Folder")
        folder.Name = "Big"
        for i = 1, 7 do
            local part = Instance.new("Part")
            part.Name = "P" .. i
            part.Parent = folder
            local script = Instance.new("Script")
            script.Name = "S" .. i
            script.Source = "-- needle " .. i .. "\nprint('needle')\n"
            script.Parent = folder
        end
        folder.Parent = workspace
        return #folder:GetChildren()"#,
    )
    .await;
    assert_eq!(made, json!(14));

    let whole = mcp
        .ok("studio_find", json!({"root": "Workspace.Big", "className": "Part"}))
        .await;
    let all: Vec<String> = whole["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].to_string())
        .collect();
    assert_eq!(all.len(), 7, "{whole}");
    assert_eq!(whole["truncated"], false, "{whole}");

    let mut pages: Vec<String> = Vec::new();
    let mut args = json!({"root": "Workspace.Big", "className": "Part", "limit": 3});
    for round in 0.. {
        let page = exchange(&mcp, "studio_find", args.clone()).await;
        pages.extend(
            page["matches"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["path"].to_string()),
        );
        if page["truncated"] != true {
            assert!(page.get("resumeAfter").is_none(), "{page}");
            break;
        }
        assert!(page["scanned"].as_u64().is_some_and(|n| n > 0), "{page}");
        let resume = page["resumeAfter"].as_str().expect("a cut find says where to go on");
        args["resumeAfter"] = json!(resume);
        assert!(round < 5, "the pages end");
    }
    assert_eq!(pages, all, "the pages are the whole answer, in order, each once");

    let whole = mcp
        .ok(
            "studio_script_search",
            json!({"query": "needle", "root": "Workspace.Big"}),
        )
        .await;
    let count = whole["matches"].as_array().unwrap().len();
    assert_eq!(count, 14, "{whole}");
    let mut seen = std::collections::BTreeSet::new();
    let mut args = json!({"query": "needle", "root": "Workspace.Big", "limit": 4});
    for round in 0.. {
        let page = exchange(&mcp, "studio_script_search", args.clone()).await;
        for found in page["matches"].as_array().unwrap() {
            seen.insert((found["path"].to_string(), found["line"].as_u64()));
        }
        if page["truncated"] != true {
            break;
        }
        args["resumeAfter"] = json!(page["resumeAfter"].as_str().expect("where to go on"));
        assert!(round < 10, "the pages end");
    }
    assert_eq!(seen.len(), count, "every line found, across the pages");

    // A path that is gone: the error says so and what to do.
    let error = mcp
        .err(
            "studio_find",
            json!({"root": "Workspace.Big", "className": "Part", "resumeAfter": "Workspace.Big.Nope"}),
        )
        .await;
    assert_eq!(error["code"], "not_found", "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("without resumeAfter"),
        "{error}"
    );
}

//! End to end over stdio (TESTING.md layer 3): the built binary as an MCP server, rmcp's
//! client on the other end, and fake Studio plugins on the bridge port: the catalogue and
//! every tool's round trip and argument checks. The other capabilities have files of their
//! own beside this one: e2e_sessions.rs, e2e_calls.rs, e2e_errors.rs, e2e_limits.rs and
//! e2e_policy.rs.

use crate::support;

use rmpv::Value;
use serde_json::json;
use support::fake_plugin::{FakePlugin, Identity, Reply, handler, studio_like, value_map};
use support::free_port;
use support::mcp_client::Mcp;

use support::TOOLS;

#[tokio::test]
async fn tools_are_listed_in_a_stable_order_with_schemas_and_annotations() {
    let mcp = Mcp::spawn(free_port(), &[]).await;
    let info = mcp.client.peer_info().expect("server info");
    assert!(info.instructions.as_deref().unwrap_or("").contains("studio_sessions"));
    let first = mcp.client.list_all_tools().await.unwrap();
    let second = mcp.client.list_all_tools().await.unwrap();
    let names: Vec<&str> = first.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, TOOLS);
    assert_eq!(first, second, "tools/list must be stable");
    for tool in &first {
        assert_eq!(tool.input_schema.get("type"), Some(&json!("object")), "{}", tool.name);
        let output = tool.output_schema.as_ref().expect("outputSchema");
        assert_eq!(output.get("type"), Some(&json!("object")), "{}", tool.name);
        assert!(tool.description.as_deref().is_some_and(|d| d.len() > 20));
        let annotations = tool.annotations.as_ref().expect("annotations");
        let read_only = annotations.read_only_hint == Some(true);
        let writes = [
            "studio_exec",
            "studio_script_edit",
            "studio_delete",
            "studio_clone",
            "studio_selection",
            "studio_undo",
            "studio_redo",
            "studio_play",
            "studio_test_run",
            "studio_debug",
            "studio_create",
            "studio_update",
            "studio_insert_asset",
            "studio_terrain",
            "studio_input",
            "studio_ui",
            "studio_character",
            "studio_open",
            "studio_run",
            "studio_close",
        ]
        .contains(&tool.name.as_ref());
        assert_eq!(read_only, !writes, "{}", tool.name);
        // exec can do anything Luau can, and delete removes: they say so.
        // test_run and run run any Luau too; close loses what was not saved.
        let exec = ["studio_exec", "studio_test_run", "studio_run"].contains(&tool.name.as_ref());
        let destructive = exec || tool.name == "studio_delete" || tool.name == "studio_close";
        assert_eq!(annotations.destructive_hint == Some(true), destructive, "{}", tool.name);
        // exec, insert_asset, which fetches from Roblox's asset servers, asset_search, which
        // searches the Creator Store, and open, which starts a program, reach beyond Studio.
        let open_world =
            exec || ["studio_insert_asset", "studio_asset_search", "studio_open"].contains(&tool.name.as_ref());
        assert_eq!(annotations.open_world_hint == Some(true), open_world, "{}", tool.name);
    }
    let exec = first.iter().find(|t| t.name == "studio_exec").unwrap();
    let properties = exec.input_schema["properties"].as_object().unwrap();
    for field in ["script", "timeoutMs", "sessionId", "instanceId", "context"] {
        assert!(properties.contains_key(field), "exec schema lacks {field}");
    }
    assert_eq!(exec.input_schema["required"], json!(["script"]));
}

#[tokio::test]
async fn state_is_answered_by_the_plugin() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(port, Identity::edit("A"), studio_like()).await;
    let state = mcp.ok("studio_state", json!({})).await;
    assert_eq!(
        state,
        json!({"state": "Edit", "placeName": "Place A", "placeId": 1818, "gameId": 0, "sessionId": "A-edit", "context": "edit"}),
        "the result says where it ran"
    );
    let seen = &plugin.log().requests[0];
    assert_eq!(seen.action, "state");
    assert_eq!(seen.args, Value::Map(vec![]), "args is a map, even when empty");
    assert!(seen.timeout_ms > 0 && seen.timeout_ms <= 5000, "{}", seen.timeout_ms);
}

#[tokio::test]
async fn logs_fills_defaults_and_passes_entries_through() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(
        port,
        Identity::edit("A"),
        handler(|_, _| {
            let entry = value_map(vec![
                ("seq", 7.into()),
                ("level", "Warning".into()),
                ("body", "careful".into()),
                ("timestamp", Value::F64(1_763_700_000_000.0)),
            ]);
            Reply::Ok(value_map(vec![
                ("entries", Value::Array(vec![entry])),
                ("total", 7.into()),
                ("bufferCapacity", 10000.into()),
                ("nextSince", 7.into()),
            ]))
        }),
    )
    .await;
    let logs = mcp.ok("studio_logs", json!({"levels": ["Warning"]})).await;
    assert_eq!(logs["entries"][0]["body"], "careful");
    assert_eq!(logs["entries"][0]["timestamp"], 1_763_700_000_000i64);
    assert_eq!(logs["nextSince"], 7);
    let args = &plugin.log().requests[0].args;
    assert_eq!(args["count"].as_u64(), Some(50));
    assert_eq!(args["direction"].as_str(), Some("tail"));
    assert_eq!(args["includeInternal"].as_bool(), Some(false));
    assert_eq!(args["levels"][0].as_str(), Some("Warning"));
}

#[tokio::test]
async fn query_passes_typed_values_and_path() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(
        port,
        Identity::edit("A"),
        handler(|_, args| {
            let position = value_map(vec![
                ("type", "Vector3".into()),
                (
                    "value",
                    Value::Array(vec![Value::F64(1.0), Value::F64(2.5), Value::F64(f64::INFINITY)]),
                ),
            ]);
            Reply::Ok(value_map(vec![(
                "instance",
                value_map(vec![
                    ("name", "Part".into()),
                    ("className", "Part".into()),
                    ("path", args["path"].clone()),
                    ("properties", value_map(vec![("Position", position)])),
                    ("attributes", Value::Map(vec![])),
                    ("tags", Value::Array(vec![])),
                    ("childCount", 0.into()),
                ]),
            )]))
        }),
    )
    .await;
    let result = mcp
        .ok(
            "studio_query",
            json!({"path": "Workspace.Part", "properties": ["Position"], "children": true}),
        )
        .await;
    assert_eq!(result["instance"]["path"], "Workspace.Part");
    assert_eq!(
        result["instance"]["properties"]["Position"],
        json!({"type": "Vector3", "value": [1, 2.5, {"type": "number", "value": "inf"}]})
    );
    let args = &plugin.log().requests[0].args;
    assert_eq!(args["children"].as_bool(), Some(true));
    assert_eq!(args["depth"].as_u64(), Some(0));
}

#[tokio::test]
async fn exec_returns_values_in_place_and_script_errors_are_results() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(
        port,
        Identity::edit("A"),
        handler(|_, args| {
            if args["script"].as_str() == Some("error('boom')") {
                return Reply::Ok(value_map(vec![
                    ("success", false.into()),
                    ("returns", Value::Array(vec![])),
                    ("error", "exec:1: boom".into()),
                    ("logs", Value::Array(vec![])),
                ]));
            }
            studio_like()("exec", args)
        }),
    )
    .await;
    let ok = mcp
        .ok("studio_exec", json!({"script": "print('hello') return 2, nil, 'ok'"}))
        .await;
    assert_eq!(ok["success"], true);
    assert_eq!(ok["returns"], json!([2, null, "ok"]));
    assert_eq!(ok["logs"], json!([{"level": "Print", "body": "hello"}]));
    let failed = mcp.ok("studio_exec", json!({"script": "error('boom')"})).await;
    assert_eq!(failed["success"], false);
    assert_eq!(failed["error"], "exec:1: boom");
    let seen = &plugin.log().requests[0];
    assert_eq!(seen.args["timeoutMs"].as_u64(), Some(120_000));
    assert_eq!(
        seen.timeout_ms, 120_000,
        "the plugin gets timeoutMs, the host waits 5 s longer"
    );
}

#[tokio::test]
async fn screenshot_becomes_a_png_image_block_scaled_to_max_width() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let _plugin = FakePlugin::connect(
        port,
        Identity::edit("A"),
        handler(|_, _| {
            let (w, h) = (64u32, 32u32);
            let mut rgba = Vec::with_capacity((w * h * 4) as usize);
            for y in 0..h {
                for x in 0..w {
                    rgba.extend_from_slice(&[(x * 4) as u8, (y * 8) as u8, 200, 255]);
                }
            }
            Reply::Ok(value_map(vec![
                ("width", w.into()),
                ("height", h.into()),
                ("rgba", Value::Binary(rgba)),
            ]))
        }),
    )
    .await;
    let result = mcp.call("studio_screenshot", json!({"maxWidth": 32})).await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(
        result.structured_content,
        Some(json!({"width": 32, "height": 16, "source": "viewport", "sessionId": "A-edit", "context": "edit"}))
    );
    let image = result
        .content
        .iter()
        .find_map(|c| c.as_image())
        .expect("an image block");
    assert_eq!(image.mime_type, "image/png");
    use base64::Engine as _;
    let png = base64::engine::general_purpose::STANDARD.decode(&image.data).unwrap();
    let decoder = png::Decoder::new(std::io::Cursor::new(png));
    let reader = decoder.read_info().unwrap();
    assert_eq!((reader.info().width, reader.info().height), (32, 16));
}

#[tokio::test]
async fn find_and_script_read_validate_their_arguments_before_the_plugin() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(
        port,
        Identity::edit("A"),
        handler(|action, args| match action {
            "find" => Reply::Ok(value_map(vec![
                (
                    "matches",
                    Value::Array(vec![value_map(vec![
                        ("path", "game.Workspace.Part".into()),
                        ("className", "Part".into()),
                    ])]),
                ),
                ("truncated", true.into()),
            ])),
            "script_read" => Reply::Ok(value_map(vec![
                ("source", "two".into()),
                ("lineCount", 3.into()),
                ("hash", "0123abcd-12".into()),
                ("path", args["path"].clone()),
            ])),
            other => Reply::Err("unknown_action", format!("no action {other}")),
        }),
    )
    .await;

    for (args, field) in [
        (json!({"limit": 0}), "`limit`"),
        (json!({"limit": 10001}), "`limit`"),
        (json!({"limit": -1}), "`limit`"),
        (json!({"limit": "many"}), "`limit`"),
        (json!({"className": 5}), "`className`"),
        (json!({"name": "a", "pattern": "a"}), "`pattern`"),
        (json!({"root": ""}), "`root`"),
    ] {
        let error = mcp.err("studio_find", args.clone()).await;
        assert_eq!(error["code"], "invalid_args", "{args}: {error}");
        assert!(error["message"].as_str().unwrap().contains(field), "{args}: {error}");
    }
    for (args, field) in [
        (json!({}), "path"),
        (json!({"path": ""}), "`path`"),
        (json!({"path": "x", "startLine": 0}), "`startLine`"),
        (json!({"path": "x", "endLine": -2}), "`endLine`"),
        (json!({"path": "x", "startLine": 3, "endLine": 2}), "`endLine`"),
    ] {
        let error = mcp.err("studio_script_read", args.clone()).await;
        assert_eq!(error["code"], "invalid_args", "{args}: {error}");
        assert!(error["message"].as_str().unwrap().contains(field), "{args}: {error}");
    }
    assert!(plugin.log().requests.is_empty(), "nothing invalid reached the plugin");

    let found = mcp.ok("studio_find", json!({"className": "BasePart"})).await;
    assert_eq!(found["matches"][0]["path"], "game.Workspace.Part");
    assert_eq!(found["truncated"], true);
    assert!(found["truncatedHint"].as_str().unwrap().contains("limit"), "{found}");
    let read = mcp
        .ok(
            "studio_script_read",
            json!({"path": "ServerScriptService.Main", "startLine": 2}),
        )
        .await;
    assert_eq!(read["lineCount"], 3);
    assert_eq!(read["source"], "two");
    let requests = plugin.log().requests;
    assert_eq!(requests[0].action, "find");
    assert_eq!(requests[0].args["root"].as_str(), Some("game"), "root defaults to game");
    assert_eq!(requests[0].args["limit"].as_u64(), Some(100), "limit defaults to 100");
    assert_eq!(requests[0].args["className"].as_str(), Some("BasePart"));
    assert!(requests[0].timeout_ms <= 10_000, "{}", requests[0].timeout_ms);
    assert_eq!(requests[1].action, "script_read");
    assert_eq!(requests[1].args["startLine"].as_u64(), Some(2));
    assert!(requests[1].args["endLine"].is_nil(), "an absent endLine is not sent");
}

#[tokio::test]
async fn script_edit_and_script_search_validate_their_arguments_before_the_plugin() {
    let port = free_port();
    let mcp = Mcp::spawn(port, &[]).await;
    let plugin = FakePlugin::connect(
        port,
        Identity::edit("A"),
        handler(|action, args| match action {
            // A line edit is previewed first (dryRun: the would-be source), then written whole.
            "script_edit" if args["dryRun"].as_bool() == Some(true) => Reply::Ok(value_map(vec![
                ("baseHash", "0123abcd-4".into()),
                ("hash", "89abcdef-2".into()),
                ("lineCount", 1.into()),
                ("path", args["path"].clone()),
                ("source", "x()\n".into()),
            ])),
            "script_edit" => Reply::Ok(value_map(vec![
                ("hash", "0123abcd-4".into()),
                ("lineCount", 1.into()),
                ("path", args["path"].clone()),
            ])),
            "script_search" => Reply::Ok(value_map(vec![
                ("matches", Value::Array(vec![])),
                ("truncated", false.into()),
            ])),
            other => Reply::Err("unknown_action", format!("no action {other}")),
        }),
    )
    .await;

    let line = |s: i64, e: i64| json!([{"startLine": s, "endLine": e, "text": "x"}]);
    for (args, field) in [
        (json!({"source": "x"}), "path"),
        (json!({"path": "", "source": "x"}), "`path`"),
        (json!({"path": "S"}), "`source`"),
        (
            json!({"path": "S", "source": "x", "find": "a", "replace": "b"}),
            "exactly one",
        ),
        (json!({"path": "S", "source": "x", "edits": line(1, 1)}), "exactly one"),
        (json!({"path": "S", "find": "a"}), "`replace`"),
        (json!({"path": "S", "replace": "a"}), "`find`"),
        (json!({"path": "S", "find": "", "replace": "b"}), "`find`"),
        (json!({"path": "S", "find": "a", "replace": "b", "count": 0}), "`count`"),
        (
            json!({"path": "S", "find": "a", "replace": "b", "count": -1}),
            "`count`",
        ),
        (json!({"path": "S", "source": "x", "count": 2}), "`count`"),
        (json!({"path": "S", "edits": []}), "`edits`"),
        (json!({"path": "S", "edits": line(0, 0)}), "`edits[0].startLine`"),
        (json!({"path": "S", "edits": line(3, 1)}), "`edits[0].endLine`"),
        (
            json!({"path": "S", "edits": [{"startLine": 1, "text": "x"}]}),
            "endLine",
        ),
        (json!({"path": "S", "source": 5}), "`source`"),
        (json!({"path": "S", "source": "x", "expectedHash": 1}), "`expectedHash`"),
    ] {
        let error = mcp.err("studio_script_edit", args.clone()).await;
        assert_eq!(error["code"], "invalid_args", "{args}: {error}");
        assert!(error["message"].as_str().unwrap().contains(field), "{args}: {error}");
    }
    for (args, field) in [
        (json!({}), "query"),
        (json!({"query": ""}), "`query`"),
        (json!({"query": "a", "limit": 0}), "`limit`"),
        (json!({"query": "a", "limit": 10001}), "`limit`"),
        (json!({"query": "a", "regex": "yes"}), "`regex`"),
        (json!({"query": "a", "root": ""}), "`root`"),
    ] {
        let error = mcp.err("studio_script_search", args.clone()).await;
        assert_eq!(error["code"], "invalid_args", "{args}: {error}");
        assert!(error["message"].as_str().unwrap().contains(field), "{args}: {error}");
    }
    assert!(plugin.log().requests.is_empty(), "nothing invalid reached the plugin");

    let edited = mcp
        .ok(
            "studio_script_edit",
            json!({"path": "ServerScriptService.Main", "edits": line(1, 0), "expectedHash": "0123abcd-4"}),
        )
        .await;
    assert_eq!(edited["hash"], "0123abcd-4");
    mcp.ok("studio_script_search", json!({"query": "needle"})).await;
    let requests = plugin.log().requests;
    assert_eq!(requests[0].action, "script_edit");
    assert_eq!(
        requests[0].args["edits"][0]["endLine"].as_u64(),
        Some(0),
        "an insert at the top"
    );
    assert_eq!(requests[0].args["expectedHash"].as_str(), Some("0123abcd-4"));
    assert!(requests[0].args["source"].is_nil(), "an absent mode is not sent");
    assert_eq!(requests[0].args["dryRun"].as_bool(), Some(true), "previewed first");
    assert_eq!(requests[1].action, "script_edit");
    assert_eq!(requests[1].args["source"].as_str(), Some("x()\n"), "then written whole");
    assert_eq!(
        requests[1].args["expectedHash"].as_str(),
        Some("0123abcd-4"),
        "against what it was made from"
    );
    assert!(requests[1].args["edits"].is_nil());
    let search = &requests[2];
    assert_eq!(search.action, "script_search");
    assert_eq!(search.args["limit"].as_u64(), Some(200), "limit defaults to 200");
    assert_eq!(search.args["root"].as_str(), Some("game"));
    assert_eq!(search.args["regex"].as_bool(), Some(false));
    assert_eq!(search.args["caseSensitive"].as_bool(), Some(false));
    assert!(search.timeout_ms <= 15_000, "{}", search.timeout_ms);
}

#[tokio::test]
async fn api_answers_from_the_host_with_no_studio_open() {
    // No plugin anywhere: the host answers from the API dump it carries.
    let mcp = Mcp::spawn(free_port(), &[]).await;

    let request = json!({"class": "Part"});
    let part = mcp.ok("studio_api", request.clone()).await;
    eprintln!("studio_api {request}\n→ {part}");
    assert_eq!(part["name"], "Part");
    let superclasses: Vec<&str> = part["superclasses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(superclasses.first(), Some(&"FormFactorPart"), "nearest first");
    assert!(superclasses.contains(&"BasePart"), "{superclasses:?}");
    let properties = part["properties"].as_array().unwrap();
    let color = properties
        .iter()
        .find(|p| p["name"] == "Color")
        .expect("Part lists Color");
    assert_eq!(color["from"], "BasePart");
    assert_eq!(color["type"], "Color3");
    let shape = properties
        .iter()
        .find(|p| p["name"] == "Shape")
        .expect("Part lists Shape");
    assert!(
        shape.get("from").is_none(),
        "Part's own property names no other class: {shape}"
    );
    assert!(part.get("sessionId").is_none(), "no Studio ran it: {part}");

    let request = json!({"enum": "Material"});
    let material = mcp.ok("studio_api", request.clone()).await;
    eprintln!("studio_api {request}\n→ {material}");
    let items = material["items"].as_array().unwrap();
    assert!(items.contains(&json!({"name": "Neon", "value": 288})), "{material}");

    let request = json!({"search": "spawnloc"});
    let found = mcp.ok("studio_api", request.clone()).await;
    eprintln!("studio_api {request}\n→ {found}");
    assert_eq!(found["matches"][0], json!({"kind": "class", "name": "SpawnLocation"}));

    let request = json!({"class": "Part", "member": "Colour"});
    let error = mcp.err("studio_api", request.clone()).await;
    eprintln!("studio_api {request}\n→ {error}");
    assert_eq!(error["code"], "invalid_args");
    assert!(
        error["message"].as_str().unwrap().contains("did you mean `Color`?"),
        "{error}"
    );
    for (args, field) in [
        (json!({}), "`class`"),
        (json!({"class": "Part", "search": "x"}), "`search`"),
        (json!({"enum": "Material", "member": "Neon"}), "`member`"),
        (json!({"class": 5}), "`class`"),
    ] {
        let error = mcp.err("studio_api", args.clone()).await;
        assert_eq!(error["code"], "invalid_args", "{args}: {error}");
        assert!(error["message"].as_str().unwrap().contains(field), "{args}: {error}");
    }
}

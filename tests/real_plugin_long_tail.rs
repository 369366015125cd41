//! The long tail (issue #44) against the real plugin in a headless Studio under Lune:
//! `stats` (what a place costs, each figure naming its engine member, what this Studio does
//! not expose left out and named) and `asset_search` (free Creator Store models by keyword,
//! served by the test Studio's InsertService from model files it is given).

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::free_port;
use support::lune::HeadlessStudio;
use support::mcp_client::Mcp;
use support::studio::{exchange, installed_plugin};

#[tokio::test]
async fn stats_says_what_the_place_costs_and_where_each_figure_comes_from() {
    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn_paired(port, &[]).await;
    let mut studio = HeadlessStudio::start_with(port, &rbxm, "play", &[]);
    studio.wait_connected(&["edit", "server", "client"]).await;

    let edit = exchange(&mcp, "studio_stats", json!({"context": "edit"})).await;
    // The test Studio's memory: 812.25 MB in all, (tag value + 1) × 1.5 a tag.
    assert_eq!(edit["memory"]["totalMb"], 812.25, "{edit}");
    assert_eq!(edit["memory"]["byTag"]["Internal"], 1.5, "{edit}");
    assert_eq!(
        edit["sources"]["memory.totalMb"], "Stats.GetTotalMemoryUsageMb",
        "{edit}"
    );
    let by_class = edit["instances"]["byClass"].as_array().unwrap();
    assert!(!by_class.is_empty() && by_class.len() <= 20, "{edit}");
    let counts: Vec<u64> = by_class.iter().map(|c| c["count"].as_u64().unwrap()).collect();
    assert!(counts.windows(2).all(|w| w[0] >= w[1]), "largest first: {counts:?}");
    assert!(edit["instances"]["total"].as_u64().unwrap() >= counts.iter().sum::<u64>());
    assert!(edit["scripts"]["byKind"]["Script"].as_u64().unwrap() >= 1, "{edit}");
    // Frame and network figures exist only in a running game.
    assert!(edit.get("frame").is_none() && edit.get("network").is_none(), "{edit}");

    let server = exchange(&mcp, "studio_stats", json!({"context": "server"})).await;
    assert!(server["frame"]["heartbeatTime"].is_number(), "{server}");
    assert!(server["network"]["dataSendKbps"].is_number(), "{server}");
    assert_eq!(
        server["sources"]["frame.heartbeatTime"], "Stats.HeartbeatTime",
        "{server}"
    );
    // Every figure names its member.
    for section in ["memory", "instances", "scripts", "frame", "network"] {
        for name in server[section].as_object().unwrap().keys() {
            let key = format!("{section}.{name}");
            assert!(server["sources"][&key].is_string(), "{key} names no source: {server}");
        }
    }
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

#[tokio::test]
async fn a_member_this_studio_lacks_is_named_not_made_up() {
    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn_paired(port, &[]).await;
    let mut studio = HeadlessStudio::start_lacking(port, &rbxm, "edit", &[], &["Stats.GetMemoryUsageMbForTag"]);
    studio
        .wait_for_line("[harness] connected context=edit", Duration::from_secs(30))
        .await;
    let stats = exchange(&mcp, "studio_stats", json!({})).await;
    assert!(stats["memory"].get("byTag").is_none(), "{stats}");
    assert_eq!(stats["memory"]["totalMb"], 812.25, "the rest is there: {stats}");
    let unavailable = stats["unavailable"].as_array().unwrap();
    assert!(
        unavailable.iter().any(|m| m == "Stats.GetMemoryUsageMbForTag"),
        "{stats}"
    );
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

#[tokio::test]
async fn asset_search_finds_free_models_whose_ids_insert_asset_takes() {
    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn_paired(port, &[]).await;
    let crate_file = support::lune::repo().join("tests/lune/assets/Crate.rbxmx");
    let asset = format!("4242={}", crate_file.display());
    let mut studio = HeadlessStudio::start_with(port, &rbxm, "edit", &["--asset", &asset]);
    studio
        .wait_for_line("[harness] connected context=edit", Duration::from_secs(30))
        .await;
    let found = exchange(&mcp, "studio_asset_search", json!({"query": "cra"})).await;
    assert_eq!(
        found,
        json!({"assets": [{"id": 4242, "name": "Crate", "creator": "StudioBridgeTests"}], "page": 1,
               "sessionId": found["sessionId"], "context": "edit"})
    );
    let past = exchange(&mcp, "studio_asset_search", json!({"query": "cra", "page": 2})).await;
    assert_eq!(past["assets"], json!([]), "{past}");
    let none = exchange(&mcp, "studio_asset_search", json!({"query": "no such model"})).await;
    assert_eq!(none["assets"], json!([]), "{none}");
    // The id goes to insert_asset as it is.
    let inserted = mcp.ok("studio_insert_asset", json!({"assetId": 4242})).await;
    assert_eq!(inserted["assetId"], 4242, "{inserted}");
    let empty = mcp.err("studio_asset_search", json!({"query": " "})).await;
    assert_eq!(empty["code"], "invalid_args", "{empty}");
    assert!(empty["message"].as_str().unwrap().contains("`query`"), "{empty}");
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

/// `terrain` (#44 item 1): a fill is read back as its material's voxels and bounds, one
/// undo takes it back to air, a replace changes the material, a clear empties the region,
/// and bad arguments are named with the fix (the aligned box, the nearest material).
#[tokio::test]
async fn terrain_fills_reads_replaces_clears_and_undoes_in_one_step_each() {
    let (rbxm, mcp, _studio) = support::studio::edit_studio().await;
    let region = json!({"action": "read", "min": [-16, 0, -16], "max": [16, 32, 16]});
    let empty = mcp.ok("studio_terrain", region.clone()).await;
    assert_eq!(empty["occupied"], 0, "{empty}");
    assert!(empty.get("bounds").is_none(), "all air has no bounds: {empty}");

    let filled = exchange(
        &mcp,
        "studio_terrain",
        json!({"action": "fill", "shape": "block", "position": [0, 8, 0], "size": [8, 8, 8], "material": "Grass"}),
    )
    .await;
    assert_eq!(filled["material"], "Grass", "{filled}");
    let read = exchange(&mcp, "studio_terrain", region.clone()).await;
    assert_eq!(
        read["materials"]["Grass"]["voxels"], 8,
        "a 8-stud cube is 2×2×2 voxels: {read}"
    );
    assert_eq!(read["materials"]["Grass"]["volume"], 512.0, "{read}");
    assert_eq!(read["bounds"], json!({"min": [-4, 4, -4], "max": [4, 12, 4]}), "{read}");

    let undone = mcp
        .ok("studio_undo", json!({"expect": "studio-bridge: terrain fill"}))
        .await;
    assert_eq!(undone["done"], 1, "{undone}");
    assert_eq!(
        mcp.ok("studio_terrain", region.clone()).await["occupied"],
        0,
        "the fill is undone"
    );

    mcp.ok("studio_undo", json!({})).await; // nothing left of ours: a no-op
    mcp.ok(
        "studio_terrain",
        json!({"action": "fill", "shape": "block", "position": [0, 8, 0], "size": [8, 8, 8], "material": "Grass"}),
    )
    .await;
    let replaced = exchange(
        &mcp,
        "studio_terrain",
        json!({"action": "replace", "min": [-16, 0, -16], "max": [16, 32, 16], "from": "Grass", "to": "Rock"}),
    )
    .await;
    assert_eq!(
        replaced["replaced"],
        json!({"from": "Grass", "to": "Rock"}),
        "{replaced}"
    );
    let rock = mcp.ok("studio_terrain", region.clone()).await;
    assert_eq!(rock["materials"]["Rock"]["voxels"], 8, "{rock}");
    assert!(rock["materials"].get("Grass").is_none(), "{rock}");
    let cleared = exchange(
        &mcp,
        "studio_terrain",
        json!({"action": "clear", "min": [-16, 0, -16], "max": [16, 32, 16]}),
    )
    .await;
    assert!(cleared.get("cleared").is_some(), "{cleared}");
    assert_eq!(mcp.ok("studio_terrain", region).await["occupied"], 0);

    let misaligned = mcp
        .err(
            "studio_terrain",
            json!({"action": "read", "min": [1, 0, 0], "max": [8, 8, 8]}),
        )
        .await;
    assert_eq!(misaligned["code"], "invalid_args", "{misaligned}");
    assert!(
        misaligned["message"].as_str().unwrap().contains("use min [0, 0, 0]"),
        "{misaligned}"
    );
    let typo = mcp
        .err(
            "studio_terrain",
            json!({"action": "fill", "shape": "ball", "position": [0, 0, 0], "radius": 4, "material": "Gras"}),
        )
        .await;
    assert_eq!(typo["code"], "invalid_args", "{typo}");
    assert!(
        typo["message"].as_str().unwrap().contains("Grass"),
        "did you mean: {typo}"
    );
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

/// In read-only mode terrain reads, and its writes are refused before Studio.
#[tokio::test]
async fn read_only_terrain_reads_and_never_writes() {
    let rbxm = installed_plugin().await;
    let port = free_port();
    let mcp = Mcp::spawn_paired(port, &["--read-only"]).await;
    let mut studio = HeadlessStudio::start(port, &rbxm, "edit");
    studio
        .wait_for_line("[harness] connected context=edit", Duration::from_secs(30))
        .await;
    let read = mcp
        .ok(
            "studio_terrain",
            json!({"action": "read", "min": [0, 0, 0], "max": [8, 8, 8]}),
        )
        .await;
    assert_eq!(read["occupied"], 0);
    let refused = mcp
        .err(
            "studio_terrain",
            json!({"action": "clear", "min": [0, 0, 0], "max": [8, 8, 8]}),
        )
        .await;
    assert_eq!(refused["code"], "permission_denied", "{refused}");
    let _ = std::fs::remove_dir_all(rbxm.parent().unwrap());
}

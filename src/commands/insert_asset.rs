//! `insert_asset`: loads an asset by id (or the first Creator Store model a search finds)
//! through InsertService and puts its contents under a parent, in one undo step; the result
//! names what was inserted and every script inside it (an agent must know it inserted code).

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Command, Invocation, Kind, Output, Spec};
use crate::protocol::{Context, ToolError};

/// Luau numbers hold integers exactly up to 2^53.
const MAX_ASSET_ID: u64 = 1 << 53;

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InsertAssetArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asset_id: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    #[serde(default = "workspace")]
    pub parent: String,
    /// [x,y,z] pivot
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<Vec<f64>>,
}

fn workspace() -> String {
    "Workspace".to_owned()
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InsertAssetResult {
    /// The asset's top-level instances, where they now are.
    pub inserted: Vec<String>,
    /// Every LuaSourceContainer inside what was inserted.
    pub scripts: Vec<String>,
    /// The id that was loaded (the search's first result for `query`).
    pub asset_id: u64,
}

pub struct InsertAsset;

impl Command for InsertAsset {
    type Args = InsertAssetArgs;
    type Result = InsertAssetResult;
    const SPEC: Spec = Spec {
        name: "insert_asset",
        description: "Insert an asset by id, or the first free model a query finds.",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(30),
        kind: Kind::Write,
        capabilities: super::Capabilities::of(&[super::Capability::Write, super::Capability::Assets]),
        idempotent: false,
        open_world: true,
        positional: &[],
        truncation_hint: "",
        follow_event: None,
        example: "studio-bridge insert-asset --asset-id 12345678 --parent Workspace",
        from_file: None,
        flag_help: &[
            ("assetId", "A Creator Store asset id"),
            ("query", "Search the Creator Store and insert the first model found"),
            ("parent", "Where it goes"),
        ],
    };

    async fn run(args: InsertAssetArgs, cx: &Invocation) -> Result<Output, ToolError> {
        validate(&args)?;
        cx.forward(&Self::SPEC, &args).await
    }
}

fn validate(args: &InsertAssetArgs) -> Result<(), ToolError> {
    match (&args.asset_id, &args.query) {
        (Some(_), Some(_)) | (None, None) => {
            return Err(ToolError::invalid_args(
                "Pass exactly one of `assetId` (a Roblox asset id) or `query` (search text for a free model).",
            ));
        }
        (Some(id), None) if *id == 0 || *id > MAX_ASSET_ID => {
            return Err(ToolError::invalid_args(
                "`assetId` must be a positive Roblox asset id (the number in the asset's Creator Store URL).",
            ));
        }
        (None, Some(query)) if query.trim().is_empty() => {
            return Err(ToolError::invalid_args(
                "`query` is empty; pass search text such as \"oak tree\", or an `assetId`.",
            ));
        }
        _ => {}
    }
    if args.parent.trim().is_empty() {
        return Err(ToolError::invalid_args(
            "`parent` is empty; pass an instance path such as Workspace (the default).",
        ));
    }
    if let Some(position) = &args.position
        && (position.len() != 3 || position.iter().any(|v| !v.is_finite()))
    {
        return Err(ToolError::invalid_args(
            "`position` must be three finite numbers [x, y, z]: where the inserted model's pivot goes.",
        ));
    }
    Ok(())
}

use serde_json::Value as Json;

// Human rendering --------------------------------------------------------------------------

use std::fmt::Write as _;

use crate::human::render::{self, Rendered, Style};

impl super::Render for InsertAsset {
    /// `inserted asset 123:`, then where its instances are, and the scripts inside.
    fn render(_args: &Json, result: &Json, out: Style, _err: Style) -> Option<Rendered> {
        let mut rendered = Rendered::default();
        let _ = writeln!(rendered.stdout, "inserted asset {}:", result.get("assetId")?.as_u64()?);
        rendered
            .stdout
            .push_str(&render::lines(result.get("inserted")?.as_array()?)?);
        let scripts = result.get("scripts")?.as_array()?;
        if !scripts.is_empty() {
            let _ = writeln!(
                rendered.stdout,
                "{}",
                out.bold(&format!(
                    "{} inside:",
                    render::count(scripts.len() as u64, "script", "scripts")
                ))
            );
            rendered.stdout.push_str(&render::lines(scripts)?);
        }
        Some(rendered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(json: serde_json::Value) -> InsertAssetArgs {
        serde_json::from_value(json).expect("well-formed arguments")
    }

    fn message(json: serde_json::Value) -> String {
        let err = validate(&args(json)).expect_err("refused");
        assert_eq!(err.code, crate::protocol::ErrorCode::InvalidArgs);
        err.message
    }

    #[test]
    fn exactly_one_of_asset_id_or_query() {
        for both_or_none in [
            serde_json::json!({}),
            serde_json::json!({"assetId": 5, "query": "tree"}),
        ] {
            let text = message(both_or_none);
            assert!(text.contains("`assetId`") && text.contains("`query`"), "{text}");
        }
        assert!(validate(&args(serde_json::json!({"assetId": 5}))).is_ok());
        assert!(validate(&args(serde_json::json!({"query": "tree"}))).is_ok());
    }

    #[test]
    fn bad_ids_queries_parents_and_positions_name_the_field() {
        assert!(message(serde_json::json!({"assetId": 0})).contains("`assetId`"));
        assert!(message(serde_json::json!({"query": "  "})).contains("`query`"));
        assert!(message(serde_json::json!({"assetId": 1, "parent": ""})).contains("`parent`"));
        assert!(message(serde_json::json!({"assetId": 1, "position": [1, 2]})).contains("`position`"));
    }

    #[test]
    fn parent_defaults_to_workspace_and_absent_fields_are_not_sent() {
        let parsed = args(serde_json::json!({"assetId": 42}));
        assert_eq!(parsed.parent, "Workspace");
        let sent = serde_json::to_value(&parsed).expect("serializable");
        assert_eq!(sent, serde_json::json!({"assetId": 42, "parent": "Workspace"}));
    }
}

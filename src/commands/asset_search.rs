//! `asset_search`: free Creator Store models by keyword, through the engine API a plugin
//! has (InsertService:GetFreeModelsAsync; plugin/src/Actions/AssetSearch.luau), so that an
//! agent can pick one and hand its id to `insert_asset`. Reads metadata only: nothing is
//! inserted or loaded.

use std::fmt::Write as _;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::{Command, Invocation, Kind, Output, Spec};
use crate::human::render::{self, Rendered, Style, clean};
use crate::protocol::{Context, ToolError};

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AssetSearchArgs {
    pub query: String,
    #[serde(default = "first_page")]
    #[schemars(range(min = 1))]
    pub page: u32,
}

fn first_page() -> u32 {
    1
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct AssetSearchResult {
    pub assets: Vec<Asset>,
    pub page: u32,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Asset {
    /// What `insert_asset` takes as `assetId`.
    pub id: u64,
    pub name: String,
    pub creator: String,
}

pub struct AssetSearch;

impl Command for AssetSearch {
    type Args = AssetSearchArgs;
    type Result = AssetSearchResult;
    const SPEC: Spec = Spec {
        name: "asset_search",
        description: "Search free Creator Store models; insert_asset takes an id.",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(30),
        kind: Kind::Read,
        capabilities: super::Capabilities::of(&[super::Capability::Read]),
        idempotent: true,
        // The Creator Store is beyond Studio.
        open_world: true,
        positional: &["query"],
        truncation_hint: "Ask for the next page.",
        follow_event: None,
        example: "studio-bridge asset-search 'oak tree' --page 2",
        from_file: None,
        flag_help: &[
            ("query", "Keywords to search free models for"),
            ("page", "Which page of results"),
        ],
    };

    async fn run(args: AssetSearchArgs, cx: &Invocation) -> Result<Output, ToolError> {
        if args.query.trim().is_empty() {
            return Err(ToolError::invalid_args(
                "`query` is empty; pass keywords such as \"oak tree\".",
            ));
        }
        if args.page == 0 {
            return Err(ToolError::invalid_args("`page` starts at 1."));
        }
        cx.forward(&Self::SPEC, &args).await
    }
}

// Human rendering --------------------------------------------------------------------------

impl super::Render for AssetSearch {
    /// A table: id, name, creator; the page on stderr.
    fn render(_args: &Json, result: &Json, out: Style, err: Style) -> Option<Rendered> {
        let mut rows = Vec::new();
        for asset in result.get("assets")?.as_array()? {
            rows.push(vec![
                asset.get("id")?.as_u64()?.to_string(),
                clean(asset.get("name")?.as_str()?).into_owned(),
                clean(asset.get("creator")?.as_str()?).into_owned(),
            ]);
        }
        let mut rendered = Rendered::default();
        if rows.is_empty() {
            rendered.stdout = "no free models found\n".into();
        } else {
            rendered.stdout = render::table(&["ID", "NAME", "CREATOR"], &rows, out, |_, _, padded| padded.to_owned());
        }
        let page = result.get("page")?.as_u64()?;
        let _ = writeln!(
            rendered.stderr,
            "{}",
            err.dim(&format!("page {page}; --page {} for more", page + 1))
        );
        Some(rendered)
    }
}

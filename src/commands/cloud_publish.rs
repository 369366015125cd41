//! `cloud_publish`: uploads a place file (e.g. `rojo build`'s) as a new version of the
//! place, through Open Cloud's place publishing. `Saved` keeps it as a version; `Published`
//! also makes it what live players get, so it needs the `publish` capability, which the
//! policy denies unless `allow_publish = true` or `--allow-publish`.

use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

use super::cloud_place::{self, Where};
use super::{Capabilities, Capability, Command, Invocation, Kind, Output, Render, Spec};
use crate::cloud::places;
use crate::human::render::{Rendered, Style};
use crate::protocol::{Context, ToolError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum VersionType {
    Saved,
    Published,
}

impl VersionType {
    fn as_str(self) -> &'static str {
        match self {
            VersionType::Saved => "Saved",
            VersionType::Published => "Published",
        }
    }
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CloudPublishArgs {
    pub file: PathBuf,
    /// Published: live players get it
    pub version_type: VersionType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub universe: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place: Option<i64>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloudPublishResult {
    pub version_number: u64,
}

pub struct CloudPublish;

impl Command for CloudPublish {
    type Args = CloudPublishArgs;
    type Result = CloudPublishResult;
    const SPEC: Spec = Spec {
        name: "cloud_publish",
        description: "Upload a .rbxl/.rbxlx as a new version of the place (Open Cloud).",
        needs_session: false,
        default_context: Context::Edit,
        timeout: Duration::from_secs(120),
        kind: Kind::Write,
        capabilities: Capabilities::of(&[Capability::Cloud, Capability::Write]),
        idempotent: false,
        open_world: true,
        positional: &["file"],
        truncation_hint: "",
        follow_event: None,
        example: "studio-bridge cloud publish game.rbxl --version-type Saved --universe 123 --place 456",
        from_file: None,
        flag_help: &[
            ("file", "A .rbxl or .rbxlx place file"),
            ("universe", "The universe (default: the open Studio's)"),
            ("place", "The place (default: the open Studio's)"),
        ],
    };

    /// `Published` reaches live players: it also needs `publish`.
    fn capabilities(args: &CloudPublishArgs) -> Capabilities {
        match args.version_type {
            VersionType::Published => Self::SPEC.capabilities.with(Capability::Publish),
            VersionType::Saved => Self::SPEC.capabilities,
        }
    }

    async fn run(args: CloudPublishArgs, cx: &Invocation) -> Result<Output, ToolError> {
        let path = args.file.clone();
        let file = tokio::task::spawn_blocking(move || places::read(&path))
            .await
            .map_err(|e| ToolError::invalid_args(format!("file: reading it failed: {e}")))??;
        let Where { universe, place } = cloud_place::resolve(cx, args.universe, args.place, true).await?;
        let (cloud, deadline) = cloud_place::client(Self::SPEC.timeout)?;
        let version = places::publish(
            &cloud,
            universe,
            place.unwrap_or_default(),
            file,
            args.version_type.as_str(),
            deadline,
            &cx.hooks.cancel,
        )
        .await?;
        Ok(Output::json(json!({ "versionNumber": version })))
    }
}

impl Render for CloudPublish {
    fn render(args: &Json, result: &Json, out: Style, _err: Style) -> Option<Rendered> {
        let verb = match args.get("versionType").and_then(Json::as_str) {
            Some("Published") => "published",
            _ => "saved",
        };
        Some(Rendered {
            stdout: format!(
                "{} as version {}\n",
                out.bold(verb),
                result.get("versionNumber")?.as_u64()?
            ),
            ..Rendered::default()
        })
    }
}

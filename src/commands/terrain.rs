//! `terrain`: smooth terrain in the edit DataModel (TOOLS.md, "Terrain, camera, asset search,
//! stats"): `read` a region's materials and volumes (and, small enough, its voxels), `fill` a
//! block, ball, cylinder or wedge, `clear` a region to air, `replace` one material with
//! another. Each write is one undo step, "studio-bridge: terrain <action>". What goes with
//! which action and shape, the 4-stud grid and the engine's limits are checked where the
//! engine is, in the plugin (plugin/src/Actions/Terrain.luau), which answers the aligned
//! box, the missing field or the nearest material name; here the types are.

use std::fmt::Write as _;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use super::{Command, Invocation, Kind, Output, Render, Spec};
use crate::human::render::{self, Rendered, Style, clean};
use crate::protocol::{Context, ToolError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TerrainAction {
    Read,
    Fill,
    Clear,
    Replace,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Shape {
    Block,
    Ball,
    Cylinder,
    Wedge,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TerrainArgs {
    pub action: TerrainAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<[f64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<[f64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<f64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub grid: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Shape>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub material: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<[f64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cframe: Option<[f64; 12]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<[f64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub radius: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TerrainResult {
    /// read: `{<Material>: {voxels, volume}}` (air left out; volumes in studs³).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub materials: Option<Map<String, Json>>,
    /// read: the volume of everything but air, water included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occupied: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub water: Option<f64>,
    /// read: the box of what is not air; fill: the shape's box.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounds: Option<Map<String, Json>>,
    /// read with `grid`: `{size: [x, y, z], materials: [..], occupancy: [..]}`, x fastest,
    /// then y, then z.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid: Option<Map<String, Json>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<Map<String, Json>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub material: Option<String>,
    /// clear: the region made air.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleared: Option<Map<String, Json>>,
    /// replace: `{from, to}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced: Option<Map<String, Json>>,
}

pub struct Terrain;

impl Command for Terrain {
    type Args = TerrainArgs;
    type Result = TerrainResult;
    const SPEC: Spec = Spec {
        name: "terrain",
        description: "Terrain: read {min,max,grid?}; fill {shape,material,position|cframe,size|radius,height}; clear {min,max}; replace {min,max,from,to}. Corners: multiples of 4.",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(60),
        kind: Kind::Write,
        capabilities: super::Capabilities::of(&[super::Capability::Read]),
        idempotent: false,
        open_world: false,
        positional: &["action"],
        truncation_hint: "Read a smaller region, or without grid.",
        follow_event: None,
        example: "studio-bridge terrain fill --shape ball --position 0,20,0 --radius 12 --material Grass",
        from_file: None,
        flag_help: &[
            (
                "action",
                "read a region, fill a shape, clear a region to air, replace a material",
            ),
            ("min", "read, clear, replace: the region's near corner, multiples of 4"),
            ("max", "read, clear, replace: the region's far corner, multiples of 4"),
            ("resolution", "Voxel size in studs (the engine takes only 4)"),
            (
                "grid",
                "read: every voxel's material and occupancy too (at most 32,768)",
            ),
            ("shape", "fill: the shape"),
            ("material", "fill: an Enum.Material name (terrain materials only)"),
            ("position", "fill: the shape's centre, or give --cframe"),
            ("cframe", "fill: the shape's CFrame as its 12 components"),
            ("size", "fill a block or wedge: its size"),
            ("radius", "fill a ball or cylinder: its radius"),
            ("height", "fill a cylinder: its height"),
            ("from", "replace: the material to replace"),
            ("to", "replace: the material to put in its place"),
        ],
    };

    /// `read` reads; the others change the place.
    fn capabilities(args: &TerrainArgs) -> super::Capabilities {
        match args.action {
            TerrainAction::Read => Self::SPEC.capabilities,
            _ => Self::SPEC.capabilities.with(super::Capability::Write),
        }
    }

    async fn run(args: TerrainArgs, cx: &Invocation) -> Result<Output, ToolError> {
        cx.forward(&Self::SPEC, &args).await
    }
}

impl Render for Terrain {
    /// A read's materials as a table (largest volume first), with the occupied and water
    /// volumes and the bounds; a write in one line.
    fn render(_args: &Json, result: &Json, out: Style, _err: Style) -> Option<Rendered> {
        let mut rendered = Rendered::default();
        let vector = |v: &Json| render::numbers(v.as_array().map(Vec::as_slice).unwrap_or_default());
        let corners = |b: &Json| Some(format!("{} to {}", vector(b.get("min")?), vector(b.get("max")?)));
        if let Some(materials) = result.get("materials").and_then(Json::as_object) {
            let mut rows: Vec<(String, u64, f64)> = materials
                .iter()
                .filter_map(|(name, m)| {
                    Some((
                        clean(name).into_owned(),
                        m.get("voxels")?.as_u64()?,
                        m.get("volume")?.as_f64()?,
                    ))
                })
                .collect();
            rows.sort_by(|a, b| b.2.total_cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
            let _ = writeln!(
                rendered.stdout,
                "{} {} studs³ ({} water)",
                out.bold("occupied:"),
                result
                    .get("occupied")
                    .map(|v| vector(&Json::Array(vec![v.clone()])))
                    .unwrap_or_default(),
                result
                    .get("water")
                    .map(|v| vector(&Json::Array(vec![v.clone()])))
                    .unwrap_or_default(),
            );
            if let Some(bounds) = result.get("bounds").and_then(corners) {
                let _ = writeln!(rendered.stdout, "{} {bounds}", out.bold("bounds:"));
            }
            if rows.is_empty() {
                rendered.stdout.push_str("all air\n");
            } else {
                let table: Vec<Vec<String>> = rows
                    .into_iter()
                    .map(|(name, voxels, volume)| {
                        vec![name, voxels.to_string(), render::numbers(&[Json::from(volume)])]
                    })
                    .collect();
                rendered.stdout.push_str(&render::table(
                    &["MATERIAL", "VOXELS", "VOLUME"],
                    &table,
                    out,
                    |_, _, padded| padded.to_owned(),
                ));
            }
            if let Some(size) = result.get("grid").and_then(|g| g.get("size")) {
                let _ = writeln!(rendered.stdout, "grid: {} voxels (--json for them)", vector(size));
            }
            return Some(rendered);
        }
        let line = if let Some(shape) = result.get("shape").and_then(Json::as_str) {
            format!(
                "filled a {} of {} ({})",
                clean(shape),
                clean(result.get("material")?.as_str()?),
                result.get("bounds").and_then(corners)?
            )
        } else if let Some(cleared) = result.get("cleared") {
            format!("cleared {}", corners(cleared)?)
        } else {
            let replaced = result.get("replaced")?;
            format!(
                "replaced {} with {} in {}",
                clean(replaced.get("from")?.as_str()?),
                clean(replaced.get("to")?.as_str()?),
                result.get("region").and_then(corners)?
            )
        };
        let _ = writeln!(rendered.stdout, "{line}");
        Some(rendered)
    }
}

//! `stats`: what a place costs (TOOLS.md, "Terrain, camera, asset search, stats"): memory by
//! DeveloperMemoryTag and in all, instance counts by class, scripts by kind, and in a Play
//! server or client the engine's frame, physics and network figures, each naming the engine
//! member it came from (`sources`). A member this Studio does not expose is left out and
//! named under `unavailable`, never made up (plugin/src/Actions/Stats.luau).

use std::fmt::Write as _;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use super::{Command, Invocation, Kind, Output, Spec};
use crate::human::render::{self, Rendered, Style, clean};
use crate::protocol::{Context, ToolError};

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatsArgs {}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatsResult {
    /// `{totalMb, byTag: {<DeveloperMemoryTag>: mb}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Map<String, Json>>,
    /// `{total, byClass: [{className, count}]}`, the 20 largest classes.
    pub instances: Map<String, Json>,
    /// `{total, byKind: {Script, LocalScript, ModuleScript}, enabled}`.
    pub scripts: Map<String, Json>,
    /// In a Play server or client: the engine's frame and physics figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame: Option<Map<String, Json>>,
    /// In a Play server or client: data sent and received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Map<String, Json>>,
    /// Engine members this Studio does not expose here (`Class.Member`): their figures are left out.
    pub unavailable: Vec<String>,
    /// Each figure's engine member, by the figure's path (`memory.totalMb`).
    pub sources: Map<String, Json>,
}

pub struct Stats;

impl Command for Stats {
    type Args = StatsArgs;
    type Result = StatsResult;
    const SPEC: Spec = Spec {
        name: "stats",
        description: "What the place costs: memory, instances, scripts, frame, network.",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(30),
        kind: Kind::Read,
        capabilities: super::Capabilities::of(&[super::Capability::Read]),
        idempotent: true,
        open_world: false,
        positional: &[],
        truncation_hint: "",
        follow_event: None,
        example: "studio-bridge stats --context server",
        from_file: None,
        flag_help: &[],
    };

    async fn run(args: StatsArgs, cx: &Invocation) -> Result<Output, ToolError> {
        cx.forward(&Self::SPEC, &args).await
    }
}

// Human rendering --------------------------------------------------------------------------

impl super::Render for Stats {
    /// Memory, then the largest classes as a table, scripts, the Play figures, and what this
    /// Studio does not expose.
    fn render(_args: &Json, result: &Json, out: Style, err: Style) -> Option<Rendered> {
        let mut rendered = Rendered::default();
        let number = |value: &Json| render::numbers(std::slice::from_ref(value));
        if let Some(memory) = result.get("memory") {
            let total = memory.get("totalMb").map(number).unwrap_or_else(|| "?".into());
            let _ = writeln!(rendered.stdout, "{} {total} MB", out.bold("memory:"));
            let mut tags: Vec<(&String, f64)> = memory
                .get("byTag")
                .and_then(Json::as_object)
                .map(|tags| tags.iter().filter_map(|(tag, mb)| Some((tag, mb.as_f64()?))).collect())
                .unwrap_or_default();
            tags.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
            for (tag, mb) in tags.iter().take(8) {
                let _ = writeln!(rendered.stdout, "  {:<24} {} MB", clean(tag), number(&Json::from(*mb)));
            }
        }
        let instances = result.get("instances")?;
        let _ = writeln!(
            rendered.stdout,
            "{} {}",
            out.bold("instances:"),
            instances.get("total")?.as_u64()?
        );
        let rows: Vec<Vec<String>> = instances
            .get("byClass")?
            .as_array()?
            .iter()
            .filter_map(|c| {
                Some(vec![
                    clean(c.get("className")?.as_str()?).into_owned(),
                    c.get("count")?.as_u64()?.to_string(),
                ])
            })
            .collect();
        for line in render::table(&["CLASS", "COUNT"], &rows, out, |_, _, padded| padded.to_owned()).lines() {
            let _ = writeln!(rendered.stdout, "  {line}");
        }
        let scripts = result.get("scripts")?;
        let _ = writeln!(
            rendered.stdout,
            "{} {} ({} enabled)",
            out.bold("scripts:"),
            scripts.get("total")?.as_u64()?,
            scripts.get("enabled").map(number).unwrap_or_else(|| "?".into())
        );
        for key in ["frame", "network"] {
            if let Some(figures) = result.get(key).and_then(Json::as_object) {
                let listed: Vec<String> = figures
                    .iter()
                    .map(|(name, value)| format!("{} {}", clean(name), number(value)))
                    .collect();
                let _ = writeln!(
                    rendered.stdout,
                    "{} {}",
                    out.bold(&format!("{key}:")),
                    listed.join(", ")
                );
            }
        }
        let unavailable: Vec<String> = result
            .get("unavailable")
            .and_then(Json::as_array)
            .map(|u| {
                u.iter()
                    .filter_map(Json::as_str)
                    .map(|m| clean(m).into_owned())
                    .collect()
            })
            .unwrap_or_default();
        if !unavailable.is_empty() {
            let note = format!("not exposed by this Studio here: {}", unavailable.join(", "));
            let _ = writeln!(rendered.stderr, "{}", err.dim(&note));
        }
        Some(rendered)
    }
}

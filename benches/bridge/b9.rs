//! B9: the catalogue's bytes as a client receives them.

use super::*;

/// B9: what the tool catalogue costs an agent's context (the compact JSON of name,
/// description and input schema per tool, as `tools/list` sends them), so the number
/// stays visible as commands are added. Measured, not timed: one value each.
pub(super) fn b9(report: &mut Report) {
    let tools = studio_bridge::mcp::catalogue();
    let sizes: Vec<f64> = tools
        .iter()
        .map(|t| studio_bridge::mcp::catalogue_bytes(t) as f64)
        .collect();
    let total: f64 = sizes.iter().sum();
    let largest = sizes.iter().copied().fold(0.0, f64::max);
    report.row(
        "B9",
        "catalogue bytes in all",
        vec![total],
        Unit::Bytes,
        Target::AtMost(studio_bridge::mcp::CATALOGUE_BUDGET as f64),
    );
    report.row(
        "B9",
        "catalogue bytes per tool, mean",
        vec![total / sizes.len().max(1) as f64],
        Unit::Bytes,
        Target::None,
    );
    report.row(
        "B9",
        "catalogue bytes, largest tool",
        vec![largest],
        Unit::Bytes,
        Target::AtMost(studio_bridge::mcp::TOOL_BUDGET as f64),
    );
}

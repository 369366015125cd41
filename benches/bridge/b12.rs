//! B12: the Luau syntax gate on a 5,000-line script.

use super::*;

/// B12: the Luau syntax gate (src/luau/, issue 29) on a 5,000-line script of modern Luau
/// (types, generics, if-expressions, interpolation, compound assignment): the host's cost
/// before a `create` or a checked `exec` is sent, measured in-process (it runs where the
/// command runs). Each run is the median of 20 checks.
pub(super) fn b12(plan: &Plan, report: &mut Report) -> anyhow::Result<()> {
    eprintln!("B12: the Luau syntax gate on a 5,000-line script");
    // Functions in a table: a chunk has at most 200 locals (Luau refuses more, as Studio does).
    let mut source = String::from("--!strict\ntype Point = { x: number, y: number }\nlocal M = {}\n");
    let mut n = 0;
    while source.lines().count() < 5_000 {
        source.push_str(&format!(
            "function M.step{n}<T>(p: Point, list: {{ T }}, scale: number?): (Point, number)\n\
             \tlocal total = 0\n\
             \tfor i, _ in list do\n\
             \t\tif i % 2 == 0 then continue end\n\
             \t\ttotal += i * (scale or 1)\n\
             \tend\n\
             \tlocal label = if total > 10 then `big {{total}}` else \"small\"\n\
             \tprint(label, #list)\n\
             \treturn {{ x = p.x + total, y = p.y - {n} }}, total\n\
             end\n"
        ));
        n += 1;
    }
    let lines = source.lines().count();
    studio_bridge::luau::check(&source)
        .map_err(|errors| anyhow::anyhow!("B12: the generated script is refused: {errors:?}"))?;
    let mut runs = Vec::new();
    for _ in 0..plan.runs {
        let mut times: Vec<f64> = (0..20)
            .map(|_| {
                let start = Instant::now();
                let checked = studio_bridge::luau::check(&source);
                let elapsed = start.elapsed().as_secs_f64() * 1000.0;
                std::hint::black_box(checked).ok();
                elapsed
            })
            .collect();
        times.sort_by(f64::total_cmp);
        runs.push(times[times.len() / 2]);
    }
    report.row(
        "B12",
        "syntax gate, 5,000 lines",
        runs,
        Unit::Millis,
        Target::AtMost(5.0),
    );
    report.note(format!(
        "B12: {lines} lines, {} KiB of Luau, checked with the bundled Luau {}.",
        source.len() / 1024,
        studio_bridge::luau::version()
    ));
    Ok(())
}

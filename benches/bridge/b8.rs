//! B8: the plugin side under Lune.

use super::*;

/// B8: the plugin's own cost, measured where it runs: the real plugin's `find` over a
/// place of 100,000 instances under Lune (`tests/lune/bench-find.luau`), its whole time
/// and the longest stretch it held the thread without yielding (Studio's frame could not
/// run then). Lune's Luau is the same VM family as Studio's; Studio may add native code
/// generation, so these are an upper bound. Skipped with a note where Lune is missing.
pub(super) async fn b8(plan: &Plan, report: &mut Report) {
    eprintln!("B8: find over 100,000 instances in the real plugin under Lune");
    let what_total = "find over 100,000 instances under Lune: whole walk";
    let what_stretch = "find: longest stretch without a yield";
    let Some(lune) = lune_binary() else {
        report.unavailable("B8", what_total, "Lune is not installed (bash .ci/run installs it)");
        return;
    };
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let (mut totals, mut stretches) = (Vec::new(), Vec::new());
    for _ in 0..plan.runs.min(5) {
        let output = Command::new(&lune)
            .args(["run", "tests/lune/bench-find.luau"])
            .current_dir(repo)
            .output()
            .await;
        let parsed = output
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok());
        let Some(line) = parsed else {
            report.unavailable("B8", what_total, "tests/lune/bench-find.luau failed");
            return;
        };
        totals.push(line["totalMs"].as_f64().unwrap_or(f64::NAN));
        stretches.push(line["longestStretchMs"].as_f64().unwrap_or(f64::NAN));
    }
    report.row("B8", what_total, totals, Unit::Millis, Target::AtMost(1000.0));
    report.row("B8", what_stretch, stretches, Unit::Millis, Target::AtMost(16.0));
    b8_codec(plan, &lune, repo, report).await;
    b8_big_place(plan, &lune, repo, report).await;
}

/// B8, big places (issue #42): the real plugin's find (by class, name, tag, attribute; and
/// one cut by its deadline and paged with `resumeAfter`), a 10,000-child query and
/// script_search over a generated place of 500,000 instances and 10,000 scripts (20 MB of
/// source) under Lune (`tests/lune/bench-bigplace.luau`, 25 s a run). For each row its whole
/// time and the longest stretch the plugin held Studio's frame (the Heartbeat gap less the
/// test Studio's own modelled engine work), against #42's targets; and the longest gap a
/// thread that does nothing but pace itself sees in the same heap (the garbage collector's
/// and the machine's share, which no pacing avoids).
async fn b8_big_place(plan: &Plan, lune: &Path, repo: &Path, report: &mut Report) {
    eprintln!("B8: big places, 500,000 instances in the real plugin under Lune");
    let mut rows: Vec<(String, Vec<f64>, Vec<f64>)> = Vec::new();
    let mut floor = Vec::new();
    for _ in 0..plan.runs.min(3) {
        let output = Command::new(lune)
            .args(["run", "tests/lune/bench-bigplace.luau"])
            .current_dir(repo)
            .output()
            .await;
        let line = output
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8_lossy(&o.stdout).lines().last().map(str::to_owned))
            .and_then(|line| serde_json::from_str::<Json>(&line).ok());
        let Some(line) = line else {
            report.unavailable("B8", "big places", "tests/lune/bench-bigplace.luau failed");
            return;
        };
        floor.push(line["floorStretchMs"].as_f64().unwrap_or(f64::NAN));
        for row in line["rows"].as_array().into_iter().flatten() {
            let name = row["row"].as_str().unwrap_or("?").to_owned();
            let total = row["pagesMs"].as_f64().or(row["totalMs"].as_f64()).unwrap_or(f64::NAN);
            let stretch = row["pluginStretchMs"].as_f64().unwrap_or(f64::NAN);
            match rows.iter_mut().find(|(n, _, _)| *n == name) {
                Some((_, totals, stretches)) => {
                    totals.push(total);
                    stretches.push(stretch);
                }
                None => rows.push((name, vec![total], vec![stretch])),
            }
        }
    }
    for (name, totals, stretches) in rows {
        let target = match name.as_str() {
            "query-crowd" => 150.0,
            name if name.starts_with("script-search") => 2000.0,
            _ => 2500.0,
        };
        report.row(
            "B8",
            &format!("500k place, {name}: whole time"),
            totals,
            Unit::Millis,
            Target::AtMost(target),
        );
        report.row(
            "B8",
            &format!("500k place, {name}: longest stretch the plugin held the frame"),
            stretches,
            Unit::Millis,
            Target::AtMost(16.0),
        );
    }
    report.row(
        "B8",
        "500k place: longest gap of a thread that only paces itself (GC and machine)",
        floor,
        Unit::Millis,
        Target::None,
    );
}

/// B8, the wire codec: the real plugin's Msgpack and Base64 modules under Lune
/// (`tests/lune/bench-codec.luau`), stage by stage: a 100,000-instance `query` response
/// out (msgpack, base64, the text frame) and two 1 MB requests in (an `exec` with a 1 MB
/// script and a `create` with a large nested args table: base64, msgpack, the null strip).
/// One row of milliseconds and one of MB/s per stage, each run a value.
async fn b8_codec(plan: &Plan, lune: &Path, repo: &Path, report: &mut Report) {
    eprintln!("B8: the plugin's msgpack and base64 under Lune");
    let runs = plan.runs.min(7).to_string();
    let output = Command::new(lune)
        .args(["run", "tests/lune/bench-codec.luau", "--", "--runs", &runs])
        .current_dir(repo)
        .output()
        .await;
    let stdout = match output {
        Ok(o) if o.status.success() => o.stdout,
        _ => {
            report.unavailable("B8", "plugin codec stages", "tests/lune/bench-codec.luau failed");
            return;
        }
    };
    let mut stages = 0;
    for line in String::from_utf8_lossy(&stdout).lines() {
        let Ok(stage) = serde_json::from_str::<Json>(line) else {
            continue;
        };
        let (Some(name), Some(bytes), Some(runs)) = (
            stage["stage"].as_str(),
            stage["bytes"].as_f64(),
            stage["runs"].as_array(),
        ) else {
            continue;
        };
        let millis: Vec<f64> = runs.iter().filter_map(Json::as_f64).collect();
        let rates: Vec<f64> = millis.iter().map(|ms| bytes / 1e6 / (ms / 1e3)).collect();
        let what = format!("codec {name} ({:.1} MB)", bytes / 1e6);
        report.row("B8", &what, millis, Unit::Millis, Target::None);
        report.row("B8", &format!("{what}: rate"), rates, Unit::MBPerSec, Target::None);
        stages += 1;
    }
    if stages == 0 {
        report.unavailable(
            "B8",
            "plugin codec stages",
            "tests/lune/bench-codec.luau printed no stage",
        );
        return;
    }
    report.note(
        "B8 runs the plugin's Luau under Lune: the same VM family as Studio's, but Studio may also \
         compile hot modules to native code (--!native), so Studio is likely faster. In Studio the \
         base64 stages use EncodingService (native) where it exists; these rows time the plugin's \
         own Base64 module, its fallback. The walks yield once they have held the thread 10 ms \
         (Pace.luau): under Lune a task.wait() resumes within about a millisecond, in Studio after \
         a frame (about 17 ms at 60 fps), so in Studio a whole walk takes longer by a frame per \
         10 ms slice, while Studio stays responsive throughout."
            .into(),
    );
}

/// Lune: `$LUNE`, else on PATH, else where `.ci/run` installs it.
pub(super) fn lune_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("LUNE") {
        return Some(PathBuf::from(path));
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("lune"));
    let cached = std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/studio-bridge-tools/bin/lune"));
    on_path.chain(cached).find(|candidate| candidate.is_file())
}

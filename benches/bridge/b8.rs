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
    report.row("B8", what_stretch, stretches, Unit::Millis, Target::AtMost(50.0));
    b8_codec(plan, &lune, repo, report).await;
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
         own Base64 module, its fallback. find yields every 2,000 instances: under Lune a \
         task.wait() resumes within about a millisecond, in Studio after a frame (about 17 ms at \
         60 fps), so Studio's whole walk adds about 50 frames to the B8 figure."
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

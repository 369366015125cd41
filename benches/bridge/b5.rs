//! B5: spawn → initialize reply, idle RSS, stripped binary size.

use super::*;

/// B5: spawn → initialize reply; idle RSS; binary size.
pub(super) async fn b5(plan: &Plan, report: &mut Report) -> anyhow::Result<()> {
    eprintln!("B5: spawn → initialize, idle RSS, binary size");
    let mut init = Vec::new();
    let mut rss = Vec::new();
    for _ in 0..plan.b5_spawns {
        let started = Instant::now();
        let server = Server::spawn("b5", free_port(), &[], false).await?;
        init.push(started.elapsed().as_secs_f64() * 1e3);
        tokio::time::sleep(Duration::from_millis(200)).await;
        if let Some(kib) = server.rss_kib() {
            rss.push(kib as f64 / 1024.0);
        }
        server.stop().await;
    }
    report.row(
        "B5",
        "spawn → initialize reply",
        init,
        Unit::Millis,
        Target::AtMost(10.0),
    );
    report.row("B5", "RSS, idle after initialize", rss, Unit::MiB, Target::AtMost(12.0));
    let what = "binary size (`cargo build --release`, stripped)";
    match shipped_binary().await {
        Ok(path) => {
            let size = std::fs::metadata(&path)?.len();
            report.row(
                "B5",
                what,
                vec![size as f64 / (1024.0 * 1024.0)],
                Unit::MiB,
                // TESTING.md's B5: the binary at most 14 MB (it holds Luau's compiler since
                // the syntax gate, issue 29); idle RSS stays at most 12.
                Target::AtMost(14.0),
            );
            report.note(format!(
                "B5 binary size: {size} bytes, the binary `cargo build --release` ships ({}), not the one this \
                 benchmark runs, which `cargo bench` builds with the dev-dependencies' features unified in.",
                path.display()
            ));
        }
        Err(error) => report.unavailable("B5", what, &format!("building it failed: {error:#}")),
    }
    Ok(())
}

/// The binary as `cargo build --release` makes it: built here into a target dir of its
/// own (`<target>/bench/shipped`), since `cargo bench` unifies the dev-dependencies'
/// features into the binary it builds (jsonschema's and rexpect's `regex` with its
/// Unicode tables), which ships none of them. The first build takes minutes; later ones
/// only relink what changed.
async fn shipped_binary() -> anyhow::Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "build",
            "--release",
            "--locked",
            "--bin",
            "studio-bridge",
            "--message-format=json",
        ])
        .arg("--target-dir")
        .arg(target_dir().join("bench").join("shipped"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(Stdio::inherit())
        .output()
        .await
        .context("running cargo")?;
    if !output.status.success() {
        bail!("cargo build --release exited with {}", output.status);
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Json>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact")
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
        .context("cargo named no executable")
}

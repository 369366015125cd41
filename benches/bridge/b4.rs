//! B4: a 1920×1080 RGBA screenshot to an image block.

use super::*;

/// B4: a 1920×1080 RGBA screenshot to a PNG image block, unscaled (maxWidth 1920) and
/// at the default maxWidth (1280: scaled, then encoded).
pub(super) async fn b4(plan: &Plan, report: &mut Report) -> anyhow::Result<()> {
    eprintln!("B4: 1920×1080 screenshot to PNG");
    let (width, height) = (1920u32, 1080u32);
    let mut result = Vec::new();
    rmpv::encode::write_value(
        &mut result,
        &value_map(vec![
            ("width", Value::F64(f64::from(width))),
            ("height", Value::F64(f64::from(height))),
            ("rgba", Value::Binary(scene(width, height))),
        ]),
    )?;
    let result = Arc::new(result);
    let port = free_port();
    let server = Server::spawn("b4", port, &[], true).await?;
    let raw = Arc::clone(&result);
    let plugin = fast_plugin(
        port,
        Identity::edit("B4"),
        handler(move |_, _| Reply::Raw(Arc::clone(&raw))),
    )
    .await;
    for (label, max_width) in [
        ("maxWidth 1920 (encode only)", 1920u32),
        ("maxWidth 1280 (default: scale + encode)", 1280),
    ] {
        let call =
            CallToolRequestParams::new("studio_screenshot").with_arguments(object(json!({ "maxWidth": max_width })));
        let (mut host, mut total, mut png_bytes) = (Vec::new(), Vec::new(), 0);
        for run in 0..=plan.runs {
            let started = Instant::now();
            let outcome = server.client.call_tool(call.clone()).await?;
            let elapsed = started.elapsed();
            let host_time = server.since_answer(&plugin)?;
            if run == 0 {
                png_bytes = check_png(&outcome, max_width, width, height)?;
            }
            if run > 0 {
                host.push(host_time.as_secs_f64() * 1e3);
                total.push(elapsed.as_secs_f64() * 1e3);
            }
        }
        // TESTING.md's B4 is the image at the default 1280 wide; the unscaled row is
        // for information (an agent asks for it with maxWidth).
        let target = if max_width == 1280 {
            Target::AtMost(40.0)
        } else {
            Target::None
        };
        report.row(
            "B4",
            &format!("{label}: frame sent → last byte on stdout"),
            host,
            Unit::Millis,
            target,
        );
        report.row(
            "B4",
            &format!("{label}: whole call at the client"),
            total,
            Unit::Millis,
            Target::None,
        );
        report.note(format!("B4 {label}: PNG of {png_bytes} bytes."));
    }
    drop(plugin);
    server.stop().await;
    b4_studio(plan, report).await
}

/// B4, the studio path (issue #46): the real plugin under Lune with the test Studio's
/// StudioCaptureService at a 1920×1080 viewport, asked at the default width: the plugin
/// scales with ScaleAsync and sends 1280×720 RGBA, which the host encodes. The whole call
/// at the client, plugin time included. Lune's Luau interprets what Studio may compile, and
/// the model's capture and scaling are Luau where Studio's are native, so this is an upper
/// bound on the plugin's share (TESTING.md; docs/benchmark.md says what Lune cannot tell).
async fn b4_studio(plan: &Plan, report: &mut Report) -> anyhow::Result<()> {
    let what = "studio path under Lune (1920×1080 captured, 1280 sent): whole call at the client";
    let Some(lune) = super::b8::lune_binary() else {
        report.unavailable("B4", what, "Lune is not installed (bash .ci/run installs it)");
        return Ok(());
    };
    eprintln!("B4: the studio path, the real plugin under Lune");
    let port = free_port();
    let server = Server::spawn("b4-studio", port, &[], false).await?;
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut studio = Command::new(&lune)
        .args([
            "run",
            "tests/lune/studio.luau",
            "--",
            "--quiet",
            "--viewport",
            "1920x1080",
        ])
        .args(["--port", &port.to_string()])
        .current_dir(repo)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("start the test Studio under Lune")?;
    let call = CallToolRequestParams::new("studio_screenshot");
    // The plugin connects within a few seconds; its first screenshot asks the permission.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let outcome = server.client.call_tool(call.clone()).await?;
        if outcome.is_error != Some(true) {
            let result = outcome.structured_content.clone().unwrap_or_default();
            if result["source"] != "studio" || result["width"] != 1280 {
                bail!("B4 studio: not Studio's own capture at 1280 wide: {result}");
            }
            break;
        }
        if Instant::now() > deadline {
            bail!("B4 studio: no screenshot within 30 s: {outcome:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let mut total = Vec::new();
    for _ in 0..plan.runs {
        let started = Instant::now();
        let outcome = server.client.call_tool(call.clone()).await?;
        total.push(started.elapsed().as_secs_f64() * 1e3);
        if outcome.is_error == Some(true) {
            bail!("B4 studio: {outcome:?}");
        }
    }
    report.row("B4", what, total, Unit::Millis, Target::None);
    let _ = studio.kill().await;
    server.stop().await;
    Ok(())
}

/// Something like a rendered viewport: a sky gradient, a textured ground, some flat
/// shapes, and a little noise (deterministic).
fn scene(width: u32, height: u32) -> Vec<u8> {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut noise = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % 5) as i32 - 2
    };
    let mut rgba = Vec::with_capacity((width * height * 4) as usize);
    for y in 0..height {
        for x in 0..width {
            let mut pixel = if y < height / 2 {
                let t = y * 255 / (height / 2);
                [90 + (t / 3) as i32, 150 + (t / 4) as i32, 235, 255]
            } else if ((x / 64) + (y / 32)) % 2 == 0 {
                [70, 140, 60, 255]
            } else {
                [80, 150, 68, 255]
            };
            for (i, (cx, cy, r)) in [(400u32, 700u32, 120u32), (1200, 650, 200), (1600, 800, 90)]
                .iter()
                .enumerate()
            {
                if x.abs_diff(*cx) < *r && y.abs_diff(*cy) < *r / 2 {
                    pixel = [[200, 60, 50, 255], [163, 162, 165, 255], [40, 90, 200, 255]][i];
                }
            }
            for c in pixel.iter_mut().take(3) {
                *c = (*c + noise()).clamp(0, 255);
            }
            rgba.extend(pixel.iter().map(|c| *c as u8));
        }
    }
    rgba
}

fn check_png(outcome: &CallToolResult, max_width: u32, width: u32, height: u32) -> anyhow::Result<usize> {
    if outcome.is_error == Some(true) {
        bail!("screenshot failed: {outcome:?}");
    }
    let image = outcome
        .content
        .iter()
        .find_map(|c| c.as_image())
        .context("no image block")?;
    use base64::Engine as _;
    let png = base64::engine::general_purpose::STANDARD.decode(&image.data)?;
    let decoder = png::Decoder::new(std::io::Cursor::new(&png));
    let reader = decoder.read_info()?;
    let expected_width = width.min(max_width);
    let expected_height = (height * expected_width).div_ceil(width);
    if reader.info().width != expected_width || reader.info().height.abs_diff(expected_height) > 1 {
        bail!("PNG is {}×{}", reader.info().width, reader.info().height);
    }
    Ok(png.len())
}

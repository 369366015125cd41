//! `screenshot`: what the Studio viewport shows, as a PNG image block.
//!
//! The plugin sends raw RGBA (it has no PNG encoder); the host scales anything wider
//! than `maxWidth` and encodes the PNG with a fast setting.

use std::time::Duration;

use rmpv::Value as Msgpack;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{Body, Command, Invocation, Kind, Output, Spec, bad_result, plugin_value};
use crate::protocol::{Context, ToolError};

const MAX_WIDTH_LIMIT: u32 = 3840;

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScreenshotArgs {
    #[schemars(range(min = 16, max = 3840))]
    #[serde(default = "default_max_width")]
    pub max_width: u32,
}

fn default_max_width() -> u32 {
    1280
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ScreenshotResult {
    pub width: u32,
    pub height: u32,
}

pub struct Screenshot;

impl Command for Screenshot {
    type Args = ScreenshotArgs;
    type Result = ScreenshotResult;
    const SPEC: Spec = Spec {
        name: "screenshot",
        description: "Capture the viewport as a PNG, to see the place after a change.",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(15),
        kind: Kind::Read,
        capabilities: super::Capabilities::of(&[super::Capability::Read]),
        idempotent: true,
        open_world: false,
        positional: &[],
        truncation_hint: "",
        follow_event: None,
    };

    async fn run(args: ScreenshotArgs, cx: &Invocation) -> Result<Output, ToolError> {
        if !(16..=MAX_WIDTH_LIMIT).contains(&args.max_width) {
            return Err(ToolError::invalid_args(format!(
                "`maxWidth` must be between 16 and {MAX_WIDTH_LIMIT}."
            )));
        }
        let result = cx.call_plugin(&Self::SPEC, &args, Self::SPEC.timeout, None).await?;
        // Decoding (megabytes of pixels), scaling and PNG encoding take milliseconds of
        // CPU per frame: off the async thread, so that other callers' calls are not held
        // up behind them.
        let max_width = args.max_width;
        let (width, height, png) = tokio::task::spawn_blocking(move || {
            let raw = RawImage::from_plugin(plugin_value("screenshot", &result)?)?;
            let (width, height, rgba) = crate::image::fit_width(raw.width, raw.height, raw.rgba, max_width);
            crate::image::encode_png(width, height, &rgba)
                .map(|png| (width, height, png))
                .map_err(|e| bad_result("screenshot", &format!("PNG encoding failed: {e}")))
        })
        .await
        .map_err(|e| bad_result("screenshot", &format!("the encoder stopped: {e}")))??;
        Ok(Output {
            body: Body::Json(json!({ "width": width, "height": height })),
            image: Some(png),
            whole: None,
        })
    }
}

struct RawImage {
    width: u32,
    height: u32,
    rgba: Vec<u8>,
}

impl RawImage {
    fn from_plugin(result: Msgpack) -> Result<RawImage, ToolError> {
        let Msgpack::Map(entries) = result else {
            return Err(bad_result("screenshot", "not a map"));
        };
        let mut width = None;
        let mut height = None;
        let mut rgba = None;
        for (key, value) in entries {
            match (key.as_str(), value) {
                (Some("width"), v) => width = as_dimension(&v),
                (Some("height"), v) => height = as_dimension(&v),
                (Some("rgba"), Msgpack::Binary(bytes)) => rgba = Some(bytes),
                _ => {}
            }
        }
        let (Some(width), Some(height), Some(rgba)) = (width, height, rgba) else {
            return Err(bad_result("screenshot", "expected width, height and binary rgba"));
        };
        // Checked: the dimensions come from the plugin, and a product that wrapped could
        // match a small payload and then size an allocation that aborts the process.
        let expected = u64::from(width)
            .checked_mul(u64::from(height))
            .and_then(|pixels| pixels.checked_mul(4));
        if expected != Some(rgba.len() as u64) || width == 0 || height == 0 {
            return Err(bad_result(
                "screenshot",
                &format!("{width}×{height} does not match {} RGBA bytes", rgba.len()),
            ));
        }
        Ok(RawImage { width, height, rgba })
    }
}

fn as_dimension(value: &Msgpack) -> Option<u32> {
    match value {
        Msgpack::Integer(i) => i.as_u64().and_then(|n| u32::try_from(n).ok()),
        Msgpack::F64(f) if f.fract() == 0.0 && *f >= 0.0 && *f <= f64::from(u32::MAX) => Some(*f as u32),
        _ => None,
    }
}

impl super::Render for Screenshot {}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(width: u64, height: u64, bytes: usize) -> Msgpack {
        Msgpack::Map(vec![
            ("width".into(), width.into()),
            ("height".into(), height.into()),
            ("rgba".into(), Msgpack::Binary(vec![0; bytes])),
        ])
    }

    #[test]
    fn dimensions_must_match_the_payload_without_overflow() {
        assert!(RawImage::from_plugin(raw(2, 3, 24)).is_ok());
        assert!(RawImage::from_plugin(raw(2, 3, 23)).is_err());
        assert!(RawImage::from_plugin(raw(0, 3, 0)).is_err());
        // 2^32-1 squared times 4 does not fit in 64 bits: refused, not wrapped.
        let max = u64::from(u32::MAX);
        let err = RawImage::from_plugin(raw(max, max, 16)).err().expect("refused");
        assert_eq!(err.code, crate::protocol::ErrorCode::PluginError);
    }
}

//! `screenshot`: what Studio shows, as a PNG image block, by the first of three paths that
//! works (TOOLS.md, "Studio's own capture").
//!
//! The studio path: Studio's own capture (StudioCaptureService), where the engine has it and
//! lets the plugin capture, in the edit DataModel and in Play clients, at any size; the
//! plugin sends raw RGBA already scaled to `maxWidth` (it has no PNG encoder). The viewport
//! path, for a Studio without it: the plugin captures an Edit viewport within the 1024×1024
//! an EditableImage can hold. The window path, last: for a Play context, a larger viewport,
//! or a capture the engine refused, the plugin reports its place name instead, and the host
//! captures the Studio window through the operating system (`crate::capture`). Either way
//! the host scales anything wider than `maxWidth`, encodes the PNG with a fast setting,
//! says which path ran (`source`), and flags a one-colour image.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{Body, Command, Invocation, Kind, Output, Spec, bad_result};
use crate::capture::CaptureError;
use crate::protocol::frame::FrameError;
use crate::protocol::raw::{RawValue, Reader, Token};
use crate::protocol::{Context, ErrorCode, ToolError};

const MAX_WIDTH_LIMIT: u32 = 3840;

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScreenshotArgs {
    #[schemars(range(min = 16, max = 3840))]
    #[serde(default = "default_max_width")]
    pub max_width: u32,
    /// Put back after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub camera: Option<Camera>,
}

/// Where the capture looks from: a position and a point to look at, or an instance framed
/// as Studio's F key frames it (plugin/src/CaptureCamera.luau).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Camera {
    At(CameraAt),
    Focus(CameraFocus),
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CameraAt {
    pub position: [f64; 3],
    pub look_at: [f64; 3],
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CameraFocus {
    /// Instance path to frame
    pub focus: String,
}

fn default_max_width() -> u32 {
    1280
}

/// Which path produced the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// Studio's own capture (StudioCaptureService), tried first.
    Studio,
    /// The plugin's capture of the 3D viewport through an EditableImage.
    Viewport,
    /// The whole Studio window, captured by the host through the operating system.
    Window,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScreenshotResult {
    pub width: u32,
    pub height: u32,
    pub source: Source,
    /// Every pixel is one colour (see `hint`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub blank: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// Why the window was captured: `play`, `viewport_too_large`, `editable_image_refused`
    /// or `capture_unavailable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The captured window's title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    /// With `camera`: `{position, lookAt, restored}`, the camera used and whether the
    /// person's was put back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub camera: Option<serde_json::Map<String, serde_json::Value>>,
    /// In a Play client with `camera`: the game's camera scripts may move it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

pub struct Screenshot;

/// How long the operating system may take to list and capture windows.
const WINDOW_CAPTURE_DEADLINE: Duration = Duration::from_secs(10);

impl Command for Screenshot {
    type Args = ScreenshotArgs;
    type Result = ScreenshotResult;
    const SPEC: Spec = Spec {
        name: "screenshot",
        description: "Studio's view as a PNG: its own capture, else the viewport or window.",
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
        example: "studio-bridge screenshot --out view.png",
        from_file: None,
        flag_help: &[("maxWidth", "Scale down to at most this many pixels wide")],
    };

    async fn run(args: ScreenshotArgs, cx: &Invocation) -> Result<Output, ToolError> {
        if !(16..=MAX_WIDTH_LIMIT).contains(&args.max_width) {
            return Err(ToolError::invalid_args(format!(
                "`maxWidth` must be between 16 and {MAX_WIDTH_LIMIT}."
            )));
        }
        let result = cx.call_plugin(&Self::SPEC, &args, Self::SPEC.timeout, None).await?;
        // Decoding (megabytes of pixels), capturing a window, scaling and PNG encoding take
        // milliseconds of CPU or blocking system calls: off the async thread, so that other
        // callers' calls are not held up behind them, and under a deadline of their own.
        let max_width = args.max_width;
        let work = tokio::task::spawn_blocking(move || match PluginReply::parse(&result)? {
            // The pixels are read where they lie in the plugin's frame, not copied out.
            PluginReply::Pixels(image, source, chosen) => {
                let (mut result, png) = finish(image, max_width, source, None, None)?;
                result.camera = chosen.camera;
                result.note = chosen.note;
                Ok((result, png))
            }
            PluginReply::Window(report) => {
                let frame = crate::capture::capture_studio_window(&report.place_name).map_err(|e| report.error(e))?;
                let image = Pixels {
                    width: frame.width,
                    height: frame.height,
                    rgba: &frame.rgba,
                };
                finish(image, max_width, Source::Window, Some(report.reason), Some(frame.title))
            }
        });
        let (result, png) = tokio::time::timeout(WINDOW_CAPTURE_DEADLINE, work)
            .await
            .map_err(|_| {
                ToolError::new(
                    ErrorCode::Timeout,
                    "Capturing the screenshot took longer than 10 s (the window system did not answer). Retry.",
                )
            })?
            .map_err(|e| bad_result("screenshot", &format!("the encoder stopped: {e}")))??;
        let body = serde_json::to_value(&result)
            .map_err(|e| bad_result("screenshot", &format!("its result could not be written: {e}")))?;
        Ok(Output {
            body: Body::Json(body),
            image: Some(png),
            whole: None,
        })
    }
}

/// Scales, flags a one-colour image, and encodes the PNG.
fn finish(
    image: Pixels<'_>,
    max_width: u32,
    source: Source,
    reason: Option<String>,
    window: Option<String>,
) -> Result<(ScreenshotResult, Vec<u8>), ToolError> {
    let blank = crate::image::is_uniform(image.rgba);
    let png = crate::image::encode_png(image.width, image.height, image.rgba, max_width)
        .map_err(|e| bad_result("screenshot", &format!("PNG encoding failed: {e}")))?;
    let hint = blank.then(|| blank_hint(source).to_owned());
    Ok((
        ScreenshotResult {
            width: png.width,
            height: png.height,
            source,
            blank,
            hint,
            reason,
            window,
            camera: None,
            note: None,
        },
        png.bytes,
    ))
}

fn blank_hint(source: Source) -> &'static str {
    match source {
        Source::Studio | Source::Viewport => {
            "Every pixel is the same colour: the viewport may be empty or not drawn yet. Point the camera at something, or retry once the place has loaded."
        }
        #[cfg(target_os = "macos")]
        Source::Window => {
            "Every pixel is the same colour: macOS blanks other apps' windows without the Screen Recording permission (System Settings → Privacy & Security → Screen Recording), and a covered or minimised window shows nothing. Grant it to the app that runs studio-bridge, bring Studio to the front, and retry."
        }
        #[cfg(not(target_os = "macos"))]
        Source::Window => {
            "Every pixel is the same colour: the Studio window may be covered, minimised or not drawn yet. Bring it to the front and retry."
        }
    }
}

/// What the plugin answered: pixels and the path that took them, or why it left the
/// capture to the host.
enum PluginReply<'a> {
    Pixels(Pixels<'a>, Source, ChosenCamera),
    Window(WindowReport),
}

/// What the plugin says of a capture from a chosen camera.
#[derive(Debug, Default)]
struct ChosenCamera {
    camera: Option<serde_json::Map<String, serde_json::Value>>,
    note: Option<String>,
}

/// The plugin's report for the window path (docs/protocol.md, screenshot).
#[derive(Debug, Default)]
struct WindowReport {
    reason: String,
    context: String,
    place_name: String,
    viewport_width: u32,
    viewport_height: u32,
    editable_image_error: Option<String>,
    /// Why a Studio without CaptureService:CaptureScreenshot could not (the engine's words).
    capture_error: Option<String>,
    /// Why Studio's own capture was tried and failed, where it was.
    studio_capture_error: Option<String>,
}

impl WindowReport {
    /// Why the plugin did not capture, in words.
    fn why(&self) -> String {
        let why = match self.reason.as_str() {
            "play" => format!(
                "the {} DataModel is in a playtest, where the plugin's captures come back black",
                self.context
            ),
            "viewport_too_large" => format!(
                "the viewport is {}×{}, past the 1024×1024 an EditableImage can hold",
                self.viewport_width, self.viewport_height
            ),
            "editable_image_refused" => format!(
                "Studio refused to load the {}×{} viewport's capture into an EditableImage ({})",
                self.viewport_width,
                self.viewport_height,
                self.editable_image_error.as_deref().unwrap_or("no reason given")
            ),
            "capture_unavailable" => format!(
                "this Studio has no CaptureService:CaptureScreenshot ({})",
                self.capture_error.as_deref().unwrap_or("no reason given")
            ),
            other => format!("the plugin said \"{other}\""),
        };
        match &self.studio_capture_error {
            Some(studio) => format!("{why}; Studio's own capture failed first: {studio}"),
            None => why,
        }
    }

    /// The window path's failure as a tool error: why the window was needed, then why it
    /// could not be captured.
    fn error(&self, cause: CaptureError) -> ToolError {
        let code = match cause {
            CaptureError::Permission(_) => ErrorCode::PermissionDenied,
            CaptureError::NoWindow(_) | CaptureError::Unavailable(_) => ErrorCode::NotFound,
        };
        ToolError::new(
            code,
            format!(
                "No screenshot: the plugin cannot capture here ({}), so studio-bridge captures the Studio window, and could not: {cause}",
                self.why()
            ),
        )
        .with_details(json!({
            "reason": self.reason,
            "context": self.context,
            "placeName": self.place_name,
            "viewportWidth": self.viewport_width,
            "viewportHeight": self.viewport_height,
            "editableImageError": self.editable_image_error,
            "captureError": self.capture_error,
            "studioCaptureError": self.studio_capture_error,
        }))
    }
}

impl<'a> PluginReply<'a> {
    /// Reads the plugin's map token by token ([`Reader`]), so that the pixels (8 MB for a
    /// 1024×1024 capture, more from a test plugin) stay a slice of the frame they came in.
    fn parse(result: &'a RawValue) -> Result<PluginReply<'a>, ToolError> {
        let malformed = |e: FrameError| bad_result("screenshot", &format!("its result could not be decoded: {e}"));
        let mut reader = Reader::new(result.as_bytes());
        let Token::Map(count) = reader.next_token().map_err(malformed)? else {
            return Err(bad_result("screenshot", "not a map"));
        };
        let mut width = None;
        let mut height = None;
        let mut rgba = None;
        let mut window = false;
        // A plugin from before StudioCaptureService says no source: its pixels are the viewport's.
        let mut source = Source::Viewport;
        let mut report = WindowReport::default();
        let mut chosen = ChosenCamera::default();
        for _ in 0..count {
            let key = match reader.next_token().map_err(malformed)? {
                Token::Str(key) => key,
                _ => &[],
            };
            let start = reader.pos();
            let value = reader.next_token().map_err(malformed)?;
            if let Token::Array(_) | Token::Map(_) = value {
                reader.seek(start);
                reader.skip_value().map_err(malformed)?;
                if key == b"camera" {
                    // A small map: decoded as a tree, unlike the pixels.
                    let mut bytes = &result.as_bytes()[start..reader.pos()];
                    let camera = rmpv::decode::read_value(&mut bytes)
                        .map_err(|e| bad_result("screenshot", &format!("its camera could not be decoded: {e}")))?;
                    if let serde_json::Value::Object(camera) = crate::protocol::value::into_json(camera) {
                        chosen.camera = Some(camera);
                    }
                }
                continue;
            }
            let text = || match value {
                Token::Str(bytes) => std::str::from_utf8(bytes).ok().map(str::to_owned),
                _ => None,
            };
            match key {
                b"width" => width = as_dimension(value),
                b"height" => height = as_dimension(value),
                b"rgba" => {
                    rgba = if let Token::Bin(bytes) = value {
                        Some(bytes)
                    } else {
                        None
                    }
                }
                b"capture" => window = matches!(value, Token::Str(b"window")),
                b"source" => {
                    source = match value {
                        Token::Str(b"studio") => Source::Studio,
                        Token::Str(b"viewport") => Source::Viewport,
                        _ => {
                            return Err(bad_result(
                                "screenshot",
                                "its pixels' source is neither studio nor viewport",
                            ));
                        }
                    }
                }
                b"reason" => report.reason = text().unwrap_or_default(),
                b"context" => report.context = text().unwrap_or_default(),
                b"placeName" => report.place_name = text().unwrap_or_default(),
                b"viewportWidth" => report.viewport_width = as_dimension(value).unwrap_or(0),
                b"viewportHeight" => report.viewport_height = as_dimension(value).unwrap_or(0),
                b"editableImageError" => report.editable_image_error = text(),
                b"captureError" => report.capture_error = text(),
                b"studioCaptureError" => report.studio_capture_error = text(),
                b"note" => chosen.note = text(),
                _ => {}
            }
        }
        if window {
            if report.place_name.is_empty() {
                return Err(bad_result("screenshot", "a window report without its placeName"));
            }
            return Ok(PluginReply::Window(report));
        }
        let (Some(width), Some(height), Some(rgba)) = (width, height, rgba) else {
            return Err(bad_result("screenshot", "expected width, height and binary rgba"));
        };
        // Checked: the dimensions come from the plugin, and a product that wrapped could
        // match a small payload and then index past it.
        let expected = u64::from(width)
            .checked_mul(u64::from(height))
            .and_then(|pixels| pixels.checked_mul(4));
        if expected != Some(rgba.len() as u64) || width == 0 || height == 0 {
            return Err(bad_result(
                "screenshot",
                &format!("{width}×{height} does not match {} RGBA bytes", rgba.len()),
            ));
        }
        Ok(PluginReply::Pixels(Pixels { width, height, rgba }, source, chosen))
    }
}

/// An image's RGBA pixels, row-major, `width * height * 4` bytes (checked).
struct Pixels<'a> {
    width: u32,
    height: u32,
    rgba: &'a [u8],
}

fn as_dimension(value: Token<'_>) -> Option<u32> {
    match value {
        Token::UInt(n) => u32::try_from(n).ok(),
        Token::Int(n) => u32::try_from(n).ok(),
        Token::F64(f) if f.fract() == 0.0 && f >= 0.0 && f <= f64::from(u32::MAX) => Some(f as u32),
        Token::F32(f) if f.fract() == 0.0 && f >= 0.0 && f64::from(f) <= f64::from(u32::MAX) => Some(f as u32),
        _ => None,
    }
}

// Human rendering --------------------------------------------------------------------------

use std::fmt::Write as _;

use serde_json::Value as Json;

use crate::human::render::{Rendered, Style, clean};

impl super::Render for Screenshot {
    /// `1280×720 PNG from the viewport` (the file's name is said where it is written); why
    /// the window was captured, and a one-colour image's hint, on stderr.
    fn render(_args: &Json, result: &Json, _out: Style, err: Style) -> Option<Rendered> {
        let mut rendered = Rendered::default();
        let source = match result.get("source")?.as_str()? {
            "studio" => "Studio's own capture".to_owned(),
            "window" => "the Studio window".to_owned(),
            other => format!("the {}", clean(other)),
        };
        let _ = writeln!(
            rendered.stdout,
            "{}×{} PNG from {source}",
            result.get("width")?.as_u64()?,
            result.get("height")?.as_u64()?
        );
        if let Some(window) = result.get("window").and_then(Json::as_str) {
            let why = result.get("reason").and_then(Json::as_str).unwrap_or("");
            let note = format!("window {:?} ({})", clean(window), clean(why));
            let _ = writeln!(rendered.stderr, "{}", err.dim(&note));
        }
        if let Some(hint) = result.get("hint").and_then(Json::as_str) {
            let _ = writeln!(rendered.stderr, "{}", err.yellow(&format!("note: {}", clean(hint))));
        }
        Some(rendered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmpv::Value as Msgpack;

    fn raw(width: u64, height: u64, bytes: usize) -> RawValue {
        RawValue::encode(&Msgpack::Map(vec![
            ("width".into(), width.into()),
            ("height".into(), height.into()),
            ("rgba".into(), Msgpack::Binary(vec![0; bytes])),
        ]))
    }

    /// Studio's own capture says so; an older plugin's pixels are the viewport's; any
    /// other source is a bad result, not a guess.
    #[test]
    fn the_pixels_say_which_path_took_them() {
        let with_source = |source: &str| {
            RawValue::encode(&Msgpack::Map(vec![
                ("width".into(), 1.into()),
                ("height".into(), 1.into()),
                ("rgba".into(), Msgpack::Binary(vec![0; 4])),
                ("source".into(), source.into()),
            ]))
        };
        assert!(matches!(
            PluginReply::parse(&with_source("studio")),
            Ok(PluginReply::Pixels(_, Source::Studio, _))
        ));
        assert!(matches!(
            PluginReply::parse(&with_source("viewport")),
            Ok(PluginReply::Pixels(_, Source::Viewport, _))
        ));
        assert!(PluginReply::parse(&with_source("window")).is_err());
    }

    #[test]
    fn dimensions_must_match_the_payload_without_overflow() {
        assert!(matches!(
            PluginReply::parse(&raw(2, 3, 24)),
            Ok(PluginReply::Pixels(_, Source::Viewport, _))
        ));
        assert!(PluginReply::parse(&raw(2, 3, 23)).is_err());
        assert!(PluginReply::parse(&raw(0, 3, 0)).is_err());
        // 2^32-1 squared times 4 does not fit in 64 bits: refused, not wrapped.
        let max = u64::from(u32::MAX);
        let err = PluginReply::parse(&raw(max, max, 16)).err().expect("refused");
        assert_eq!(err.code, ErrorCode::PluginError);
    }

    fn report(entries: Vec<(&str, Msgpack)>) -> RawValue {
        RawValue::encode(&Msgpack::Map(entries.into_iter().map(|(k, v)| (k.into(), v)).collect()))
    }

    #[test]
    fn a_window_report_becomes_an_error_saying_why_both_paths_failed() {
        let value = report(vec![
            ("capture", "window".into()),
            ("reason", "viewport_too_large".into()),
            ("context", "edit".into()),
            ("placeName", "Baseplate".into()),
            ("viewportWidth", 1920.into()),
            ("viewportHeight", Msgpack::F64(1080.0)),
            // a container the reader steps over
            (
                "extra",
                Msgpack::Array(vec![Msgpack::Map(vec![("a".into(), 1.into())])]),
            ),
        ]);
        let Ok(PluginReply::Window(window)) = PluginReply::parse(&value) else {
            panic!("a window report");
        };
        assert_eq!((window.viewport_width, window.viewport_height), (1920, 1080));
        let error = window.error(CaptureError::NoWindow("No Roblox Studio window is open.".into()));
        assert_eq!(error.code, ErrorCode::NotFound);
        assert!(error.message.contains("1920×1080"), "{}", error.message);
        assert!(
            error.message.contains("No Roblox Studio window is open."),
            "{}",
            error.message
        );
        assert!(!error.message.contains("EditableImage refused"), "{}", error.message);
        let details = error.details.expect("details");
        assert_eq!(details["placeName"], "Baseplate");
        assert_eq!(details["reason"], "viewport_too_large");
        let denied = window.error(CaptureError::Permission("Screen Recording".into()));
        assert_eq!(denied.code, ErrorCode::PermissionDenied);
        // a report must name its place: the window is chosen by it
        assert!(PluginReply::parse(&report(vec![("capture", "window".into())])).is_err());
    }

    #[test]
    fn a_uniform_image_is_flagged_blank_with_a_hint() {
        let shot = |rgba: Vec<u8>| {
            finish(
                Pixels {
                    width: 2,
                    height: 1,
                    rgba: &rgba,
                },
                1280,
                Source::Window,
                None,
                None,
            )
        };
        let (blank, _) = shot(vec![0, 0, 0, 255, 0, 0, 0, 255]).unwrap();
        assert!(blank.blank);
        assert!(blank.hint.as_deref().unwrap_or("").contains("same colour"));
        let (seen, png) = shot(vec![0, 0, 0, 255, 9, 0, 0, 255]).unwrap();
        assert!(!seen.blank && seen.hint.is_none());
        assert!(png.starts_with(b"\x89PNG"));
        let json = serde_json::to_value(&seen).unwrap();
        assert_eq!(json, json!({"width": 2, "height": 1, "source": "window"}));
    }
}

//! Place publishing (Universes API v1: `POST /universes/v1/{universe}/places/{place}/versions`):
//! a `.rbxl` or `.rbxlx` file becomes the place's new version, saved or published. The body
//! is the file itself, with the content type its format needs (`application/octet-stream`
//! for binary, `application/xml` for XML, as the publishing guide's requests send them), and
//! the file is read as a place before the upload (rbx_binary or rbx_xml), so a broken build
//! is refused here rather than stored as a version.

use std::path::Path;

use bytes::Bytes;
use reqwest::Method;
use serde_json::Value as Json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Body, Cloud, Request};
use crate::protocol::{ErrorCode, ToolError};

/// The largest place file the API takes (its `x-roblox-size-limit`).
pub const MAX_BYTES: u64 = 10_485_760;

/// A place file, read and checked.
#[derive(Debug)]
pub struct PlaceFile {
    pub bytes: Bytes,
    pub content_type: &'static str,
}

/// Reads `path` and checks it is a place in the format its extension says.
pub fn read(path: &Path) -> Result<PlaceFile, ToolError> {
    let extension = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let binary = match extension.as_deref() {
        Some("rbxl") => true,
        Some("rbxlx") => false,
        _ => {
            return Err(ToolError::invalid_args(format!(
                "file: {} is not a place file; give a .rbxl or .rbxlx (e.g. from `rojo build -o game.rbxl`).",
                path.display()
            )));
        }
    };
    let size = std::fs::metadata(path)
        .map_err(|e| {
            ToolError::new(
                ErrorCode::NotFound,
                format!("file: {} cannot be read: {e}", path.display()),
            )
        })?
        .len();
    if size > MAX_BYTES {
        return Err(ToolError::invalid_args(format!(
            "file: {} is {size} bytes, over Open Cloud's limit of {MAX_BYTES} for a place; make it smaller (packages, or assets uploaded apart).",
            path.display()
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| {
        ToolError::new(
            ErrorCode::NotFound,
            format!("file: {} cannot be read: {e}", path.display()),
        )
    })?;
    let parsed = if binary {
        rbx_binary::from_reader(bytes.as_slice())
            .map(|_| ())
            .map_err(|e| e.to_string())
    } else {
        rbx_xml::from_reader_default(bytes.as_slice())
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    parsed.map_err(|e| {
        ToolError::invalid_args(format!(
            "file: {} is not a valid {} place ({e}); nothing was uploaded. Build it again.",
            path.display(),
            if binary { "binary (.rbxl)" } else { "XML (.rbxlx)" }
        ))
    })?;
    Ok(PlaceFile {
        bytes: Bytes::from(bytes),
        content_type: if binary {
            "application/octet-stream"
        } else {
            "application/xml"
        },
    })
}

/// Uploads `file` as a new version (`Saved` or `Published`): its version number.
pub async fn publish(
    cloud: &Cloud,
    universe: u64,
    place: u64,
    file: PlaceFile,
    version_type: &str,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<u64, ToolError> {
    let mut request = Request::new(
        Method::POST,
        format!("/universes/v1/{universe}/places/{place}/versions"),
        "universe-places:write",
        format!("universe {universe}'s place {place}"),
    )
    .query("versionType", version_type);
    request.body = Some(Body::Bytes {
        content_type: file.content_type,
        bytes: file.bytes,
    });
    let answer = cloud.send(&request, deadline, cancel).await?;
    // Answered as text/plain holding JSON: {"versionNumber":7}
    let json: Json = serde_json::from_str(&answer.text).unwrap_or(answer.json);
    json.get("versionNumber").and_then(Json::as_u64).ok_or_else(|| {
        ToolError::new(
            ErrorCode::PluginError,
            format!(
                "Open Cloud accepted the place but its answer named no version number: {}",
                super::api_message(&answer.text)
            ),
        )
    })
}

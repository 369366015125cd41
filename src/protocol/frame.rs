//! What both inbound decoders share: the errors a frame can have, its nesting budget, and
//! the fields of a message map. Below both the message parser (`messages.rs`) and the raw
//! value reader (`raw.rs`), so that neither reaches into the other for them.

use rmpv::Value as Msgpack;

/// Why an inbound frame could not be understood.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("text frame is not valid base64: {0}")]
    Base64(#[from] base64_simd::Error),
    #[error("frame is not valid msgpack: {0}")]
    Msgpack(#[from] rmpv::decode::Error),
    #[error("frame is not a msgpack map with a string key `t`")]
    NotAMessage,
    #[error("`{field}` is missing or has the wrong type in a `{kind}` message")]
    BadField { kind: &'static str, field: &'static str },
    #[error("frame is {size} bytes; the limit is {limit} bytes")]
    TooLarge { size: usize, limit: usize },
    #[error("frame is not valid msgpack: a length runs past its end")]
    Truncated,
    #[error("frame nests arrays and maps too deep")]
    TooDeep,
}

/// Nesting budget of a frame, in rmpv's units (each array or map level costs two), so
/// about 255 levels. Real messages nest a few dozen levels at most (a `query` at depth 10
/// is about 40); a garbage or hostile frame nested deeper must be rejected, not recursed
/// into until the host's stack overflows.
pub const MAX_DEPTH: usize = 512;

/// The entries of a msgpack map, taken out by key.
pub(crate) struct Fields(pub(crate) Vec<(Msgpack, Msgpack)>);

impl Fields {
    pub(crate) fn take(&mut self, key: &str) -> Option<Msgpack> {
        let index = self.0.iter().position(|(k, _)| k.as_str() == Some(key))?;
        Some(std::mem::replace(&mut self.0[index].1, Msgpack::Nil))
    }

    pub(crate) fn uint(&mut self, kind: &'static str, field: &'static str) -> Result<u64, FrameError> {
        self.take(field)
            .as_ref()
            .and_then(as_u64)
            .ok_or(FrameError::BadField { kind, field })
    }
}

pub(crate) fn into_string(value: Msgpack) -> Option<String> {
    match value {
        Msgpack::String(s) => s.into_str(),
        _ => None,
    }
}

/// Luau numbers are doubles, so ids and counts may arrive as whole floats.
pub(crate) fn as_u64(value: &Msgpack) -> Option<u64> {
    match value {
        Msgpack::Integer(i) => i.as_u64(),
        Msgpack::F64(f) if f.fract() == 0.0 && *f >= 0.0 && *f < 1.8e19 => Some(*f as u64),
        Msgpack::F32(f) if f.fract() == 0.0 && *f >= 0.0 => Some(*f as u64),
        _ => None,
    }
}

pub(crate) fn as_f64(value: &Msgpack) -> Option<f64> {
    match value {
        Msgpack::Integer(i) => i.as_f64(),
        Msgpack::F64(f) => Some(*f),
        Msgpack::F32(f) => Some(f64::from(*f)),
        _ => None,
    }
}

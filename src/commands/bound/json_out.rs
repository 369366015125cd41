//! Writing JSON text for the raw path (`raw.rs`): the output with its quoted twin, the
//! scalars and strings as serde_json writes them, and their lengths, with what this path
//! cannot write ([`Unsupported`]) handed back to the tree path.

use super::string_len;
use crate::protocol::raw::Token;

/// Largest integer a double holds exactly, as [`value`](crate::protocol::value) maps floats.
const MAX_EXACT_FLOAT_INT: f64 = 9_007_199_254_740_992.0;

/// `text` as a JSON string, quotes included, for `text` that is itself compact JSON (what
/// serde_json and this module write): there, only `"` and `\` need escaping, since JSON
/// allows no raw control character inside its strings and compact JSON has no whitespace
/// outside them. The same bytes serde_json writes (a test holds it).
pub fn quote_json_text(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len() + bytes.len() / 8 + 2);
    out.push(b'"');
    escape_into(bytes, &mut out);
    out.push(b'"');
    out
}

/// Appends `bytes` (compact JSON) with `"` and `\` escaped; the runs between them are
/// found with memchr and copied whole.
fn escape_into(bytes: &[u8], out: &mut Vec<u8>) {
    let mut from = 0;
    for at in memchr::memchr2_iter(b'"', b'\\', bytes) {
        out.extend_from_slice(&bytes[from..at]);
        out.push(b'\\');
        out.push(bytes[at]);
        from = at + 1;
    }
    out.extend_from_slice(&bytes[from..]);
}

/// Where the JSON text is written: the text, and, when asked for, the same text quoted as
/// a JSON string beside it. Every write says what it holds, so the quoted form needs no
/// search: syntax and numbers hold no `"` or `\`, plain strings none inside their quotes.
pub(super) struct Out {
    pub(super) json: Vec<u8>,
    pub(super) quoted: Option<Vec<u8>>,
}

impl Out {
    pub(super) fn new(capacity: usize, quoted: bool) -> Out {
        Out {
            json: Vec::with_capacity(capacity),
            quoted: quoted.then(|| {
                let mut q = Vec::with_capacity(capacity + capacity / 8 + 2);
                q.push(b'"');
                q
            }),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.json.len()
    }

    /// Bytes that hold no `"` or `\`.
    pub(super) fn plain(&mut self, bytes: &[u8]) {
        self.json.extend_from_slice(bytes);
        if let Some(quoted) = &mut self.quoted {
            quoted.extend_from_slice(bytes);
        }
    }

    /// One byte of syntax other than a quote.
    pub(super) fn byte(&mut self, byte: u8) {
        self.json.push(byte);
        if let Some(quoted) = &mut self.quoted {
            quoted.push(byte);
        }
    }

    /// A string's quote.
    pub(super) fn quote(&mut self) {
        self.json.push(b'"');
        if let Some(quoted) = &mut self.quoted {
            quoted.extend_from_slice(b"\\\"");
        }
    }

    /// Brings the quoted form up to date with what was written to `json` since `mark`
    /// by a writer that does not say what it writes (serde_json's).
    pub(super) fn catch_up(&mut self, mark: usize) {
        if let Some(quoted) = &mut self.quoted {
            escape_into(&self.json[mark..], quoted);
        }
    }

    pub(super) fn clear(&mut self) {
        self.json.clear();
        if let Some(quoted) = &mut self.quoted {
            quoted.truncate(1);
        }
    }

    pub(super) fn finish(self) -> (String, Option<Vec<u8>>) {
        let quoted = self.quoted.map(|mut quoted| {
            quoted.push(b'"');
            quoted
        });
        (into_string(self.json), quoted)
    }
}

/// A value this path leaves to the tree path.
#[derive(Debug)]
pub(super) struct Unsupported;

fn into_string(out: Vec<u8>) -> String {
    // Everything written is UTF-8: checked strings, serde_json's scalars, ASCII syntax.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

pub(super) fn is_char_boundary(text: &[u8], at: usize) -> bool {
    // Not a UTF-8 continuation byte (10xxxxxx).
    at >= text.len() || (text[at] as i8) >= -0x40
}

/// A scalar as serde_json writes the value [`value`](crate::protocol::value) maps it to.
pub(super) fn write_scalar(token: Token<'_>, out: &mut Out) -> Result<(), Unsupported> {
    let mark = out.len();
    let written = match token {
        Token::Nil => {
            out.plain(b"null");
            return Ok(());
        }
        Token::Bool(true) => {
            out.plain(b"true");
            return Ok(());
        }
        Token::Bool(false) => {
            out.plain(b"false");
            return Ok(());
        }
        Token::Str(bytes) => return write_msgpack_str(bytes, out),
        Token::UInt(n) => serde_json::to_writer(&mut out.json, &n),
        Token::Int(n) => serde_json::to_writer(&mut out.json, &n),
        Token::F32(f) => write_float(f64::from(f), &mut out.json)?,
        Token::F64(f) => write_float(f, &mut out.json)?,
        Token::Bin(_) | Token::Ext(..) | Token::Array(_) | Token::Map(_) => return Err(Unsupported),
    };
    written.map_err(|_| Unsupported)?;
    // A number holds no `"` or `\`: the quoted form takes it as it is.
    if let Some(quoted) = &mut out.quoted {
        quoted.extend_from_slice(&out.json[mark..]);
    }
    Ok(())
}

/// A finite float as serde_json writes it (whole ones within ±2^53 as integers, as
/// [`value`](crate::protocol::value) maps them); not finite is for the tree path.
pub(super) fn write_float(f: f64, out: &mut Vec<u8>) -> Result<serde_json::Result<()>, Unsupported> {
    if !f.is_finite() {
        return Err(Unsupported);
    }
    Ok(if f.fract() == 0.0 && f.abs() <= MAX_EXACT_FLOAT_INT {
        // Whole and within ±2^53: exact.
        serde_json::to_writer(&mut *out, &(f as i64))
    } else {
        serde_json::to_writer(&mut *out, &f)
    })
}

/// The JSON length of a scalar, computed as [`super`] computes it for a tree.
pub(super) fn scalar_len(token: Token<'_>) -> Result<usize, Unsupported> {
    Ok(match token {
        Token::Nil | Token::Bool(true) => 4,
        Token::Bool(false) => 5,
        Token::UInt(n) => super::digits(n),
        Token::Int(n) if n >= 0 => super::digits(n.unsigned_abs()),
        Token::Int(n) => 1 + super::digits(n.unsigned_abs()),
        Token::F32(_) | Token::F64(_) => {
            let mut text = Out::new(32, false);
            write_scalar(token, &mut text)?;
            text.len()
        }
        Token::Str(bytes) => string_len(std::str::from_utf8(bytes).map_err(|_| Unsupported)?),
        Token::Bin(_) | Token::Ext(..) | Token::Array(_) | Token::Map(_) => return Err(Unsupported),
    })
}

/// Bytes that a JSON string holds as they are and that are ASCII: printable, not `"`
/// or `\`.
static PLAIN_ASCII: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0x20;
    while byte < 0x7f {
        table[byte] = byte != b'"' as usize && byte != b'\\' as usize;
        byte += 1;
    }
    table
};

pub(super) fn write_str(text: &str, out: &mut Out) {
    // Most strings (names, paths, class names) need no escape: copied whole.
    if text.bytes().all(|byte| super::ESCAPE_EXTRA[usize::from(byte)] == 0) {
        out.quote();
        out.plain(text.as_bytes());
        out.quote();
    } else {
        let mark = out.len();
        // Writing to a Vec cannot fail.
        let _ = serde_json::to_writer(&mut out.json, text);
        out.catch_up(mark);
    }
}

/// A msgpack string as a JSON string; not UTF-8 is for the tree path.
fn write_msgpack_str(bytes: &[u8], out: &mut Out) -> Result<(), Unsupported> {
    // Plain ASCII (most names and paths) is UTF-8 and needs no escape: one look at each
    // byte instead of a UTF-8 check and then an escape check.
    if bytes.iter().all(|byte| PLAIN_ASCII[usize::from(*byte)]) {
        out.quote();
        out.plain(bytes);
        out.quote();
        return Ok(());
    }
    write_str(std::str::from_utf8(bytes).map_err(|_| Unsupported)?, out);
    Ok(())
}

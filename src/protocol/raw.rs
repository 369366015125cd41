//! Results kept as the msgpack bytes they arrived in.
//!
//! A plugin's `result` can be ten megabytes: a 100,000-instance `query`. Decoding it into
//! a tree of a million heap nodes, converting that into a second tree of JSON, freeing
//! both and serializing the second costs hundreds of milliseconds, most of it in the
//! allocator. So a frame's envelope (`t`, `id`, `ok`, `session`, …) is decoded, but its
//! `result` is only *validated* here (every marker and length checked, nesting bounded)
//! and handed on as a [`RawValue`]: a slice of the frame's own buffer. Whoever needs a
//! tree asks for one ([`RawValue::decode`]); the result path writes JSON straight from the
//! bytes (`commands::bound`).
//!
//! [`Reader`] is the one msgpack tokenizer for both: it reads one marker at a time
//! without allocating, and refuses lengths that run past the end of the buffer, so a
//! header claiming a 4 GiB array in a 10-byte frame is an error, not an allocation.

use bytes::Bytes;
use rmpv::Value as Msgpack;

use super::frame::{Fields, FrameError};

/// Deepest nesting of arrays and maps accepted in a raw value, as
/// [`super::frame::MAX_DEPTH`] allows a decoded one (rmpv counts two a level).
pub const MAX_LEVELS: usize = super::frame::MAX_DEPTH / 2 - 1;

/// One msgpack value, validated, as its encoded bytes, and how deep it nests (found by
/// the validation, so that whoever writes it out need not walk it again to know).
#[derive(Clone, PartialEq, Eq)]
pub struct RawValue {
    bytes: Bytes,
    levels: usize,
}

impl std::fmt::Debug for RawValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.decode() {
            Ok(value) => write!(f, "RawValue({value})"),
            Err(_) => write!(f, "RawValue({} bytes)", self.bytes.len()),
        }
    }
}

impl RawValue {
    /// Encodes a tree (a value made on this side: tests, a peer's own results).
    pub fn encode(value: &Msgpack) -> RawValue {
        let mut bytes = Vec::new();
        // Writing to a Vec cannot fail.
        let _ = rmpv::encode::write_value(&mut bytes, value);
        let levels = Reader::new(&bytes).skip_value().unwrap_or(0);
        RawValue {
            bytes: Bytes::from(bytes),
            levels,
        }
    }

    /// `nil`, for a response that carries no result.
    pub fn nil() -> RawValue {
        RawValue {
            bytes: Bytes::from_static(&[0xc0]),
            levels: 0,
        }
    }

    /// Takes `bytes` as one whole msgpack value after checking that it is exactly one.
    pub fn from_bytes(bytes: Bytes) -> Result<RawValue, FrameError> {
        let mut reader = Reader::new(&bytes);
        let levels = reader.skip_value()?;
        if reader.pos() != bytes.len() {
            return Err(FrameError::NotAMessage);
        }
        Ok(RawValue { bytes, levels })
    }

    /// The same value in an allocation of its own, exactly its size: what is kept for a
    /// while (a cut result's rest) holds no more than it counts. A frame's value is a slice
    /// of the frame, whose buffer may be up to twice the frame (the socket's decode buffer).
    pub fn detached(&self) -> RawValue {
        RawValue {
            bytes: Bytes::copy_from_slice(&self.bytes),
            levels: self.levels,
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// How many arrays and maps deep the value nests: 0 for a scalar, 1 for `[1]` or `[]`.
    pub fn levels(&self) -> usize {
        self.levels
    }

    /// The value as a tree, for the commands that read their result.
    pub fn decode(&self) -> Result<Msgpack, FrameError> {
        let mut reader = &self.bytes[..];
        Ok(rmpv::decode::read_value_with_max_depth(
            &mut reader,
            super::frame::MAX_DEPTH,
        )?)
    }
}

/// One msgpack marker and what it announces. Strings, binaries and extensions borrow
/// their bytes; arrays and maps give their entry count (their entries follow).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Token<'a> {
    Nil,
    Bool(bool),
    Int(i64),
    UInt(u64),
    F32(f32),
    F64(f64),
    Str(&'a [u8]),
    Bin(&'a [u8]),
    Ext(i8, &'a [u8]),
    Array(usize),
    Map(usize),
}

/// A cursor over msgpack bytes.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, pos: 0 }
    }

    pub fn at(bytes: &'a [u8], pos: usize) -> Reader<'a> {
        Reader { bytes, pos }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Moves to `pos` (a position this reader was at, or the end of a value it read).
    pub fn seek(&mut self, pos: usize) {
        self.pos = pos.min(self.bytes.len());
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], FrameError> {
        let end = self.pos.checked_add(n).ok_or(FrameError::Truncated)?;
        let slice = self.bytes.get(self.pos..end).ok_or(FrameError::Truncated)?;
        self.pos = end;
        Ok(slice)
    }

    fn be<const N: usize>(&mut self) -> Result<[u8; N], FrameError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn len8(&mut self) -> Result<usize, FrameError> {
        Ok(usize::from(self.be::<1>()?[0]))
    }

    fn len16(&mut self) -> Result<usize, FrameError> {
        Ok(usize::from(u16::from_be_bytes(self.be()?)))
    }

    fn len32(&mut self) -> Result<usize, FrameError> {
        usize::try_from(u32::from_be_bytes(self.be()?)).map_err(|_| FrameError::Truncated)
    }

    /// A container may not announce more entries than there are bytes left (each entry
    /// is at least one byte): the guard against headers that lie about their size.
    fn entries(&self, count: usize, per_entry: usize) -> Result<usize, FrameError> {
        let room = self.bytes.len() - self.pos;
        if count.saturating_mul(per_entry) > room {
            return Err(FrameError::Truncated);
        }
        Ok(count)
    }

    fn ext(&mut self, len: usize) -> Result<Token<'a>, FrameError> {
        let kind = i8::from_be_bytes(self.be()?);
        Ok(Token::Ext(kind, self.take(len)?))
    }

    /// Reads the next marker (and a string's, binary's or extension's bytes).
    pub fn next_token(&mut self) -> Result<Token<'a>, FrameError> {
        let marker = self.be::<1>()?[0];
        Ok(match marker {
            0x00..=0x7f => Token::UInt(u64::from(marker)),
            0x80..=0x8f => Token::Map(self.entries(usize::from(marker & 0x0f), 2)?),
            0x90..=0x9f => Token::Array(self.entries(usize::from(marker & 0x0f), 1)?),
            0xa0..=0xbf => Token::Str(self.take(usize::from(marker & 0x1f))?),
            0xc0 => Token::Nil,
            0xc2 => Token::Bool(false),
            0xc3 => Token::Bool(true),
            0xc4 => {
                let n = self.len8()?;
                Token::Bin(self.take(n)?)
            }
            0xc5 => {
                let n = self.len16()?;
                Token::Bin(self.take(n)?)
            }
            0xc6 => {
                let n = self.len32()?;
                Token::Bin(self.take(n)?)
            }
            0xc7 => {
                let n = self.len8()?;
                self.ext(n)?
            }
            0xc8 => {
                let n = self.len16()?;
                self.ext(n)?
            }
            0xc9 => {
                let n = self.len32()?;
                self.ext(n)?
            }
            0xca => Token::F32(f32::from_be_bytes(self.be()?)),
            0xcb => Token::F64(f64::from_be_bytes(self.be()?)),
            0xcc => Token::UInt(u64::from(self.be::<1>()?[0])),
            0xcd => Token::UInt(u64::from(u16::from_be_bytes(self.be()?))),
            0xce => Token::UInt(u64::from(u32::from_be_bytes(self.be()?))),
            0xcf => Token::UInt(u64::from_be_bytes(self.be()?)),
            0xd0 => Token::Int(i64::from(i8::from_be_bytes(self.be()?))),
            0xd1 => Token::Int(i64::from(i16::from_be_bytes(self.be()?))),
            0xd2 => Token::Int(i64::from(i32::from_be_bytes(self.be()?))),
            0xd3 => Token::Int(i64::from_be_bytes(self.be()?)),
            0xd4 => self.ext(1)?,
            0xd5 => self.ext(2)?,
            0xd6 => self.ext(4)?,
            0xd7 => self.ext(8)?,
            0xd8 => self.ext(16)?,
            0xd9 => {
                let n = self.len8()?;
                Token::Str(self.take(n)?)
            }
            0xda => {
                let n = self.len16()?;
                Token::Str(self.take(n)?)
            }
            0xdb => {
                let n = self.len32()?;
                Token::Str(self.take(n)?)
            }
            0xdc => {
                let n = self.len16()?;
                Token::Array(self.entries(n, 1)?)
            }
            0xdd => {
                let n = self.len32()?;
                Token::Array(self.entries(n, 1)?)
            }
            0xde => {
                let n = self.len16()?;
                Token::Map(self.entries(n, 2)?)
            }
            0xdf => {
                let n = self.len32()?;
                Token::Map(self.entries(n, 2)?)
            }
            0xe0..=0xff => Token::Int(i64::from(marker as i8)),
            0xc1 => return Err(FrameError::NotAMessage),
        })
    }

    /// Skips one whole value (nested at most [`MAX_LEVELS`] deep), checking it; returns
    /// how many arrays and maps deep it nests.
    pub fn skip_value(&mut self) -> Result<usize, FrameError> {
        // Entries still to skip at each open level, innermost last: iterative, so a
        // hostile nesting cannot exhaust the stack before the limit is reached.
        let mut open: Vec<usize> = Vec::new();
        let mut remaining = 1usize;
        let mut deepest = 0;
        loop {
            while remaining == 0 {
                match open.pop() {
                    Some(outer) => remaining = outer,
                    None => return Ok(deepest),
                }
            }
            remaining -= 1;
            let entries = match self.next_token()? {
                Token::Array(n) => n,
                Token::Map(n) => n * 2,
                _ => continue,
            };
            deepest = deepest.max(open.len() + 1);
            if entries > 0 {
                if open.len() >= MAX_LEVELS {
                    return Err(FrameError::TooDeep);
                }
                open.push(remaining);
                remaining = entries;
            }
        }
    }
}

/// The end of the one value that starts at `pos`, checked.
pub fn skip(bytes: &[u8], pos: usize) -> Result<usize, FrameError> {
    let mut reader = Reader::at(bytes, pos);
    reader.skip_value()?;
    Ok(reader.pos())
}

/// Splits a message (a msgpack map of at most `limit` bytes) into its fields, decoded,
/// and the one field `raw`, kept as bytes. The frame's own buffer is sliced, not copied.
pub(crate) fn split_message(frame: &Bytes, raw: &str, limit: usize) -> Result<(Fields, Option<RawValue>), FrameError> {
    if frame.len() > limit {
        return Err(FrameError::TooLarge {
            size: frame.len(),
            limit,
        });
    }
    let mut reader = Reader::new(frame);
    let Token::Map(count) = reader.next_token()? else {
        return Err(FrameError::NotAMessage);
    };
    let mut fields = Vec::with_capacity(count);
    let mut kept = None;
    for _ in 0..count {
        let key_start = reader.pos();
        let key = match reader.next_token()? {
            Token::Str(key) => Some(key),
            _ => None,
        };
        let start = reader.pos();
        let levels = reader.skip_value()?;
        let end = reader.pos();
        if key == Some(raw.as_bytes()) {
            kept = Some(RawValue {
                bytes: frame.slice(start..end),
                levels,
            });
            continue;
        }
        let mut slice = &frame[key_start..end];
        let key = rmpv::decode::read_value(&mut slice)?;
        let value = rmpv::decode::read_value_with_max_depth(&mut slice, super::frame::MAX_DEPTH)?;
        fields.push((key, value));
    }
    if reader.pos() != frame.len() {
        return Err(FrameError::NotAMessage);
    }
    Ok((Fields(fields), kept))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_of(value: &Msgpack) -> Bytes {
        Bytes::from(RawValue::encode(value).as_bytes().to_vec())
    }

    #[test]
    fn the_raw_field_is_a_slice_of_the_frame_and_the_rest_is_decoded() {
        let result = Msgpack::Map(vec![(
            "items".into(),
            Msgpack::Array(vec![1.into(), "two".into(), Msgpack::F64(3.5), Msgpack::Nil]),
        )]);
        let frame = bytes_of(&Msgpack::Map(vec![
            ("t".into(), "response".into()),
            ("id".into(), 7.into()),
            ("result".into(), result.clone()),
            ("ok".into(), true.into()),
        ]));
        let (fields, raw) = split_message(&frame, "result", frame.len()).unwrap();
        assert_eq!(
            Msgpack::Map(fields.0),
            Msgpack::Map(vec![
                ("t".into(), "response".into()),
                ("id".into(), 7.into()),
                ("ok".into(), true.into()),
            ])
        );
        assert_eq!(raw.unwrap().decode().unwrap(), result);
    }

    #[test]
    fn every_marker_is_skipped_to_the_end_of_its_value() {
        let value = Msgpack::Array(vec![
            Msgpack::Nil,
            true.into(),
            (-5).into(),
            (-200).into(),
            (-70_000).into(),
            (-5_000_000_000i64).into(),
            200.into(),
            70_000.into(),
            5_000_000_000u64.into(),
            u64::MAX.into(),
            Msgpack::F32(1.5),
            Msgpack::F64(-2.25),
            "x".repeat(40).into(),
            "y".repeat(300).into(),
            "z".repeat(70_000).into(),
            Msgpack::Binary(vec![1; 300]),
            Msgpack::Binary(vec![2; 70_000]),
            Msgpack::Ext(3, vec![1]),
            Msgpack::Ext(3, vec![1; 16]),
            Msgpack::Ext(-4, vec![1; 17]),
            Msgpack::Array((0..20).map(Msgpack::from).collect()),
            Msgpack::Array((0..70_000).map(Msgpack::from).collect()),
            Msgpack::Map((0..20).map(|i| (Msgpack::from(i), Msgpack::Nil)).collect()),
            Msgpack::Map((0..70_000).map(|i| (Msgpack::from(i), Msgpack::Nil)).collect()),
        ]);
        let bytes = bytes_of(&value);
        assert_eq!(skip(&bytes, 0).unwrap(), bytes.len());
        assert_eq!(RawValue::from_bytes(bytes).unwrap().decode().unwrap(), value);
    }

    #[test]
    fn lying_lengths_truncation_and_depth_are_errors_not_allocations() {
        // An array claiming 2^32-1 entries, a map claiming as many, a 4 GiB string.
        for bytes in [
            &[0xdd, 0xff, 0xff, 0xff, 0xff, 0x00][..],
            &[0xdf, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00],
            &[0xdb, 0xff, 0xff, 0xff, 0xff, b'a'],
            &[0x92, 0x01],
            &[0xc1],
            &[],
        ] {
            assert!(skip(bytes, 0).is_err(), "{bytes:?}");
        }
        let deep: Vec<u8> = std::iter::repeat_n(0x91, 100_000).chain([0xc0]).collect();
        assert!(matches!(skip(&deep, 0), Err(FrameError::TooDeep)));
        let fine: Vec<u8> = std::iter::repeat_n(0x91, MAX_LEVELS).chain([0xc0]).collect();
        let raw = RawValue::from_bytes(Bytes::from(fine)).unwrap();
        assert!(raw.decode().is_ok(), "what the skipper accepts, the decoder accepts");
    }

    #[test]
    fn trailing_bytes_after_a_message_are_refused() {
        let mut frame = bytes_of(&Msgpack::Map(vec![("t".into(), "bye".into())])).to_vec();
        frame.push(0xc0);
        let frame = Bytes::from(frame);
        assert!(split_message(&frame, "result", usize::MAX).is_err());
        assert!(matches!(
            split_message(&frame.slice(..frame.len() - 1), "result", 2),
            Err(FrameError::TooLarge { .. })
        ));
    }
}

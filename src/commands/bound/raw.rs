//! The bound applied while converting: a plugin's msgpack result written straight to
//! the JSON text the agent receives, cut as [`super::bound`] would cut it.
//!
//! The tree path (decode the msgpack into a tree, map it to a JSON tree, measure, cut,
//! serialize) spends most of its time allocating and freeing a million small nodes: about
//! 400 ms for a 10 MB `query` result, even when only 100 KB of it may be sent. Here the
//! result stays the bytes it came in ([`RawValue`]). A result within the bound is written
//! in one pass. One over it is measured in place (sizes computed, nothing built), the cuts
//! are decided on those measurements, and only what is kept is written: a 10 MB result
//! bounded to 100 KB is never built in full.
//!
//! The text is byte for byte what the tree path gives (scalars are written by serde_json
//! itself; a test compares the two on generated results), and so are the cuts: the same
//! walk order, the same choice of the largest array or map, the same string shortening.
//! What this path does not handle it hands back to the tree path: binary, extension and
//! non-finite values (written as `{"type", "value"}` objects), non-string or duplicate
//! keys and strings that are not UTF-8. Plugins send none of those in bulk.

use std::collections::HashMap;

use serde_json::Value as Json;

use super::json_out::{Out, Unsupported, is_char_boundary, quote_json_text, scalar_len, write_scalar, write_str};
use super::{MAP_MIN_ENTRIES, MARKER_ROOM, note, string_len};
use crate::protocol::raw::{RawValue, Reader, Token};
use crate::protocol::value;

/// What the command layer sets on the result's top-level object before it is bounded:
/// where the call ran, and the hint for a result the plugin cut itself.
#[derive(Clone)]
pub struct Top<'a> {
    /// Set in place when the plugin's object has the key, appended when it does not.
    pub set: Vec<(&'static str, String)>,
    /// Added as `truncatedHint` when the plugin's object says `truncated: true` and
    /// carries no hint of its own.
    pub plugin_hint: &'a str,
}

impl Top<'_> {
    /// The same additions on a JSON tree: the reference for this module, and the path a
    /// result this module does not handle takes.
    pub fn apply(&self, json: &mut Json) {
        let Json::Object(object) = json else { return };
        for (key, text) in &self.set {
            object.insert((*key).into(), Json::String(text.clone()));
        }
        if object.get("truncated") == Some(&Json::Bool(true)) && !object.contains_key("truncatedHint") {
            object.insert("truncatedHint".into(), Json::String(self.plugin_hint.into()));
        }
    }
}

/// The one-pass conversion, or `Unsupported` for what takes the tree path: a result
/// nested too deep is flattened on the tree (rare, and small: the plugin's encoder stops
/// at 200 levels), as are the kinds of value [`Doc`] does not write.
fn converted(
    raw: &RawValue,
    top: &Top<'_>,
    limit: usize,
    hint: &str,
) -> Result<(String, Option<Vec<u8>>), Unsupported> {
    if raw.levels() > super::MAX_RESULT_LEVELS {
        return Err(Unsupported);
    }
    Doc::new(raw.as_bytes(), top).and_then(|doc| doc.bounded(limit, hint, true))
}

/// The result as compact JSON text with `top` applied, bounded to `limit` bytes as
/// [`super::bound`] bounds a tree; and the same text as a JSON string, quotes included
/// (what a tool result's text block holds inside the JSON-RPC line), written in the same
/// pass: the writer knows where every quote it writes is, where a separate pass over the
/// text would have to search for them (every few bytes in a result of names and paths).
pub fn bound_raw_quoted(raw: &RawValue, top: &Top<'_>, limit: usize, hint: &str) -> (String, Vec<u8>) {
    match converted(raw, top, limit, hint) {
        Ok((text, Some(quoted))) => (text, quoted),
        Ok((text, None)) => {
            let quoted = quote_json_text(&text);
            (text, quoted)
        }
        Err(Unsupported) => {
            let text = tree_text(raw, top, limit, hint);
            let quoted = quote_json_text(&text);
            (text, quoted)
        }
    }
}

fn tree_text(raw: &RawValue, top: &Top<'_>, limit: usize, hint: &str) -> String {
    let mut json = raw.decode().map(value::into_json).unwrap_or(Json::Null);
    top.apply(&mut json);
    serde_json::to_string(&super::bound(json, limit, hint)).unwrap_or_default()
}

/// Why a write stopped early.
enum Stop {
    Unsupported,
    OverBudget,
}

impl From<Unsupported> for Stop {
    fn from(_: Unsupported) -> Stop {
        Stop::Unsupported
    }
}

/// A node is named by where it starts in the bytes; the strings added at the top level
/// by their index past the end.
type Id = usize;

/// The top-level object's id: its entries are [`Doc::top`], not the bytes at 0 (which,
/// when the result is not an object and gets wrapped, are the wrapped value).
const TOP: Id = usize::MAX;

/// A value of the top-level object: the plugin's, or one set on this side.
#[derive(Clone, Copy)]
enum Val {
    Raw(usize),
    Text(usize),
    True,
}

struct Doc<'a> {
    bytes: &'a [u8],
    /// The top-level object's entries when the result is a map, after [`Top`].
    top: Option<Vec<(&'a str, Val)>>,
    /// Strings set on this side (their ids are `bytes.len() + index`).
    texts: Vec<String>,
    /// Entries kept of the containers cut, by id.
    keep: HashMap<Id, usize>,
    /// Bytes kept of the strings shortened (each then ends in `…`), by id.
    shortened: HashMap<Id, usize>,
    /// Where the containers cut end, so that walks jump over what was cut instead of
    /// reading through it again.
    ends: HashMap<Id, usize>,
}

impl<'a> Doc<'a> {
    fn new(bytes: &'a [u8], top: &Top<'_>) -> Result<Doc<'a>, Unsupported> {
        let mut doc = Doc {
            bytes,
            top: None,
            texts: Vec::new(),
            keep: HashMap::new(),
            shortened: HashMap::new(),
            ends: HashMap::new(),
        };
        let mut reader = Reader::new(bytes);
        let Ok(Token::Map(count)) = reader.next_token() else {
            return Ok(doc);
        };
        let mut entries = Vec::with_capacity(count + top.set.len() + 1);
        let mut keys = Keys::new();
        for _ in 0..count {
            let key = key_text(reader.next_token().map_err(|_| Unsupported)?)?;
            keys.push(key.as_bytes())?;
            entries.push((key, Val::Raw(reader.pos())));
            reader.skip_value().map_err(|_| Unsupported)?;
        }
        keys.check()?;
        for (key, text) in &top.set {
            let val = doc.text(text.clone());
            doc_set(&mut entries, key, val);
        }
        let truncated = entries
            .iter()
            .any(|(key, val)| *key == "truncated" && matches!(val, Val::Raw(pos) if bytes.get(*pos) == Some(&0xc3)));
        if truncated && !entries.iter().any(|(key, _)| *key == "truncatedHint") {
            let val = doc.text(top.plugin_hint.to_owned());
            entries.push(("truncatedHint", val));
        }
        doc.top = Some(entries);
        Ok(doc)
    }

    fn text(&mut self, text: String) -> Val {
        self.texts.push(text);
        Val::Text(self.texts.len() - 1)
    }

    fn text_id(&self, index: usize) -> Id {
        self.bytes.len() + index
    }

    /// The whole document, or, over `limit`, cut as [`super::bound`] cuts.
    /// With `quoted`, also the text quoted as a JSON string (see [`Out`]).
    fn bounded(mut self, limit: usize, hint: &str, quoted: bool) -> Result<(String, Option<Vec<u8>>), Unsupported> {
        // The JSON text is about 4/3 of the msgpack it comes from (quotes, key names).
        let capacity = self.bytes.len().saturating_add(self.bytes.len() / 3);
        let mut out = Out::new(capacity.min(limit).saturating_add(64), quoted);
        match self.write_root(&mut out, limit) {
            Ok(()) => return Ok(out.finish()),
            Err(Stop::Unsupported) => return Err(Unsupported),
            Err(Stop::OverBudget) => {}
        }
        let mut survey = self.survey()?;
        let size = survey.size;
        let budget = limit.saturating_sub(MARKER_ROOM + hint.len());
        let mut excess = size.saturating_sub(budget);
        while excess > 0 {
            let Some(largest) = survey.largest.take() else { break };
            let removed = self.cut(&largest, excess);
            if removed == 0 {
                break;
            }
            excess = excess.saturating_sub(removed);
            if excess > 0 {
                survey = self.survey()?;
            }
        }
        while excess > 0 {
            let Some((id, len)) = self.longest_string()? else { break };
            let keep = len.saturating_sub(excess + 3);
            let text = self.string_bytes(id);
            let mut cut = keep.min(text.len());
            while cut > 0 && !is_char_boundary(text, cut) {
                cut -= 1;
            }
            let removed = len - cut;
            self.shortened.insert(id, cut);
            if removed <= 3 {
                break;
            }
            excess = excess.saturating_sub(removed - 3);
        }
        self.mark(size, hint);
        out.clear();
        match self.write_root(&mut out, usize::MAX) {
            Ok(()) => Ok(out.finish()),
            Err(_) => Err(Unsupported),
        }
    }

    /// Adds `truncated`/`truncatedHint` as [`super::mark`] does.
    fn mark(&mut self, size: usize, hint: &str) {
        let note = self.text(note(size, hint));
        match self.top.take() {
            Some(mut entries) => {
                if let Some(keep) = self.keep.remove(&TOP) {
                    entries.truncate(keep);
                }
                doc_set(&mut entries, "truncated", Val::True);
                doc_set(&mut entries, "truncatedHint", note);
                self.top = Some(entries);
            }
            None => {
                // Not an object: wrapped, as `{"value": …, "truncated": true, …}`.
                self.top = Some(vec![
                    ("value", Val::Raw(0)),
                    ("truncated", Val::True),
                    ("truncatedHint", note),
                ]);
            }
        }
    }
}

/// Sets `key` in place, or appends it.
fn doc_set<'a>(entries: &mut Vec<(&'a str, Val)>, key: &'a str, val: Val) {
    match entries.iter_mut().find(|(k, _)| *k == key) {
        Some(entry) => entry.1 = val,
        None => entries.push((key, val)),
    }
}

fn key_text(token: Token<'_>) -> Result<&str, Unsupported> {
    match token {
        Token::Str(bytes) => std::str::from_utf8(bytes).map_err(|_| Unsupported),
        _ => Err(Unsupported),
    }
}

/// The keys of one map, to check them unique: duplicate keys collapse into one in a JSON
/// object (the last value at the first key's place), which is left to the tree path.
/// Small maps (every result object) are checked without allocating.
struct Keys<'k> {
    small: [&'k [u8]; 16],
    len: usize,
    large: Vec<&'k [u8]>,
}

impl<'k> Keys<'k> {
    fn new() -> Keys<'k> {
        Keys {
            small: [&[]; 16],
            len: 0,
            large: Vec::new(),
        }
    }

    fn push(&mut self, key: &'k [u8]) -> Result<(), Unsupported> {
        if self.len < self.small.len() {
            if self.small[..self.len].contains(&key) {
                return Err(Unsupported);
            }
            self.small[self.len] = key;
        } else {
            self.large.push(key);
        }
        self.len += 1;
        Ok(())
    }

    fn check(mut self) -> Result<(), Unsupported> {
        if self.large.is_empty() {
            return Ok(());
        }
        self.large.extend_from_slice(&self.small);
        self.large.sort_unstable();
        if self.large.windows(2).any(|pair| pair[0] == pair[1]) {
            return Err(Unsupported);
        }
        Ok(())
    }
}

/// What one walk finds, as [`super::Survey`]: the size, and the first largest array
/// (more than one entry) or data map (more than [`MAP_MIN_ENTRIES`]).
struct Survey {
    size: usize,
    largest: Option<Largest>,
}

struct Largest {
    content: usize,
    id: Id,
    /// Where the container ends in the bytes.
    end: usize,
    entry_sizes: Vec<usize>,
}

struct Walk {
    sizes: Vec<usize>,
    largest: Option<Largest>,
}

impl Walk {
    fn offer(&mut self, id: Id, end: usize, start: usize, entries: usize, min_entries: usize, content: usize) {
        if entries > min_entries && self.largest.as_ref().is_none_or(|l| content > l.content) {
            self.largest = Some(Largest {
                content,
                id,
                end,
                entry_sizes: self.sizes[start..].to_vec(),
            });
        }
        self.sizes.truncate(start);
    }
}

impl Doc<'_> {
    fn survey(&self) -> Result<Survey, Unsupported> {
        let mut walk = Walk {
            sizes: Vec::new(),
            largest: None,
        };
        let size = match &self.top {
            Some(entries) => {
                let start = walk.sizes.len();
                let keep = self.kept(TOP, entries.len());
                let mut content = 0;
                for (key, val) in &entries[..keep] {
                    let size = string_len(key) + 1 + self.visit_val(*val, &mut walk)?;
                    content += size;
                    walk.sizes.push(size);
                }
                walk.offer(TOP, 0, start, keep, MAP_MIN_ENTRIES, content);
                2 + keep.saturating_sub(1) + content
            }
            None => self.visit(&mut Reader::new(self.bytes), &mut walk)?,
        };
        Ok(Survey {
            size,
            largest: walk.largest,
        })
    }

    fn kept(&self, id: Id, len: usize) -> usize {
        self.keep.get(&id).map_or(len, |&keep| keep.min(len))
    }

    fn visit_val(&self, val: Val, walk: &mut Walk) -> Result<usize, Unsupported> {
        match val {
            Val::Raw(pos) => self.visit(&mut Reader::at(self.bytes, pos), walk),
            Val::Text(index) => Ok(self.string_len_of(self.text_id(index))),
            Val::True => Ok(4),
        }
    }

    /// The size of the value at the reader (which it leaves past the value).
    fn visit(&self, reader: &mut Reader<'_>, walk: &mut Walk) -> Result<usize, Unsupported> {
        let id = reader.pos();
        let token = reader.next_token().map_err(|_| Unsupported)?;
        match token {
            Token::Array(len) => {
                let keep = self.kept(id, len);
                let start = walk.sizes.len();
                let mut content = 0;
                for _ in 0..keep {
                    let size = self.visit(reader, walk)?;
                    content += size;
                    walk.sizes.push(size);
                }
                self.skip_cut(reader, id, len - keep, 1).map_err(|_| Unsupported)?;
                walk.offer(id, reader.pos(), start, keep, 1, content);
                Ok(2 + keep.saturating_sub(1) + content)
            }
            Token::Map(len) => {
                let keep = self.kept(id, len);
                let start = walk.sizes.len();
                let mut content = 0;
                let mut keys = Keys::new();
                for _ in 0..keep {
                    let key = key_text(reader.next_token().map_err(|_| Unsupported)?)?;
                    keys.push(key.as_bytes())?;
                    let size = string_len(key) + 1 + self.visit(reader, walk)?;
                    content += size;
                    walk.sizes.push(size);
                }
                keys.check()?;
                self.skip_cut(reader, id, len - keep, 2).map_err(|_| Unsupported)?;
                walk.offer(id, reader.pos(), start, keep, MAP_MIN_ENTRIES, content);
                Ok(2 + keep.saturating_sub(1) + content)
            }
            Token::Str(bytes) if self.shortened.contains_key(&id) => {
                std::str::from_utf8(bytes).map_err(|_| Unsupported)?;
                Ok(self.string_len_of(id))
            }
            scalar => scalar_len(scalar),
        }
    }

    /// Cuts entries from the end of the container `largest` names, as
    /// [`super::cut_container`] does; returns the bytes removed.
    fn cut(&mut self, largest: &Largest, excess: usize) -> usize {
        let mut len = largest.entry_sizes.len();
        let mut removed = 0;
        while removed < excess && len > 1 {
            removed += largest.entry_sizes[len - 1] + 1;
            len -= 1;
        }
        self.keep.insert(largest.id, len);
        if largest.id != TOP {
            self.ends.insert(largest.id, largest.end);
        }
        removed
    }

    /// Moves the reader past the `entries` cut from the end of container `id` (each
    /// `values` values long): a jump when the walk that cut them saw where they end.
    fn skip_cut(&self, reader: &mut Reader<'_>, id: Id, entries: usize, values: usize) -> Result<(), Stop> {
        if entries == 0 {
            return Ok(());
        }
        if let Some(&end) = self.ends.get(&id) {
            reader.seek(end);
            return Ok(());
        }
        for _ in 0..entries * values {
            reader.skip_value().map_err(|_| Stop::Unsupported)?;
        }
        Ok(())
    }

    /// The bytes of string `id` as first sent (before any shortening).
    fn string_bytes(&self, id: Id) -> &[u8] {
        if id >= self.bytes.len() {
            return self.texts.get(id - self.bytes.len()).map_or(&[][..], |t| t.as_bytes());
        }
        match Reader::at(self.bytes, id).next_token() {
            Ok(Token::Str(bytes)) => bytes,
            _ => &[],
        }
    }

    /// String `id` as it stands: its kept bytes, and whether `…` follows them.
    fn string_now(&self, id: Id) -> (&str, bool) {
        let bytes = self.string_bytes(id);
        let (bytes, cut) = match self.shortened.get(&id) {
            Some(&keep) => (&bytes[..keep.min(bytes.len())], true),
            None => (bytes, false),
        };
        (std::str::from_utf8(bytes).unwrap_or(""), cut)
    }

    fn string_len_of(&self, id: Id) -> usize {
        let (text, cut) = self.string_now(id);
        string_len(text) + if cut { '…'.len_utf8() } else { 0 }
    }

    /// The first longest string value (by bytes, as it stands), in document order, as
    /// [`super::longest_string`] finds it.
    fn longest_string(&self) -> Result<Option<(Id, usize)>, Unsupported> {
        let mut best: Option<(Id, usize)> = None;
        let mut consider = |id: Id, doc: &Doc<'_>| {
            let (text, cut) = doc.string_now(id);
            let len = text.len() + if cut { '…'.len_utf8() } else { 0 };
            if best.is_none_or(|(_, b)| len > b) {
                best = Some((id, len));
            }
        };
        match &self.top {
            Some(entries) => {
                for (_, val) in &entries[..self.kept(TOP, entries.len())] {
                    match *val {
                        Val::Raw(pos) => {
                            self.each_string(&mut Reader::at(self.bytes, pos), &mut |id| consider(id, self))?
                        }
                        Val::Text(index) => consider(self.text_id(index), self),
                        Val::True => {}
                    }
                }
            }
            None => self.each_string(&mut Reader::new(self.bytes), &mut |id| consider(id, self))?,
        }
        Ok(best)
    }

    /// Calls `found` with every string value under the reader, in document order.
    fn each_string(&self, reader: &mut Reader<'_>, found: &mut dyn FnMut(Id)) -> Result<(), Unsupported> {
        let id = reader.pos();
        match reader.next_token().map_err(|_| Unsupported)? {
            Token::Array(len) => {
                let keep = self.kept(id, len);
                for _ in 0..keep {
                    self.each_string(reader, found)?;
                }
                self.skip_cut(reader, id, len - keep, 1).map_err(|_| Unsupported)?;
            }
            Token::Map(len) => {
                let keep = self.kept(id, len);
                for _ in 0..keep {
                    reader.skip_value().map_err(|_| Unsupported)?;
                    self.each_string(reader, found)?;
                }
                self.skip_cut(reader, id, len - keep, 2).map_err(|_| Unsupported)?;
            }
            Token::Str(_) => found(id),
            _ => {}
        }
        Ok(())
    }

    /// Writes the document (with its cuts) as compact JSON; stops once `out` holds more
    /// than `budget` bytes.
    fn write_root(&self, out: &mut Out, budget: usize) -> Result<(), Stop> {
        match &self.top {
            Some(entries) => {
                out.byte(b'{');
                for (i, (key, val)) in entries[..self.kept(TOP, entries.len())].iter().enumerate() {
                    if i > 0 {
                        out.byte(b',');
                    }
                    write_str(key, out);
                    out.byte(b':');
                    match *val {
                        Val::Raw(pos) => self.write(&mut Reader::at(self.bytes, pos), out, budget)?,
                        Val::Text(index) => self.write_string(self.text_id(index), out),
                        Val::True => out.plain(b"true"),
                    }
                    if out.len() > budget {
                        return Err(Stop::OverBudget);
                    }
                }
                out.byte(b'}');
            }
            None => self.write(&mut Reader::new(self.bytes), out, budget)?,
        }
        if out.len() > budget {
            return Err(Stop::OverBudget);
        }
        Ok(())
    }

    fn write(&self, reader: &mut Reader<'_>, out: &mut Out, budget: usize) -> Result<(), Stop> {
        let id = reader.pos();
        let token = reader.next_token().map_err(|_| Stop::Unsupported)?;
        match token {
            Token::Array(len) => {
                let keep = self.kept(id, len);
                out.byte(b'[');
                for i in 0..keep {
                    if i > 0 {
                        out.byte(b',');
                    }
                    self.write(reader, out, budget)?;
                    if out.len() > budget {
                        return Err(Stop::OverBudget);
                    }
                }
                out.byte(b']');
                self.skip_cut(reader, id, len - keep, 1)?;
            }
            Token::Map(len) => {
                let keep = self.kept(id, len);
                let mut keys = Keys::new();
                out.byte(b'{');
                for i in 0..keep {
                    if i > 0 {
                        out.byte(b',');
                    }
                    let key = key_text(reader.next_token().map_err(|_| Stop::Unsupported)?)?;
                    keys.push(key.as_bytes())?;
                    write_str(key, out);
                    out.byte(b':');
                    self.write(reader, out, budget)?;
                    if out.len() > budget {
                        return Err(Stop::OverBudget);
                    }
                }
                out.byte(b'}');
                keys.check()?;
                self.skip_cut(reader, id, len - keep, 2)?;
            }
            Token::Str(bytes) if self.shortened.contains_key(&id) => {
                std::str::from_utf8(bytes).map_err(|_| Stop::Unsupported)?;
                self.write_string(id, out);
            }
            scalar => write_scalar(scalar, out)?,
        }
        Ok(())
    }

    fn write_string(&self, id: Id, out: &mut Out) {
        let (text, cut) = self.string_now(id);
        if cut {
            write_str(&format!("{text}…"), out);
        } else {
            write_str(text, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmpv::Value as Msgpack;
    use serde_json::json;

    /// The reference: the tree path, as `invoke` ran it before this module.
    fn by_tree(value: &Msgpack, top: &Top<'_>, limit: usize, hint: &str) -> String {
        let mut json = value::to_json(value);
        top.apply(&mut json);
        serde_json::to_string(&super::super::bound(json, limit, hint)).unwrap()
    }

    /// This module's text, after checking that the form quoted in the same pass is the
    /// text as serde_json quotes it (the text block of a result).
    fn by_bytes(value: &Msgpack, top: &Top<'_>, limit: usize, hint: &str) -> String {
        let raw = RawValue::encode(value);
        let (text, quoted) = bound_raw_quoted(&raw, top, limit, hint);
        assert_eq!(
            String::from_utf8(quoted).unwrap(),
            serde_json::to_string(&text).unwrap(),
            "the quoted form"
        );
        text
    }

    fn top() -> Top<'static> {
        Top {
            set: vec![("sessionId", "S-1".into()), ("context", "edit".into())],
            plugin_hint: "Ask for less.",
        }
    }

    /// A small deterministic generator (xorshift), so that a failure names its seed.
    struct Gen(u64);

    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }

        fn string(&mut self) -> String {
            const PIECES: &[&str] = &["a", "Part", " ", "\"", "\\", "\n", "\u{1}", "é", "漢", "🎮", "…", "x"];
            let len = match self.below(10) {
                0 => self.below(3000),
                _ => self.below(12),
            };
            (0..len)
                .map(|_| PIECES[self.below(PIECES.len() as u64) as usize])
                .collect()
        }

        fn value(&mut self, depth: u32) -> Msgpack {
            let pick = if depth >= 4 { self.below(7) } else { self.below(10) };
            match pick {
                0 => Msgpack::Nil,
                1 => Msgpack::Boolean(self.below(2) == 0),
                2 => Msgpack::from(self.next() as i64 >> self.below(64)),
                3 => Msgpack::from(self.next() >> self.below(64)),
                4 => Msgpack::F64([0.5, -2.25, 1e300, 3.0, 1e-7, 9_007_199_254_740_993.0][self.below(6) as usize]),
                5 => Msgpack::F32(1.5),
                6 => Msgpack::from(self.string()),
                7 | 8 => {
                    let len = if self.below(4) == 0 {
                        self.below(60)
                    } else {
                        self.below(4)
                    };
                    Msgpack::Array((0..len).map(|_| self.value(depth + 1)).collect())
                }
                _ => {
                    let len = if self.below(4) == 0 {
                        self.below(40)
                    } else {
                        self.below(6)
                    };
                    let mut keys: Vec<String> = (0..len).map(|i| format!("k{i}{}", self.string())).collect();
                    keys.dedup();
                    Msgpack::Map(
                        keys.into_iter()
                            .map(|key| (Msgpack::from(key), self.value(depth + 1)))
                            .collect(),
                    )
                }
            }
        }
    }

    #[test]
    fn generated_results_come_out_as_the_tree_path_writes_them_bounded_or_not() {
        for seed in 1..=200u64 {
            let mut generator = Gen(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let value = match generator.below(3) {
                0 => generator.value(0),
                _ => Msgpack::Map(vec![
                    ("success".into(), true.into()),
                    ("truncated".into(), Msgpack::Boolean(generator.below(2) == 0)),
                    ("returns".into(), generator.value(0)),
                    ("logs".into(), generator.value(1)),
                ]),
            };
            let whole = by_tree(&value, &top(), usize::MAX, "h");
            assert_eq!(by_bytes(&value, &top(), usize::MAX, "h"), whole, "seed {seed}");
            for limit in [whole.len() / 2, whole.len() / 5, 600, 100] {
                assert_eq!(
                    by_bytes(&value, &top(), limit, "Read less."),
                    by_tree(&value, &top(), limit, "Read less."),
                    "seed {seed}, limit {limit}"
                );
            }
        }
    }

    #[test]
    fn the_query_shape_is_cut_as_the_tree_path_cuts_it() {
        let part = |m: usize, p: usize| {
            Msgpack::Map(vec![
                ("name".into(), format!("Part{p}").into()),
                ("className".into(), "Part".into()),
                ("path".into(), format!("game.Workspace.Model{m}.Part{p}").into()),
                (
                    "properties".into(),
                    Msgpack::Map(vec![("Anchored".into(), (!p.is_multiple_of(3)).into())]),
                ),
                ("tags".into(), Msgpack::Array(vec![])),
                ("childCount".into(), 0.into()),
            ])
        };
        let models = (0..20)
            .map(|m| {
                Msgpack::Map(vec![
                    ("name".into(), format!("Model{m}").into()),
                    (
                        "children".into(),
                        Msgpack::Array((0..200).map(|p| part(m, p)).collect()),
                    ),
                ])
            })
            .collect();
        let value = Msgpack::Map(vec![(
            "instance".into(),
            Msgpack::Map(vec![("children".into(), Msgpack::Array(models))]),
        )]);
        for limit in [usize::MAX, 100_000, 10_000, 1000] {
            let text = by_bytes(&value, &top(), limit, "Query less.");
            assert_eq!(text, by_tree(&value, &top(), limit, "Query less."), "limit {limit}");
            if limit < usize::MAX {
                assert!(text.len() <= limit, "{} over {limit}", text.len());
            }
        }
    }

    #[test]
    fn what_this_path_does_not_handle_takes_the_tree_path_and_ends_the_same() {
        let mut cases: Vec<RawValue> = [
            Msgpack::Map(vec![("a".into(), Msgpack::Binary(vec![1, 2, 3]))]),
            Msgpack::Map(vec![("a".into(), Msgpack::Ext(5, vec![1]))]),
            Msgpack::Map(vec![("a".into(), Msgpack::F64(f64::NAN))]),
            Msgpack::Map(vec![(1.into(), "one".into())]),
            Msgpack::Map(vec![("a".into(), 1.into()), ("a".into(), 2.into())]),
            Msgpack::Map(vec![
                ("sessionId".into(), "the plugin's".into()),
                ("x".into(), 1.into()),
            ]),
        ]
        .iter()
        .map(RawValue::encode)
        .collect();
        // A string that is not UTF-8 (Luau strings are bytes).
        cases.push(RawValue::from_bytes(bytes::Bytes::from_static(&[0x81, 0xa1, b's', 0xa2, 0xff, 0xfe])).unwrap());
        for raw in cases {
            let value = raw.decode().unwrap();
            for limit in [usize::MAX, 40] {
                let (text, quoted) = bound_raw_quoted(&raw, &top(), limit, "h");
                assert_eq!(text, by_tree(&value, &top(), limit, "h"), "{value}");
                assert_eq!(quoted, serde_json::to_vec(&text).unwrap());
            }
        }
        let text = by_bytes(
            &Msgpack::Map(vec![("truncated".into(), true.into())]),
            &top(),
            4096,
            "h",
        );
        assert_eq!(
            serde_json::from_str::<Json>(&text).unwrap(),
            json!({"truncated": true, "sessionId": "S-1", "context": "edit", "truncatedHint": "Ask for less."})
        );
    }
}

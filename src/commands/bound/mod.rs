//! Bounded output (TOOLS.md): no result larger than the limit reaches an agent's
//! context. A result over the limit is cut at whole entries of its largest arrays and
//! maps (and, failing that, its longest strings), and says so with `truncated: true` and
//! a hint on how to get the rest. Nothing is cut silently.
//!
//! A map counts as data, to be cut, when it has more than [`MAP_MIN_ENTRIES`] entries
//! (a Luau table returned by `exec`, a property map); smaller objects are the result's
//! own shape (`{seq, level, body}`), whose fields a client's schema requires, so those
//! keep every field and only their strings are shortened.
//!
//! A result is also bounded in depth: arrays and maps nested deeper than
//! [`MAX_RESULT_LEVELS`] are replaced by a string saying so, and the result is marked
//! `truncated`. A Studio table may nest 200 levels (the plugin's encoder stops there),
//! but serde_json, which Rust MCP clients parse with, refuses JSON nested deeper than 128:
//! such a client would drop the whole answer and wait for one forever.

use serde_json::{Map, Value as Json};

mod json_out;
mod raw;
mod rest;
pub use json_out::quote_json_text;
pub use raw::{Top, bound_raw_quoted};
pub use rest::{Page, rest_pages};

/// Deepest nesting of arrays and maps in a result an agent receives: the JSON-RPC line
/// wraps it in a few more levels, and strict parsers stop at 128.
pub const MAX_RESULT_LEVELS: usize = 100;

/// Room kept for the `truncated`/`truncatedHint` fields added after cutting.
const MARKER_ROOM: usize = 512;

/// Objects with more entries than this are data (cut at whole entries); every result
/// type's own objects have fewer fields.
const MAP_MIN_ENTRIES: usize = 16;

pub fn bound(value: Json, limit: usize, hint: &str) -> Json {
    bound_keeping_whole(value, limit, hint).0
}

/// [`bound`], and the whole value when it had to be cut (for [`rest_pages`]); a value
/// within the bound is not copied.
pub fn bound_keeping_whole(mut value: Json, limit: usize, hint: &str) -> (Json, Option<Json>) {
    let deep = has_deeper_than(&value, MAX_RESULT_LEVELS);
    let whole = deep.then(|| value.clone());
    let flattened = cut_deep(&mut value, MAX_RESULT_LEVELS);
    let mut survey = Survey::of(&value);
    let size = survey.size;
    if size <= limit {
        return if flattened > 0 {
            (mark_with(value, deep_note(flattened)), whole)
        } else {
            (value, None)
        };
    }
    let whole = whole.or_else(|| Some(value.clone()));
    let budget = limit.saturating_sub(MARKER_ROOM + hint.len());
    let mut excess = size.saturating_sub(budget);
    let mut cut_off = Vec::new();
    // Cut the largest arrays first, at whole entries, from the end.
    while excess > 0 {
        let Some(largest) = survey.largest.take() else { break };
        let Some(container) = container_at(&mut value, &largest.path) else {
            break;
        };
        let removed = cut_container(container, &largest.entry_sizes, excess, &mut cut_off);
        if removed == 0 {
            break;
        }
        excess = excess.saturating_sub(removed);
        if excess > 0 {
            survey = Survey::of(&value);
        }
    }
    drop_later(cut_off, size.saturating_sub(budget).saturating_sub(excess));
    let hint = &if flattened > 0 {
        format!("{hint} {}", deep_note(flattened))
    } else {
        hint.to_owned()
    };
    // What is left is one long string (an exec return, a log line): shorten it.
    while excess > 0 {
        let Some(text) = longest_string(&mut value) else { break };
        let keep = text.len().saturating_sub(excess + 3);
        let mut cut = keep;
        while cut > 0 && !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let removed = text.len() - cut;
        text.truncate(cut);
        text.push('…');
        if removed <= 3 {
            break;
        }
        excess = excess.saturating_sub(removed - 3);
    }
    (mark(value, size, hint), whole)
}

/// Whether `value` nests arrays or maps deeper than `max` levels.
fn has_deeper_than(value: &Json, max: usize) -> bool {
    fn visit(value: &Json, level: usize, max: usize) -> bool {
        match value {
            Json::Array(_) | Json::Object(_) if level > max => true,
            Json::Array(items) => items.iter().any(|child| visit(child, level + 1, max)),
            Json::Object(map) => map.values().any(|child| visit(child, level + 1, max)),
            _ => false,
        }
    }
    visit(value, 1, max)
}

/// The start of the note a result the bound cut carries as its `truncatedHint`, as it
/// appears in the result's compact JSON text.
const CUT_NOTE: &str = "\"truncatedHint\":\"The full result was ";

/// Whether a result's JSON text (written by [`bound_raw_quoted`]) is one the bound cut
/// for size, as opposed to one within the bound (a plugin may have cut it itself).
pub fn was_cut(text: &str) -> bool {
    memchr::memmem::rfind(text.as_bytes(), CUT_NOTE.as_bytes()).is_some()
}

/// What a cut result says about itself in `truncatedHint`.
fn note(size: usize, hint: &str) -> String {
    // The limit here is the JSON's share of the result bound (see `commands::invoke`), not
    // the `--max-result-kib` a user set, so the note names only the full size.
    format!("The full result was {size} bytes of JSON, over the result bound, and was cut. {hint}")
}

fn mark(value: Json, size: usize, hint: &str) -> Json {
    mark_with(value, note(size, hint))
}

/// What a result with parts nested too deep says about itself.
fn deep_note(count: usize) -> String {
    format!(
        "{count} part(s) nested deeper than {MAX_RESULT_LEVELS} levels were replaced by a string (many clients cannot read JSON nested deeper than 128). Return a flatter table."
    )
}

/// Replaces every array or map deeper than `max` levels with a string; returns how many.
fn cut_deep(value: &mut Json, max: usize) -> usize {
    /// `value` is at `level` (the top is 1).
    fn visit(value: &mut Json, level: usize, max: usize) -> usize {
        if level > max && matches!(value, Json::Array(_) | Json::Object(_)) {
            *value = Json::String(format!("<table nested deeper than {max} levels>"));
            return 1;
        }
        match value {
            Json::Array(items) => items.iter_mut().map(|child| visit(child, level + 1, max)).sum(),
            Json::Object(map) => map.values_mut().map(|child| visit(child, level + 1, max)).sum(),
            _ => 0,
        }
    }
    visit(value, 1, max)
}

fn mark_with(value: Json, note: String) -> Json {
    match value {
        Json::Object(mut object) => {
            object.insert("truncated".into(), Json::Bool(true));
            object.insert("truncatedHint".into(), Json::String(note));
            Json::Object(object)
        }
        other => {
            let mut object = Map::new();
            object.insert("value".into(), other);
            object.insert("truncated".into(), Json::Bool(true));
            object.insert("truncatedHint".into(), Json::String(note));
            Json::Object(object)
        }
    }
}

/// What one walk over a value finds: its size as compact JSON (computed, not
/// serialized) and its largest array. A result of megabytes is a tree of a million
/// heap nodes; walking it is bound by memory, so it is walked once, not once to size
/// it, once to find its largest array and once more to size what is cut.
struct Survey {
    size: usize,
    largest: Option<Largest>,
}

/// The array with more than one entry, or the map with more than [`MAP_MIN_ENTRIES`],
/// whose entries add up to the most bytes (the first such in document order), found by
/// the path of child positions that leads to it, with its entries' sizes (a map entry's
/// with its key).
struct Largest {
    content: usize,
    path: Vec<usize>,
    entry_sizes: Vec<usize>,
}

impl Survey {
    fn of(value: &Json) -> Survey {
        let mut walk = Walk {
            path: Vec::new(),
            sizes: Vec::new(),
            largest: None,
        };
        let size = walk.visit(value);
        Survey {
            size,
            largest: walk.largest,
        }
    }
}

struct Walk {
    path: Vec<usize>,
    /// Entry sizes of the arrays being walked, innermost last.
    sizes: Vec<usize>,
    largest: Option<Largest>,
}

impl Walk {
    fn visit(&mut self, value: &Json) -> usize {
        match value {
            Json::Null => 4,
            Json::Bool(true) => 4,
            Json::Bool(false) => 5,
            Json::Number(number) => number_len(number),
            Json::String(text) => string_len(text),
            Json::Array(items) => {
                let start = self.sizes.len();
                let mut content = 0;
                for (i, item) in items.iter().enumerate() {
                    self.path.push(i);
                    let size = self.visit(item);
                    self.path.pop();
                    content += size;
                    self.sizes.push(size);
                }
                // Arrays nested in this one are smaller than it, so visiting them
                // first cannot change which array is the first largest.
                if items.len() > 1 && self.largest.as_ref().is_none_or(|l| content > l.content) {
                    self.largest = Some(Largest {
                        content,
                        path: self.path.clone(),
                        entry_sizes: self.sizes[start..].to_vec(),
                    });
                }
                self.sizes.truncate(start);
                2 + items.len().saturating_sub(1) + content
            }
            Json::Object(object) => {
                let start = self.sizes.len();
                let mut content = 0;
                for (i, (key, item)) in object.iter().enumerate() {
                    self.path.push(i);
                    let size = string_len(key) + 1 + self.visit(item);
                    self.path.pop();
                    content += size;
                    self.sizes.push(size);
                }
                if object.len() > MAP_MIN_ENTRIES && self.largest.as_ref().is_none_or(|l| content > l.content) {
                    self.largest = Some(Largest {
                        content,
                        path: self.path.clone(),
                        entry_sizes: self.sizes[start..].to_vec(),
                    });
                }
                self.sizes.truncate(start);
                2 + object.len().saturating_sub(1) + content
            }
        }
    }
}

fn number_len(number: &serde_json::Number) -> usize {
    if let Some(n) = number.as_u64() {
        digits(n)
    } else if let Some(n) = number.as_i64() {
        1 + digits(n.unsigned_abs())
    } else {
        // A float: as serde_json writes it (shortest round trip), counted, not kept.
        struct Counter(usize);
        impl std::io::Write for Counter {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0 += buf.len();
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut counter = Counter(0);
        let _ = serde_json::to_writer(&mut counter, number);
        counter.0
    }
}

fn digits(mut n: u64) -> usize {
    let mut count = 1;
    while n >= 10 {
        n /= 10;
        count += 1;
    }
    count
}

/// A JSON string's length with its quotes and escapes, as serde_json writes it: `"`,
/// `\\` and the short control escapes (`\n`, …) take two bytes, other control
/// characters six (`\u001f`); everything else is written as it is.
fn string_len(text: &str) -> usize {
    let mut extra = 0;
    for &byte in text.as_bytes() {
        extra += usize::from(ESCAPE_EXTRA[usize::from(byte)]);
    }
    text.len() + 2 + extra
}

/// The bytes an escape adds, by byte value (the table serde_json escapes by).
static ESCAPE_EXTRA: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = 5;
        byte += 1;
    }
    table[0x08] = 1;
    table[b'\t' as usize] = 1;
    table[b'\n' as usize] = 1;
    table[0x0c] = 1;
    table[b'\r' as usize] = 1;
    table[b'"' as usize] = 1;
    table[b'\\' as usize] = 1;
    table
};

/// The value at `path` (child positions: array indices, object entries in order).
fn container_at<'a>(value: &'a mut Json, path: &[usize]) -> Option<&'a mut Json> {
    let mut here = value;
    for &step in path {
        here = match here {
            Json::Array(items) => items.get_mut(step)?,
            Json::Object(object) => object.values_mut().nth(step)?,
            _ => return None,
        };
    }
    Some(here)
}

#[cfg(test)]
fn array_at<'a>(value: &'a mut Json, path: &[usize]) -> Option<&'a mut Vec<Json>> {
    match container_at(value, path)? {
        Json::Array(items) => Some(items),
        _ => None,
    }
}

/// Freeing a large cut-off part (up to a million small allocations) is left to a
/// blocking thread, so that the answer does not wait for it.
fn drop_later(cut_off: Vec<Json>, bytes: usize) {
    const WORTH_A_THREAD: usize = 1 << 20;
    if bytes >= WORTH_A_THREAD
        && let Ok(runtime) = tokio::runtime::Handle::try_current()
    {
        runtime.spawn_blocking(move || drop(cut_off));
    }
}

/// Removes entries from the end of an array or map (whose entries' sizes are
/// `entry_sizes`) until at least `excess` bytes are gone, or one entry is left: a lone
/// entry is better shortened than dropped. Returns the bytes removed; the entries go to
/// `cut_off`.
fn cut_container(container: &mut Json, entry_sizes: &[usize], excess: usize, cut_off: &mut Vec<Json>) -> usize {
    let mut removed = 0;
    loop {
        let len = match container {
            Json::Array(items) => items.len(),
            Json::Object(object) => object.len(),
            _ => return removed,
        };
        if removed >= excess || len <= 1 {
            return removed;
        }
        let Some(size) = entry_sizes.get(len - 1) else {
            return removed;
        };
        let entry = match container {
            Json::Array(items) => items.pop(),
            Json::Object(object) => {
                // The last key: with `preserve_order`, removing it keeps the others' order.
                let last = object.keys().next_back().cloned();
                last.and_then(|key| object.remove(&key))
            }
            _ => None,
        };
        match entry {
            Some(entry) => {
                removed += size + 1;
                cut_off.push(entry);
            }
            None => return removed,
        }
    }
}

fn longest_string(value: &mut Json) -> Option<&mut String> {
    fn visit<'a>(value: &'a mut Json, best: &mut Option<&'a mut String>) {
        match value {
            Json::String(text) if best.as_ref().is_none_or(|b| text.len() > b.len()) => *best = Some(text),
            Json::Array(items) => items.iter_mut().for_each(|i| visit(i, best)),
            Json::Object(object) => object.values_mut().for_each(|i| visit(i, best)),
            _ => {}
        }
    }
    let mut best = None;
    visit(value, &mut best);
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn json_len(value: &Json) -> usize {
        Survey::of(value).size
    }

    /// The largest array as it was found before the survey: a walk from the top that
    /// takes the first array larger than any before it and does not look inside it.
    fn reference_largest(value: &mut Json) -> Option<&mut Vec<Json>> {
        fn visit<'a>(value: &'a mut Json, best: &mut Option<(usize, &'a mut Vec<Json>)>) {
            match value {
                Json::Array(items) => {
                    let size = items
                        .iter()
                        .map(|i| serde_json::to_vec(i).unwrap().len())
                        .sum::<usize>();
                    if items.len() > 1 && best.as_ref().is_none_or(|(s, _)| size > *s) {
                        *best = Some((size, items));
                    } else {
                        for item in items.iter_mut() {
                            visit(item, best);
                        }
                    }
                }
                Json::Object(object) => {
                    for item in object.values_mut() {
                        visit(item, best);
                    }
                }
                _ => {}
            }
        }
        let mut best = None;
        visit(value, &mut best);
        best.map(|(_, array)| array)
    }

    #[test]
    fn the_survey_finds_the_array_the_old_walk_found() {
        let cases = vec![
            json!({"a": [1, 2], "b": [3, 4], "c": [[5, 6, 7]]}),
            json!({"a": [[1, 2, 3], [4]], "b": [10, 20, 30, 40, 50]}),
            json!([[1, 2, 3, 4, 5, 6], [7]]),
            json!({"x": [{"y": ["long string", "another one"]}], "z": ["ab", "cd"]}),
            json!({"one": ["only"], "deep": {"deeper": [[1], [2], [3]]}}),
            json!({"none": 1, "empty": [], "single": [[1, 2, 3]]}),
            json!({"tie1": [1, 2], "tie2": [3, 4]}),
        ];
        for mut value in cases {
            let survey = Survey::of(&value);
            let text = value.to_string();
            let expected = reference_largest(&mut value).map(|a| a as *const Vec<Json>);
            let found = survey
                .largest
                .and_then(|l| array_at(&mut value, &l.path).map(|a| a as *const Vec<Json>));
            assert_eq!(found, expected, "{text}");
        }
    }

    #[test]
    fn json_len_is_the_serialized_length() {
        let cases = vec![
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(9),
            json!(10),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(-1),
            json!(-10),
            json!(0.1),
            json!(1e300),
            json!(-2.5e-8),
            json!(123456.789),
            json!(""),
            json!("plain"),
            json!("quote \" backslash \\ slash / tab \t nl \n cr \r bs \u{8} ff \u{c} nul \u{0} us \u{1f} del \u{7f}"),
            json!("é ü 漢字 🎮 \u{2028}"),
            json!([]),
            json!({}),
            json!([1, [2, [3, []]], {"a": {"b": null}}]),
            json!({"k\"ey": "v", "\n": [true, false], "": {}}),
        ];
        for value in cases {
            assert_eq!(json_len(&value), serde_json::to_vec(&value).unwrap().len(), "{value}");
        }
    }

    /// `{"returns": [[[…[1]…]]]}` with `levels` arrays, and a shallow sibling.
    fn deep_result(levels: usize) -> Json {
        let mut value = json!(1);
        for _ in 0..levels {
            value = json!([value]);
        }
        json!({"returns": value, "logs": ["kept"]})
    }

    fn levels_of(value: &Json) -> usize {
        match value {
            Json::Array(items) => 1 + items.iter().map(levels_of).max().unwrap_or(0),
            Json::Object(map) => 1 + map.values().map(levels_of).max().unwrap_or(0),
            _ => 0,
        }
    }

    #[test]
    fn a_result_nested_too_deep_is_flattened_below_what_strict_parsers_refuse_and_marked() {
        let deep = deep_result(150);
        // What a Rust client would get without the bound: a line serde_json refuses.
        let envelope =
            |result: &Json| format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"structuredContent":{result}}}}}"#);
        assert!(serde_json::from_str::<Json>(&envelope(&deep)).is_err());

        let bounded = bound(deep, 1 << 20, "hint");
        assert_eq!(levels_of(&bounded), MAX_RESULT_LEVELS);
        assert!(serde_json::from_str::<Json>(&envelope(&bounded)).is_ok());
        assert_eq!(bounded["truncated"], true);
        let note = bounded["truncatedHint"].as_str().unwrap();
        assert!(note.contains("1 part(s) nested deeper than 100 levels"), "{note}");
        assert_eq!(bounded["logs"], json!(["kept"]), "what is shallow is untouched");
        // The deepest array kept holds the marker where the rest was.
        let mut inner = &bounded["returns"];
        while let Some(first) = inner.get(0) {
            inner = first;
        }
        assert_eq!(inner, &json!("<table nested deeper than 100 levels>"));

        // Exactly at the bound nothing changes.
        let at_bound = deep_result(MAX_RESULT_LEVELS - 1);
        assert_eq!(bound(at_bound.clone(), 1 << 20, "hint"), at_bound);
    }

    #[test]
    fn a_deep_raw_result_is_flattened_as_the_tree_is() {
        let deep = deep_result(150);
        let raw = crate::protocol::raw::RawValue::encode(&crate::protocol::value::from_json(&deep));
        assert_eq!(raw.levels(), 151);
        let top = Top {
            set: Vec::new(),
            plugin_hint: "",
        };
        let (text, quoted) = bound_raw_quoted(&raw, &top, 1 << 20, "hint");
        assert_eq!(
            serde_json::from_str::<Json>(&text).unwrap(),
            bound(deep, 1 << 20, "hint")
        );
        // Its quoted form (the text block) is that text as serde_json quotes it.
        assert_eq!(quoted, serde_json::to_string(&text).unwrap().into_bytes());
    }

    #[test]
    fn small_results_pass_untouched() {
        let value = json!({"entries": [1, 2, 3]});
        assert_eq!(bound(value.clone(), 1024, "hint"), value);
    }

    #[test]
    fn large_arrays_are_cut_at_whole_entries_and_marked() {
        let entries: Vec<Json> = (0..10_000).map(|i| json!({"seq": i, "body": "x".repeat(50)})).collect();
        let value = json!({"entries": entries, "total": 10_000});
        let cut = bound(value, 64 * 1024, "Pass since to read on.");
        assert!(json_len(&cut) <= 64 * 1024, "{}", json_len(&cut));
        assert_eq!(cut["truncated"], json!(true));
        assert!(cut["truncatedHint"].as_str().unwrap().contains("Pass since"));
        let kept = cut["entries"].as_array().unwrap();
        assert!(kept.len() > 100 && kept.len() < 10_000);
        // Whole entries, in order, from the start.
        for (i, entry) in kept.iter().enumerate() {
            assert_eq!(entry["seq"], json!(i));
        }
        assert_eq!(cut["total"], json!(10_000));
    }

    #[test]
    fn large_maps_are_cut_at_whole_entries_too() {
        // An exec returning a 400,000-key table: one array entry holding one huge map.
        let table: serde_json::Map<String, Json> = (0..400_000).map(|i| (format!("k{i}"), json!(i))).collect();
        let value = json!({"success": true, "returns": [table], "logs": []});
        let cut = bound(value, 64 * 1024, "Return less.");
        assert!(json_len(&cut) <= 64 * 1024, "{}", json_len(&cut));
        assert_eq!(cut["truncated"], json!(true));
        let kept = cut["returns"][0].as_object().unwrap();
        assert!(kept.len() > 1000 && kept.len() < 400_000, "{}", kept.len());
        // Whole entries, in order, from the start.
        for (i, (key, entry)) in kept.iter().enumerate() {
            assert_eq!((key.as_str(), entry), (format!("k{i}").as_str(), &json!(i)));
        }
        assert_eq!(cut["success"], json!(true));
    }

    #[test]
    fn a_result_objects_own_fields_are_kept_and_its_long_string_shortened() {
        let value = json!({"entries": [{"seq": 1, "level": "Print", "body": "x".repeat(200_000), "timestamp": 5}]});
        let cut = bound(value, 16 * 1024, "Read less.");
        assert!(json_len(&cut) <= 16 * 1024, "{}", json_len(&cut));
        let entry = &cut["entries"][0];
        for field in ["seq", "level", "body", "timestamp"] {
            assert!(entry.get(field).is_some(), "{field} was cut: {entry}");
        }
    }

    #[test]
    fn one_huge_string_is_shortened() {
        let value = json!({"success": true, "returns": ["é".repeat(400_000)]});
        let cut = bound(value, 32 * 1024, "Return less.");
        assert!(json_len(&cut) <= 32 * 1024, "{}", json_len(&cut));
        assert_eq!(cut["truncated"], json!(true));
        assert!(cut["returns"][0].as_str().unwrap().ends_with('…'));
    }
}

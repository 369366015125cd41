//! Bounded output (TOOLS.md): no result larger than the limit reaches an agent's
//! context. A result over the limit is cut at whole entries of its largest arrays (and,
//! failing that, its longest strings), and says so with `truncated: true` and a hint on
//! how to get the rest. Nothing is cut silently.

use serde_json::{Map, Value as Json};

/// Room kept for the `truncated`/`truncatedHint` fields added after cutting.
const MARKER_ROOM: usize = 512;

pub fn bound(mut value: Json, limit: usize, hint: &str) -> Json {
    let size = json_len(&value);
    if size <= limit {
        return value;
    }
    let budget = limit.saturating_sub(MARKER_ROOM + hint.len());
    let mut excess = size.saturating_sub(budget);
    // Cut the largest arrays first, at whole entries, from the end.
    while excess > 0 {
        let Some(array) = largest_array(&mut value) else { break };
        let removed = cut_array(array, excess);
        if removed == 0 {
            break;
        }
        excess = excess.saturating_sub(removed);
    }
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
    mark(value, size, limit, hint)
}

fn mark(value: Json, size: usize, limit: usize, hint: &str) -> Json {
    let note = format!("The full result was {size} bytes, over the {limit}-byte limit, and was cut. {hint}");
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

fn json_len(value: &Json) -> usize {
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
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// Removes entries from the end of `array` until at least `excess` bytes are gone (or
/// one entry is left: a lone entry is better shortened than dropped). Returns the bytes
/// removed.
fn cut_array(array: &mut Vec<Json>, excess: usize) -> usize {
    let mut removed = 0;
    while removed < excess && array.len() > 1 {
        match array.pop() {
            Some(entry) => removed += json_len(&entry) + 1,
            None => break,
        }
    }
    removed
}

fn largest_array(value: &mut Json) -> Option<&mut Vec<Json>> {
    fn visit<'a>(value: &'a mut Json, best: &mut Option<(usize, &'a mut Vec<Json>)>) {
        match value {
            Json::Array(items) => {
                let size = items.iter().map(json_len).sum::<usize>();
                if items.len() > 1 && best.as_ref().is_none_or(|(s, _)| size > *s) {
                    // Arrays nested in this one are never larger than it.
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
    fn one_huge_string_is_shortened() {
        let value = json!({"success": true, "returns": ["é".repeat(400_000)]});
        let cut = bound(value, 32 * 1024, "Return less.");
        assert!(json_len(&cut) <= 32 * 1024, "{}", json_len(&cut));
        assert_eq!(cut["truncated"], json!(true));
        assert!(cut["returns"][0].as_str().unwrap().ends_with('…'));
    }
}

//! What the bound cut, as pages: the rest of a truncated result, for an agent to fetch
//! (the MCP resource `studio://results/{id}?page=N`).
//!
//! The bound decides its cuts on sizes alone (largest arrays and maps first, at whole
//! entries, then the longest strings, then anything nested too deep), and writes only
//! what it keeps. Rather than teach both of its paths (`raw.rs` and the tree) to also
//! write what they drop, the rest is found afterwards by comparing the whole result with
//! what was kept: an array that kept its first k entries lost the entries from k on; a
//! map lost the keys it no longer has; a string ending in `…` lost the text after its
//! kept prefix; anything else that differs (a table flattened for depth) lost its whole
//! value. Each such part is then split into pages of at most `page_bytes` of JSON, each
//! page JSON of the part's own shape (a slice of the array, some of the map's entries, a
//! piece of the string), in document order, so that the kept result and the pages
//! together are the whole result.

use serde_json::{Map, Value as Json};

/// One part of a result the bound cut, where it was and what it lost.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The JSON pointer (RFC 6901) of the array, map or string the page continues.
    pub pointer: String,
    /// For an array: the index of the page's first entry. For a string: the byte offset
    /// of the page's first character. For a map or a whole value: 0.
    pub from: usize,
    /// The page's JSON: a slice of the array, entries of the map, a piece of the string,
    /// or the whole value that was replaced.
    pub json: String,
}

/// The pages holding what `whole` has and `kept` does not, each at most `page_bytes` of
/// JSON (a single entry larger than that is a page of its own).
pub fn rest_pages(whole: &Json, kept: &Json, page_bytes: usize) -> Vec<Page> {
    let mut cuts = Vec::new();
    // A result that was not an object is kept wrapped: `{value, truncated, truncatedHint}`.
    let kept = match (whole, kept) {
        (Json::Object(_), _) => kept,
        (_, Json::Object(object)) if object.contains_key("truncated") => object.get("value").unwrap_or(&Json::Null),
        _ => kept,
    };
    diff(whole, kept, &mut String::new(), &mut cuts);
    let mut pages = Vec::new();
    for cut in cuts {
        cut.paginate(page_bytes.max(1), &mut pages);
    }
    pages
}

/// One place where the kept result differs from the whole.
enum Cut<'a> {
    Entries {
        pointer: String,
        from: usize,
        items: &'a [Json],
    },
    Fields {
        pointer: String,
        entries: Vec<(&'a String, &'a Json)>,
    },
    Text {
        pointer: String,
        from: usize,
        text: &'a str,
    },
    Whole {
        pointer: String,
        value: &'a Json,
    },
}

fn diff<'a>(whole: &'a Json, kept: &Json, pointer: &mut String, cuts: &mut Vec<Cut<'a>>) {
    match (whole, kept) {
        (Json::Array(items), Json::Array(kept_items)) if kept_items.len() <= items.len() => {
            for (i, (item, kept_item)) in items.iter().zip(kept_items).enumerate() {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(itoa::Buffer::new().format(i));
                diff(item, kept_item, pointer, cuts);
                pointer.truncate(len);
            }
            if kept_items.len() < items.len() {
                cuts.push(Cut::Entries {
                    pointer: pointer.clone(),
                    from: kept_items.len(),
                    items: &items[kept_items.len()..],
                });
            }
        }
        (Json::Object(fields), Json::Object(kept_fields)) => {
            let mut missing = Vec::new();
            for (key, value) in fields {
                // The result's own marker is the bound's to set: not a cut.
                if pointer.is_empty() && matches!(key.as_str(), "truncated" | "truncatedHint") {
                    continue;
                }
                match kept_fields.get(key) {
                    Some(kept_value) => {
                        let len = pointer.len();
                        pointer.push('/');
                        pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
                        diff(value, kept_value, pointer, cuts);
                        pointer.truncate(len);
                    }
                    None => missing.push((key, value)),
                }
            }
            if !missing.is_empty() {
                cuts.push(Cut::Fields {
                    pointer: pointer.clone(),
                    entries: missing,
                });
            }
        }
        (Json::String(text), Json::String(kept_text)) if text != kept_text => {
            match kept_text.strip_suffix('…').filter(|prefix| text.starts_with(prefix)) {
                Some(prefix) => cuts.push(Cut::Text {
                    pointer: pointer.clone(),
                    from: prefix.len(),
                    text: &text[prefix.len()..],
                }),
                None => cuts.push(Cut::Whole {
                    pointer: pointer.clone(),
                    value: whole,
                }),
            }
        }
        (whole, kept) if whole == kept => {}
        (whole, _) => cuts.push(Cut::Whole {
            pointer: pointer.clone(),
            value: whole,
        }),
    }
}

impl Cut<'_> {
    fn paginate(self, page_bytes: usize, pages: &mut Vec<Page>) {
        match self {
            Cut::Entries { pointer, from, items } => {
                let mut start = 0;
                while start < items.len() {
                    // `[` and `]`, and a comma between entries.
                    let mut size = 2;
                    let mut end = start;
                    while end < items.len() {
                        let entry = json_len(&items[end]) + usize::from(end > start);
                        if end > start && size + entry > page_bytes {
                            break;
                        }
                        size += entry;
                        end += 1;
                    }
                    pages.push(Page {
                        pointer: pointer.clone(),
                        from: from + start,
                        json: serde_json::to_string(&items[start..end]).unwrap_or_default(),
                    });
                    start = end;
                }
            }
            Cut::Fields { pointer, entries } => {
                let mut page = Map::new();
                let mut size = 2;
                for (key, value) in entries {
                    let entry = json_len(&Json::String(key.clone())) + 1 + json_len(value) + 1;
                    if !page.is_empty() && size + entry > page_bytes {
                        pages.push(Page {
                            pointer: pointer.clone(),
                            from: 0,
                            json: Json::Object(std::mem::take(&mut page)).to_string(),
                        });
                        size = 2;
                    }
                    size += entry;
                    page.insert(key.clone(), value.clone());
                }
                if !page.is_empty() {
                    pages.push(Page {
                        pointer,
                        from: 0,
                        json: Json::Object(page).to_string(),
                    });
                }
            }
            Cut::Text { pointer, from, text } => {
                // A page's string, escaped, stays within the page: count escaped bytes.
                let mut start = 0;
                while start < text.len() {
                    let mut size = 2;
                    let mut end = start;
                    for (offset, c) in text[start..].char_indices() {
                        let mut buffer = [0u8; 4];
                        let encoded = json_len(&Json::String(c.encode_utf8(&mut buffer).to_owned())) - 2;
                        if offset > 0 && size + encoded > page_bytes {
                            break;
                        }
                        size += encoded;
                        end = start + offset + c.len_utf8();
                    }
                    pages.push(Page {
                        pointer: pointer.clone(),
                        from: from + start,
                        json: Json::String(text[start..end].to_owned()).to_string(),
                    });
                    start = end;
                }
            }
            Cut::Whole { pointer, value } => pages.push(Page {
                pointer,
                from: 0,
                json: value.to_string(),
            }),
        }
    }
}

/// The length of `value` as compact JSON.
fn json_len(value: &Json) -> usize {
    serde_json::to_vec(value).map_or(0, |bytes| bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `kept` with every page put back where it came from: must be `whole` again.
    fn reassemble(kept: &Json, pages: &[Page]) -> Json {
        let mut value = kept.clone();
        if let Json::Object(object) = &mut value {
            object.remove("truncated");
            object.remove("truncatedHint");
        }
        for page in pages {
            let part: Json = serde_json::from_str(&page.json).unwrap();
            let target = if page.pointer.is_empty() {
                &mut value
            } else {
                value
                    .pointer_mut(&page.pointer)
                    .expect("the page's pointer exists in the kept result")
            };
            match (target, part) {
                (Json::Array(items), Json::Array(more)) => {
                    assert_eq!(items.len(), page.from, "pages come in order");
                    items.extend(more);
                }
                (Json::Object(fields), Json::Object(more)) => fields.extend(more),
                (Json::String(text), Json::String(more)) => {
                    if text.ends_with('…') && text.len() - '…'.len_utf8() == page.from {
                        text.truncate(page.from);
                    }
                    assert_eq!(text.len(), page.from, "pages come in order");
                    text.push_str(&more);
                }
                (target, part) => *target = part,
            }
        }
        value
    }

    #[test]
    fn a_cut_array_continues_in_pages_whose_union_is_the_whole() {
        let items: Vec<Json> = (0..500)
            .map(|i| json!({"path": format!("game.Workspace.Part{i}"), "className": "Part"}))
            .collect();
        let whole = json!({"matches": items, "total": 500, "truncated": false});
        let kept = super::super::bound(whole.clone(), 4000, "Narrow it.");
        assert_eq!(kept["truncated"], true);
        let pages = rest_pages(&whole, &kept, 4000);
        assert!(pages.len() > 3, "{} pages", pages.len());
        for page in &pages {
            assert_eq!(page.pointer, "/matches");
            assert!(page.json.len() <= 4000, "{}", page.json.len());
            assert!(serde_json::from_str::<Json>(&page.json).unwrap().is_array());
        }
        // The plugin's own `truncated: false` is the bound's marker to set, not a cut.
        let mut expected = whole.clone();
        expected.as_object_mut().unwrap().remove("truncated");
        assert_eq!(reassemble(&kept, &pages), expected);
    }

    #[test]
    fn cut_maps_strings_and_a_bare_value_come_back_too() {
        let map: Map<String, Json> = (0..200).map(|i| (format!("key{i}"), json!(i))).collect();
        let whole = json!({"returns": [Json::Object(map)], "logs": []});
        let kept = super::super::bound(whole.clone(), 1500, "");
        let pages = rest_pages(&whole, &kept, 1500);
        assert!(!pages.is_empty());
        assert_eq!(reassemble(&kept, &pages), whole);

        let long = "é".repeat(20_000);
        let whole = json!({"source": long});
        let kept = super::super::bound(whole.clone(), 2000, "");
        let pages = rest_pages(&whole, &kept, 2000);
        assert!(pages.len() > 10);
        assert!(pages.iter().all(|p| p.json.len() <= 2000));
        assert_eq!(reassemble(&kept, &pages), whole);

        let whole = json!(["x".repeat(5000), "y".repeat(5000)]);
        let kept = super::super::bound(whole.clone(), 3000, "");
        let pages = rest_pages(&whole, &kept, 3000);
        assert_eq!(
            reassemble(&kept["value"], &pages),
            whole,
            "a bare value is kept wrapped"
        );
    }

    #[test]
    fn nothing_cut_is_no_page() {
        let whole = json!({"a": [1, 2, 3]});
        assert!(rest_pages(&whole, &whole, 100).is_empty());
    }
}

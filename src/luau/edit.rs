//! `script_edit`'s edits applied on the host, exactly as the plugin applies them
//! (plugin/src/Actions/ScriptEdit.luau, plugin/src/ScriptSource.luau), so the syntax gate
//! can check the new source, with the new source's line numbers, before anything is sent.
//! The same messages, the same line rules, the same hash.
//!
//! Not wired yet: `script_edit` still sends `edits` and `find` to the plugin (see
//! docs/protocol.md, The Luau syntax gate).

/// Lines startLine..endLine (1-based, inclusive) become `text`; endLine = startLine - 1
/// inserts before startLine; an empty `text` deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineEdit<'a> {
    pub start_line: usize,
    pub end_line: usize,
    pub text: &'a str,
}

/// Lines as the editor shows them: split on "\n"; a trailing newline ends the last line
/// and does not start another; the empty source has 0 lines ("\n" is one empty line). A
/// "\r" before "\n" stays part of its line.
pub fn lines(source: &str) -> Vec<&str> {
    if source.is_empty() {
        return Vec::new();
    }
    let mut lines: Vec<&str> = source.split('\n').collect();
    if source.ends_with('\n') {
        lines.pop();
    }
    lines
}

/// The plugin's opaque hash: 32-bit FNV-1a over the bytes, then the byte length,
/// `"<8 hex digits>-<length>"`.
pub fn hash(source: &str) -> String {
    let mut h: u32 = 2_166_136_261;
    for byte in source.bytes() {
        h ^= u32::from(byte);
        h = h.wrapping_mul(16_777_619);
    }
    format!("{h:08x}-{}", source.len())
}

fn describe(index: usize, edit: &LineEdit) -> String {
    if edit.end_line + 1 == edit.start_line {
        return format!("edits[{index}] (insert before line {})", edit.start_line);
    }
    format!("edits[{index}] (lines {}..{})", edit.start_line, edit.end_line)
}

/// `source` with the line edits applied, all against the source as read; an edit past the
/// end or two that overlap is an `invalid_args` message (edits numbered from 1, as the
/// plugin numbers them).
pub fn apply_edits(source: &str, edits: &[LineEdit]) -> Result<String, String> {
    let old = lines(source);
    let line_count = old.len();
    for (i, edit) in edits.iter().enumerate() {
        if edit.start_line > line_count + 1 || edit.end_line > line_count {
            return Err(format!(
                "{} is past the end: lineCount is {line_count}. Replace lines within 1..{line_count}, or insert at the end with startLine = {}, endLine = {line_count}.",
                describe(i + 1, edit),
                line_count + 1
            ));
        }
    }
    let mut sorted: Vec<(usize, &LineEdit)> = edits.iter().enumerate().map(|(i, e)| (i + 1, e)).collect();
    sorted.sort_by_key(|(index, e)| (e.start_line, e.end_line, *index));
    for pair in sorted.windows(2) {
        let ((ia, a), (ib, b)) = (pair[0], pair[1]);
        if b.start_line <= a.end_line {
            return Err(format!(
                "{} overlaps {}: edits apply to the source as read and must not overlap. Merge them into one edit.",
                describe(ib, b),
                describe(ia, a)
            ));
        }
    }
    let mut out: Vec<&str> = Vec::with_capacity(line_count);
    let mut cursor = 1;
    for (_, edit) in &sorted {
        for n in cursor..edit.start_line {
            out.push(old[n - 1]);
        }
        out.extend(lines(edit.text));
        cursor = edit.end_line + 1;
    }
    for n in cursor..=line_count {
        out.push(old[n - 1]);
    }
    if out.is_empty() {
        return Ok(String::new());
    }
    // Keep the source's own ending: a trailing newline stays (and a new script gets one).
    let trailing = source.is_empty() || source.ends_with('\n');
    let mut joined = out.join("\n");
    if trailing {
        joined.push('\n');
    }
    Ok(joined)
}

/// `source` with exactly `count` plain occurrences of `find` replaced (all of them); any
/// other number is an `invalid_args` message naming how many there are.
pub fn apply_find(source: &str, find: &str, replace: &str, count: usize) -> Result<String, String> {
    if find.is_empty() {
        return Err("find is empty: pass the exact text to replace".into());
    }
    let found = source.matches(find).count();
    if found != count {
        let advice = if found == 0 {
            "Read the script with script_read and copy the text exactly (find is plain text, not a pattern).".to_owned()
        } else {
            format!("Pass count = {found} to replace them all, or make find longer so that it is unique.")
        };
        return Err(format!(
            "find occurs {found} time{}, not {count} (count): nothing was written. {advice}",
            if found == 1 { "" } else { "s" }
        ));
    }
    Ok(source.replace(find, replace))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(start_line: usize, end_line: usize, text: &str) -> LineEdit<'_> {
        LineEdit {
            start_line,
            end_line,
            text,
        }
    }

    #[test]
    fn lines_count_as_the_editor_does() {
        assert_eq!(lines(""), Vec::<&str>::new());
        assert_eq!(lines("\n"), [""]);
        assert_eq!(lines("a"), ["a"]);
        assert_eq!(lines("a\n"), ["a"]);
        assert_eq!(lines("a\n\n"), ["a", ""]);
        assert_eq!(lines("a\r\nb"), ["a\r", "b"]);
    }

    #[test]
    fn the_hash_is_the_plugins() {
        // FNV-1a 32 of "" is its offset basis; of "a", 0xe40c292c.
        assert_eq!(hash(""), "811c9dc5-0");
        assert_eq!(hash("a"), "e40c292c-1");
        assert_eq!(hash("é"), "1e9de8c1-2", "bytes, not characters");
    }

    #[test]
    fn edits_apply_to_the_source_as_read() {
        let source = "local count = 0\nlocal step = 1\nreturn count\n";
        // The real-plugin test's edit: a line on top, line 2 replaced; numbers do not shift.
        let out = apply_edits(source, &[edit(1, 0, "--!strict"), edit(2, 2, "local step = 2")]).unwrap();
        assert_eq!(out, "--!strict\nlocal count = 0\nlocal step = 2\nreturn count\n");
        // Order of the edits in the call does not matter.
        let out = apply_edits(source, &[edit(2, 2, "local step = 2"), edit(1, 0, "--!strict")]).unwrap();
        assert_eq!(out, "--!strict\nlocal count = 0\nlocal step = 2\nreturn count\n");
        // Delete, multi-line text, insert at the end.
        assert_eq!(
            apply_edits(source, &[edit(2, 2, "")]).unwrap(),
            "local count = 0\nreturn count\n"
        );
        assert_eq!(
            apply_edits(source, &[edit(2, 2, "local a = 1\nlocal b = 2\n")]).unwrap(),
            "local count = 0\nlocal a = 1\nlocal b = 2\nreturn count\n"
        );
        assert_eq!(
            apply_edits(source, &[edit(4, 3, "print(count)")]).unwrap(),
            "local count = 0\nlocal step = 1\nreturn count\nprint(count)\n"
        );
        // Everything deleted is the empty source; no trailing newline stays absent.
        assert_eq!(apply_edits(source, &[edit(1, 3, "")]).unwrap(), "");
        assert_eq!(apply_edits("a\nb", &[edit(2, 2, "c")]).unwrap(), "a\nc");
        // A new (empty) script gets a trailing newline.
        assert_eq!(apply_edits("", &[edit(1, 0, "print(1)")]).unwrap(), "print(1)\n");
    }

    #[test]
    fn edits_past_the_end_or_overlapping_are_refused_as_the_plugin_words_it() {
        let source = "a\nb\nc\n";
        let past = apply_edits(source, &[edit(1, 1, "x"), edit(4, 4, "y")]).unwrap_err();
        assert_eq!(
            past,
            "edits[2] (lines 4..4) is past the end: lineCount is 3. Replace lines within 1..3, or insert at the end with startLine = 4, endLine = 3."
        );
        let overlap = apply_edits(source, &[edit(1, 2, "x"), edit(2, 3, "y")]).unwrap_err();
        assert_eq!(
            overlap,
            "edits[2] (lines 2..3) overlaps edits[1] (lines 1..2): edits apply to the source as read and must not overlap. Merge them into one edit."
        );
        let inserts = apply_edits(source, &[edit(2, 1, "x"), edit(2, 1, "y")]);
        assert!(inserts.is_ok(), "two inserts at one place do not overlap: {inserts:?}");
    }

    #[test]
    fn find_replaces_exactly_count_plain_occurrences() {
        let source = "local count = 0\nreturn count\n";
        assert_eq!(
            apply_find(source, "count", "total", 2).unwrap(),
            "local total = 0\nreturn total\n"
        );
        assert_eq!(
            apply_find(source, "count", "n", 1).unwrap_err(),
            "find occurs 2 times, not 1 (count): nothing was written. Pass count = 2 to replace them all, or make find longer so that it is unique."
        );
        assert!(
            apply_find(source, "a.b", "x", 1)
                .unwrap_err()
                .starts_with("find occurs 0 times")
        );
        assert_eq!(
            apply_find("x%y", "%", "", 1).unwrap(),
            "xy",
            "plain text, not a pattern"
        );
    }
}

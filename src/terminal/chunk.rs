//! Whether a Luau chunk is unfinished, so the terminal asks for another line instead of
//! reporting an error, as the Lua REPL does.
//!
//! Decided from the plugin's own parse error, not by a local scan: Studio's Luau parser is
//! the authority on what is complete, and a local scan of blocks, strings and brackets
//! gets comments, long brackets, `end` as a table key, string escapes and interpolated
//! strings wrong in ways that either hang the prompt or run half a function. The cost is
//! one round trip per continued line, which a person typing does not notice.

use serde_json::Value as Json;

/// Whether the `exec` result `value` of `chunk` means "read another line onto it": the chunk
/// failed to compile (`stage: "compile"`) with an error that says it ended too early. A
/// runtime error never continues, whatever its message says (`error("... got <eof>")` ran,
/// and running it again with more lines would run its side effects again); nor does a
/// result without `stage` (a plugin too old to say), which is reported as it is.
pub fn continues(value: &Json, chunk: &str) -> bool {
    value.get("success").and_then(Json::as_bool) == Some(false)
        && value.get("stage").and_then(Json::as_str) == Some("compile")
        && value
            .get("error")
            .and_then(Json::as_str)
            .is_some_and(|error| is_incomplete(error, chunk))
}

/// Whether `error` (an `exec` result's `error`) says that `chunk` ended too early.
///
/// Luau says `Expected 'end' (to close 'function' at line 1), got <eof>` for an open block
/// or bracket and `Expected identifier when parsing expression, got <eof>` for a dangling
/// operator. An unfinished string is `Malformed string`: that continues only when a long
/// bracket (`[[`, `[=[`) is open, since a quoted string cannot span lines anyway.
pub fn is_incomplete(error: &str, chunk: &str) -> bool {
    let message = error.trim_end();
    if message.ends_with("got <eof>") || message.ends_with("got '<eof>'") {
        return true;
    }
    (message.contains("Malformed string") || message.contains("Unfinished long")) && opens_long_bracket(chunk)
}

/// Whether `chunk` holds a long bracket opener (`[[`, `[=[`, `[==[`, …).
fn opens_long_bracket(chunk: &str) -> bool {
    let bytes = chunk.as_bytes();
    bytes.iter().enumerate().any(|(i, &b)| {
        if b != b'[' {
            return false;
        }
        let mut j = i + 1;
        while bytes.get(j) == Some(&b'=') {
            j += 1;
        }
        bytes.get(j) == Some(&b'[')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn luau_eof_errors_continue() {
        for error in [
            "exec:1: Expected 'end' (to close 'function' at column 1), got <eof>",
            "[string \"exec\"]:2: Expected ')' (to close '(' at column 7), got <eof>",
            "exec:1: Expected identifier when parsing expression, got <eof>",
        ] {
            assert!(is_incomplete(error, "function f()"), "{error}");
        }
    }

    #[test]
    fn other_errors_are_reported() {
        assert!(!is_incomplete("exec:1: Expected <eof>, got 'end'", "end"));
        assert!(!is_incomplete(
            "exec:2: Incomplete statement: expected assignment or a function call",
            "x"
        ));
        assert!(!is_incomplete("exec:1: attempt to index nil with 'x'", "return t.x"));
    }

    fn failed(stage: Option<&str>, error: &str) -> Json {
        let mut value = serde_json::json!({"success": false, "error": error, "returns": [], "logs": []});
        if let Some(stage) = stage {
            value["stage"] = stage.into();
        }
        value
    }

    #[test]
    fn only_a_compile_error_at_eof_continues() {
        let open = "[string \"exec\"]:1: Expected 'end' (to close 'function' at line 1), got <eof>";
        assert!(continues(&failed(Some("compile"), open), "function f()"));
        // The same text raised at run time is an error to report, not a chunk to extend.
        assert!(!continues(&failed(Some("run"), open), "error(\"...\")"));
        assert!(!continues(
            &failed(Some("run"), "[string \"exec\"]:1: unexpected symbol near '<eof>'"),
            "error(\"...\")"
        ));
        assert!(!continues(
            &failed(Some("run"), "[string \"exec\"]:1: unexpected <eof>"),
            "error(\"unexpected <eof>\")"
        ));
        // A plugin that does not say the stage: reported, never guessed from the message.
        assert!(!continues(&failed(None, open), "function f()"));
        // A compile error that is not about the end of the chunk is reported.
        assert!(!continues(
            &failed(Some("compile"), "[string \"exec\"]:1: Expected <eof>, got 'end'"),
            "end"
        ));
        // A success never continues, whatever it carries.
        let ok = serde_json::json!({"success": true, "returns": [open], "logs": [], "stage": "compile"});
        assert!(!continues(&ok, "return 1"));
    }

    #[test]
    fn an_unfinished_string_continues_only_inside_long_brackets() {
        let error = "exec:1: Malformed string; did you forget to finish it?";
        assert!(is_incomplete(error, "x = [[abc"));
        assert!(is_incomplete(error, "x = [==[abc"));
        assert!(!is_incomplete(error, "x = 'abc"));
        assert!(!is_incomplete(error, "t[ [1] ] = 'a"));
    }
}

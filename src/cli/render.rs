//! Human-readable output: the result JSON as indented `key: value` lines.

use std::fmt::Write as _;

use serde_json::Value as Json;

pub fn human(value: &Json) -> String {
    let mut out = String::new();
    write_value(&mut out, value, 0);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

fn write_value(out: &mut String, value: &Json, indent: usize) {
    match value {
        Json::Object(object) if !object.is_empty() => {
            for (key, item) in object {
                let _ = write!(out, "{:indent$}{key}:", "");
                write_nested(out, item, indent);
            }
        }
        Json::Array(items) if !items.is_empty() => {
            for item in items {
                let _ = write!(out, "{:indent$}-", "");
                write_nested(out, item, indent);
            }
        }
        other => {
            let _ = writeln!(out, "{:indent$}{}", "", scalar(other));
        }
    }
}

fn write_nested(out: &mut String, item: &Json, indent: usize) {
    match item {
        Json::Object(o) if !o.is_empty() => {
            out.push('\n');
            write_value(out, item, indent + 2);
        }
        Json::Array(a) if !a.is_empty() => {
            out.push('\n');
            write_value(out, item, indent + 2);
        }
        other => {
            let _ = writeln!(out, " {}", scalar(other));
        }
    }
}

fn scalar(value: &Json) -> String {
    match value {
        Json::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_values_are_indented() {
        let text =
            human(&json!({"success": true, "returns": [2, null], "logs": [{"level": "Print", "body": "hi"}], "e": []}));
        assert_eq!(
            text,
            "success: true\nreturns:\n  - 2\n  - null\nlogs:\n  -\n    level: Print\n    body: hi\ne: []\n"
        );
    }
}

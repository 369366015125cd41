//! Result values written as Luau literals, the way a Roblox developer reads them:
//! `Workspace.Baseplate (Part), inf, nil, {1, 2, 3}`.
//!
//! The input is the JSON an agent gets (docs/protocol.md, Values): plain JSON for nil,
//! booleans, numbers, strings, arrays and tables, and `{"type": T, "value": v}` for
//! non-finite numbers, binary and Roblox values (plugin/src/Codec.luau). A typed value
//! whose payload is not the expected shape is written as `T(<json>)`, never dropped.

use std::borrow::Cow;
use std::fmt::Write as _;

use serde_json::{Map, Value as Json};

use super::render::escape_controls;

/// One value as a Luau literal (on one line). Control characters a string literal does
/// not escape itself (C1, and any in a path or a type's name) are escaped as everywhere
/// in human output ([`escape_controls`]).
pub fn value(json: &Json) -> String {
    let mut out = String::new();
    write_value(&mut out, json);
    match escape_controls(&out) {
        Cow::Borrowed(_) => out,
        Cow::Owned(escaped) => escaped,
    }
}

/// Values separated by `, `, as Luau writes a list of returns.
pub fn list(values: &[Json]) -> String {
    values.iter().map(value).collect::<Vec<_>>().join(", ")
}

fn write_value(out: &mut String, json: &Json) {
    match json {
        Json::Null => out.push_str("nil"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Number(n) => out.push_str(&n.to_string()),
        Json::String(s) => write_string(out, s),
        Json::Array(items) => {
            out.push('{');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, item);
            }
            out.push('}');
        }
        Json::Object(object) => match typed(object) {
            Some((kind, payload)) => write_typed(out, kind, payload),
            None => write_table(out, object),
        },
    }
}

/// `{"type": T, "value": v}` and nothing else: a wrapped value.
fn typed(object: &Map<String, Json>) -> Option<(&str, &Json)> {
    if object.len() != 2 {
        return None;
    }
    Some((object.get("type")?.as_str()?, object.get("value")?))
}

fn write_table(out: &mut String, object: &Map<String, Json>) {
    out.push('{');
    for (i, (key, item)) in object.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        if is_identifier(key) {
            out.push_str(key);
        } else if key.parse::<i64>().is_ok() {
            // A number key of a Luau table (msgpack map keys reach JSON as text).
            let _ = write!(out, "[{key}]");
        } else {
            out.push('[');
            write_string(out, key);
            out.push(']');
        }
        out.push_str(" = ");
        write_value(out, item);
    }
    out.push('}');
}

fn is_identifier(key: &str) -> bool {
    const KEYWORDS: &[&str] = &[
        "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "if", "in", "local", "nil", "not",
        "or", "repeat", "return", "then", "true", "until", "while", "continue",
    ];
    let mut chars = key.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !KEYWORDS.contains(&key)
}

/// A Luau string literal in double quotes.
fn write_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\0' => out.push_str("\\0"),
            c if c.is_control() && (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The payload's numbers, when it is an array of exactly `count` numbers (any count
/// when `count` is None).
fn numbers(payload: &Json, count: Option<usize>) -> Option<Vec<String>> {
    let items = payload.as_array()?;
    if count.is_some_and(|n| n != items.len()) {
        return None;
    }
    items
        .iter()
        .map(|item| match item {
            Json::Number(n) => Some(n.to_string()),
            // inf/-inf/nan inside a vector.
            Json::Object(o) => match typed(o) {
                Some(("number", Json::String(text))) => Some(text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn constructor(kind: &str, args: &[String]) -> String {
    format!("{kind}.new({})", args.join(", "))
}

fn write_typed(out: &mut String, kind: &str, payload: &Json) {
    match known_typed(kind, payload) {
        Some(text) => out.push_str(&text),
        None => {
            let _ = write!(out, "{kind}({payload})");
        }
    }
}

/// A Roblox value (or non-finite number) as Luau, when its payload has the shape the
/// plugin's codec writes.
fn known_typed(kind: &str, payload: &Json) -> Option<String> {
    let field = |name: &str| payload.get(name);
    let text = |name: &str| payload.get(name).and_then(Json::as_str);
    Some(match kind {
        "number" => match payload.as_str()? {
            special @ ("inf" | "-inf" | "nan") => special.to_owned(),
            _ => return None,
        },
        "Instance" => {
            let class = text("className")?;
            match field("path")? {
                Json::Null => format!("nil ({class})"),
                Json::String(path) => {
                    let path = path.strip_prefix("game.").unwrap_or(path);
                    format!("{path} ({class})")
                }
                _ => return None,
            }
        }
        "Vector3" | "Vector3int16" => constructor(kind, &numbers(payload, Some(3))?),
        "Vector2" | "Vector2int16" | "UDim" | "NumberRange" => constructor(kind, &numbers(payload, Some(2))?),
        "Color3" => constructor(kind, &numbers(payload, Some(3))?),
        "UDim2" | "Rect" => constructor(kind, &numbers(payload, Some(4))?),
        "CFrame" => constructor(kind, &numbers(payload, Some(12))?),
        "EnumItem" => format!("Enum.{}.{}", text("enum")?, text("name")?),
        "Enum" => format!("Enum.{}", payload.as_str()?),
        "BrickColor" => format!("BrickColor.new({})", value(field("name")?)),
        "DateTime" => format!("DateTime.fromUnixTimestampMillis({})", payload.as_number()?),
        "NumberSequenceKeypoint" => constructor(kind, &numbers(payload, Some(3))?),
        "ColorSequenceKeypoint" => color_keypoint(payload)?,
        "NumberSequence" => {
            let points: Option<Vec<String>> = payload
                .as_array()?
                .iter()
                .map(|k| Some(constructor("NumberSequenceKeypoint", &numbers(k, Some(3))?)))
                .collect();
            format!("NumberSequence.new({{{}}})", points?.join(", "))
        }
        "ColorSequence" => {
            let points: Option<Vec<String>> = payload.as_array()?.iter().map(color_keypoint).collect();
            format!("ColorSequence.new({{{}}})", points?.join(", "))
        }
        "Font" => format!(
            "Font.new({}, Enum.FontWeight.{}, Enum.FontStyle.{})",
            value(field("family")?),
            text("weight")?,
            text("style")?
        ),
        "PhysicalProperties" => {
            let parts: Option<Vec<String>> = [
                "density",
                "friction",
                "elasticity",
                "frictionWeight",
                "elasticityWeight",
            ]
            .iter()
            .map(|name| field(name).and_then(Json::as_number).map(ToString::to_string))
            .collect();
            constructor(kind, &parts?)
        }
        "Ray" => format!(
            "Ray.new({}, {})",
            constructor("Vector3", &numbers(field("origin")?, Some(3))?),
            constructor("Vector3", &numbers(field("direction")?, Some(3))?)
        ),
        "Region3int16" => format!(
            "Region3int16.new({}, {})",
            constructor("Vector3int16", &numbers(field("min")?, Some(3))?),
            constructor("Vector3int16", &numbers(field("max")?, Some(3))?)
        ),
        "Faces" | "Axes" => {
            let enum_name = if kind == "Faces" { "NormalId" } else { "Axis" };
            let names: Option<Vec<String>> = payload
                .as_array()?
                .iter()
                .map(|n| n.as_str().map(|n| format!("Enum.{enum_name}.{n}")))
                .collect();
            constructor(kind, &names?)
        }
        // A Luau table that happened to have exactly the keys `type` and `value`.
        "table" => {
            let mut out = String::new();
            write_table(&mut out, payload.as_object()?);
            out
        }
        _ => return None,
    })
}

fn color_keypoint(payload: &Json) -> Option<String> {
    let n = numbers(payload, Some(4))?;
    Some(format!(
        "ColorSequenceKeypoint.new({}, Color3.new({}, {}, {}))",
        n[0], n[1], n[2], n[3]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_values_are_luau_literals() {
        let returns = [
            json!({"type": "Instance", "value": {"path": "game.Workspace.Baseplate", "className": "Part"}}),
            json!({"type": "number", "value": "inf"}),
            json!(null),
            json!([1, 2, 3]),
        ];
        assert_eq!(list(&returns), "Workspace.Baseplate (Part), inf, nil, {1, 2, 3}");
        assert_eq!(value(&json!("a \"q\"\n\\")), r#""a \"q\"\n\\""#);
        assert_eq!(
            value(&json!({"a": 1, "b c": 2, "end": true, "5": [] })),
            r#"{a = 1, ["b c"] = 2, ["end"] = true, [5] = {}}"#
        );
        assert_eq!(value(&json!(1.5)), "1.5");
        assert_eq!(value(&json!({"type": "number", "value": "-inf"})), "-inf");
        assert_eq!(value(&json!({"type": "number", "value": "nan"})), "nan");
        assert_eq!(value(&json!({})), "{}");
    }

    #[test]
    fn roblox_values_are_constructors() {
        let cases = [
            (
                json!({"type": "Vector3", "value": [1, 2.5, -3]}),
                "Vector3.new(1, 2.5, -3)",
            ),
            (json!({"type": "Vector2", "value": [1, 2]}), "Vector2.new(1, 2)"),
            (json!({"type": "Color3", "value": [1, 0, 0.5]}), "Color3.new(1, 0, 0.5)"),
            (
                json!({"type": "UDim2", "value": [0.5, 10, 1, 0]}),
                "UDim2.new(0.5, 10, 1, 0)",
            ),
            (
                json!({"type": "EnumItem", "value": {"enum": "Material", "name": "Plastic", "value": 256}}),
                "Enum.Material.Plastic",
            ),
            (json!({"type": "Enum", "value": "Material"}), "Enum.Material"),
            (
                json!({"type": "Instance", "value": {"path": null, "className": "Part"}}),
                "nil (Part)",
            ),
            (
                json!({"type": "Instance", "value": {"path": "game", "className": "DataModel"}}),
                "game (DataModel)",
            ),
            (
                json!({"type": "BrickColor", "value": {"number": 194, "name": "Medium stone grey"}}),
                r#"BrickColor.new("Medium stone grey")"#,
            ),
            (
                json!({"type": "NumberSequence", "value": [[0, 1, 0], [1, 0, 0]]}),
                "NumberSequence.new({NumberSequenceKeypoint.new(0, 1, 0), NumberSequenceKeypoint.new(1, 0, 0)})",
            ),
            (
                json!({"type": "Faces", "value": ["Top", "Front"]}),
                "Faces.new(Enum.NormalId.Top, Enum.NormalId.Front)",
            ),
            (
                json!({"type": "table", "value": {"type": "x", "value": 1}}),
                r#"{type = "x", value = 1}"#,
            ),
            // Unknown types, and known ones of an unexpected shape, show their JSON.
            (
                json!({"type": "function", "value": "function: 0x1"}),
                r#"function("function: 0x1")"#,
            ),
            (json!({"type": "Vector3", "value": [1, 2]}), "Vector3([1,2])"),
        ];
        for (input, expected) in cases {
            assert_eq!(value(&input), expected, "{input}");
        }
    }
}

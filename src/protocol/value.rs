//! The msgpack ⇄ JSON value mapping of PROTOCOL.md (Values).
//!
//! Roblox values travel as plain msgpack maps `{"type", "value"}`, so they need no special
//! case here: they map to the same JSON objects. What JSON cannot say directly is mapped
//! to the same `{"type", "value"}` convention: non-finite floats become
//! `{"type": "number", "value": "inf" | "-inf" | "nan"}` and binary becomes
//! `{"type": "binary", "value": "<base64>"}`, and both are mapped back on the way in.
//!
//! The decoder is tolerant of what a Luau msgpack encoder really sends: integers encoded
//! as floats (Luau numbers are doubles) come out as JSON integers when they are whole and
//! exactly representable, and strings that are not UTF-8 (Luau strings are bytes) are
//! decoded lossily rather than failing the whole result.

use base64_simd::STANDARD as BASE64;
use rmpv::Value as Msgpack;
use serde_json::{Map, Number, Value as Json};

/// Largest integer a double holds exactly (2^53): whole floats up to this size are
/// written as JSON integers.
const MAX_EXACT_FLOAT_INT: f64 = 9_007_199_254_740_992.0;

/// Maps a msgpack value from a plugin to the JSON an agent sees.
pub fn to_json(value: &Msgpack) -> Json {
    into_json(value.clone())
}

/// [`to_json`] by value: strings and arrays are moved, not copied, and the msgpack is
/// freed as it is converted. Results can be tens of megabytes; this is their path.
pub fn into_json(value: Msgpack) -> Json {
    match value {
        Msgpack::Nil => Json::Null,
        Msgpack::Boolean(b) => Json::Bool(b),
        Msgpack::Integer(i) => {
            if let Some(n) = i.as_i64() {
                Json::Number(n.into())
            } else if let Some(n) = i.as_u64() {
                Json::Number(n.into())
            } else {
                Json::Null
            }
        }
        Msgpack::F32(f) => float_to_json(f64::from(f)),
        Msgpack::F64(f) => float_to_json(f),
        Msgpack::String(s) => Json::String(utf8_or_lossy(s)),
        Msgpack::Binary(bytes) => typed("binary", Json::String(BASE64.encode_to_string(bytes))),
        Msgpack::Array(items) => Json::Array(items.into_iter().map(into_json).collect()),
        Msgpack::Map(entries) => {
            let mut object = Map::with_capacity(entries.len());
            for (key, item) in entries {
                let key = match key {
                    Msgpack::String(s) => utf8_or_lossy(s),
                    other => key_text(&other),
                };
                object.insert(key, into_json(item));
            }
            Json::Object(object)
        }
        Msgpack::Ext(kind, bytes) => typed(
            "ext",
            serde_json::json!({ "kind": kind, "data": BASE64.encode_to_string(bytes) }),
        ),
    }
}

fn utf8_or_lossy(s: rmpv::Utf8String) -> String {
    if s.is_str() {
        s.into_str().unwrap_or_default()
    } else {
        String::from_utf8_lossy(&s.into_bytes()).into_owned()
    }
}

/// Maps JSON from an agent to the msgpack sent to a plugin, undoing the
/// `number`/`binary` conventions of [`to_json`].
pub fn from_json(value: &Json) -> Msgpack {
    match value {
        Json::Null => Msgpack::Nil,
        Json::Bool(b) => Msgpack::Boolean(*b),
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                Msgpack::from(i)
            } else if let Some(u) = n.as_u64() {
                Msgpack::from(u)
            } else {
                Msgpack::F64(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Json::String(s) => Msgpack::from(s.as_str()),
        Json::Array(items) => Msgpack::Array(items.iter().map(from_json).collect()),
        Json::Object(object) => {
            if let Some(special) = special_from_json(object) {
                return special;
            }
            Msgpack::Map(
                object
                    .iter()
                    .map(|(key, item)| (Msgpack::from(key.as_str()), from_json(item)))
                    .collect(),
            )
        }
    }
}

fn float_to_json(f: f64) -> Json {
    if f.is_nan() {
        typed("number", Json::String("nan".into()))
    } else if f.is_infinite() {
        let text = if f > 0.0 { "inf" } else { "-inf" };
        typed("number", Json::String(text.into()))
    } else if f.fract() == 0.0 && f.abs() <= MAX_EXACT_FLOAT_INT {
        // `f` is whole and within ±2^53, so the conversion is exact.
        Json::Number((f as i64).into())
    } else {
        Number::from_f64(f).map_or(Json::Null, Json::Number)
    }
}

fn typed(kind: &str, value: Json) -> Json {
    let mut object = Map::with_capacity(2);
    object.insert("type".into(), Json::String(kind.into()));
    object.insert("value".into(), value);
    Json::Object(object)
}

/// JSON object keys must be strings: other msgpack keys are written as their text form.
fn key_text(key: &Msgpack) -> String {
    match key {
        Msgpack::String(s) => match s.as_str() {
            Some(text) => text.to_owned(),
            None => String::from_utf8_lossy(s.as_bytes()).into_owned(),
        },
        Msgpack::Integer(i) => i.to_string(),
        Msgpack::Boolean(b) => b.to_string(),
        Msgpack::F64(f) => float_key(*f),
        Msgpack::F32(f) => float_key(f64::from(*f)),
        Msgpack::Nil => "nil".to_owned(),
        // A table used as a key (Luau allows it) is named, not written out: written out,
        // a key holding a key holding a key… is escaped once more at each level, and a
        // few hundred bytes of nested keys became gigabytes of text (found by fuzzing).
        Msgpack::Array(items) => format!("<array of {}>", items.len()),
        Msgpack::Map(entries) => format!("<map of {}>", entries.len()),
        other => to_json(other).to_string(),
    }
}

fn float_key(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() <= MAX_EXACT_FLOAT_INT {
        (f as i64).to_string()
    } else {
        f.to_string()
    }
}

fn special_from_json(object: &Map<String, Json>) -> Option<Msgpack> {
    if object.len() != 2 {
        return None;
    }
    let kind = object.get("type")?.as_str()?;
    let value = object.get("value")?;
    match (kind, value) {
        ("number", Json::String(text)) => match text.as_str() {
            "inf" => Some(Msgpack::F64(f64::INFINITY)),
            "-inf" => Some(Msgpack::F64(f64::NEG_INFINITY)),
            "nan" => Some(Msgpack::F64(f64::NAN)),
            _ => None,
        },
        ("binary", Json::String(text)) => BASE64.decode_to_vec(text).ok().map(Msgpack::Binary),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_as_keys_are_named_not_written_out_so_nested_keys_cannot_blow_up() {
        let mut key = Msgpack::from("leaf");
        for _ in 0..40 {
            key = Msgpack::Map(vec![(key, Msgpack::Nil)]);
        }
        let json = to_json(&Msgpack::Map(vec![
            (key, 1.into()),
            (Msgpack::Array(vec![1.into(), 2.into()]), 2.into()),
        ]));
        assert_eq!(json, serde_json::json!({"<map of 1>": 1, "<array of 2>": 2}));
    }
    use serde_json::json;

    fn map(entries: Vec<(&str, Msgpack)>) -> Msgpack {
        Msgpack::Map(entries.into_iter().map(|(k, v)| (Msgpack::from(k), v)).collect())
    }

    fn floats(values: &[f64]) -> Msgpack {
        Msgpack::Array(values.iter().map(|f| Msgpack::F64(*f)).collect())
    }

    fn typed_value(kind: &str, value: Msgpack) -> Msgpack {
        map(vec![("type", Msgpack::from(kind)), ("value", value)])
    }

    #[test]
    fn scalars_map_to_their_json_forms() {
        assert_eq!(to_json(&Msgpack::Nil), Json::Null);
        assert_eq!(to_json(&Msgpack::Boolean(true)), json!(true));
        assert_eq!(to_json(&Msgpack::from(-5i64)), json!(-5));
        assert_eq!(to_json(&Msgpack::from(u64::MAX)), json!(u64::MAX));
        assert_eq!(to_json(&Msgpack::F64(1.5)), json!(1.5));
        assert_eq!(to_json(&Msgpack::F32(0.5)), json!(0.5));
        assert_eq!(to_json(&Msgpack::from("héllo")), json!("héllo"));
    }

    #[test]
    fn whole_floats_from_luau_become_integers() {
        // A Luau encoder sends 2^40 as a double: the agent should see an integer.
        assert_eq!(to_json(&Msgpack::F64(1_099_511_627_776.0)), json!(1_099_511_627_776i64));
        assert_eq!(to_json(&Msgpack::F64(-3.0)), json!(-3));
        // Beyond 2^53 a double is not exact; it stays a float.
        assert!(to_json(&Msgpack::F64(1e300)).is_f64());
    }

    #[test]
    fn non_finite_numbers_round_trip() {
        for (f, text) in [(f64::INFINITY, "inf"), (f64::NEG_INFINITY, "-inf"), (f64::NAN, "nan")] {
            let mapped = to_json(&Msgpack::F64(f));
            assert_eq!(mapped, json!({"type": "number", "value": text}));
            match from_json(&mapped) {
                Msgpack::F64(back) => assert!(back == f || (f.is_nan() && back.is_nan())),
                other => panic!("{text} came back as {other:?}"),
            }
        }
    }

    #[test]
    fn binary_round_trips_as_base64() {
        let bytes = vec![0u8, 1, 2, 255];
        let mapped = to_json(&Msgpack::Binary(bytes.clone()));
        assert_eq!(mapped, json!({"type": "binary", "value": "AAEC/w=="}));
        assert_eq!(from_json(&mapped), Msgpack::Binary(bytes));
    }

    #[test]
    fn nil_keeps_its_place_in_arrays() {
        let value = Msgpack::Array(vec![Msgpack::from(1), Msgpack::Nil, Msgpack::from(3)]);
        assert_eq!(to_json(&value), json!([1, null, 3]));
        assert_eq!(from_json(&json!([1, null, 3])), value);
    }

    #[test]
    fn non_string_keys_are_written_as_text() {
        let value = Msgpack::Map(vec![
            (Msgpack::from(1), Msgpack::from("a")),
            (Msgpack::Boolean(true), Msgpack::from("b")),
            (Msgpack::F64(2.0), Msgpack::from("c")),
        ]);
        assert_eq!(to_json(&value), json!({"1": "a", "true": "b", "2": "c"}));
    }

    #[test]
    fn non_utf8_strings_are_decoded_lossily() {
        // fixstr of 3 bytes, the middle one not UTF-8, as a Luau encoder may send it.
        let value = rmpv::decode::read_value(&mut &[0xa3, b'a', 0xff, b'b'][..]).unwrap();
        assert_eq!(to_json(&value), json!("a\u{fffd}b"));
    }

    #[test]
    fn empty_tables_stay_empty_arrays() {
        assert_eq!(to_json(&Msgpack::Array(vec![])), json!([]));
        assert_eq!(to_json(&Msgpack::Map(vec![])), json!({}));
    }

    /// Every DataType of PROTOCOL.md travels as `{type, value}` and reaches the agent in
    /// exactly that shape, and an agent's write in that shape reaches the plugin intact.
    #[test]
    fn every_datatype_keeps_its_shape_both_ways() {
        let brick = map(vec![
            ("number", Msgpack::from(194)),
            ("name", Msgpack::from("Medium stone grey")),
        ]);
        let enum_item = map(vec![
            ("enum", Msgpack::from("Material")),
            ("name", Msgpack::from("Plastic")),
            ("value", Msgpack::from(256)),
        ]);
        let instance = map(vec![
            ("path", Msgpack::from("game.Workspace.Part")),
            ("className", Msgpack::from("Part")),
        ]);
        let orphan = map(vec![("path", Msgpack::Nil), ("className", Msgpack::from("Part"))]);
        let cases: Vec<(&str, Msgpack, Json)> = vec![
            ("Vector3", floats(&[1.0, 2.5, -3.0]), json!([1, 2.5, -3])),
            ("Vector2", floats(&[0.25, 4.0]), json!([0.25, 4])),
            ("Vector3int16", floats(&[1.0, 2.0, 3.0]), json!([1, 2, 3])),
            ("Vector2int16", floats(&[-1.0, 2.0]), json!([-1, 2])),
            (
                "CFrame",
                floats(&[1.0, 2.0, 3.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]),
                json!([1, 2, 3, 1, 0, 0, 0, 1, 0, 0, 0, 1]),
            ),
            ("Color3", floats(&[1.0, 0.5, 0.0]), json!([1, 0.5, 0])),
            ("BrickColor", brick, json!({"number": 194, "name": "Medium stone grey"})),
            ("UDim", floats(&[0.5, 10.0]), json!([0.5, 10])),
            ("UDim2", floats(&[0.5, 10.0, 1.0, -4.0]), json!([0.5, 10, 1, -4])),
            ("Rect", floats(&[0.0, 0.0, 100.0, 50.5]), json!([0, 0, 100, 50.5])),
            ("NumberRange", floats(&[1.0, 2.5]), json!([1, 2.5])),
            (
                "NumberSequence",
                Msgpack::Array(vec![floats(&[0.0, 1.0, 0.0]), floats(&[1.0, 0.5, 0.25])]),
                json!([[0, 1, 0], [1, 0.5, 0.25]]),
            ),
            (
                "ColorSequence",
                Msgpack::Array(vec![floats(&[0.0, 1.0, 0.0, 0.0]), floats(&[1.0, 0.0, 0.0, 1.0])]),
                json!([[0, 1, 0, 0], [1, 0, 0, 1]]),
            ),
            (
                "EnumItem",
                enum_item,
                json!({"enum": "Material", "name": "Plastic", "value": 256}),
            ),
            (
                "Instance",
                instance,
                json!({"path": "game.Workspace.Part", "className": "Part"}),
            ),
            ("Instance", orphan, json!({"path": null, "className": "Part"})),
            (
                "table",
                map(vec![("type", Msgpack::from("x")), ("value", Msgpack::from(1))]),
                json!({"type": "x", "value": 1}),
            ),
        ];
        for (kind, payload, expected) in cases {
            let wire = typed_value(kind, payload);
            let agent_view = to_json(&wire);
            assert_eq!(agent_view, json!({"type": kind, "value": expected}), "{kind}");
            // Back to msgpack and out again: nothing changes.
            assert_eq!(to_json(&from_json(&agent_view)), agent_view, "{kind} round trip");
        }
    }

    /// The vectors the plugin's Luau msgpack is tested against (made by an independent
    /// encoder): what the plugin sends, the host reads as the JSON each vector names.
    #[test]
    fn shared_msgpack_vectors_decode_to_their_json() {
        let text = include_str!("../../plugin/tests/vectors/msgpack.json");
        let vectors: Vec<Json> = serde_json::from_str(text).unwrap();
        assert!(vectors.len() > 40);
        for vector in vectors {
            let name = vector["name"].as_str().unwrap();
            let hex = vector["hex"].as_str().unwrap();
            let bytes: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            let decoded = rmpv::decode::read_value(&mut &bytes[..]).unwrap_or_else(|e| panic!("{name}: {e}"));
            let expected = &vector["json"];
            let actual = to_json(&decoded);
            let same = match (expected.as_f64(), actual.as_f64()) {
                (Some(a), Some(b)) => a == b,
                _ => &actual == expected,
            };
            assert!(same, "{name}: decoded {actual}, vector says {expected}");
        }
    }
}

//! Tool schemas that every mainstream MCP client accepts.
//!
//! Schemas are derived from the argument and result types (schemars), then made
//! portable here, once for every command, so that no command can regress it: strict
//! clients (the MCP Inspector's `--strict`, OpenAPI-style subsets, Gemini's
//! function declarations) reject a bare `true` where a schema object is expected,
//! `"type": [T, "null"]` arrays, `$ref`s and non-standard `format`s. So: subschemas are
//! inlined; an optional field is simply not required (its `null` branch dropped); a
//! free-form value is an object schema that says what it holds; only standard formats
//! stay; input objects refuse unknown fields.

use schemars::JsonSchema;
use serde_json::{Map, Value as Json, json};

/// What a free-form value (an `exec` return, a property value) is said to hold.
const ANY_VALUE: &str = "Any JSON value; Roblox values are {type, value} maps.";

/// The `format`s of JSON Schema that clients know; schemars' numeric ones (`uint32`,
/// `double`) are not among them.
const STANDARD_FORMATS: &[&str] = &["date-time", "date", "time", "duration", "email", "uri", "uuid"];

/// The schema of `T`, inlined and portable, as an object schema.
pub(super) fn schema_for<T: JsonSchema>() -> Map<String, Json> {
    let settings = schemars::generate::SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
    });
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut json = schema.to_value();
    if let Json::Object(root) = &mut json {
        root.remove("$schema");
        root.remove("title");
    }
    make_portable(&mut json);
    let mut json = match json {
        Json::Object(map) => map,
        _ => Map::new(),
    };
    json.entry("type").or_insert_with(|| Json::String("object".into()));
    json.entry("properties").or_insert_with(|| Json::Object(Map::new()));
    json
}

/// Rewrites one schema (and every subschema) into the portable subset.
fn make_portable(schema: &mut Json) {
    let Json::Object(map) = schema else {
        if *schema == Json::Bool(true) {
            *schema = any_value();
        }
        return;
    };
    // `"type": ["string", "null"]` → `"type": "string"`.
    if let Some(Json::Array(types)) = map.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            map.insert("type".into(), only);
        }
    }
    // `anyOf: [{…}, {"type": "null"}]` → the one branch, merged in.
    for key in ["anyOf", "oneOf"] {
        if let Some(Json::Array(branches)) = map.get_mut(key) {
            branches.retain(|b| b != &json!({ "type": "null" }));
            if branches.len() == 1 {
                let only = branches.remove(0);
                map.remove(key);
                if let Json::Object(fields) = only {
                    for (field, value) in fields {
                        map.entry(field).or_insert(value);
                    }
                }
            }
        }
    }
    if let Some(Json::Array(values)) = map.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    // Said by nothing: a flag is off and a count is not negative unless told otherwise
    // (the catalogue is read into every agent's context; TOOLS.md keeps it lean).
    if matches!(map.get("default"), Some(Json::Null | Json::Bool(false))) || map.get("default") == Some(&json!(0)) {
        map.remove("default");
    }
    if map.get("minimum") == Some(&json!(0)) {
        map.remove("minimum");
    }
    if let Some(Json::String(format)) = map.get("format")
        && !STANDARD_FORMATS.contains(&format.as_str())
    {
        map.remove("format");
    }
    // Whether the host sends a field on (serde's `skip_serializing`) is no business of the
    // caller's: every input field is the caller's to give.
    map.remove("writeOnly");
    // `additionalProperties: true` is the default; say nothing.
    if map.get("additionalProperties") == Some(&Json::Bool(true)) {
        map.remove("additionalProperties");
    }
    // An object with no properties of its own holds arbitrary keys: say so.
    if map.get("type") == Some(&json!("object"))
        && !map.contains_key("properties")
        && !map.contains_key("additionalProperties")
        && !map.contains_key("description")
    {
        map.insert("description".into(), Json::String("A map of names to values.".into()));
    }
    for (key, value) in map.iter_mut() {
        match key.as_str() {
            "properties" | "patternProperties" | "$defs" => {
                if let Json::Object(children) = value {
                    children.values_mut().for_each(make_portable);
                }
            }
            "items" | "additionalProperties" | "not" | "contains" | "if" | "then" | "else"
                if value != &Json::Bool(false) =>
            {
                make_portable(value);
            }
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                if let Json::Array(branches) = value {
                    branches.iter_mut().for_each(make_portable);
                }
            }
            _ => {}
        }
    }
    if map.is_empty() {
        *schema = any_value();
    } else if map.keys().all(|k| k == "description") {
        // A free-form value with words of its own (`datastore`'s value): the same branches,
        // its own words.
        let words = map.remove("description");
        *schema = any_value();
        if let (Json::Object(any), Some(words)) = (schema, words) {
            any.insert("description".into(), words);
        }
    }
}

/// A free-form value, said in a way strict clients accept: each JSON type a branch
/// (`null` among them, since an `exec` return may be nil), no bare `true`.
fn any_value() -> Json {
    json!({
        "anyOf": [
            { "type": "string" },
            { "type": "number" },
            { "type": "boolean" },
            { "type": "object" },
            { "type": "array" },
            { "type": "null" }
        ],
        "description": ANY_VALUE
    })
}

/// `sessionId`, `instanceId` and `context` on a session command's input; explained once
/// in the server's instructions, so each tool's copy is minimal.
pub(super) fn add_session_properties(schema: &mut Map<String, Json>) {
    let properties = schema.entry("properties").or_insert_with(|| Json::Object(Map::new()));
    if let Json::Object(properties) = properties {
        properties.insert("sessionId".into(), json!({ "type": "string" }));
        properties.insert("instanceId".into(), json!({ "type": "string" }));
        // Its values (edit, server, client) are in the instructions too; an enum here
        // would repeat them in every tool, and a wrong value is refused with the list.
        properties.insert("context".into(), json!({ "type": "string" }));
    }
}

/// What every result may carry besides the command's own fields: where it ran (for
/// session commands) and the bound's marker.
pub(super) fn add_result_properties(schema: &mut Map<String, Json>, needs_session: bool) {
    let properties = schema.entry("properties").or_insert_with(|| Json::Object(Map::new()));
    if let Json::Object(properties) = properties {
        if needs_session {
            properties.insert(
                "sessionId".into(),
                json!({ "type": "string", "description": "The session that ran the call." }),
            );
            properties.insert(
                "context".into(),
                json!({ "type": "string", "enum": ["edit", "server", "client"], "description": "The DataModel it ran in." }),
            );
        }
        properties.insert(
            "truncated".into(),
            json!({ "type": "boolean", "description": "True when the result was cut to fit the size bound." }),
        );
        properties.insert(
            "truncatedHint".into(),
            json!({ "type": "string", "description": "How to get what was cut." }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every construct in `schema` that a strict client refuses, by JSON pointer.
    fn portability_problems(schema: &Json, at: &str, input: bool, problems: &mut Vec<String>) {
        let Json::Object(map) = schema else {
            problems.push(format!("{at}: a bare {schema} where a schema object is expected"));
            return;
        };
        // A structured input object refuses unknown fields; a free-form map (no
        // `properties`) holds any keys by definition.
        if input
            && map.get("type") == Some(&json!("object"))
            && map.contains_key("properties")
            && map.get("additionalProperties") != Some(&Json::Bool(false))
        {
            problems.push(format!("{at}: an input object without additionalProperties: false"));
        }
        for (key, value) in map {
            let here = format!("{at}/{key}");
            match key.as_str() {
                "$ref" | "$defs" | "definitions" | "nullable" => problems.push(format!("{here}: not portable")),
                "type" if !value.is_string() => problems.push(format!("{here}: a type array ({value})")),
                "format" if !value.as_str().is_some_and(|f| STANDARD_FORMATS.contains(&f)) => {
                    problems.push(format!("{here}: non-standard format {value}"))
                }
                "enum" if value.as_array().is_some_and(|v| v.iter().any(Json::is_null)) => {
                    problems.push(format!("{here}: null in an enum"))
                }
                "properties" | "patternProperties" => {
                    if let Json::Object(children) = value {
                        for (name, child) in children {
                            portability_problems(child, &format!("{here}/{name}"), input, problems);
                        }
                    }
                }
                "additionalProperties" if value == &Json::Bool(false) => {}
                "items" | "additionalProperties" | "not" | "contains" | "if" | "then" | "else" => {
                    portability_problems(value, &here, input, problems)
                }
                "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                    if let Json::Array(branches) = value {
                        for (i, branch) in branches.iter().enumerate() {
                            portability_problems(branch, &format!("{here}/{i}"), input, problems);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn problems(schema: &Json, input: bool) -> Vec<String> {
        let mut found = Vec::new();
        portability_problems(schema, "", input, &mut found);
        found
    }

    #[test]
    fn every_command_schema_is_portable() {
        for command in super::super::ALL {
            let name = command.spec().name;
            let input = Json::Object(command.input_schema());
            let output = Json::Object(command.output_schema());
            assert_eq!(problems(&input, true), Vec::<String>::new(), "{name} input: {input}");
            assert_eq!(
                problems(&output, false),
                Vec::<String>::new(),
                "{name} output: {output}"
            );
        }
    }

    #[test]
    fn the_check_finds_each_non_portable_construct() {
        let bad = [
            json!({"type": "object", "properties": {"x": true}}),
            json!({"type": "object", "properties": {"x": {"type": ["string", "null"]}}}),
            json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/X"}}}),
            json!({"type": "object", "properties": {"x": {"type": "integer", "format": "uint32"}}}),
            json!({"type": "object", "properties": {"x": {"type": "array", "items": true}}}),
            json!({"type": "object", "properties": {"x": {"enum": ["a", null]}}}),
        ];
        for schema in bad {
            assert!(!problems(&schema, false).is_empty(), "not caught: {schema}");
        }
        // Structured inputs must refuse unknown fields.
        assert!(!problems(&json!({"type": "object", "properties": {}}), true).is_empty());
        assert!(problems(&json!({"type": "object"}), true).is_empty(), "a free-form map");
    }

    #[test]
    fn make_portable_rewrites_what_schemars_emits() {
        #[derive(JsonSchema)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Sample {
            optional: Option<String>,
            nested: Option<Inner>,
            count: u32,
            anything: Vec<serde_json::Value>,
        }
        #[derive(JsonSchema)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Inner {
            x: f64,
        }
        let schema = Json::Object(schema_for::<Sample>());
        assert_eq!(problems(&schema, true), Vec::<String>::new(), "{schema}");
        assert_eq!(schema["properties"]["optional"]["type"], "string");
        assert_eq!(schema["properties"]["nested"]["type"], "object");
        assert_eq!(schema["properties"]["anything"]["items"]["description"], ANY_VALUE);
    }
}

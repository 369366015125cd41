//! `query`: one instance of the DataModel, its properties, attributes, tags and
//! children.

use std::fmt::Write as _;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use super::{Command, Invocation, Kind, Output, Render, Spec};
use crate::human::luau;
use crate::human::render::{Rendered, Style, clean, count};
use crate::protocol::{Context, ToolError};

/// Deepest nesting `depth` may ask for: each level multiplies the result.
const MAX_DEPTH: u32 = 10;

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct QueryArgs {
    /// e.g. `Workspace["A.B"].C`.
    #[serde(default = "default_path")]
    pub path: String,
    #[serde(default)]
    #[schemars(range(max = 10))]
    pub depth: u32,
    /// Default: Name, ClassName, Parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<Vec<String>>,
    #[serde(default)]
    pub include_attributes: bool,
    #[serde(default)]
    pub children: bool,
    #[serde(default)]
    pub list_services: bool,
}

fn default_path() -> String {
    "game".to_owned()
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct QueryResult {
    /// `{name, className, path, properties, propertyErrors?, attributes, tags, childCount, children?}`.
    #[schemars(with = "serde_json::Map<String, Json>")]
    pub instance: Json,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
}

pub struct Query;

impl Command for Query {
    type Args = QueryArgs;
    type Result = QueryResult;
    const SPEC: Spec = Spec {
        name: "query",
        description: "Inspect an instance by path: properties, attributes, tags, children.",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(10),
        kind: Kind::Read,
        capabilities: super::Capabilities::of(&[super::Capability::Read]),
        idempotent: true,
        open_world: false,
        positional: &["path"],
        truncation_hint: "Query a narrower path, a smaller depth, or fewer properties.",
        follow_event: None,
        example: "studio-bridge query Workspace --children --properties Name,Position",
        from_file: None,
        flag_help: &[
            ("depth", "How many levels of children to include"),
            ("includeAttributes", "Include attributes"),
            ("children", "List the children (one level)"),
            ("listServices", "List the services of game"),
        ],
    };

    async fn run(args: QueryArgs, cx: &Invocation) -> Result<Output, ToolError> {
        if args.depth > MAX_DEPTH {
            return Err(ToolError::invalid_args(format!(
                "`depth` must be at most {MAX_DEPTH}; query a deeper path instead."
            )));
        }
        if args.path.trim().is_empty() {
            return Err(ToolError::invalid_args(
                "`path` is empty; pass an instance path such as game.Workspace.",
            ));
        }
        cx.forward(&Self::SPEC, &args).await
    }
}

impl Render for Query {
    /// The instance as an indented tree.
    fn render(_args: &Json, result: &Json, out: Style, _err: Style) -> Option<Rendered> {
        let instance = result.get("instance")?;
        let mut text = String::new();
        write_instance(&mut text, instance, 0, out)?;
        Some(Rendered {
            stdout: text,
            stderr: String::new(),
        })
    }
}

/// `Name (ClassName)`, then its properties, attribute (`@Name = value`), tags and
/// children, each indented two more spaces than the entry.
fn write_instance(out: &mut String, entry: &Json, indent: usize, style: Style) -> Option<()> {
    let raw_name = entry.get("name")?.as_str()?;
    let raw_class = entry.get("className")?.as_str()?;
    let (name, class) = (clean(raw_name), clean(raw_class));
    let child_count = entry.get("childCount").and_then(Json::as_u64).unwrap_or(0);
    let children = entry.get("children").and_then(Json::as_array);
    let mut header = format!("{:indent$}{name} ({class})", "");
    if children.is_none() && child_count > 0 {
        header.push_str(&style.dim(&format!("  [{}]", count(child_count, "child", "children"))));
    }
    let _ = writeln!(out, "{header}");
    let inner = indent + 2;
    let object = |key: &str| entry.get(key).and_then(Json::as_object);
    for (key, value) in object("properties").into_iter().flat_map(Map::iter) {
        // The header already says these.
        let redundant = (key == "Name" && value.as_str() == Some(raw_name))
            || (key == "ClassName" && value.as_str() == Some(raw_class));
        if !redundant {
            let _ = writeln!(out, "{:inner$}{} = {}", "", clean(key), luau::value(value));
        }
    }
    for (key, message) in object("propertyErrors").into_iter().flat_map(Map::iter) {
        let message = message.as_str().map_or_else(|| message.to_string(), str::to_owned);
        let _ = writeln!(
            out,
            "{:inner$}{} = {}",
            "",
            clean(key),
            style.red(&format!("(error: {})", clean(&message)))
        );
    }
    for (key, value) in object("attributes").into_iter().flat_map(Map::iter) {
        let _ = writeln!(out, "{:inner$}@{} = {}", "", clean(key), luau::value(value));
    }
    let tags: Vec<&str> = entry
        .get("tags")
        .and_then(Json::as_array)
        .map(|tags| tags.iter().filter_map(Json::as_str).collect())
        .unwrap_or_default();
    if !tags.is_empty() {
        let _ = writeln!(out, "{:inner$}tags: {}", "", clean(&tags.join(", ")));
    }
    if let Some(children) = children {
        for child in children {
            write_instance(out, child, inner, style)?;
        }
        let shown = children.len() as u64;
        if child_count > shown {
            let more = format!("… {}", count(child_count - shown, "more child", "more children"));
            let _ = writeln!(out, "{:inner$}{}", "", style.dim(&more));
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::plain;
    use serde_json::json;

    #[test]
    fn query_is_an_indented_tree() {
        let result = json!({"instance": {
            "name": "Workspace", "className": "Workspace", "path": "game.Workspace",
            "properties": {"ClassName": "Workspace", "Gravity": 196.2, "Name": "Workspace"},
            "propertyErrors": {"Secret": "not readable"},
            "attributes": {"Level": 3},
            "tags": ["Map"],
            "childCount": 3,
            "children": [
                {"name": "Baseplate", "className": "Part", "path": "game.Workspace.Baseplate", "childCount": 0,
                 "properties": {"Size": {"type": "Vector3", "value": [2048, 16, 2048]}}, "tags": []},
                {"name": "Model", "className": "Model", "path": "game.Workspace.Model", "childCount": 2},
            ],
        }, "sessionId": "A-edit", "context": "edit"});
        assert_eq!(
            plain("query", &result).stdout,
            "Workspace (Workspace)\n  Gravity = 196.2\n  Secret = (error: not readable)\n  @Level = 3\n  tags: Map\n  \
             Baseplate (Part)\n    Size = Vector3.new(2048, 16, 2048)\n  Model (Model)  [2 children]\n  … 1 more child\n"
        );
    }
}

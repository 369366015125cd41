//! `api`: the Roblox API as data (a class's properties, an enum's items, a name search),
//! answered by this process from the rbx-dom API dump, so it works with no Studio open.
//!
//! A class lists inherited properties too, each marked with the class that declares it:
//! what an agent asks of `Part` is mostly BasePart's (`Color`, `Size`, `Anchored`), and a
//! second call for each superclass would cost more than the list. It stays lean by
//! leaving out what an agent should not use (deprecated names, properties Luau cannot
//! reach) unless `all` asks for them, and by saying the usual (read-write, current)
//! by saying nothing.

use std::fmt::Write as _;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::reflection::{self, Property};
use super::{Command, Invocation, Kind, Output, Render, Spec};
use crate::human::render::{Rendered, Style, clean};
use crate::protocol::{Context, ToolError};

/// Most matches a search returns.
const MAX_MATCHES: usize = 100;

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApiArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r#enum: Option<String>,
    // Part of a class, property or enum name (said in the description).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    /// Also deprecated and unscriptable properties.
    #[serde(default)]
    pub all: bool,
}

/// One of three shapes: a class (`name`, `superclasses`, `tags`, `properties`), an enum
/// (`name`, `items`) or a search (`matches`).
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Nearest first, up to Object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superclasses: Option<Vec<String>>,
    /// Service, NotCreatable, Deprecated, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    /// The API dump has no methods or events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<Vec<PropertyEntry>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Vec<EnumItemEntry>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<Vec<Match>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PropertyEntry {
    pub name: String,
    pub r#type: String,
    /// Absent: read-write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<bool>,
    /// The superclass that declares it; absent: the class itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct EnumItemEntry {
    pub name: String,
    pub value: u32,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Match {
    /// class, enum, property or enumItem.
    pub kind: String,
    pub name: String,
    /// The class that declares a property.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// The enum an item belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r#enum: Option<String>,
}

pub struct Api;

impl Command for Api {
    type Args = ApiArgs;
    type Result = ApiResult;
    const SPEC: Spec = Spec {
        name: "api",
        description: "The Roblox API, offline: a class's members and types, an enum's items, or a name search.",
        needs_session: false,
        default_context: Context::Edit,
        timeout: Duration::from_secs(5),
        kind: Kind::Read,
        capabilities: super::Capabilities::of(&[super::Capability::Read]),
        idempotent: true,
        open_world: false,
        positional: &[],
        truncation_hint: "Narrow the search, or ask for one `member` of the class.",
        follow_event: None,
        example: "studio-bridge api --class Part",
        from_file: None,
        flag_help: &[
            ("class", "A class: its members, inherited ones included"),
            ("enum", "An enum: its items"),
            ("search", "Members and classes whose name holds this text"),
            ("member", "One member of --class, in full"),
        ],
    };

    async fn run(args: ApiArgs, _cx: &Invocation) -> Result<Output, ToolError> {
        reflection::load().await;
        let result = answer(&args)?;
        serde_json::to_value(result)
            .map(Output::json)
            .map_err(|e| ToolError::invalid_args(format!("the api result could not be encoded: {e}")))
    }
}

/// The answer to one call, or `invalid_args` naming the field and the fix.
pub fn answer(args: &ApiArgs) -> Result<ApiResult, ToolError> {
    let given = [args.class.is_some(), args.r#enum.is_some(), args.search.is_some()];
    if given.iter().filter(|g| **g).count() != 1 {
        return Err(ToolError::invalid_args(
            "Pass exactly one of `class` (a class name such as \"Part\"), `enum` (such as \"Material\") or `search` (part of a name).",
        ));
    }
    if args.member.is_some() && args.class.is_none() {
        return Err(ToolError::invalid_args(
            "`member` goes with `class`: pass the class that has it (or use `search` to find which does).",
        ));
    }
    if let Some(name) = &args.class {
        return class(name, args.member.as_deref(), args.all);
    }
    if let Some(name) = &args.r#enum {
        return enumeration(name);
    }
    let text = args.search.as_deref().unwrap_or_default();
    search(text, args.all)
}

fn class(name: &str, member: Option<&str>, all: bool) -> Result<ApiResult, ToolError> {
    let Some(descriptor) = reflection::class(name) else {
        let hint = match reflection::suggest_class(name) {
            Some(close) => format!("; did you mean `{close}`?"),
            None => ". Use `search` to find a class by part of its name.".to_owned(),
        };
        return Err(ToolError::invalid_args(format!(
            "`class`: unknown class `{name}`{hint}"
        )));
    };
    let properties: Vec<Property> = match member {
        Some(member) => match reflection::property(descriptor, member) {
            Some(property) => vec![property],
            None => {
                let hint = match reflection::suggest_property(descriptor, member) {
                    Some(close) => format!("; did you mean `{close}`?"),
                    None => " (the API dump lists properties only, not methods or events)".to_owned(),
                };
                return Err(ToolError::invalid_args(format!(
                    "`member`: {name} has no property `{member}`{hint}"
                )));
            }
        },
        None => reflection::properties(descriptor)
            .into_iter()
            .filter(|p| all || p.is_current())
            .collect(),
    };
    let mut tags: Vec<String> = descriptor.tags.iter().map(|t| format!("{t:?}")).collect();
    tags.sort_unstable();
    Ok(ApiResult {
        name: Some(descriptor.name.to_owned()),
        superclasses: Some(
            reflection::chain(descriptor)
                .skip(1)
                .map(|c| c.name.to_owned())
                .collect(),
        ),
        tags: Some(tags),
        properties: Some(
            properties
                .into_iter()
                .map(|p| PropertyEntry {
                    name: p.name.to_owned(),
                    r#type: p.type_name,
                    access: p.access.label().map(str::to_owned),
                    deprecated: p.deprecated.then_some(true),
                    from: (p.class != descriptor.name).then(|| p.class.to_owned()),
                })
                .collect(),
        ),
        ..ApiResult::default()
    })
}

fn enumeration(name: &str) -> Result<ApiResult, ToolError> {
    let name = name.strip_prefix("Enum.").unwrap_or(name);
    let Some(items) = reflection::enum_items(name) else {
        let names = reflection::database().enums.keys().copied();
        let hint = match reflection::did_you_mean(name, names) {
            Some(close) => format!("; did you mean `{close}`?"),
            None => ". Use `search` to find an enum by part of its name.".to_owned(),
        };
        return Err(ToolError::invalid_args(format!("`enum`: unknown enum `{name}`{hint}")));
    };
    Ok(ApiResult {
        name: Some(name.to_owned()),
        items: Some(
            items
                .into_iter()
                .map(|(name, value)| EnumItemEntry {
                    name: name.to_owned(),
                    value,
                })
                .collect(),
        ),
        ..ApiResult::default()
    })
}

/// Case-insensitive substring matches: exact names first, then prefixes, then the rest;
/// within each, classes, enums, properties, enum items, by name.
fn search(text: &str, all: bool) -> Result<ApiResult, ToolError> {
    let needle = text.trim().to_lowercase();
    if needle.is_empty() {
        return Err(ToolError::invalid_args(
            "`search` is empty; pass part of a class, property or enum name.",
        ));
    }
    let rank = |name: &str| -> Option<u8> {
        let lower = name.to_lowercase();
        if lower == needle {
            Some(0)
        } else if lower.starts_with(&needle) {
            Some(1)
        } else if lower.contains(&needle) {
            Some(2)
        } else {
            None
        }
    };
    // (rank, kind order, name, owner): sorted, so the answer never depends on hashing.
    let mut found: Vec<(u8, u8, &'static str, &'static str)> = Vec::new();
    let database = reflection::database();
    for class in database.classes.values() {
        if let Some(r) = rank(class.name) {
            found.push((r, 0, class.name, ""));
        }
        for descriptor in class.properties.values() {
            if let Some(r) = rank(descriptor.name)
                && (all || reflection::property(class, descriptor.name).is_some_and(|p| p.is_current()))
            {
                found.push((r, 2, descriptor.name, class.name));
            }
        }
    }
    for descriptor in database.enums.values() {
        if let Some(r) = rank(descriptor.name) {
            found.push((r, 1, descriptor.name, ""));
        }
        for item in descriptor.items.keys() {
            if let Some(r) = rank(item) {
                found.push((r, 3, item, descriptor.name));
            }
        }
    }
    found.sort_unstable();
    let truncated = found.len() > MAX_MATCHES;
    found.truncate(MAX_MATCHES);
    let matches = found
        .into_iter()
        .map(|(_, kind, name, owner)| Match {
            kind: ["class", "enum", "property", "enumItem"][usize::from(kind)].to_owned(),
            name: name.to_owned(),
            class: (kind == 2).then(|| owner.to_owned()),
            r#enum: (kind == 3).then(|| owner.to_owned()),
        })
        .collect();
    Ok(ApiResult {
        matches: Some(matches),
        truncated: truncated.then_some(true),
        ..ApiResult::default()
    })
}

impl Render for Api {
    /// A class as its chain then one aligned line a property (type, then where it comes from
    /// and how it can be used); an enum as `Name = value` lines; a search one match a line.
    fn render(_args: &Json, result: &Json, out: Style, _err: Style) -> Option<Rendered> {
        let mut rendered = Rendered::default();
        let text = |v: &Json, key: &str| clean(v.get(key).and_then(Json::as_str).unwrap_or("")).into_owned();
        if let Some(properties) = result.get("properties").and_then(Json::as_array) {
            let mut chain = vec![text(result, "name")];
            for superclass in result
                .get("superclasses")
                .and_then(Json::as_array)
                .map_or(&[][..], Vec::as_slice)
            {
                chain.push(clean(superclass.as_str()?).into_owned());
            }
            let tags: Vec<&str> = result
                .get("tags")
                .and_then(Json::as_array)
                .map_or(&[][..], Vec::as_slice)
                .iter()
                .filter_map(Json::as_str)
                .collect();
            let tags = if tags.is_empty() {
                String::new()
            } else {
                format!("  [{}]", clean(&tags.join(", ")))
            };
            let _ = writeln!(rendered.stdout, "{}{tags}", out.bold(&chain.join(" : ")));
            let name_width = properties.iter().map(|p| text(p, "name").len()).max().unwrap_or(0);
            let type_width = properties.iter().map(|p| text(p, "type").len()).max().unwrap_or(0);
            for property in properties {
                let mut notes = Vec::new();
                if let Some(from) = property.get("from").and_then(Json::as_str) {
                    notes.push(format!("from {}", clean(from)));
                }
                if let Some(access) = property.get("access").and_then(Json::as_str) {
                    notes.push(clean(access).into_owned());
                }
                if property.get("deprecated") == Some(&Json::Bool(true)) {
                    notes.push("deprecated".to_owned());
                }
                let line = format!(
                    "  {:<name_width$}  {:<type_width$}  {}",
                    text(property, "name"),
                    text(property, "type"),
                    out.dim(&notes.join(", "))
                );
                let _ = writeln!(rendered.stdout, "{}", line.trim_end());
            }
        } else if let Some(items) = result.get("items").and_then(Json::as_array) {
            let _ = writeln!(
                rendered.stdout,
                "{}",
                out.bold(&format!("Enum.{}", text(result, "name")))
            );
            for item in items {
                let value = item.get("value")?.to_string();
                let _ = writeln!(rendered.stdout, "  {} = {}", text(item, "name"), clean(&value));
            }
        } else {
            for found in result.get("matches")?.as_array()? {
                let name = text(found, "name");
                let qualified = match text(found, "kind").as_str() {
                    "property" => format!("{}.{name}", text(found, "class")),
                    "enum" => format!("Enum.{name}"),
                    "enumItem" => format!("Enum.{}.{name}", text(found, "enum")),
                    _ => name,
                };
                let _ = writeln!(rendered.stdout, "{:<8}  {qualified}", text(found, "kind"));
            }
        }
        Some(rendered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(json: serde_json::Value) -> ApiArgs {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_class_lists_inherited_properties_with_where_they_come_from() {
        let part = answer(&args(serde_json::json!({"class": "Part"}))).unwrap();
        assert_eq!(part.name.as_deref(), Some("Part"));
        let superclasses = part.superclasses.unwrap();
        assert_eq!(superclasses.last().map(String::as_str), Some("Object"));
        assert!(superclasses.contains(&"BasePart".to_owned()));
        let properties = part.properties.unwrap();
        let color = properties.iter().find(|p| p.name == "Color").unwrap();
        assert_eq!(color.from.as_deref(), Some("BasePart"));
        assert_eq!(color.r#type, "Color3");
        assert_eq!(color.access, None);
        let shape = properties.iter().find(|p| p.name == "Shape").unwrap();
        assert_eq!(shape.from, None, "Part's own");
        assert_eq!(shape.r#type, "Enum.PartType");
        assert!(
            properties.iter().all(|p| p.deprecated.is_none()),
            "deprecated only with all"
        );
        assert!(
            !properties.iter().any(|p| p.name == "Color3uint8"),
            "unscriptable only with all"
        );
        let class_name = properties.iter().find(|p| p.name == "ClassName").unwrap();
        assert_eq!(class_name.access.as_deref(), Some("readOnly"));

        let everything = answer(&args(serde_json::json!({"class": "Part", "all": true}))).unwrap();
        let everything = everything.properties.unwrap();
        assert!(everything.len() > properties.len());
        let brick = everything.iter().find(|p| p.name == "brickColor").unwrap();
        assert_eq!(brick.deprecated, Some(true));
    }

    #[test]
    fn one_member_is_found_through_the_chain_or_refused_with_a_suggestion() {
        let one = answer(&args(serde_json::json!({"class": "Part", "member": "Anchored"}))).unwrap();
        let properties = one.properties.unwrap();
        assert_eq!(properties.len(), 1);
        assert_eq!(properties[0].from.as_deref(), Some("BasePart"));
        let error = answer(&args(serde_json::json!({"class": "Part", "member": "Colour"}))).unwrap_err();
        assert_eq!(
            error.message,
            "`member`: Part has no property `Colour`; did you mean `Color`?"
        );
        let error = answer(&args(serde_json::json!({"class": "Prat"}))).unwrap_err();
        assert_eq!(error.message, "`class`: unknown class `Prat`; did you mean `Part`?");
    }

    #[test]
    fn an_enum_lists_its_items_by_value() {
        let material = answer(&args(serde_json::json!({"enum": "Enum.Material"}))).unwrap();
        assert_eq!(material.name.as_deref(), Some("Material"));
        let items = material.items.unwrap();
        assert!(items.iter().any(|i| i.name == "Neon" && i.value == 288));
        assert_eq!(items[0].name, "Plastic");
        let error = answer(&args(serde_json::json!({"enum": "Materal"}))).unwrap_err();
        assert!(error.message.contains("did you mean `Material`?"), "{}", error.message);
    }

    #[test]
    fn a_search_ranks_exact_names_first_and_is_bounded() {
        let found = answer(&args(serde_json::json!({"search": "neon"}))).unwrap();
        let matches = found.matches.unwrap();
        assert_eq!(matches[0].kind, "enumItem");
        assert_eq!(matches[0].name, "Neon");
        assert_eq!(matches[0].r#enum.as_deref(), Some("Material"));

        let found = answer(&args(serde_json::json!({"search": "SpawnLocation"}))).unwrap();
        let first = &found.matches.unwrap()[0];
        assert_eq!((first.kind.as_str(), first.name.as_str()), ("class", "SpawnLocation"));

        let found = answer(&args(serde_json::json!({"search": "transparency"}))).unwrap();
        let matches = found.matches.unwrap();
        assert!(
            matches
                .iter()
                .any(|m| m.kind == "property" && m.class.as_deref() == Some("BasePart"))
        );
        assert!(
            matches.iter().all(|m| m.kind != "property" || m.class.is_some()),
            "a property names its class"
        );

        let wide = answer(&args(serde_json::json!({"search": "e"}))).unwrap();
        assert_eq!(wide.matches.unwrap().len(), MAX_MATCHES);
        assert_eq!(wide.truncated, Some(true));
    }

    #[test]
    fn exactly_one_question_is_asked() {
        for bad in [
            serde_json::json!({}),
            serde_json::json!({"class": "Part", "enum": "Material"}),
            serde_json::json!({"member": "Color"}),
            serde_json::json!({"enum": "Material", "member": "Neon"}),
            serde_json::json!({"search": "  "}),
        ] {
            let error = answer(&args(bad.clone())).unwrap_err();
            assert_eq!(error.code, crate::protocol::ErrorCode::InvalidArgs, "{bad}");
            assert!(error.message.contains('`'), "names the field: {}", error.message);
        }
    }
}

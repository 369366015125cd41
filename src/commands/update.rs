//! `update`: change instances' properties, attributes (`null` removes one), tags, name and
//! parent, all or nothing, in one undo step; the result has the paths after the call.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use super::reflection::{self, sentence};
use super::{Command, Invocation, Kind, Output, Spec};
use crate::protocol::{Context, ErrorCode, ToolError};

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UpdateArgs {
    // One line for the fields, as in `create` (the catalogue budget); the typed item below
    // still refuses unknown or mistyped fields, by name.
    #[schemars(with = "Vec<ItemShape>")]
    pub items: Vec<UpdateItem>,
}

/// {path, properties?, attributes? (null removes), tags?: {add?, remove?}, name?, parent?}
#[derive(JsonSchema)]
#[allow(dead_code)] // only its schema is used
struct ItemShape(Map<String, Json>);

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(description = "")]
pub struct UpdateItem {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<Map<String, Json>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<Map<String, Json>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<TagChanges>,
    // Renamed before any reparent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(description = "")]
pub struct TagChanges {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct UpdateResult {
    /// Each item's path after the call.
    pub updated: Vec<String>,
    /// `{path: file}` for the scripts the project's sourcemap maps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<std::collections::BTreeMap<String, String>>,
}

pub struct Update;

impl Command for Update {
    type Args = UpdateArgs;
    type Result = UpdateResult;
    const SPEC: Spec = Spec {
        name: "update",
        description: "Change instances (not script source), all or nothing.",
        needs_session: true,
        default_context: Context::Edit,
        timeout: Duration::from_secs(10),
        kind: Kind::Write,
        capabilities: super::Capabilities::of(&[super::Capability::Write]),
        idempotent: false,
        open_world: false,
        positional: &[],
        truncation_hint: "",
        follow_event: None,
        example: "studio-bridge update --items '{\"path\": \"Workspace.Floor\", \"properties\": {\"Transparency\": 0.5}}'",
        from_file: None,
        flag_help: &[("items", "The changes, one an instance")],
    };
    const FILES: super::files::Files = super::files::Files {
        path_lists: &["updated"],
        ..super::files::Files::NONE
    };

    async fn run(args: UpdateArgs, cx: &Invocation) -> Result<Output, ToolError> {
        validate(&args)?;
        reflection::load().await;
        check_api(&args)?;
        let result = cx
            .call_plugin(&Self::SPEC, &args, Self::SPEC.timeout, None)
            .await
            .map_err(with_suggestion)?;
        Ok(Output::plugin(result))
    }
}

/// The Roblox API check before Studio: only Studio knows each instance's class, so here a
/// property must exist on some class (a name no class has is a typo: `Colour`).
fn check_api(args: &UpdateArgs) -> Result<(), ToolError> {
    for (i, item) in args.items.iter().enumerate() {
        for name in item.properties.iter().flat_map(|p| p.keys()) {
            reflection::check_property_exists(name).map_err(|message| {
                ToolError::invalid_args(format!("item {}: properties.{name}: {}", i + 1, sentence(&message)))
            })?;
        }
    }
    Ok(())
}

/// A property that exists, but not on the instance's class, is refused by the plugin, which
/// names the class ("Part has no property `Heat`"): add the did-you-mean for that class.
fn with_suggestion(error: ToolError) -> ToolError {
    if error.code != ErrorCode::InvalidArgs || error.message.contains("did you mean") {
        return error;
    }
    let suggestion = no_such_property(&error.message).and_then(|(class_name, property)| {
        let class = reflection::class(class_name)?;
        reflection::suggest_property(class, property)
    });
    match suggestion {
        Some(name) => ToolError {
            message: format!("{} Did you mean `{name}`?", error.message.trim_end()),
            ..error
        },
        None => error,
    }
}

/// `("Part", "Heat")` from a message holding "Part has no property `Heat`".
fn no_such_property(message: &str) -> Option<(&str, &str)> {
    let (before, after) = message.split_once(" has no property `")?;
    let class_name = before.rsplit(|c: char| !(c.is_alphanumeric() || c == '_')).next()?;
    let property = after.split('`').next()?;
    (!class_name.is_empty() && !property.is_empty()).then_some((class_name, property))
}

/// Scripts are written only by `script_edit` (through the Script Editor, hash-checked) and by
/// `create`'s `source` for a new script: `properties.Source` is refused here and, in the same
/// words, by the plugin (Actions/Update.luau), with nothing written.
fn source_refused(i: usize, key: &str, path: &str) -> ToolError {
    ToolError::invalid_args(format!(
        "`items[{i}].properties.{key}` (item {n}): a script's source is written only by studio_script_edit (through the Script Editor, hash-checked, one undo step) or, for a new script, by studio_create's `source`. Use studio_script_edit with path {path}. Nothing was changed.",
        n = i + 1
    ))
}

/// What needs no Studio to refuse: errors name the item (1-based) like the plugin's.
fn validate(args: &UpdateArgs) -> Result<(), ToolError> {
    if args.items.is_empty() {
        return Err(ToolError::invalid_args(
            "`items` is empty; pass at least one {path, …}.",
        ));
    }
    for (i, item) in args.items.iter().enumerate() {
        let n = i + 1;
        if let Some(key) = item
            .properties
            .iter()
            .flat_map(|p| p.keys())
            .find(|k| k.eq_ignore_ascii_case("Source"))
        {
            return Err(source_refused(i, key, &item.path));
        }
        if item.path.trim().is_empty() {
            return Err(ToolError::invalid_args(format!(
                "item {n}: path: is empty; pass the instance's path, e.g. Workspace.Part."
            )));
        }
        if item.parent.as_deref().is_some_and(|p| p.trim().is_empty()) {
            return Err(ToolError::invalid_args(format!(
                "item {n}: parent: is empty; pass the new parent's path or leave it out."
            )));
        }
        if let Some(tags) = &item.tags
            && let Some(tag) = tags.add.iter().chain(&tags.remove).find(|t| t.is_empty())
        {
            return Err(ToolError::invalid_args(format!(
                "item {n}: tags: {tag:?} is empty; a tag is a non-empty string."
            )));
        }
    }
    Ok(())
}

// Human rendering --------------------------------------------------------------------------

use crate::human::render::{self, Rendered, Style};

impl super::Render for Update {
    /// Each item's path after the call, one a line.
    fn render(_args: &Json, result: &Json, _out: Style, _err: Style) -> Option<Rendered> {
        Some(Rendered {
            stdout: render::lines(result.get("updated")?.as_array()?)?,
            stderr: String::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_item_and_field_and_keeps_null_attributes() {
        let args: UpdateArgs = serde_json::from_value(serde_json::json!({
            "items": [
                { "path": "Workspace.A", "attributes": { "X": null } },
                { "path": "Workspace.B", "parent": "" }
            ]
        }))
        .unwrap();
        // a null attribute survives into what is sent to the plugin
        let sent = serde_json::to_value(&args).unwrap();
        assert_eq!(sent["items"][0]["attributes"], serde_json::json!({ "X": null }));
        let err = validate(&args).unwrap_err();
        assert!(err.message.starts_with("item 2: parent:"), "{}", err.message);
    }

    #[test]
    fn source_is_refused_naming_the_item_and_script_edit() {
        let args: UpdateArgs = serde_json::from_value(serde_json::json!({
            "items": [
                { "path": "Workspace.A", "properties": { "Anchored": true } },
                { "path": "ServerScriptService.Main", "properties": { "Disabled": true, "Source": "print(1)" } }
            ]
        }))
        .unwrap();
        let err = validate(&args).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidArgs);
        assert!(
            err.message.starts_with("`items[1].properties.Source` (item 2): "),
            "{}",
            err.message
        );
        assert!(err.message.contains("studio_script_edit"), "{}", err.message);
        assert!(err.message.contains("ServerScriptService.Main"), "{}", err.message);
        // any spelling of the name: the plugin would take none of them
        let lower: UpdateArgs = serde_json::from_value(serde_json::json!({
            "items": [{ "path": "ServerScriptService.Main", "properties": { "source": "" } }]
        }))
        .unwrap();
        let err = validate(&lower).unwrap_err();
        assert!(
            err.message.starts_with("`items[0].properties.source`"),
            "{}",
            err.message
        );
        // other properties of a script pass
        let other: UpdateArgs = serde_json::from_value(serde_json::json!({
            "items": [{ "path": "ServerScriptService.Main", "properties": { "Disabled": true } }]
        }))
        .unwrap();
        assert!(validate(&other).is_ok());
    }

    #[test]
    fn a_property_no_class_has_is_refused_before_studio_with_a_suggestion() {
        let args: UpdateArgs = serde_json::from_value(serde_json::json!({
            "items": [
                { "path": "Workspace.A", "properties": { "Anchored": true } },
                { "path": "Workspace.Part", "properties": { "Colour": [1, 0, 0] } }
            ]
        }))
        .unwrap();
        let err = check_api(&args).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidArgs);
        assert_eq!(
            err.message,
            "item 2: properties.Colour: No class has a property `Colour`; did you mean `Color`?"
        );
    }

    #[test]
    fn the_plugins_no_such_property_gets_the_did_you_mean_for_that_class() {
        let plugin = ToolError::invalid_args(
            "item 1: properties.Colour3: Part has no property `Colour3`. Check the name with query (properties) or the api command.",
        );
        let told = with_suggestion(plugin);
        assert!(
            told.message.ends_with("api command. Did you mean `Color`?"),
            "{}",
            told.message
        );
        let other = with_suggestion(ToolError::invalid_args("item 1: path: nothing there"));
        assert_eq!(other.message, "item 1: path: nothing there");
        assert_eq!(
            no_such_property("item 2: x: Model has no property `Size`."),
            Some(("Model", "Size"))
        );
    }
}

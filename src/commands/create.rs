//! `create`: new instances (a Model and its parts in one call), all or nothing, in one undo
//! step. The plugin checks every item before it creates anything (PROTOCOL.md, Values, for
//! the property values it takes).

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use super::reflection::{self, sentence};
use std::collections::BTreeMap;

use futures_util::StreamExt as _;

use super::files::Files;
use super::{Command, Invocation, Kind, Output, Spec};
use crate::luau;
use crate::protocol::{Context, ErrorCode, ToolError};

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateArgs {
    // The catalogue says each item's fields in one line (the budget test holds every tool to
    // about 400 bytes); the typed item below still refuses unknown or mistyped fields, by name.
    #[schemars(with = "Vec<ItemShape>")]
    pub items: Vec<CreateItem>,
    /// false: no syntax check
    #[schemars(extend("default" = true))]
    #[serde(default = "super::check_by_default", skip_serializing)]
    pub check: bool,
}

/// {className, parent (may be an earlier item), name?, properties?, attributes?, tags?, source?}
#[derive(JsonSchema)]
#[allow(dead_code)] // only its schema is used
struct ItemShape(Map<String, Json>);

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(description = "")]
pub struct CreateItem {
    pub class_name: String,
    pub parent: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<Map<String, Json>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<Map<String, Json>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    /// For scripts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateResult {
    /// The new instances' paths, in item order.
    pub created: Vec<String>,
    /// `{path: file}` for the new scripts the project's sourcemap maps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<BTreeMap<String, String>>,
    /// selene's findings in the new scripts' sources (never blocking).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<Vec<ScriptDiagnostic>>,
    /// How many diagnostics past the first hundred were left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics_omitted: Option<u32>,
    /// Why a source was not linted (selene missing or failed); the instances were created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics_skipped: Option<String>,
}

/// A finding in the script at `path`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ScriptDiagnostic {
    pub path: String,
    #[serde(flatten)]
    pub diagnostic: luau::lint::Diagnostic,
}

pub struct Create;

impl Command for Create {
    type Args = CreateArgs;
    type Result = CreateResult;
    const SPEC: Spec = Spec {
        name: "create",
        description: "Create instances, all or nothing.",
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
        example: "studio-bridge create --items '[{\"className\": \"Part\", \"parent\": \"Workspace\", \"name\": \"Floor\", \"properties\": {\"Anchored\": true}}]'",
        from_file: None,
        flag_help: &[("items", "The instances to create, in order")],
    };
    const FILES: Files = Files {
        path_lists: &["created"],
        ..Files::NONE
    };

    /// A script's source on any item (`source`, or a `Source` property) is code.
    fn capabilities(args: &CreateArgs) -> super::Capabilities {
        let writes_code = args.items.iter().any(|item| {
            item.source.is_some()
                || item
                    .properties
                    .as_ref()
                    .is_some_and(|p| p.keys().any(|k| k.eq_ignore_ascii_case("source")))
        });
        if writes_code {
            Self::SPEC.capabilities.with(super::Capability::Code)
        } else {
            Self::SPEC.capabilities
        }
    }

    async fn run(args: CreateArgs, cx: &Invocation) -> Result<Output, ToolError> {
        validate(&args)?;
        if args.check {
            check_syntax(&args)?;
        }
        reflection::load().await;
        check_api(&args)?;
        create_and_lint(&args, cx).await
    }
}

/// The Roblox API check, before anything reaches Studio: each class must be creatable and
/// each property exist on it and be writable, with a "did you mean" for a near miss
/// (reflection.rs; the data is rbx-dom's API dump, see the README for a newer one).
fn check_api(args: &CreateArgs) -> Result<(), ToolError> {
    for (i, item) in args.items.iter().enumerate() {
        let n = i + 1;
        let class = reflection::check_creatable_class(&item.class_name)
            .map_err(|message| ToolError::invalid_args(format!("item {n}: className: {}", sentence(&message))))?;
        for name in item.properties.iter().flat_map(|p| p.keys()) {
            reflection::check_writable_property(class, name).map_err(|message| {
                ToolError::invalid_args(format!("item {n}: properties.{name}: {}", sentence(&message)))
            })?;
        }
    }
    Ok(())
}

/// Every script source an item writes (`source`, or a string `Source` property): its item's
/// index, the field it is in, and the source.
fn sources(args: &CreateArgs) -> Vec<(usize, String, &str)> {
    let mut found = Vec::new();
    for (i, item) in args.items.iter().enumerate() {
        let property = item
            .properties
            .iter()
            .flatten()
            .find(|(k, _)| k.eq_ignore_ascii_case("source"));
        let sources = [
            item.source.as_deref().map(|s| ("source".to_owned(), s)),
            property.and_then(|(k, v)| Some((format!("properties.{k}"), v.as_str()?))),
        ];
        found.extend(sources.into_iter().flatten().map(|(field, source)| (i, field, source)));
    }
    found
}

/// Luau's parser over every script source, before anything reaches Studio: a syntax error
/// creates nothing.
fn check_syntax(args: &CreateArgs) -> Result<(), ToolError> {
    for (i, field, source) in sources(args) {
        let n = i + 1;
        if let Err(errors) = luau::check(source) {
            let first = errors.first().map(|e| format!("line {}: {}", e.line, e.message));
            return Err(ToolError::new(
                ErrorCode::SyntaxError,
                format!(
                    "item {n}: {field}: {}; nothing was created. Fix the source, or pass `check: false` for syntax newer than the bundled Luau {}.",
                    first.unwrap_or_default(),
                    luau::version()
                ),
            )
            .with_details(luau::details(&errors)));
        }
    }
    Ok(())
}

/// How many selene processes one `create` runs at once.
const LINTS_AT_ONCE: usize = 4;

/// Creates, while selene lints every script source (luau::lint, never blocking); the result
/// carries each finding with its new script's path.
async fn create_and_lint(args: &CreateArgs, cx: &Invocation) -> Result<Output, ToolError> {
    let sources = sources(args);
    if sources.is_empty() {
        return cx.forward(&Create::SPEC, args).await;
    }
    // A few selene processes at a time, in item order: a create of fifty scripts must not
    // start fifty.
    // (Owned texts: a stream of futures borrowing them is not Send for the command table.)
    let texts: Vec<String> = sources.iter().map(|(_, _, source)| (*source).to_owned()).collect();
    let lints = futures_util::stream::iter(texts)
        .map(|source| async move { luau::lint::lint(&source).await })
        .buffered(LINTS_AT_ONCE)
        .collect::<Vec<_>>();
    let (created, lints) = tokio::join!(cx.forward(&Create::SPEC, args), lints);
    let mut result = created?.value();
    let Some(map) = result.as_object_mut() else {
        return Ok(Output::json(result));
    };
    let paths: Vec<String> = map
        .get("created")
        .and_then(Json::as_array)
        .map(|c| c.iter().map(|p| p.as_str().unwrap_or_default().to_owned()).collect())
        .unwrap_or_default();
    let mut found = Vec::new();
    let mut skipped = None;
    for ((i, _, _), lint) in sources.iter().zip(lints) {
        match lint {
            luau::lint::Lint::Found(diagnostics) => {
                let path = paths.get(*i).cloned().unwrap_or_else(|| format!("item {}", i + 1));
                found.extend(diagnostics.into_iter().map(|diagnostic| ScriptDiagnostic {
                    path: path.clone(),
                    diagnostic,
                }));
            }
            luau::lint::Lint::Skipped(why) => {
                skipped.get_or_insert(why);
            }
        }
    }
    luau::lint::annotate_all(map, found, skipped);
    Ok(Output::json(result))
}

/// What needs no Studio to refuse: errors name the item (1-based) like the plugin's.
fn validate(args: &CreateArgs) -> Result<(), ToolError> {
    if args.items.is_empty() {
        return Err(ToolError::invalid_args(
            "`items` is empty; pass at least one {className, parent}.",
        ));
    }
    for (i, item) in args.items.iter().enumerate() {
        let n = i + 1;
        if item.class_name.trim().is_empty() {
            return Err(ToolError::invalid_args(format!(
                "item {n}: className: is empty; pass a creatable class such as Part, Model or Folder."
            )));
        }
        if item.parent.trim().is_empty() {
            return Err(ToolError::invalid_args(format!(
                "item {n}: parent: is empty; pass the parent's path, e.g. Workspace."
            )));
        }
        if let Some(tag) = item.tags.iter().flatten().find(|t| t.is_empty()) {
            return Err(ToolError::invalid_args(format!(
                "item {n}: tags: {tag:?} is empty; a tag is a non-empty string."
            )));
        }
    }
    Ok(())
}

// Human rendering --------------------------------------------------------------------------

use std::fmt::Write as _;

use crate::human::render::{self, Rendered, Style, clean};

impl super::Render for Create {
    /// The new instances' paths, one a line (`→ file` where the sourcemap maps a script),
    /// then selene's findings as `script-edit` prints them.
    fn render(_args: &Json, result: &Json, out: Style, err: Style) -> Option<Rendered> {
        let mut rendered = Rendered::default();
        let files = result.get("files").and_then(Json::as_object);
        for path in result.get("created")?.as_array()? {
            let path = path.as_str()?;
            match files.and_then(|f| f.get(path)).and_then(Json::as_str) {
                Some(file) => writeln!(rendered.stdout, "{} → {}", clean(path), clean(file)),
                None => writeln!(rendered.stdout, "{}", clean(path)),
            }
            .ok()?;
        }
        render::diagnostics(result, &mut rendered, out, err);
        Some(rendered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(class_name: &str, parent: &str) -> CreateItem {
        CreateItem {
            class_name: class_name.into(),
            parent: parent.into(),
            name: None,
            properties: None,
            attributes: None,
            tags: None,
            source: None,
        }
    }

    #[test]
    fn validation_names_the_item_and_field() {
        let err = validate(&CreateArgs {
            items: vec![],
            check: true,
        })
        .unwrap_err();
        assert!(err.message.contains("`items`"), "{}", err.message);
        let err = validate(&CreateArgs {
            items: vec![item("Part", "Workspace"), item("Part", " ")],
            check: true,
        })
        .unwrap_err();
        assert!(err.message.starts_with("item 2: parent:"), "{}", err.message);
        let err = validate(&CreateArgs {
            items: vec![item("", "Workspace")],
            check: true,
        })
        .unwrap_err();
        assert!(err.message.starts_with("item 1: className:"), "{}", err.message);
        assert!(
            validate(&CreateArgs {
                items: vec![item("Part", "Workspace")],
                check: true,
            })
            .is_ok()
        );
    }

    #[test]
    fn a_broken_source_names_the_item_field_and_line() {
        let args = |items: serde_json::Value| -> CreateArgs {
            serde_json::from_value(serde_json::json!({ "items": items })).unwrap()
        };
        let fine = args(serde_json::json!([
            { "className": "Script", "parent": "ServerScriptService", "source": "local x: number = 1\nx += 1" }
        ]));
        assert!(fine.check, "checked unless the caller says check: false");
        assert!(check_syntax(&fine).is_ok());
        let broken = args(serde_json::json!([
            { "className": "Folder", "parent": "Workspace" },
            { "className": "Script", "parent": "Workspace", "source": "print(1)\nlocal = 2" }
        ]));
        let err = check_syntax(&broken).unwrap_err();
        assert_eq!(err.code, ErrorCode::SyntaxError);
        assert!(err.message.starts_with("item 2: source: line 2: "), "{}", err.message);
        assert_eq!(err.details.as_ref().unwrap()["errors"][0]["line"], 2);
        let property = args(serde_json::json!([
            { "className": "ModuleScript", "parent": "Workspace", "properties": { "Source": "return {" } }
        ]));
        let err = check_syntax(&property).unwrap_err();
        assert!(
            err.message.starts_with("item 1: properties.Source: line 1: "),
            "{}",
            err.message
        );
    }

    #[test]
    fn classes_and_properties_are_checked_against_the_api_before_studio() {
        let args = |items: serde_json::Value| -> CreateArgs {
            serde_json::from_value(serde_json::json!({ "items": items })).unwrap()
        };
        let fine = args(serde_json::json!([
            { "className": "Model", "parent": "Workspace" },
            { "className": "Part", "parent": "Workspace.Model", "properties": { "Color": "#ff0000", "Anchored": true } }
        ]));
        assert!(check_api(&fine).is_ok());
        let typo = args(serde_json::json!([
            { "className": "Model", "parent": "Workspace" },
            { "className": "Prat", "parent": "Workspace" }
        ]));
        assert_eq!(
            check_api(&typo).unwrap_err().message,
            "item 2: className: Unknown class `Prat`; did you mean `Part`?"
        );
        let colour = args(serde_json::json!([
            { "className": "Part", "parent": "Workspace", "properties": { "Colour": [0, 0, 1] } }
        ]));
        assert_eq!(
            check_api(&colour).unwrap_err().message,
            "item 1: properties.Colour: Part has no property `Colour`; did you mean `Color`?"
        );
        let read_only = args(serde_json::json!([
            { "className": "Part", "parent": "Workspace", "properties": { "ClassName": "X" } }
        ]));
        assert!(check_api(&read_only).unwrap_err().message.contains("read-only"));
    }
}

//! The Roblox API as data: classes, their properties through the superclass chain, enums,
//! and a "did you mean" for near misses. Read from the API dump the rbx-dom project
//! publishes (`rbx_reflection_database`, the data Rojo uses), decoded on first use only,
//! so a process that never asks pays nothing for it (TESTING.md, B5: idle RSS).
//!
//! The checks return messages ready for an `invalid_args` error; a command adds where
//! the name came from ("item 3, `properties`: …").

use std::collections::BTreeSet;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, Ordering};

use rbx_reflection::{ClassDescriptor, ClassTag, DataType, PropertyTag, ReflectionDatabase, Scriptability};
use rbx_types::VariantType;

/// The database: a local one where the rbx-dom convention puts it (`RBX_DATABASE`, or
/// `~/.rbxreflection/database.msgpack`, so a person can follow a newer Studio without a
/// new studio-bridge), else the one built in.
static DATABASE: LazyLock<&'static ReflectionDatabase<'static>> =
    LazyLock::new(|| match rbx_reflection_database::get() {
        Ok(database) => database,
        Err(error) => {
            tracing::warn!(%error, "the local Roblox API database cannot be read; using the built-in one");
            rbx_reflection_database::get_bundled()
        }
    });

pub fn database() -> &'static ReflectionDatabase<'static> {
    &DATABASE
}

static LOADED: AtomicBool = AtomicBool::new(false);

/// Decodes the database on the blocking pool the first time: that takes tens of
/// milliseconds of CPU, and the async thread serves every other caller's calls meanwhile.
/// The commands that read the database await this first.
pub async fn load() {
    if LOADED.load(Ordering::Acquire) {
        return;
    }
    // Should the blocking task fail, the first `database()` decodes it in place instead.
    let _ = tokio::task::spawn_blocking(|| {
        LazyLock::force(&DATABASE);
    })
    .await;
    LOADED.store(true, Ordering::Release);
}

pub fn class(name: &str) -> Option<&'static ClassDescriptor<'static>> {
    database().classes.get(name)
}

/// `class` and its superclasses, nearest first (`Part`, `FormFactorPart`, `BasePart`, …).
pub fn chain(class: &'static ClassDescriptor<'static>) -> impl Iterator<Item = &'static ClassDescriptor<'static>> {
    database().superclasses_iter(class)
}

/// Whether and how Luau can reach a property.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    ReadWrite,
    ReadOnly,
    WriteOnly,
    /// Only in files (a serialization form such as `Color3uint8`), not from Luau.
    NotScriptable,
    /// Reached through its own API rather than as a property (`Tags`, `Attributes`).
    Custom,
}

impl Access {
    /// How the `api` result says it; `None` for the usual read-write.
    pub fn label(self) -> Option<&'static str> {
        match self {
            Access::ReadWrite => None,
            Access::ReadOnly => Some("readOnly"),
            Access::WriteOnly => Some("writeOnly"),
            Access::NotScriptable => Some("notScriptable"),
            Access::Custom => Some("custom"),
        }
    }

    pub fn writable(self) -> bool {
        matches!(self, Access::ReadWrite | Access::WriteOnly)
    }
}

/// One property as the checks and `api` see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    pub name: &'static str,
    /// The class that declares it (`BasePart` for a Part's `Color`).
    pub class: &'static str,
    /// Its type as Luau names it: `Color3`, `number`, `Enum.Material`, `Instance`.
    pub type_name: String,
    pub access: Access,
    pub deprecated: bool,
}

impl Property {
    fn of(class: &'static str, descriptor: &'static rbx_reflection::PropertyDescriptor<'static>) -> Property {
        let tags = &descriptor.tags;
        let access = match descriptor.scriptability {
            Scriptability::ReadWrite => Access::ReadWrite,
            Scriptability::Read => Access::ReadOnly,
            Scriptability::Write => Access::WriteOnly,
            Scriptability::Custom => Access::Custom,
            _ => Access::NotScriptable,
        };
        // The tags say it too, and win: the dump marks a few properties that way only.
        let access = if tags.contains(&PropertyTag::NotScriptable) {
            Access::NotScriptable
        } else if tags.contains(&PropertyTag::ReadOnly) && access == Access::ReadWrite {
            Access::ReadOnly
        } else {
            access
        };
        Property {
            name: descriptor.name,
            class,
            type_name: type_name(&descriptor.data_type),
            access,
            deprecated: tags.contains(&PropertyTag::Deprecated),
        }
    }

    /// What an agent may use without a second thought: scriptable and current.
    pub fn is_current(&self) -> bool {
        !self.deprecated && self.access != Access::NotScriptable
    }
}

/// A property's type as Luau names it.
fn type_name(data_type: &DataType<'_>) -> String {
    let ty = match data_type {
        DataType::Enum(name) => return format!("Enum.{name}"),
        DataType::Value(ty) => *ty,
        _ => return "unknown".to_owned(),
    };
    let name = match ty {
        VariantType::Bool => "boolean",
        VariantType::Int32 | VariantType::Int64 => "int",
        VariantType::Float32 | VariantType::Float64 => "number",
        VariantType::String | VariantType::BinaryString => "string",
        VariantType::Ref => "Instance",
        VariantType::Color3uint8 => "Color3",
        VariantType::Content | VariantType::ContentId => "Content",
        VariantType::OptionalCFrame => "CFrame?",
        VariantType::EnumItem => "EnumItem",
        other => return format!("{other:?}"),
    };
    name.to_owned()
}

/// Every property `class` has, its own first, then each superclass's in chain order;
/// within a class, by name.
pub fn properties(class: &'static ClassDescriptor<'static>) -> Vec<Property> {
    let mut all = Vec::new();
    for owner in chain(class) {
        let mut own: Vec<Property> = owner
            .properties
            .values()
            .map(|descriptor| Property::of(owner.name, descriptor))
            .collect();
        own.sort_by(|a, b| a.name.cmp(b.name));
        all.extend(own);
    }
    all
}

/// One property of `class`, declared by it or inherited.
pub fn property(class: &'static ClassDescriptor<'static>, name: &str) -> Option<Property> {
    chain(class).find_map(|owner| {
        owner
            .properties
            .get(name)
            .map(|descriptor| Property::of(owner.name, descriptor))
    })
}

/// An enum's items, by value.
pub fn enum_items(name: &str) -> Option<Vec<(&'static str, u32)>> {
    let descriptor = database().enums.get(name)?;
    let mut items: Vec<(&'static str, u32)> = descriptor.items.iter().map(|(n, v)| (*n, *v)).collect();
    items.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(b.0)));
    Some(items)
}

/// The closest of `candidates` to `wanted`, if one is close enough to be what was meant:
/// any case difference, or an edit distance (a swap counts once) of at most a third of
/// the length (at least 1, at most 3). Earlier candidates win ties, so pass the preferred
/// ones first.
pub fn did_you_mean<'a>(wanted: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let wanted_lower = wanted.to_lowercase();
    let budget = (wanted.chars().count() / 3).clamp(1, 3);
    let mut best: Option<(usize, &'a str)> = None;
    for candidate in candidates {
        if candidate == wanted {
            continue;
        }
        let distance = strsim::damerau_levenshtein(&wanted_lower, &candidate.to_lowercase());
        if distance <= budget && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, name)| name)
}

fn suffix(suggestion: Option<&str>) -> String {
    suggestion.map_or_else(String::new, |s| format!("; did you mean `{s}`?"))
}

/// The class names, creatable and current ones first (for suggestions).
fn class_names_for_suggestion() -> Vec<&'static str> {
    let mut names: Vec<(bool, &'static str)> = database()
        .classes
        .values()
        .map(|c| {
            let lesser = c.tags.contains(&ClassTag::Deprecated) || c.tags.contains(&ClassTag::NotCreatable);
            (lesser, c.name)
        })
        .collect();
    names.sort_unstable();
    names.into_iter().map(|(_, name)| name).collect()
}

/// (d) The did-you-mean for a class name (from a caller, or a plugin's error).
pub fn suggest_class(name: &str) -> Option<&'static str> {
    did_you_mean(name, class_names_for_suggestion())
}

/// (a) `create`'s check of a class name: it must exist and `Instance.new` must be able
/// to make it.
pub fn check_creatable_class(name: &str) -> Result<&'static ClassDescriptor<'static>, String> {
    let Some(descriptor) = class(name) else {
        return Err(format!("Unknown class `{name}`{}", suffix(suggest_class(name))));
    };
    if descriptor.tags.contains(&ClassTag::Service) {
        return Err(format!(
            "`{name}` is a service: there is one already (game:GetService(\"{name}\")), it cannot be created"
        ));
    }
    if descriptor.tags.contains(&ClassTag::NotCreatable) {
        return Err(format!(
            "`{name}` cannot be created with Instance.new (it is abstract or made by the engine); use a class that inherits from it"
        ));
    }
    Ok(descriptor)
}

/// The did-you-mean for a property name on `class`: a current one first, else any.
pub fn suggest_property(class: &'static ClassDescriptor<'static>, name: &str) -> Option<&'static str> {
    let all = properties(class);
    let current = all.iter().filter(|p| p.is_current()).map(|p| p.name);
    did_you_mean(name, current).or_else(|| did_you_mean(name, all.iter().map(|p| p.name)))
}

/// (b) A property name on a known class, for writing: it must exist (on the class or a
/// superclass) and be writable from Luau.
pub fn check_writable_property(class: &'static ClassDescriptor<'static>, name: &str) -> Result<Property, String> {
    let Some(found) = property(class, name) else {
        return Err(format!(
            "{} has no property `{name}`{}",
            class.name,
            suffix(suggest_property(class, name))
        ));
    };
    // Reached through their own fields, whatever the dump says of them.
    match name {
        "Tags" => return Err("`Tags` is not set as a property: use `tags`".to_owned()),
        "Attributes" | "AttributesSerialize" => {
            return Err("`Attributes` is not set as a property: use `attributes`".to_owned());
        }
        "Source" if found.access == Access::Custom => {
            return Err(
                "A script's `Source` is not set as a property: use `source` (create) or studio_script_edit".to_owned(),
            );
        }
        _ => {}
    }
    match found.access {
        Access::ReadWrite | Access::WriteOnly => Ok(found),
        Access::ReadOnly => Err(format!("{}'s `{name}` is read-only", class.name)),
        Access::NotScriptable => Err(format!(
            "{}'s `{name}` cannot be set from Luau (it exists only in saved files)",
            class.name
        )),
        Access::Custom => Err(format!("{}'s `{name}` cannot be set as a property", class.name)),
    }
}

/// Every distinct property name, current ones first (for suggestions across classes).
fn property_names_for_suggestion() -> &'static [&'static str] {
    static NAMES: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
        let mut current = BTreeSet::new();
        let mut rest = BTreeSet::new();
        for class in database().classes.values() {
            for descriptor in class.properties.values() {
                if Property::of(class.name, descriptor).is_current() {
                    current.insert(descriptor.name);
                } else {
                    rest.insert(descriptor.name);
                }
            }
        }
        let rest: Vec<&'static str> = rest.difference(&current).copied().collect();
        current.into_iter().chain(rest).collect()
    });
    &NAMES
}

/// A check's message as a sentence: a full stop unless it ends in one already (a
/// did-you-mean ends in `?`).
pub fn sentence(message: &str) -> String {
    if message.ends_with(['.', '?', '!']) {
        message.to_owned()
    } else {
        format!("{message}.")
    }
}

/// (c) `update`'s check, where only Studio knows the instance's class: some class must
/// have a property of that name (the plugin checks the instance's own class).
pub fn check_property_exists(name: &str) -> Result<(), String> {
    let names = property_names_for_suggestion();
    if names.contains(&name) {
        return Ok(());
    }
    Err(format!(
        "No class has a property `{name}`{}",
        suffix(did_you_mean(name, names.iter().copied()))
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part() -> &'static ClassDescriptor<'static> {
        class("Part").expect("Part is in the API dump")
    }

    #[test]
    fn colour_on_a_part_suggests_color() {
        let message = check_writable_property(part(), "Colour").unwrap_err();
        assert_eq!(message, "Part has no property `Colour`; did you mean `Color`?");
        assert_eq!(
            suggest_property(part(), "color"),
            Some("Color"),
            "a case slip is a near miss"
        );
    }

    #[test]
    fn color_is_inherited_from_base_part_as_a_writable_color3() {
        let color = check_writable_property(part(), "Color").unwrap();
        assert_eq!(color.class, "BasePart");
        assert_eq!(color.type_name, "Color3");
        assert_eq!(color.access, Access::ReadWrite);
        let names: Vec<&str> = chain(part()).map(|c| c.name).collect();
        assert_eq!(names.first(), Some(&"Part"));
        // The dump's root class is Object, above Instance.
        assert_eq!(names.last(), Some(&"Object"));
        assert!(names.contains(&"BasePart"), "{names:?}");
        let material = property(part(), "Material").unwrap();
        assert_eq!(material.type_name, "Enum.Material");
        assert_eq!(property(part(), "Parent").unwrap().type_name, "Instance");
        assert_eq!(property(part(), "Parent").unwrap().class, "Instance");
    }

    #[test]
    fn properties_list_the_class_first_then_each_superclass_once() {
        let all = properties(part());
        let owners: Vec<&str> = all.iter().map(|p| p.class).collect();
        let mut order: Vec<&str> = owners.clone();
        order.dedup();
        let chain: Vec<&str> = chain(part())
            .filter(|c| !c.properties.is_empty())
            .map(|c| c.name)
            .collect();
        assert_eq!(order, chain, "grouped by declaring class, in chain order");
        let colors = all.iter().filter(|p| p.name == "Color").count();
        assert_eq!(colors, 1);
    }

    #[test]
    fn read_only_and_unscriptable_properties_are_refused_with_the_reason() {
        let message = check_writable_property(part(), "ClassName").unwrap_err();
        assert_eq!(message, "Part's `ClassName` is read-only");
        let message = check_writable_property(part(), "Color3uint8").unwrap_err();
        assert!(message.contains("cannot be set from Luau"), "{message}");
        let message = check_writable_property(part(), "Tags").unwrap_err();
        assert!(message.contains("use `tags`"), "{message}");
        let message = check_writable_property(class("Script").unwrap(), "Source").unwrap_err();
        assert!(message.contains("use `source`"), "{message}");
        assert!(
            check_writable_property(part(), "brickColor").is_ok(),
            "deprecated, still writable"
        );
    }

    #[test]
    fn material_has_neon() {
        let items = enum_items("Material").unwrap();
        let neon = items.iter().find(|(name, _)| *name == "Neon");
        assert_eq!(neon, Some(&("Neon", 288)));
        assert!(items.windows(2).all(|w| w[0].1 <= w[1].1), "items come by value");
        assert!(enum_items("Materials").is_none());
    }

    #[test]
    fn class_names_are_checked_for_create() {
        assert_eq!(check_creatable_class("Part").unwrap().name, "Part");
        assert_eq!(
            check_creatable_class("Prat").unwrap_err(),
            "Unknown class `Prat`; did you mean `Part`?"
        );
        assert_eq!(check_creatable_class("Zzqxj").unwrap_err(), "Unknown class `Zzqxj`");
        assert!(check_creatable_class("BasePart").unwrap_err().contains("Instance.new"));
        assert!(check_creatable_class("Workspace").unwrap_err().contains("service"));
        assert_eq!(suggest_class("part"), Some("Part"));
        assert_eq!(suggest_class("Model"), None, "an exact name needs no suggestion");
    }

    #[test]
    fn update_refuses_a_property_no_class_has() {
        assert!(check_property_exists("Color").is_ok());
        assert!(check_property_exists("Shape").is_ok(), "Part's own");
        assert_eq!(
            check_property_exists("Colour").unwrap_err(),
            "No class has a property `Colour`; did you mean `Color`?"
        );
        assert_eq!(
            check_property_exists("Qwxyzzy").unwrap_err(),
            "No class has a property `Qwxyzzy`"
        );
    }

    #[test]
    fn near_misses_are_bounded_and_prefer_earlier_candidates() {
        assert_eq!(
            did_you_mean("Prat", ["Part", "Cart"]),
            Some("Part"),
            "a swap is one edit"
        );
        assert_eq!(did_you_mean("Pxyz", ["Part"]), None);
        assert_eq!(did_you_mean("Transparncy", ["Transparency"]), Some("Transparency"));
        assert_eq!(
            did_you_mean("Sise", ["Size", "Sine"]),
            Some("Size"),
            "ties go to the first"
        );
        assert_eq!(did_you_mean("Size", ["Size"]), None);
    }
}

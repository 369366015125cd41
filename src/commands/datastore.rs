//! `datastore`: a universe's standard data stores over Open Cloud: list stores and keys,
//! read an entry, and set, increment or delete one. Reads need only `cloud`; the writes
//! reach live players' saved data, so they also need `write`. A `set` with
//! `expectedRevision` refuses (`conflict`) when the entry moved on since it was read, as
//! `script_edit` refuses a stale hash. The API's own rules are in `crate::cloud::datastore`.

use std::fmt::Write as _;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::cloud_place::{self, Where};
use super::{Capabilities, Capability, Command, Invocation, Kind, Output, Render, Spec};
use crate::cloud::datastore::{self, Entry, Page};
use crate::human::render::{Rendered, Style, clean};
use crate::protocol::{Context, ToolError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DatastoreAction {
    ListStores,
    ListKeys,
    Get,
    Set,
    Increment,
    Delete,
}

fn global() -> String {
    "global".to_owned()
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DatastoreArgs {
    pub action: DatastoreAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// `-`: all
    #[serde(default = "global")]
    pub scope: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_token: Option<String>,
    /// JSON to set
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Json>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<i64>,
    /// Refuse unless at this revision
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_revision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub universe: Option<i64>,
}

/// get, set and increment: the entry; list_stores `{stores, nextPageToken?}`; list_keys
/// `{keys, nextPageToken?}`; delete `{key, deleted}`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DatastoreResult {
    pub stores: Option<Vec<StoreInfo>>,
    pub keys: Option<Vec<String>>,
    pub next_page_token: Option<String>,
    pub key: Option<String>,
    pub value: Option<Json>,
    pub revision: Option<String>,
    pub create_time: Option<String>,
    pub update_time: Option<String>,
    pub users: Option<Vec<String>>,
    pub attributes: Option<serde_json::Map<String, Json>>,
    pub deleted: Option<bool>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoreInfo {
    pub id: String,
    pub create_time: Option<String>,
    pub state: Option<String>,
}

pub struct Datastore;

impl Command for Datastore {
    type Args = DatastoreArgs;
    type Result = DatastoreResult;
    const SPEC: Spec = Spec {
        name: "datastore",
        description: "The game's live data stores (Open Cloud): list, get, set, increment, delete.",
        needs_session: false,
        default_context: Context::Edit,
        timeout: Duration::from_secs(60),
        kind: Kind::Destructive,
        capabilities: Capabilities::of(&[Capability::Cloud]),
        idempotent: false,
        open_world: true,
        positional: &["action"],
        truncation_hint: "List with a prefix, or page with pageToken.",
        follow_event: None,
        example: "studio-bridge cloud datastore get --store PlayerData --key user_1 --universe 123",
        from_file: None,
        flag_help: &[
            (
                "action",
                "What to do: list-stores, list-keys, get, set, increment or delete",
            ),
            ("store", "The data store's name"),
            ("key", "The entry's key"),
            ("amount", "increment: a whole number to add"),
            ("scope", "The entry's scope (list-keys: `-` for every scope)"),
            ("prefix", "list-stores, list-keys: only ids that start so"),
            ("pageToken", "list-stores, list-keys: the last result's nextPageToken"),
            ("universe", "The universe (default: the open Studio's)"),
        ],
    };

    /// Reads need only `cloud`; set, increment and delete write players' data.
    fn capabilities(args: &DatastoreArgs) -> Capabilities {
        match args.action {
            DatastoreAction::Set | DatastoreAction::Increment | DatastoreAction::Delete => {
                Self::SPEC.capabilities.with(Capability::Write)
            }
            _ => Self::SPEC.capabilities,
        }
    }

    async fn run(args: DatastoreArgs, cx: &Invocation) -> Result<Output, ToolError> {
        use DatastoreAction as A;
        let needs = |field: &str, given: bool| {
            if given {
                Ok(())
            } else {
                Err(ToolError::invalid_args(format!(
                    "`{field}` is required for action {:?}.",
                    serde_json::to_value(args.action).unwrap_or_default()
                )))
            }
        };
        let listing = matches!(args.action, A::ListStores | A::ListKeys);
        if !listing {
            for (field, given) in [
                ("prefix", args.prefix.is_some()),
                ("pageToken", args.page_token.is_some()),
            ] {
                if given {
                    return Err(ToolError::invalid_args(format!(
                        "`{field}` is for list_stores and list_keys only."
                    )));
                }
            }
        }
        if args.action != A::ListStores {
            needs("store", args.store.is_some())?;
        }
        if !listing {
            needs("key", args.key.is_some())?;
        }
        match args.action {
            A::Set => needs("value", args.value.is_some())?,
            A::Increment => needs("amount", args.amount.is_some())?,
            _ => {}
        }
        let only = |field: &str, given: bool, actions: &str| {
            if given {
                Err(ToolError::invalid_args(format!("`{field}` is for {actions} only.")))
            } else {
                Ok(())
            }
        };
        if args.action != A::Set {
            only("value", args.value.is_some(), "set")?;
        }
        if args.action != A::Increment {
            only("amount", args.amount.is_some(), "increment")?;
        }
        if !matches!(args.action, A::Set | A::Delete) {
            only("expectedRevision", args.expected_revision.is_some(), "set and delete")?;
        }
        if args.scope == "-" && args.action != A::ListKeys {
            return Err(ToolError::invalid_args(
                "`scope: \"-\"` (every scope) is for list_keys only; name the entry's scope.",
            ));
        }
        let Where { universe, .. } = cloud_place::resolve(cx, args.universe, None, false).await?;
        let (cloud, deadline) = cloud_place::client(Self::SPEC.timeout)?;
        let cancel = &cx.hooks.cancel;
        let store = args.store.as_deref().unwrap_or_default();
        let entry = Entry {
            universe,
            store,
            scope: &args.scope,
            key: args.key.as_deref().unwrap_or_default(),
        };
        let expected = args.expected_revision.as_deref();
        let page = Page {
            prefix: args.prefix.as_deref(),
            token: args.page_token.as_deref(),
        };
        let result = match args.action {
            A::ListStores => datastore::list_stores(&cloud, universe, page, deadline, cancel).await?,
            A::ListKeys => datastore::list_keys(&cloud, universe, store, &args.scope, page, deadline, cancel).await?,
            A::Get => datastore::get(&cloud, &entry, deadline, cancel).await?,
            A::Set => {
                let value = args.value.as_ref().unwrap_or(&Json::Null);
                datastore::set(&cloud, &entry, value, expected, deadline, cancel).await?
            }
            A::Increment => {
                datastore::increment(&cloud, &entry, args.amount.unwrap_or_default(), deadline, cancel).await?
            }
            A::Delete => datastore::delete(&cloud, &entry, expected, deadline, cancel).await?,
        };
        Ok(Output::json(result))
    }
}

impl Render for Datastore {
    /// A list one item a line; an entry as its value's JSON, then its revision.
    fn render(_args: &Json, result: &Json, out: Style, _err: Style) -> Option<Rendered> {
        let mut rendered = Rendered::default();
        if let Some(stores) = result.get("stores").and_then(Json::as_array) {
            for store in stores {
                let _ = writeln!(rendered.stdout, "{}", clean(store.get("id")?.as_str()?));
            }
        } else if let Some(keys) = result.get("keys").and_then(Json::as_array) {
            for key in keys {
                let _ = writeln!(rendered.stdout, "{}", clean(key.as_str()?));
            }
        } else if result.get("deleted").is_some() {
            let _ = writeln!(
                rendered.stdout,
                "{} {}",
                out.bold("deleted"),
                clean(result.get("key")?.as_str()?)
            );
        } else {
            let _ = writeln!(rendered.stdout, "{}", clean(&result.get("value")?.to_string()));
            let _ = writeln!(
                rendered.stdout,
                "{}",
                out.dim(&format!(
                    "revision {}",
                    clean(result.get("revision")?.as_str().unwrap_or(""))
                ))
            );
        }
        if let Some(token) = result.get("nextPageToken").and_then(Json::as_str) {
            let _ = writeln!(
                rendered.stdout,
                "{}",
                out.dim(&format!("more: --page-token {}", clean(token)))
            );
        }
        Some(rendered)
    }
}

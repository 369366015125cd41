//! Data stores over Open Cloud v2 (`universes/{u}/data-stores/...`): list stores and keys,
//! read an entry, and set, increment or delete one.
//!
//! Two rules of the API shape what is sent:
//! - an update or increment without `users` and `attributes` clears them ("Partial update
//!   is unsupported"), so a write carries over the entry's current ones, read just before;
//! - an entry's `etag` makes an update refuse a value that changed meanwhile, so a set with
//!   `expectedRevision` sends the etag of the revision it checked: a change in between is a
//!   `conflict`, never a lost update.

use reqwest::Method;
use serde_json::{Map, Value as Json, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Cloud, Request, segment};
use crate::protocol::{ErrorCode, ToolError};

/// One entry's address.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    pub universe: u64,
    pub store: &'a str,
    pub scope: &'a str,
    pub key: &'a str,
}

impl Entry<'_> {
    fn path(&self) -> String {
        format!(
            "/cloud/v2/universes/{}/data-stores/{}/scopes/{}/entries/{}",
            self.universe,
            segment(self.store),
            segment(self.scope),
            // `@` ends an entry id at a revision; `@latest` reads the latest of a key with `@`
            segment(self.key)
        )
    }

    fn what(&self) -> String {
        format!(
            "entry {:?} in data store {:?} (scope {:?}) of universe {}",
            self.key, self.store, self.scope, self.universe
        )
    }
}

/// Which page of a list: ids starting with `prefix`, after the page `token` ended.
#[derive(Debug, Clone, Copy, Default)]
pub struct Page<'a> {
    pub prefix: Option<&'a str>,
    pub token: Option<&'a str>,
}

impl Page<'_> {
    /// `request` for this page: the API's largest page (`most`), the prefix as its filter,
    /// the token.
    fn of(self, mut request: Request, most: u32) -> Request {
        request = request.query("maxPageSize", most.to_string());
        if let Some(prefix) = self.prefix {
            request = request.query("filter", starts_with(prefix));
        }
        if let Some(token) = self.token {
            request = request.query("pageToken", token);
        }
        request
    }
}

/// The stores of a universe: `{stores: [{id, createTime, state}], nextPageToken?}`.
pub async fn list_stores(
    cloud: &Cloud,
    universe: u64,
    page: Page<'_>,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Json, ToolError> {
    let request = page.of(
        Request::new(
            Method::GET,
            format!("/cloud/v2/universes/{universe}/data-stores"),
            "universe-datastores.control:list",
            format!("data stores of universe {universe}"),
        ),
        100,
    );
    let answer = cloud.send(&request, deadline, cancel).await?;
    let stores: Vec<Json> = items(&answer.json, "dataStores")
        .map(|store| {
            json!({
                "id": store.get("id").cloned().unwrap_or(Json::Null),
                "createTime": store.get("createTime").cloned().unwrap_or(Json::Null),
                "state": store.get("state").cloned().unwrap_or(Json::Null),
            })
        })
        .collect();
    Ok(with_token(json!({ "stores": stores }), &answer.json))
}

/// The keys of a store's scope (`-`: every scope): `{keys: [..], nextPageToken?}`.
pub async fn list_keys(
    cloud: &Cloud,
    universe: u64,
    store: &str,
    scope: &str,
    page: Page<'_>,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Json, ToolError> {
    let request = page.of(
        Request::new(
            Method::GET,
            format!(
                "/cloud/v2/universes/{universe}/data-stores/{}/scopes/{}/entries",
                segment(store),
                segment(scope)
            ),
            "universe-datastores.objects:list",
            format!("data store {store:?} (scope {scope:?}) of universe {universe}"),
        ),
        256,
    );
    let answer = cloud.send(&request, deadline, cancel).await?;
    let keys: Vec<Json> = items(&answer.json, "dataStoreEntries")
        .map(|entry| entry.get("id").cloned().unwrap_or(Json::Null))
        .collect();
    Ok(with_token(json!({ "keys": keys }), &answer.json))
}

/// The entry as the API returns it (with its etag), or `not_found`.
async fn read(
    cloud: &Cloud,
    entry: &Entry<'_>,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Json, ToolError> {
    let request = Request::new(
        Method::GET,
        entry.path(),
        "universe-datastores.objects:read",
        entry.what(),
    );
    Ok(cloud.send(&request, deadline, cancel).await?.json)
}

/// `{key, value, revision, createTime, updateTime, users, attributes}`.
pub async fn get(
    cloud: &Cloud,
    entry: &Entry<'_>,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Json, ToolError> {
    read(cloud, entry, deadline, cancel)
        .await
        .map(|json| shown(entry, &json))
}

/// Sets the value. `expected`: the revision the caller read; another is `conflict`.
pub async fn set(
    cloud: &Cloud,
    entry: &Entry<'_>,
    value: &Json,
    expected: Option<&str>,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Json, ToolError> {
    let current = current(cloud, entry, deadline, cancel).await?;
    let mut body = Map::new();
    body.insert("value".into(), value.clone());
    carry_over(&mut body, current.as_ref());
    if let Some(expected) = expected {
        let etag = checked(entry, current.as_ref(), expected)?;
        body.insert("etag".into(), Json::String(etag));
    }
    // allowMissing may create it: the API then needs create as well as update.
    let scope = if expected.is_some() {
        "universe-datastores.objects:update"
    } else {
        "universe-datastores.objects:create` and `universe-datastores.objects:update"
    };
    let request = Request::new(Method::PATCH, entry.path(), scope, entry.what())
        .query("allowMissing", if expected.is_some() { "false" } else { "true" })
        .json(Json::Object(body));
    let written = cloud.send(&request, deadline, cancel).await?.json;
    Ok(shown(entry, &written))
}

/// Adds `amount` to a whole-number value (creating the entry at `amount`).
pub async fn increment(
    cloud: &Cloud,
    entry: &Entry<'_>,
    amount: i64,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Json, ToolError> {
    let current = current(cloud, entry, deadline, cancel).await?;
    let mut body = Map::new();
    body.insert("amount".into(), json!(amount));
    carry_over(&mut body, current.as_ref());
    let request = Request::new(
        Method::POST,
        format!("{}:increment", entry.path()),
        "universe-datastores.objects:create` and `universe-datastores.objects:update",
        entry.what(),
    )
    .json(Json::Object(body));
    let written = cloud.send(&request, deadline, cancel).await?.json;
    Ok(shown(entry, &written))
}

/// Marks the entry deleted (Open Cloud removes it for good after 30 days).
pub async fn delete(
    cloud: &Cloud,
    entry: &Entry<'_>,
    expected: Option<&str>,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Json, ToolError> {
    if let Some(expected) = expected {
        let current = current(cloud, entry, deadline, cancel).await?;
        checked(entry, current.as_ref(), expected)?;
    }
    let request = Request::new(
        Method::DELETE,
        entry.path(),
        "universe-datastores.objects:delete",
        entry.what(),
    );
    cloud.send(&request, deadline, cancel).await?;
    Ok(json!({ "key": entry.key, "deleted": true }))
}

/// The entry now, or None where it does not exist.
async fn current(
    cloud: &Cloud,
    entry: &Entry<'_>,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Option<Json>, ToolError> {
    match read(cloud, entry, deadline, cancel).await {
        Ok(json) => Ok(Some(json)),
        Err(error) if error.code == ErrorCode::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}

/// The etag of `current` when its revision is `expected`; else `conflict`, naming both.
fn checked(entry: &Entry<'_>, current: Option<&Json>, expected: &str) -> Result<String, ToolError> {
    let Some(current) = current else {
        return Err(ToolError::new(
            ErrorCode::Conflict,
            format!(
                "The {} does not exist, so it is not at revision {expected:?} (expectedRevision); nothing was written. Leave expectedRevision out to create it.",
                entry.what()
            ),
        ));
    };
    let revision = current.get("revisionId").and_then(Json::as_str).unwrap_or("");
    if revision != expected {
        return Err(ToolError::new(
            ErrorCode::Conflict,
            format!(
                "The {} is at revision {revision:?}, not {expected:?} (expectedRevision): it changed since it was read. Nothing was written; get it again and decide.",
                entry.what()
            ),
        )
        .with_details(json!({ "revision": revision })));
    }
    Ok(current.get("etag").and_then(Json::as_str).unwrap_or("").to_owned())
}

/// Keeps the entry's users and attributes, which a write without them would clear.
fn carry_over(body: &mut Map<String, Json>, current: Option<&Json>) {
    for field in ["users", "attributes"] {
        if let Some(value) = current.and_then(|c| c.get(field)).filter(|v| !v.is_null()) {
            body.insert(field.into(), value.clone());
        }
    }
}

/// An entry as the tool shows it.
fn shown(entry: &Entry<'_>, json: &Json) -> Json {
    let field = |name: &str| json.get(name).cloned().unwrap_or(Json::Null);
    json!({
        "key": entry.key,
        "value": field("value"),
        "revision": field("revisionId"),
        "createTime": field("createTime"),
        "updateTime": field("revisionCreateTime"),
        "users": json.get("users").cloned().unwrap_or_else(|| json!([])),
        "attributes": json.get("attributes").cloned().unwrap_or_else(|| json!({})),
    })
}

fn items<'a>(json: &'a Json, field: &str) -> impl Iterator<Item = &'a Json> {
    json.get(field).and_then(Json::as_array).into_iter().flatten()
}

fn with_token(mut result: Json, answer: &Json) -> Json {
    if let Some(token) = answer
        .get("nextPageToken")
        .and_then(Json::as_str)
        .filter(|t| !t.is_empty())
    {
        result["nextPageToken"] = Json::String(token.to_owned());
    }
    result
}

/// The API's filter for ids that start with `prefix` (a CEL string literal).
fn starts_with(prefix: &str) -> String {
    format!("id.startsWith({})", Json::String(prefix.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_addressed_with_escaped_segments() {
        let entry = Entry {
            universe: 7,
            store: "Player Data",
            scope: "global",
            key: "user/1@x",
        };
        assert_eq!(
            entry.path(),
            "/cloud/v2/universes/7/data-stores/Player%20Data/scopes/global/entries/user%2F1%40x"
        );
    }

    #[test]
    fn a_stale_revision_is_a_conflict_and_a_current_one_gives_its_etag() {
        let entry = Entry {
            universe: 1,
            store: "s",
            scope: "global",
            key: "k",
        };
        let current = json!({"revisionId": "r2", "etag": "e2"});
        let stale = checked(&entry, Some(&current), "r1").unwrap_err();
        assert_eq!(stale.code, ErrorCode::Conflict);
        assert!(
            stale.message.contains("\"r2\"") && stale.message.contains("\"r1\""),
            "{}",
            stale.message
        );
        assert_eq!(checked(&entry, Some(&current), "r2").unwrap(), "e2");
        assert_eq!(checked(&entry, None, "r1").unwrap_err().code, ErrorCode::Conflict);
    }

    #[test]
    fn writes_keep_the_entry_s_users_and_attributes() {
        let mut body = Map::new();
        carry_over(
            &mut body,
            Some(&json!({"users": ["users/1"], "attributes": {"a": 1}, "value": 3})),
        );
        assert_eq!(
            Json::Object(body),
            json!({"users": ["users/1"], "attributes": {"a": 1}})
        );
    }

    #[test]
    fn prefixes_are_quoted_for_the_filter() {
        assert_eq!(starts_with("pl\"a"), r#"id.startsWith("pl\"a")"#);
    }
}

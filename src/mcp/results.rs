//! The rest of cut results, kept for a while for the agent to fetch in pages.
//!
//! A result over the bound reaches the agent cut, with a `resource_link` to
//! `studio://results/{id}`; its pages (`?page=N`, N from 1) hold what was cut, each JSON
//! of the cut part's own shape (see `commands::bound::rest_pages`). Keeping costs the
//! cut result nothing: the result is kept as it came (a plugin's msgpack frame, shared,
//! not copied) and its pages are worked out on the blocking pool only when a page is
//! first read. Working them out for every cut result, read or not, decoded every 10 MB
//! result a second time on the two cores the other calls needed (B10's p99 went from
//! 0.8 to 4 ms). What is kept is bounded: each result for [`KEEP_FOR`], all of them
//! together to [`KEEP_BYTES`] (a result's bytes as it came until its pages are worked
//! out, then its pages'), the oldest dropped first. Shared by every MCP connection of
//! the process.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

use crate::commands::Whole;
use crate::commands::bound::{Page, rest_pages};

/// How long a cut result's rest is kept.
pub const KEEP_FOR: Duration = Duration::from_secs(10 * 60);

/// The most bytes of pages kept for all cut results together.
pub const KEEP_BYTES: usize = 64 * 1024 * 1024;

pub const RESULTS_PREFIX: &str = "studio://results/";

/// The pages of one cut result, once worked out.
type Pages = Arc<Vec<Page>>;

/// A cut result until its pages are worked out: the whole result and the text answered.
type Source = Arc<(Whole, String)>;

struct Kept {
    id: String,
    made: Instant,
    /// What is held for it: the result as it came, then its pages.
    bytes: usize,
    /// Dropped once the pages are worked out.
    source: Arc<Mutex<Option<Source>>>,
    pages: Arc<OnceCell<Pages>>,
}

pub struct ResultStore {
    kept: Mutex<VecDeque<Kept>>,
    /// The most JSON one page holds: a result's share of the bound.
    page_bytes: usize,
    keep_bytes: usize,
}

/// One page as read, with where it belongs.
pub struct PageRead {
    pub page: Page,
    pub number: usize,
    pub pages: usize,
}

impl ResultStore {
    pub fn new(page_bytes: usize) -> Arc<ResultStore> {
        Arc::new(ResultStore {
            kept: Mutex::new(VecDeque::new()),
            page_bytes,
            keep_bytes: KEEP_BYTES,
        })
    }

    /// Keeps the rest of a cut result (`whole`, of which `kept_text` was answered);
    /// returns its URI. Nothing is decoded or copied here.
    pub fn keep(&self, whole: Whole, kept_text: String) -> String {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let bytes = whole.held_bytes() + kept_text.len();
        let mut kept = lock(&self.kept);
        kept.push_back(Kept {
            id: id.clone(),
            made: Instant::now(),
            bytes,
            source: Arc::new(Mutex::new(Some(Arc::new((whole, kept_text))))),
            pages: Arc::new(OnceCell::new()),
        });
        self.evict(&mut kept);
        format!("{RESULTS_PREFIX}{id}")
    }

    /// Records the real size of a result's pages.
    fn measured(&self, id: &str, bytes: usize) {
        let mut kept = lock(&self.kept);
        if let Some(entry) = kept.iter_mut().find(|k| k.id == id) {
            entry.bytes = bytes;
        }
        self.evict(&mut kept);
    }

    /// Drops what is past its time, then the oldest until the rest fits.
    fn evict(&self, kept: &mut VecDeque<Kept>) {
        let now = Instant::now();
        kept.retain(|k| now.duration_since(k.made) < KEEP_FOR);
        let mut total: usize = kept.iter().map(|k| k.bytes).sum();
        while total > self.keep_bytes
            && let Some(oldest) = kept.pop_front()
        {
            total -= oldest.bytes;
        }
    }

    /// The pages of `id`, worked out by the first read (later reads wait for it).
    async fn pages(&self, id: &str) -> Result<Pages, String> {
        let (source, cell) = {
            let mut kept = lock(&self.kept);
            self.evict(&mut kept);
            kept.iter()
                .find(|k| k.id == id)
                .map(|k| (Arc::clone(&k.source), Arc::clone(&k.pages)))
                .ok_or_else(|| format!(
                    "{RESULTS_PREFIX}{id} is not kept: a cut result's rest is kept for 10 minutes (64 MiB for all of them, the oldest dropped first), or this id never named one. Call the tool again, narrowed as its truncatedHint says."
                ))?
        };
        let page_bytes = self.page_bytes;
        let pages = cell
            .get_or_try_init(|| async {
                // Cloned, not taken: a read cancelled while the pages are worked out
                // leaves the source for the next one.
                let Some(whole_and_kept) = lock(&source).clone() else {
                    return Err(());
                };
                tokio::task::spawn_blocking(move || {
                    let (whole, kept_text) = &*whole_and_kept;
                    let kept: serde_json::Value = serde_json::from_str(kept_text).unwrap_or_default();
                    Arc::new(rest_pages(&whole.value(), &kept, page_bytes))
                })
                .await
                .map_err(|_| ())
            })
            .await
            .map_err(|()| format!("The rest of {RESULTS_PREFIX}{id} could not be worked out. Call the tool again, narrowed as its truncatedHint says."))?
            .clone();
        if lock(&source).take().is_some() {
            self.measured(id, pages.iter().map(|p| p.json.len() + p.pointer.len()).sum());
        }
        Ok(pages)
    }

    /// Page `number` (from 1) of the result `id`, or the error that says why not.
    pub async fn page(&self, id: &str, number: usize) -> Result<PageRead, String> {
        let pages = self.pages(id).await?;
        if pages.is_empty() {
            return Err(format!(
                "{RESULTS_PREFIX}{id} has no pages: nothing of that result was cut after all."
            ));
        }
        match number.checked_sub(1).and_then(|i| pages.get(i)) {
            Some(page) => Ok(PageRead {
                page: page.clone(),
                number,
                pages: pages.len(),
            }),
            None => Err(format!(
                "{RESULTS_PREFIX}{id} has {} page(s): page {number} does not exist. Read ?page=1 to ?page={}.",
                pages.len(),
                pages.len()
            )),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cut(n: usize, limit: usize) -> (Whole, String) {
        let whole = json!({"matches": (0..n).map(|i| format!("game.Workspace.Part{i}")).collect::<Vec<_>>()});
        let kept = crate::commands::bound::bound(whole.clone(), limit, "");
        (Whole::Json(whole), kept.to_string())
    }

    #[tokio::test]
    async fn pages_are_read_in_order_and_a_page_past_the_end_says_how_many_there_are() {
        let store = ResultStore::new(1000);
        let (whole, kept) = cut(300, 1000);
        let uri = store.keep(whole, kept);
        let id = uri.strip_prefix(RESULTS_PREFIX).unwrap();
        let first = store.page(id, 1).await.unwrap();
        assert_eq!(first.number, 1);
        assert!(first.pages > 2);
        assert_eq!(first.page.pointer, "/matches");
        let past = store.page(id, first.pages + 1).await.err().unwrap();
        assert!(past.contains(&format!("has {} page(s)", first.pages)), "{past}");
        assert!(store.page(id, 0).await.is_err());
        let unknown = store.page("nope", 1).await.err().unwrap();
        assert!(unknown.contains("is not kept"), "{unknown}");
    }

    #[tokio::test]
    async fn a_kept_result_is_worked_into_pages_only_when_a_page_is_read() {
        let store = ResultStore::new(1000);
        let (whole, kept) = cut(300, 1000);
        let uri = store.keep(whole, kept);
        let id = uri.strip_prefix(RESULTS_PREFIX).unwrap();
        let worked_out = |store: &ResultStore| {
            let kept = lock(&store.kept);
            (kept[0].pages.initialized(), lock(&kept[0].source).is_some())
        };
        assert_eq!(worked_out(&store), (false, true), "kept as it came");
        let first = store.page(id, 1).await.unwrap();
        assert_eq!(worked_out(&store), (true, false), "pages made, the source let go");
        let again = store.page(id, 1).await.unwrap();
        assert_eq!(first.page.json, again.page.json);
        assert_eq!(first.pages, again.pages);
    }

    #[tokio::test]
    async fn the_oldest_is_dropped_first_when_the_bytes_run_out() {
        let mut store = ResultStore::new(1000);
        Arc::get_mut(&mut store).unwrap().keep_bytes = 60_000;
        let mut ids = Vec::new();
        for _ in 0..6 {
            let (whole, kept) = cut(1000, 1000);
            let uri = store.keep(whole, kept);
            let id = uri.strip_prefix(RESULTS_PREFIX).unwrap().to_owned();
            // Each is read (its pages worked out and measured) before the next is kept.
            store.page(&id, 1).await.unwrap();
            ids.push(id);
        }
        assert!(store.page(&ids[0], 1).await.is_err(), "the oldest went first");
        assert!(store.page(&ids[5], 1).await.is_ok(), "the newest stays");
        let total: usize = lock(&store.kept).iter().map(|k| k.bytes).sum();
        assert!(total <= 60_000, "{total}");
    }
}

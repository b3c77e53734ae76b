//! Reading a fetched page (http and json modes) on a blocking thread, never on
//! the async runtime: parsing, selector matching and every value read run
//! there within the page's [`ExtractBudget`], so a costly selector can stall
//! neither the worker's other crawls nor, in one process, the api. The
//! caller waits at most the page's stuck timeout; when it stops waiting
//! (that timeout, or its crawl dropped) the thread is told to stop.

use std::{collections::BTreeMap, time::Duration};

use serde_json::Value;
use url::Url;

use super::{
    HtmlPage, RawItems,
    budget::{CancelFlag, ExtractBudget, OverBudget, Spent},
    extract_html, extract_json,
    json::JsonPage,
};
use crate::domain::site::{CssSelector, FieldSpec, JsonPointer, TokenPaging};

/// Why a page's items could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The page's budget ran out: the site's selectors cost too much here.
    #[error(transparent)]
    OverBudget(#[from] OverBudget),
    /// The site's extraction cannot read this page (a JSON API's items that
    /// are not a list; a stored selector today's rules refuse).
    #[error("{0}")]
    Misconfigured(String),
    /// The answer is not what the mode reads (no JSON).
    #[error("{0}")]
    Unreadable(String),
    /// The page's stuck timeout passed before reading ended.
    #[error("reading the page did not end within its stuck timeout")]
    Stuck,
    /// Reading panicked (a bug, not the site's doing).
    #[error("reading the page failed: {0}")]
    Panicked(String),
}

/// What an HTML page holds.
#[derive(Debug)]
pub enum HtmlRead {
    Items(RawItems),
    /// The site's blocked selector is on the page: it refused us.
    Blocked,
}

/// Reads an HTML page's items, at most `max_items` (or finds it is a block page).
pub fn read_html(
    html: &str,
    url: &Url,
    item_selector: &CssSelector,
    fields: &BTreeMap<String, FieldSpec>,
    blocked_selector: Option<&CssSelector>,
    max_items: usize,
    budget: &ExtractBudget,
) -> Result<HtmlRead, ReadError> {
    let page = HtmlPage::parse(html, url);
    budget.start_matching();
    if let Some(blocked) = blocked_selector
        && page.contains(blocked, "blocked_selector", budget)?
    {
        return Ok(HtmlRead::Blocked);
    }
    extract_html(&page, item_selector, fields, max_items, budget).map(HtmlRead::Items)
}

/// Reads a JSON API's answer: its items (at most `max_items`) and the next page's token.
pub fn read_json(
    body: &[u8],
    url: &Url,
    items: &JsonPointer,
    fields: &BTreeMap<String, FieldSpec>,
    paging: Option<&TokenPaging>,
    max_items: usize,
    budget: &ExtractBudget,
) -> Result<JsonPage, ReadError> {
    let answer: Value = serde_json::from_slice(body)
        .map_err(|e| ReadError::Unreadable(format!("the answer at {url} is not JSON: {e}")))?;
    budget.start_matching();
    extract_json(&answer, url, items, fields, paging, max_items, budget)
}

/// Sets the flag when dropped: the reading thread stops at its next check
/// once nobody waits for it.
struct CancelOnDrop(CancelFlag);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Runs `read` on a blocking thread with a budget of `budget` (from when the
/// thread starts it), waiting for it at most `wait_at_most`.
pub async fn off_runtime<T, F>(
    budget: Duration,
    wait_at_most: Duration,
    read: F,
) -> Result<T, ReadError>
where
    T: Send + 'static,
    F: FnOnce(&ExtractBudget) -> Result<T, ReadError> + Send + 'static,
{
    let cancel = CancelFlag::default();
    let _stop = CancelOnDrop(cancel.clone());
    let reading = tokio::task::spawn_blocking(move || read(&ExtractBudget::new(budget, cancel)));
    match tokio::time::timeout(wait_at_most, reading).await {
        Ok(Ok(Err(ReadError::OverBudget(OverBudget {
            spent: Spent::Cancelled,
            ..
        })))) => Err(ReadError::Stuck),
        Ok(Ok(read)) => read,
        Ok(Err(e)) => Err(ReadError::Panicked(e.to_string())),
        Err(_) => Err(ReadError::Stuck),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// Work that only a budget stops.
    fn endless(budget: &ExtractBudget) -> Result<(), ReadError> {
        while budget.step() {}
        budget.check()?;
        Ok(())
    }

    #[tokio::test]
    async fn a_read_over_budget_says_so() {
        let started = Instant::now();
        let read = off_runtime(Duration::from_millis(50), Duration::from_secs(10), endless).await;
        assert!(matches!(read, Err(ReadError::OverBudget(_))), "{read:?}");
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn the_stuck_timeout_stops_the_thread_and_is_stuck() {
        let (done, finished) = std::sync::mpsc::channel();
        let started = Instant::now();
        let read = off_runtime(
            Duration::from_secs(3600),
            Duration::from_millis(50),
            move |budget| {
                let read = endless(budget);
                let _ = done.send(());
                read
            },
        )
        .await;
        assert!(matches!(read, Err(ReadError::Stuck)), "{read:?}");
        finished
            .recv_timeout(Duration::from_secs(2))
            .expect("the thread stopped once nobody waited");
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}

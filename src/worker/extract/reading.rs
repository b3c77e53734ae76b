//! Reading a fetched page (http and json modes) on a blocking thread, never on
//! the async runtime: parsing, selector matching and every value read run
//! there within the page's [`ExtractBudget`], so a costly selector can stall
//! neither the worker's other crawls nor, in one process, the api. The
//! caller waits at most the page's stuck timeout; when it stops waiting
//! (that timeout, or its crawl dropped) the thread is told to stop.

use std::{collections::BTreeMap, time::Duration};

use serde_json::{Map, Value};
use url::Url;

use super::{
    HtmlPage, RawItems,
    budget::{CancelFlag, ExtractBudget, OverBudget, Spent},
    extract_html, extract_json,
    json::JsonPage,
    structured::{Lookup, StructuredData, StructuredListing},
};
use crate::domain::site::{CssSelector, FieldSpec, HtmlItems, JsonPointer, TokenPaging};

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
    Items {
        /// As read, before the fields' value rules.
        items: RawItems,
        /// The page's structured data, when it was asked for (the preview).
        structured: Option<StructuredListing>,
        /// Where the page's next link goes (`next_link` paging).
        next_link: Option<Box<Url>>,
    },
    /// The site's blocked selector is on the page: it refused us.
    Blocked,
}

/// What reading a site's HTML page takes of the site.
#[derive(Debug, Clone)]
pub struct HtmlReading {
    pub items: HtmlItems,
    pub fields: BTreeMap<String, FieldSpec>,
    pub blocked_selector: Option<CssSelector>,
    /// List the page's structured data too (the preview).
    pub list_structured: bool,
    /// Items read at most.
    pub max_items: usize,
    /// The page's next link, read over HTTP (`next_link` paging).
    pub next_link: Option<CssSelector>,
}

impl HtmlReading {
    /// Whether the page's structured data is read at all.
    pub fn needs_structured_data(&self) -> bool {
        self.list_structured
            || matches!(self.items, HtmlItems::Structured(_))
            || self.fields.values().any(|f| f.structured.is_some())
    }
}

/// Reads an HTML page's items (or finds it is a block page).
pub fn read_html(
    html: &str,
    url: &Url,
    reading: &HtmlReading,
    budget: &ExtractBudget,
) -> Result<HtmlRead, ReadError> {
    let page = HtmlPage::parse(html, url);
    budget.start_matching();
    if let Some(blocked) = &reading.blocked_selector
        && page.contains(blocked, "blocked_selector", budget)?
    {
        return Ok(HtmlRead::Blocked);
    }
    let (items, structured) =
        with_structured_data(Some(&page), reading, budget, |selector, page_values| {
            extract_html(
                &page,
                selector,
                &reading.fields,
                page_values,
                reading.max_items,
                budget,
            )
        })?;
    let next_link = match &reading.next_link {
        Some(selector) => page
            .first_link(selector, "paging.selector", budget)?
            .map(Box::new),
        None => None,
    };
    let items = RawItems {
        items,
        base: page.base().clone(),
    };
    Ok(HtmlRead::Items {
        items,
        structured,
        next_link,
    })
}

/// A page's items as read (before the fields' value rules), and its
/// structured data listed when it was asked for.
pub type ItemsRead = (Vec<Map<String, Value>>, Option<StructuredListing>);

/// Completes what the browser read of a page (the items of its selectors,
/// their markup fields) with what its structured data holds, read from the
/// HTML the browser serialized (`html`, sent when
/// [`HtmlReading::needs_structured_data`]) exactly as over HTTP.
pub fn read_rendered(
    html: Option<&str>,
    url: &Url,
    reading: &HtmlReading,
    read_in_browser: Vec<Map<String, Value>>,
    budget: &ExtractBudget,
) -> Result<ItemsRead, ReadError> {
    let page = html.map(|html| HtmlPage::parse(html, url));
    budget.start_matching();
    // The browser matched the item selector already.
    with_structured_data(page.as_ref(), reading, budget, |_, page_values| {
        Ok(read_in_browser
            .into_iter()
            .map(|mut fields| {
                fields.extend(page_values.iter().map(|(k, v)| (k.clone(), v.clone())));
                fields
            })
            .collect())
    })
}

/// The page's items: those `markup_items` reads with the item selector,
/// given the page's values of the structured fields, or its structured
/// items; and its structured data listed when asked.
fn with_structured_data(
    page: Option<&HtmlPage>,
    reading: &HtmlReading,
    budget: &ExtractBudget,
    markup_items: impl FnOnce(
        &CssSelector,
        &Map<String, Value>,
    ) -> Result<Vec<Map<String, Value>>, ReadError>,
) -> Result<ItemsRead, ReadError> {
    let data = page
        .filter(|_| reading.needs_structured_data())
        .map(|page| StructuredData::read(page, budget));
    let lookup = data.as_ref().map(|data| Lookup::new(data, budget));
    let items = match (&reading.items, &lookup) {
        (HtmlItems::Structured(item_type), Some(lookup)) => {
            lookup.items(item_type, &reading.fields, reading.max_items, budget)
        }
        (HtmlItems::Structured(_), None) => Vec::new(),
        (HtmlItems::Selector(selector), lookup) => {
            // Without the page's HTML (a browser page not sent), each is null.
            let page_values = match lookup {
                Some(lookup) => lookup.fields(None, &reading.fields, budget),
                None => reading
                    .fields
                    .iter()
                    .filter(|(_, spec)| spec.structured.is_some())
                    .map(|(name, _)| (name.clone(), Value::Null))
                    .collect(),
            };
            markup_items(selector, &page_values)?
        }
    };
    budget.check()?;
    let structured = match (&data, reading.list_structured) {
        (Some(data), true) => Some(data.listing(budget)),
        _ => None,
    };
    budget.check()?;
    Ok((items, structured))
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

//! Paging in place (a browser): the next "page" is more of the same
//! document, shown by clicking its "load more" button or by scrolling to its
//! end. One script call waits for the items to grow, and the page is then
//! read past the items already read.

use std::time::Duration;

use serde_json::json;

use crate::{
    domain::{failure::FailureKind, paging::Paging},
    worker::{browser::BrowserSession, error::CrawlError},
};

/// Longest wait for more items after a click or a scroll: none by then, and
/// the document has shown all it has.
pub const MORE_ITEMS_LIMIT: Duration = Duration::from_secs(5);

/// A function of the button's selector (null: scroll instead), the item
/// selector, the items shown so far and how long to wait (ms). It clicks the
/// button (resolving to `"gone"` when there is none) or scrolls to the end
/// of the document, then resolves to `"more"` once more items than before
/// are shown, or to `"none"` when the wait ends first. It runs in an isolated
/// world: the click and the scroll are the page's events all the same.
const SHOW_MORE_JS: &str = r#"
(button, itemSelector, before, waitMs) => new Promise((done) => {
if (button !== null) {
  const el = document.querySelector(button);
  if (el === null) { done('gone'); return; }
  el.scrollIntoView({block: 'center'});
  el.click();
} else {
  const root = document.scrollingElement || document.documentElement;
  window.scrollTo(0, root.scrollHeight);
}
const grown = () => document.querySelectorAll(itemSelector).length > before;
if (grown()) { done('more'); return; }
const observer = new MutationObserver(() => {
  if (grown()) { observer.disconnect(); clearTimeout(timer); done('more'); }
});
const timer = setTimeout(() => { observer.disconnect(); done('none'); }, waitMs);
observer.observe(document, {childList: true, subtree: true});
})
"#;

/// What asking the document for more items did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShowMore {
    /// More items are shown.
    More,
    /// The wait ended without any.
    NoMore,
    /// The "load more" button is gone: that was all.
    ButtonGone,
}

/// Clicks the site's "load more" button or scrolls to the end (by
/// `paging`), and waits for more than `shown` items to match
/// `item_selector`, within `limit`.
pub async fn show_more(
    session: &BrowserSession,
    paging: &Paging,
    item_selector: &str,
    shown: usize,
    limit: Duration,
) -> Result<ShowMore, CrawlError> {
    let button = match paging {
        Paging::LoadMore { selector } => Some(selector.as_str()),
        _ => None,
    };
    let wait = MORE_ITEMS_LIMIT.min(limit);
    let args = json!([button, item_selector, shown, wait.as_millis() as u64]);
    let expression = format!("({SHOW_MORE_JS})(...{args})");
    // The script ends within its wait; a page that does not answer by the
    // stuck timeout is stuck in a script of its own.
    let answer = tokio::time::timeout(limit + Duration::from_secs(1), async {
        session.evaluate_isolated(&expression).await
    })
    .await
    .map_err(|_| {
        CrawlError::broken(
            FailureKind::Stuck,
            format!(
                "stuck: the page stopped answering within {}s while showing more",
                limit.as_secs()
            ),
        )
    })?
    .map_err(|e| CrawlError::browser(format!("showing more items: {e:#}")))?;
    Ok(match answer.as_str() {
        Some("more") => ShowMore::More,
        Some("gone") => ShowMore::ButtonGone,
        _ => ShowMore::NoMore,
    })
}

//! A crawled page and its items, and the incremental-crawl rule: an item an
//! earlier completed run stored is seen again, not stored again.

/// One item extracted from a page, ready to store.
#[derive(Debug, Clone, PartialEq)]
pub struct PageItem {
    pub fields: serde_json::Value,
    pub item_url: Option<String>,
    pub content_hash: String,
}

impl PageItem {
    /// What identifies the item across runs: its URL, else its content.
    pub fn key(&self) -> &str {
        self.item_url.as_deref().unwrap_or(&self.content_hash)
    }
}

/// One crawled page, as the store records it.
#[derive(Debug, Clone, Copy)]
pub struct CrawledPage<'a> {
    pub page: i32,
    pub url: &'a str,
    pub items: &'a [PageItem],
    /// Keys of the items an earlier completed run stored (an incremental
    /// crawl): those are marked seen again, not stored again.
    pub stored_before: &'a [String],
}

impl CrawledPage<'_> {
    /// Whether an earlier completed run stored `item`.
    pub fn stored_before(&self, item: &PageItem) -> bool {
        self.stored_before.iter().any(|key| key == item.key())
    }

    /// The items this run stores as its results: those no earlier run stored.
    pub fn new_items(&self) -> impl Iterator<Item = &PageItem> {
        self.items.iter().filter(|item| !self.stored_before(item))
    }
}

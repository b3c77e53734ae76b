//! A crawled page and its items, the incremental-crawl rule (an item an
//! earlier completed run stored is seen again, not stored again, unless it
//! changed), and why a crawl stopped paging.

use super::{
    bounds::BoundsReport,
    item::{ItemIdentity, PageItem},
    saved_page::KeptPages,
    text_enum::text_enum,
    value::ValueReport,
};

text_enum! {
    /// Why a run stopped reading pages before its last one, and still completed
    /// with what it read.
    pub enum StopReason as "stop reason" {
        /// The site's robots.txt disallows the next page for our user agent.
        RobotsDisallowed = "robots_disallowed",
    }
}

/// The first page a completed run did not read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EarlyStop {
    pub url: String,
    pub reason: StopReason,
}

/// One crawled page, as the store records it.
#[derive(Debug, Clone, Copy)]
pub struct CrawledPage<'a> {
    pub page: i32,
    pub url: &'a str,
    pub items: &'a [PageItem],
    /// The site's key field (`item_key`): identifies items without a URL.
    pub item_key: Option<&'a str>,
    /// Identity keys of the items an earlier completed run stored (an
    /// incremental crawl): those are stored again only if they changed.
    pub stored_before: &'a [String],
    /// Identity keys of the items whose detail page was read for this page
    /// (the store records when).
    pub details_read: &'a [String],
}

impl CrawledPage<'_> {
    /// The identity of one of the page's items.
    pub fn identity(&self, item: &PageItem) -> ItemIdentity {
        item.identity(self.item_key)
    }

    /// Whether an earlier completed run stored `item`.
    pub fn stored_before(&self, item: &PageItem) -> bool {
        let key = self.identity(item).key;
        self.stored_before.contains(&key)
    }
}

text_enum! {
    /// Why a crawl stopped asking for pages. Only a crawl that went through to
    /// the last page can tell that an item it did not see is gone.
    pub enum PagingEnd as "paging end" {
        /// No next page: an empty page, no `{page}` in the search, no next
        /// token (or the same one twice).
        LastPage = "last_page",
        /// The site's `max_pages` were read and there was more.
        MaxPages = "max_pages",
        /// An incremental crawl (`stop_on_seen`) reached what an earlier run stored.
        SeenBefore = "seen_before",
        /// The site's robots.txt disallows the next page (the run says which).
        Disallowed = "disallowed",
        /// The run holds as many items as a run may (`RUN_MAX_ITEMS`).
        ItemCap = "item_cap",
        /// A page repeated the previous one item for item (a site serving
        /// its last page again past the end, or ignoring the page asked for),
        /// or the next page is one read already (a next link back): the
        /// repeat is not read or stored, and whether there was more is unknown.
        RepeatedPage = "repeated_page",
    }
}

/// The page a crawl's paging ended on, read and not stored yet: the run's
/// completion stores it in its own transaction (one commit, not two).
#[derive(Debug, Clone, PartialEq)]
pub struct FinalPage {
    pub page: i32,
    pub url: String,
    pub items: Vec<PageItem>,
    /// The site's key field (`item_key`).
    pub item_key: Option<String>,
    /// Identity keys of its items an earlier completed run stored.
    pub stored_before: Vec<String>,
    /// Identity keys of its items whose detail page was read.
    pub details_read: Vec<String>,
}

impl FinalPage {
    /// The page as the store records it.
    pub fn crawled(&self) -> CrawledPage<'_> {
        CrawledPage {
            page: self.page,
            url: &self.url,
            items: &self.items,
            item_key: self.item_key.as_deref(),
            stored_before: &self.stored_before,
            details_read: &self.details_read,
        }
    }
}

/// The pages a completed crawl read: up to which, and why it stopped there.
#[derive(Debug, Clone, PartialEq)]
pub struct PagesRead {
    pub last_page: i32,
    pub end: PagingEnd,
    /// The first page it did not read, when it was not allowed to.
    pub stopped: Option<EarlyStop>,
    /// The last page, when it is left for the completion to store.
    pub unstored: Option<FinalPage>,
    /// What the crawl bounds left out of the pages read.
    pub bounded: BoundsReport,
    /// What the fields' value rules could not read on them.
    pub values: ValueReport,
    /// The list pages whose bodies were kept, saved if the run completes healthy.
    pub kept: KeptPages,
}

impl PagesRead {
    pub fn new(last_page: i32, end: PagingEnd) -> Self {
        PagesRead {
            last_page,
            end,
            stopped: None,
            unstored: None,
            bounded: BoundsReport::default(),
            values: ValueReport::default(),
            kept: KeptPages::default(),
        }
    }

    /// Paging ended on `page`, which the completion stores.
    pub fn ended_on(page: FinalPage, end: PagingEnd) -> Self {
        PagesRead {
            last_page: page.page,
            end,
            stopped: None,
            unstored: Some(page),
            bounded: BoundsReport::default(),
            values: ValueReport::default(),
            kept: KeptPages::default(),
        }
    }

    /// The pages before `stopped`, the page the crawl was not allowed to read.
    pub fn stopped_before(stopped: EarlyStop, last_page: i32) -> Self {
        PagesRead {
            last_page,
            end: PagingEnd::Disallowed,
            stopped: Some(stopped),
            unstored: None,
            bounded: BoundsReport::default(),
            values: ValueReport::default(),
            kept: KeptPages::default(),
        }
    }

    /// The same, with what the bounds left out and the values that did not parse.
    pub fn with_reports(self, bounded: BoundsReport, values: ValueReport) -> Self {
        PagesRead {
            bounded,
            values,
            ..self
        }
    }

    /// The same, with the pages whose bodies were kept.
    pub fn with_kept(self, kept: KeptPages) -> Self {
        PagesRead { kept, ..self }
    }

    /// What makes the completed run degraded whatever its site expects:
    /// what the bounds left out, and each field's values that did not parse.
    pub fn health_notes(&self) -> (Vec<String>, Vec<String>) {
        (self.bounded.notes(), self.values.notes())
    }

    /// Whether every page was read, so what was not seen is gone.
    pub fn read_every_page(&self) -> bool {
        self.end == PagingEnd::LastPage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_reasons_round_trip_through_text() {
        for reason in StopReason::ALL {
            assert_eq!(reason.as_str().parse::<StopReason>().unwrap(), reason);
        }
    }
    use serde_json::json;

    #[test]
    fn an_item_stored_before_is_recognised_by_its_identity_on_the_site() {
        let item = PageItem {
            fields: json!({"sku": "A1", "price": "$6"}),
            item_url: None,
            content_hash: "h2".into(),
        };
        let stored = ["key:A1".to_owned()];
        let page = |item_key| CrawledPage {
            page: 1,
            url: "http://x/",
            items: std::slice::from_ref(&item),
            item_key,
            stored_before: &stored,
            details_read: &[],
        };
        assert!(page(Some("sku")).stored_before(&item));
        assert!(!page(None).stored_before(&item), "by content: another item");
    }

    #[test]
    fn only_a_crawl_that_reached_the_last_page_read_every_page() {
        assert!(PagesRead::new(3, PagingEnd::LastPage).read_every_page());
        assert!(!PagesRead::new(5, PagingEnd::MaxPages).read_every_page());
        assert!(!PagesRead::new(1, PagingEnd::SeenBefore).read_every_page());
        assert!(!PagesRead::new(2, PagingEnd::RepeatedPage).read_every_page());
        for end in PagingEnd::ALL {
            assert_eq!(end.as_str().parse::<PagingEnd>().unwrap(), end);
        }
    }
}

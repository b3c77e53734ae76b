//! The worker's bounds on what a crawl stores (see `domain::bounds`).

use crate::domain::bounds::CrawlBounds;

/// How much one crawl may store: a hostile or broken page can make a field,
/// a page's items or the page itself arbitrarily large.
#[derive(Debug, Clone, clap::Args)]
pub struct CrawlBoundsSettings {
    /// Longest field value kept, in characters; a longer one is cut there
    /// and the run says so (degraded, with the field's name).
    #[arg(long, env = "FIELD_MAX_CHARS", default_value_t = CrawlBounds::default().field_chars)]
    pub field_max_chars: usize,
    /// Items kept from one page; the items after them are dropped and the
    /// run says so (degraded).
    #[arg(long, env = "PAGE_MAX_ITEMS", default_value_t = CrawlBounds::default().page_items)]
    pub page_max_items: usize,
    /// Items kept from one run; there paging stops (`paging_ended: item_cap`)
    /// and the run says so (degraded).
    #[arg(long, env = "RUN_MAX_ITEMS", default_value_t = CrawlBounds::default().run_items)]
    pub run_max_items: usize,
    /// Largest page read, in bytes, in every render mode (the HTTP body; in
    /// a browser, the page's HTML as it stands when read): a larger page
    /// fails the attempt as `page_too_large`.
    #[arg(long, env = "PAGE_MAX_BYTES", default_value_t = CrawlBounds::default().page_bytes)]
    pub page_max_bytes: usize,
}

impl Default for CrawlBoundsSettings {
    fn default() -> Self {
        let bounds = CrawlBounds::default();
        CrawlBoundsSettings {
            field_max_chars: bounds.field_chars,
            page_max_items: bounds.page_items,
            run_max_items: bounds.run_items,
            page_max_bytes: bounds.page_bytes,
        }
    }
}

impl CrawlBoundsSettings {
    /// The bounds in force; each at least 1 (a bound of 0 would store nothing).
    pub fn bounds(&self) -> CrawlBounds {
        CrawlBounds {
            field_chars: self.field_max_chars.max(1),
            page_items: self.page_max_items.max(1),
            run_items: self.run_max_items.max(1),
            page_bytes: self.page_max_bytes.max(1),
        }
    }
}

//! The worker's bounds on what a crawl stores (the worker makes them the
//! domain's `CrawlBounds`).

/// How much one crawl may store: a hostile or broken page can make a field,
/// a page's items or the page itself arbitrarily large.
#[derive(Debug, Clone, clap::Args)]
pub struct CrawlBoundsSettings {
    /// Longest field value kept, in characters; a longer one is cut there
    /// and the run says so (degraded, with the field's name).
    #[arg(long, env = "FIELD_MAX_CHARS", default_value_t = 10_000)]
    pub field_max_chars: usize,
    /// Items kept from one page; the items after them are dropped and the
    /// run says so (degraded).
    #[arg(long, env = "PAGE_MAX_ITEMS", default_value_t = 1_000)]
    pub page_max_items: usize,
    /// Items kept from one run; there paging stops (`paging_ended: item_cap`)
    /// and the run says so (degraded).
    #[arg(long, env = "RUN_MAX_ITEMS", default_value_t = 20_000)]
    pub run_max_items: usize,
    /// Largest page read, in bytes, in every render mode (the HTTP body; in
    /// a browser, the page's HTML as it stands when read): a larger page
    /// fails the attempt as `page_too_large`.
    #[arg(long, env = "PAGE_MAX_BYTES", default_value_t = 20 * 1024 * 1024)]
    pub page_max_bytes: usize,
}

impl Default for CrawlBoundsSettings {
    /// The defaults of the flags.
    fn default() -> Self {
        CrawlBoundsSettings {
            field_max_chars: 10_000,
            page_max_items: 1_000,
            run_max_items: 20_000,
            page_max_bytes: 20 * 1024 * 1024,
        }
    }
}

//! Saved pages: the list pages of a site's last healthy runs, kept (their
//! bodies compressed, with the items the run stored from each), and the
//! detail pages those runs read, so an edited extraction can be replayed
//! over them without fetching. What is kept is
//! bounded per site by runs and by compressed bytes.

use super::{item::PageItem, site::RenderMode};

/// How much a site keeps: its last `runs` healthy runs, and at most `bytes`
/// of compressed bodies over all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SavedPageBounds {
    /// 0: nothing is kept.
    pub runs: u32,
    pub bytes: u64,
}

impl SavedPageBounds {
    pub const DEFAULT_RUNS: u32 = 3;
    pub const DEFAULT_BYTES: u64 = 8 * 1024 * 1024;

    /// Whether a crawl keeps its pages' bodies at all.
    pub fn keeps(&self) -> bool {
        self.runs > 0 && self.bytes > 0
    }
}

impl Default for SavedPageBounds {
    fn default() -> Self {
        SavedPageBounds {
            runs: Self::DEFAULT_RUNS,
            bytes: Self::DEFAULT_BYTES,
        }
    }
}

/// A page's body as fetched, compressed (deflate), and its size before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptBody {
    pub deflated: Vec<u8>,
    pub raw_bytes: usize,
}

/// One list page a run read, as it is saved once the run completes healthy.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedPage {
    pub page: i32,
    pub url: String,
    pub render: RenderMode,
    pub body: KeptBody,
    /// The items the run stored from it.
    pub items: Vec<PageItem>,
}

/// One detail page a run read, saved with its list pages: its values are
/// what the replay reads from it again.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedDetail {
    pub url: String,
    pub render: RenderMode,
    pub body: KeptBody,
}

/// The pages a crawl keeps within `bounds`: each as it comes, until their
/// compressed bodies would pass the site's bytes (a run's first pages kept).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeptPages {
    pub pages: Vec<SavedPage>,
    pub details: Vec<SavedDetail>,
    bytes: u64,
}

impl KeptPages {
    /// Keeps `page` when it fits within `bounds`; says whether it did.
    pub fn keep(&mut self, page: SavedPage, bounds: &SavedPageBounds) -> bool {
        let fits = self.take_room(page.body.deflated.len(), bounds);
        if fits {
            self.pages.push(page);
        }
        fits
    }

    /// Keeps detail page `detail` when it fits within `bounds` (a page read
    /// twice in a run is kept once); says whether it did.
    pub fn keep_detail(&mut self, detail: SavedDetail, bounds: &SavedPageBounds) -> bool {
        if self.details.iter().any(|kept| kept.url == detail.url) {
            return true;
        }
        let fits = self.take_room(detail.body.deflated.len(), bounds);
        if fits {
            self.details.push(detail);
        }
        fits
    }

    fn take_room(&mut self, size: usize, bounds: &SavedPageBounds) -> bool {
        let size = size as u64;
        if !bounds.keeps() || self.bytes + size > bounds.bytes {
            return false;
        }
        self.bytes += size;
        true
    }

    /// Whether another page could still fit.
    pub fn has_room(&self, bounds: &SavedPageBounds) -> bool {
        bounds.keeps() && self.bytes < bounds.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(n: i32, size: usize) -> SavedPage {
        SavedPage {
            page: n,
            url: format!("http://shop.test/?page={n}"),
            render: RenderMode::Http,
            body: KeptBody {
                deflated: vec![0; size],
                raw_bytes: size * 4,
            },
            items: Vec::new(),
        }
    }

    #[test]
    fn pages_are_kept_until_the_bytes_are_spent() {
        let bounds = SavedPageBounds {
            runs: 3,
            bytes: 100,
        };
        let mut kept = KeptPages::default();
        assert!(kept.keep(page(1, 60), &bounds));
        assert!(!kept.keep(page(2, 60), &bounds));
        assert!(kept.keep(page(3, 40), &bounds));
        assert!(!kept.has_room(&bounds));
        assert_eq!(kept.pages.len(), 2);
    }

    #[test]
    fn detail_pages_share_the_bytes_and_are_kept_once() {
        let bounds = SavedPageBounds {
            runs: 3,
            bytes: 100,
        };
        let detail = |url: &str, size: usize| SavedDetail {
            url: url.to_owned(),
            render: RenderMode::Http,
            body: KeptBody {
                deflated: vec![0; size],
                raw_bytes: size * 4,
            },
        };
        let mut kept = KeptPages::default();
        assert!(kept.keep(page(1, 50), &bounds));
        assert!(kept.keep_detail(detail("http://shop.test/p/1", 30), &bounds));
        assert!(kept.keep_detail(detail("http://shop.test/p/1", 30), &bounds));
        assert_eq!(kept.details.len(), 1, "the same page once");
        assert!(!kept.keep_detail(detail("http://shop.test/p/2", 30), &bounds));
        assert!(kept.keep(page(2, 20), &bounds));
        assert!(!kept.has_room(&bounds));
    }

    #[test]
    fn no_runs_keeps_nothing() {
        let bounds = SavedPageBounds {
            runs: 0,
            bytes: 100,
        };
        let mut kept = KeptPages::default();
        assert!(!kept.keep(page(1, 1), &bounds));
        assert!(!kept.has_room(&bounds));
    }
}

//! Bounds on what a crawl stores: a field's length, a page's items, a run's
//! items, a page's size, and which URLs an item may carry. A hostile or broken
//! page can make any of them arbitrarily large; each bound keeps what fits
//! and says what it left out (the run's [`BoundsReport`], which makes the
//! run degraded with a reason), or refuses the page (`page_too_large`).

use std::{collections::BTreeMap, fmt};

use super::text_enum::text_enum;

/// The bounds of one crawl (settings of the worker, see `config::bounds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrawlBounds {
    /// Longest value of one field, in characters; longer ones are cut.
    pub field_chars: usize,
    /// Items kept from one page; the rest of the page is dropped.
    pub page_items: usize,
    /// Items kept from one run; paging stops there.
    pub run_items: usize,
    /// Largest page read, in bytes (the HTTP body, or the HTML a browser
    /// holds); a larger one fails the attempt as `page_too_large`.
    pub page_bytes: usize,
}

impl Default for CrawlBounds {
    fn default() -> Self {
        CrawlBounds {
            field_chars: 10_000,
            page_items: 1_000,
            run_items: 20_000,
            page_bytes: 20 * 1024 * 1024,
        }
    }
}

text_enum! {
    /// Each bound, as metrics label it (`crawlfleet_bounds_applied_total{bound}`).
    pub enum Bound as "bound" {
        /// A field value cut to `field_chars`.
        FieldChars = "field_chars",
        /// A page's items past `page_items` dropped.
        PageItems = "page_items",
        /// A run's items past `run_items` dropped, paging stopped.
        RunItems = "run_items",
        /// A page over `page_bytes` refused.
        PageBytes = "page_bytes",
        /// A URL field that is not http(s) dropped.
        UrlScheme = "url_scheme",
        /// An API listing cut at its byte budget.
        AnswerBytes = "answer_bytes",
    }
}

/// Whether `value` may be stored as a URL: it parses and is http or https.
/// Anything else (`javascript:`, `data:`, `file:`, a formula, a relative
/// path that found no base) is not a link anyone should be handed.
pub fn is_web_url(value: &str) -> bool {
    url::Url::parse(value).is_ok_and(|url| matches!(url.scheme(), "http" | "https"))
}

/// The first `max` characters of `value`, or `None` when it is not longer.
pub fn cut_to_chars(value: &str, max: usize) -> Option<&str> {
    value.char_indices().nth(max).map(|(at, _)| &value[..at])
}

/// What the bounds left out of one run's attempt, field by field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BoundsReport {
    /// Field values cut to the field bound, by field name.
    pub fields_cut: BTreeMap<String, u64>,
    /// URL values dropped (not http(s), or longer than the field bound:
    /// a link is not cut), by field name.
    pub urls_dropped: BTreeMap<String, u64>,
    /// Pages that had more items than the page bound (a browser stops
    /// reading a page at the bound, so how many more is not known).
    pub pages_cut: u64,
    /// Items left out because the run reached its bound.
    pub run_items_dropped: u64,
    /// The bounds in force, for the reason's numbers.
    pub bounds: CrawlBounds,
}

impl BoundsReport {
    pub fn new(bounds: CrawlBounds) -> Self {
        BoundsReport {
            bounds,
            ..BoundsReport::default()
        }
    }

    /// Whether no bound left anything out.
    pub fn is_empty(&self) -> bool {
        self.fields_cut.is_empty()
            && self.urls_dropped.is_empty()
            && self.pages_cut == 0
            && self.run_items_dropped == 0
    }

    /// Each thing left out, as a person reads it (the run's health reason).
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if !self.fields_cut.is_empty() {
            notes.push(format!(
                "{} field value(s) cut to {} characters ({})",
                self.fields_cut.values().sum::<u64>(),
                self.bounds.field_chars,
                by_field(&self.fields_cut)
            ));
        }
        if !self.urls_dropped.is_empty() {
            notes.push(format!(
                "{} URL(s) dropped, not http(s) or longer than {} characters ({})",
                self.urls_dropped.values().sum::<u64>(),
                self.bounds.field_chars,
                by_field(&self.urls_dropped)
            ));
        }
        if self.pages_cut > 0 {
            notes.push(format!(
                "{} page(s) with more than {} items: the items past it dropped",
                self.pages_cut, self.bounds.page_items
            ));
        }
        if self.run_items_dropped > 0 {
            notes.push(format!(
                "the run reached {} items: {} item(s) past it dropped and paging stopped",
                self.bounds.run_items, self.run_items_dropped
            ));
        }
        notes
    }
}

fn by_field(counts: &BTreeMap<String, u64>) -> String {
    counts
        .iter()
        .map(|(field, n)| format!("{field}: {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for BoundsReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.notes().join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_and_https_urls_are_web_urls() {
        assert!(is_web_url("http://shop.example/p/1"));
        assert!(is_web_url("HTTPS://shop.example/"));
        for bad in [
            "javascript:alert(1)",
            " javascript:alert(1)",
            "data:text/html,<b>x</b>",
            "=HYPERLINK(\"http://evil\")",
            "file:///etc/passwd",
            "/relative",
            "",
        ] {
            assert!(!is_web_url(bad), "{bad}");
        }
    }

    #[test]
    fn values_are_cut_at_characters_not_bytes() {
        assert_eq!(cut_to_chars("héllo", 2), Some("hé"));
        assert_eq!(cut_to_chars("héllo", 5), None);
        assert_eq!(cut_to_chars("😀😀😀", 1), Some("😀"));
        assert_eq!(cut_to_chars("", 0), None);
        assert_eq!(cut_to_chars("a", 0), Some(""));
    }

    #[test]
    fn a_report_names_every_bound_it_applied_with_counts_by_field() {
        let mut report = BoundsReport::new(CrawlBounds::default());
        assert!(report.is_empty());
        assert!(report.notes().is_empty());
        report.fields_cut.insert("title".into(), 2);
        report.urls_dropped.insert("link".into(), 3);
        report.pages_cut = 1;
        report.run_items_dropped = 7;
        assert!(!report.is_empty());
        assert_eq!(
            report.to_string(),
            "2 field value(s) cut to 10000 characters (title: 2); \
             3 URL(s) dropped, not http(s) or longer than 10000 characters (link: 3); \
             1 page(s) with more than 1000 items: the items past it dropped; \
             the run reached 20000 items: 7 item(s) past it dropped and paging stopped"
        );
        assert_eq!(Bound::ALL.len(), 6);
    }
}

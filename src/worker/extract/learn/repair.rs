//! Repairs after a site changed its markup: the items of its last good run
//! are looked for on the page it fails on now, selectors are learned from
//! them (as from examples a person gives), and each proposal is verified on
//! that page before anyone sees it: it must give back the good run's items
//! that are still there, field by field, and little else.
//!
//! A value is given back when it is equal once whitespace is collapsed, the
//! same link, or the same number (a price written another way is the same
//! price). A good item is still on the page when each of its values is found
//! there as a learned example would be. A proposal's item is new when no
//! good item shares half its values with it (an item whose price moved since
//! is not new, and is not counted either way).

use std::time::Duration;

use serde_json::{Map, Value};

use super::{Bounds, Examples, LearnError, Proposal, page, page::gives_back};
use crate::worker::extract::HtmlPage;

/// Share of the good items still on the page a proposal must give back.
pub const MIN_REPRODUCED: f64 = 0.9;
/// Share of a proposal's items that may be new: items the site added since
/// the good run, beyond which the proposal reads something else (ads, a
/// sidebar).
pub const MAX_EXTRA: f64 = 0.25;
/// Good items whose values are the examples learned from.
const EXAMPLE_ITEMS: usize = 3;

/// A repair proposal and how it fared on the failing page.
#[derive(Debug, Clone)]
pub struct Verified {
    pub proposal: Proposal,
    /// Good items found on the page (by their values).
    pub on_page: usize,
    /// Of those, the ones the proposal gives back, every field equal.
    pub reproduced: usize,
    /// The proposal's items no good item shares half its values with.
    pub extra: usize,
}

impl Verified {
    /// Whether the proposal passes: it gives back nearly every good item
    /// still on the page and reads little beyond them.
    pub fn passes(&self) -> bool {
        self.on_page > 0
            && self.reproduced as f64 >= MIN_REPRODUCED * self.on_page as f64
            && self.extra as f64 <= MAX_EXTRA * self.proposal.items.len().max(1) as f64
    }
}

/// [`repair`] of a page's HTML served at `url`, within learning's budgets.
pub fn repair_html(
    html: &str,
    url: &url::Url,
    good: &[Map<String, Value>],
) -> Result<Vec<Verified>, LearnError> {
    let page = HtmlPage::parse(html, url);
    repair(&page, good, super::LEARN_TIME, super::LEARN_MAX_RUNS)
}

/// Proposals for `page` learned from `good` (the items of the site's last
/// good run, as stored), each verified on `page`, those that pass first, the
/// best first; none when no good item is on the page any more. Bounded as
/// learning is: `time` for the whole repair.
pub fn repair(
    page: &HtmlPage,
    good: &[Map<String, Value>],
    time: Duration,
    max_runs: usize,
) -> Result<Vec<Verified>, LearnError> {
    let bounds = Bounds::new(time, max_runs);
    let index = page::PageIndex::build(page, &bounds)?;
    let on_page = good_on_page(&index, good, page, &bounds)?;
    // Examples from items that are there: one sold out since is no example.
    let examples = examples_from(&on_page);
    if examples.is_empty() {
        return Ok(Vec::new());
    }
    let proposals = super::learn_indexed(page, &index, &examples, &bounds)?;
    let mut verified: Vec<Verified> = proposals
        .into_iter()
        .map(|proposal| verify(proposal, &on_page, good, page))
        .collect();
    // Stable: among equals, learning's own ranking stands.
    verified.sort_by_key(|v| (!v.passes(), v.on_page - v.reproduced, v.extra));
    Ok(verified)
}

/// How `proposal` fares on another `page` (the site's page fetched again):
/// its selectors run there and are checked against `good` as on the page
/// they were learned from, within `time`.
pub fn verify_on(
    proposal: &Proposal,
    page: &HtmlPage,
    good: &[Map<String, Value>],
    time: Duration,
) -> Result<Verified, LearnError> {
    let bounds = Bounds::new(time, super::LEARN_MAX_RUNS);
    let index = page::PageIndex::build(page, &bounds)?;
    let on_page = good_on_page(&index, good, page, &bounds)?;
    let items = super::rank::extract(page, &proposal.item_selector, &proposal.fields, &bounds)?;
    let there = Proposal {
        items,
        ..proposal.clone()
    };
    Ok(verify(there, &on_page, good, page))
}

/// The good items whose every value is on the page.
fn good_on_page<'g>(
    index: &page::PageIndex<'_>,
    good: &'g [Map<String, Value>],
    page: &HtmlPage,
    bounds: &Bounds,
) -> Result<Vec<&'g Map<String, Value>>, LearnError> {
    let mut on_page = Vec::new();
    for item in good {
        if still_on_page(index, item, page, bounds)? {
            on_page.push(item);
        }
    }
    Ok(on_page)
}

/// Per field, the values of a few good items spread over the run (the
/// second, the middle one, the second to last), as text.
fn examples_from(good: &[&Map<String, Value>]) -> Examples {
    let n = good.len();
    let mut picks = vec![1.min(n.saturating_sub(1)), n / 2, n.saturating_sub(2)];
    picks.dedup();
    let mut examples = Examples::new();
    for &i in picks.iter().take(EXAMPLE_ITEMS) {
        let Some(item) = good.get(i) else { continue };
        for (field, value) in *item {
            if let Some(text) = as_text(value) {
                examples.entry(field.clone()).or_default().push(text);
            }
        }
    }
    examples
}

fn as_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Whether every value of `item` is found on the page.
fn still_on_page(
    index: &page::PageIndex<'_>,
    item: &Map<String, Value>,
    page: &HtmlPage,
    bounds: &Bounds,
) -> Result<bool, LearnError> {
    let mut any = false;
    for value in item.values().filter_map(as_text) {
        if index.hits(&value, page.base(), bounds)?.is_empty() {
            return Ok(false);
        }
        any = true;
    }
    Ok(any)
}

fn verify(
    proposal: Proposal,
    on_page: &[&Map<String, Value>],
    good: &[Map<String, Value>],
    page: &HtmlPage,
) -> Verified {
    let base = page.base();
    let field_same = |got: &Map<String, Value>, field: &str, want: &Value| {
        let (Some(want), Some(got)) = (as_text(want), got.get(field).and_then(as_text)) else {
            return false;
        };
        gives_back(&want, &got, base)
    };
    let same = |got: &Map<String, Value>, want: &Map<String, Value>| {
        want.iter()
            .filter(|(_, value)| as_text(value).is_some())
            .all(|(field, value)| field_same(got, field, value))
    };
    // The same item, its price moved since: half its values or more.
    let shares = |got: &Map<String, Value>, want: &Map<String, Value>| {
        let values = want.values().filter(|v| as_text(v).is_some()).count();
        let equal = (want.iter())
            .filter(|(field, value)| field_same(got, field, value))
            .count();
        values > 0 && 2 * equal >= values
    };
    let reproduced = on_page
        .iter()
        .filter(|want| proposal.items.iter().any(|got| same(got, want)))
        .count();
    let extra = proposal
        .items
        .iter()
        .filter(|got| !good.iter().any(|want| shares(got, want)))
        .count();
    Verified {
        on_page: on_page.len(),
        reproduced,
        extra,
        proposal,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use url::Url;

    use super::*;

    const NAMES: [&str; 6] = [
        "Blue Kettle",
        "Red Pan",
        "Green Mug",
        "Steel Pot",
        "Oak Board",
        "Glass Jar",
    ];

    fn url() -> Url {
        Url::parse("http://shop.test/search?q=kitchen").unwrap()
    }

    /// The items the site's last good run stored.
    fn good() -> Vec<Map<String, Value>> {
        (0..NAMES.len())
            .map(|i| {
                let item = json!({
                    "title": NAMES[i],
                    "price": format!("₩{},900", 10 + i),
                    "link": format!("http://shop.test/p/{i}"),
                });
                item.as_object().unwrap().clone()
            })
            .collect()
    }

    /// The page after the site's redesign: cards with generated class
    /// names, the price written another way, and a sponsored card.
    fn redesigned(names: &[&str]) -> String {
        let mut cards = String::new();
        for (i, name) in names.iter().enumerate() {
            if i == 2 {
                cards.push_str(
                    r#"<div class="Card_x9f2"><h3><a href="/ad/1">Sponsored: Best Blender</a></h3></div>"#,
                );
            }
            // A product the good run had keeps its link and price.
            let (link, price) = match NAMES.iter().position(|n| n == name) {
                Some(k) => (format!("/p/{k}"), 10 + k),
                None => (format!("/p/new-{i}"), 90 + i),
            };
            cards.push_str(&format!(
                r#"<div class="Card_x9f2"><h3><a href="{link}">{name}</a></h3><b class="Price_k2">{price},900원</b></div>"#
            ));
        }
        format!(r#"<html><body><main><div class="Grid_a1">{cards}</div></main></body></html>"#)
    }

    #[test]
    fn a_redesigned_page_gets_a_verified_proposal_giving_back_the_good_runs_items() {
        let page = HtmlPage::parse(&redesigned(&NAMES), &url());
        let verified = repair(&page, &good(), Duration::from_secs(10), 400).unwrap();
        let best = verified.first().expect("a proposal");
        assert!(best.passes(), "{best:?}");
        assert_eq!((best.on_page, best.reproduced), (6, 6), "{best:?}");
        assert_eq!(best.extra, 0, "the sponsored card is not an item: {best:?}");
        let titles: Vec<&str> = best
            .proposal
            .items
            .iter()
            .filter_map(|item| item.get("title").and_then(Value::as_str))
            .collect();
        assert_eq!(titles, NAMES);
    }

    #[test]
    fn items_gone_from_the_page_give_no_proposal_and_what_reads_other_items_fails() {
        let other = [
            "Paper Cup",
            "Tin Can",
            "Wool Hat",
            "Silk Tie",
            "Jute Bag",
            "Cork Mat",
        ];
        let page = HtmlPage::parse(&redesigned(&other), &url());
        let verified = repair(&page, &good(), Duration::from_secs(10), 400).unwrap();
        assert!(verified.is_empty(), "{verified:?}");

        // Half the good items still there, half replaced: a proposal gives
        // back the three but reads three new ones beside them (50 % new).
        let mixed = [
            NAMES[0],
            "Paper Cup",
            NAMES[2],
            "Tin Can",
            NAMES[4],
            "Wool Hat",
        ];
        let page = HtmlPage::parse(&redesigned(&mixed), &url());
        let verified = repair(&page, &good(), Duration::from_secs(10), 400).unwrap();
        let best = verified.first().expect("a proposal");
        assert_eq!((best.on_page, best.reproduced), (3, 3), "{best:?}");
        assert_eq!(best.extra, 3, "{best:?}");
        assert!(!best.passes(), "{best:?}");
    }
}

//! Repairs of a site whose markup changed: what a site lets a repair do
//! (`repair: off | suggest | auto`), where a proposal is in its life, and the
//! evidence it is stored and shown with (the good run's items, what the
//! proposal reads instead, field by field, and how each verification went).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::{
    site::{CssSelector, Extraction, FieldSpec, HtmlItems, SiteSpec},
    text_enum::text_enum,
};

text_enum! {
    /// What a site lets a repair do when its runs turn degraded or find no
    /// items.
    #[derive(Default)]
    pub enum RepairPolicy as "repair policy" {
        /// No repair is looked for.
        Off = "off",
        /// Verified proposals are stored and announced; a person accepts one.
        #[default]
        Suggest = "suggest",
        /// A proposal that passes every verification is applied at once (a
        /// new version and a re-crawl), and undone if the next run is
        /// degraded again.
        Auto = "auto",
    }
}

text_enum! {
    /// Where a repair of one site version is.
    pub enum RepairState as "repair state" {
        /// A worker is looking for one.
        Working = "working",
        /// Verified, waiting for a person.
        Proposed = "proposed",
        /// No proposal passed verification; `verdict` says why.
        NoneFound = "none_found",
        /// Accepted by a person: the site's next version.
        Accepted = "accepted",
        /// Applied by the site's `auto` policy.
        Applied = "applied",
        Rejected = "rejected",
        /// Applied by `auto`, then undone: the next run was degraded again.
        RolledBack = "rolled_back",
    }
}

impl RepairState {
    /// Whether a person may still accept or reject it.
    pub fn is_open(self) -> bool {
        self == RepairState::Proposed
    }
}

/// Most items of each side an evidence keeps.
pub const EVIDENCE_ITEMS: usize = 20;

/// How one verification of a proposal went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = RepairCheck)]
pub struct Check {
    /// Whether it passed its thresholds.
    pub passed: bool,
    /// The good run's items found on the page (by their values).
    pub on_page: usize,
    /// Of those, the ones the proposal gives back, every field equal.
    pub reproduced: usize,
    /// The proposal's items that are none of the good run's.
    pub extra: usize,
    /// Items the proposal reads on the page.
    pub items: usize,
    /// The page checked.
    pub url: Option<String>,
    /// Why it was not made (the live page could not be loaded...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The proposal replayed over the site's saved pages (older markup): a
/// page it reads must give the stored items back unchanged; a page it
/// reads nothing on is older markup, not a failure.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = RepairReplayCheck)]
pub struct ReplayCheck {
    pub passed: bool,
    /// Saved pages replayed.
    pub pages: usize,
    /// Pages whose items came back exactly as stored.
    pub same: usize,
    /// Pages it read nothing on (markup from before the change).
    pub not_read: usize,
    /// Pages on which it read other values than were stored: a wrong repair.
    pub differing: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A field's selector before the repair and as proposed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = RepairFieldChange)]
pub struct FieldChange {
    pub before: Option<String>,
    pub after: Option<String>,
    /// The attribute read, when it changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attr: Option<String>,
}

/// What a proposal is stored and shown with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RepairEvidence {
    /// The item selector before and as proposed.
    pub item_selector: FieldChange,
    /// Each field whose selector changed.
    pub fields: BTreeMap<String, FieldChange>,
    /// The good run learned from.
    pub good_run_id: i64,
    /// Its first items (`fields` objects), as stored.
    pub before: Vec<Value>,
    /// The proposal's first items on the failing page.
    pub after: Vec<Value>,
    /// Where the failing page came from: `evidence` (what the failed attempt
    /// saw) or `live` (fetched again for the repair).
    pub failing_page_source: String,
    pub failing_page: Check,
    /// On a page fetched again (`null` when the failing page is that page).
    pub live: Option<Check>,
    pub replay: ReplayCheck,
    /// 0..1, learning's confidence in the selectors.
    pub confidence: f64,
    /// Time the repair took on the worker.
    pub repair_ms: u64,
}

impl RepairEvidence {
    /// Whether every verification made passed: what `auto` applies.
    pub fn all_passed(&self) -> bool {
        self.failing_page.passed
            && self.live.as_ref().is_none_or(|live| live.passed)
            && self.replay.passed
    }
}

/// The items-to-compare rule of the replay check: a page read with
/// `differing` wrong values fails; pages it reads nothing on do not count.
pub fn replay_passes(check: &ReplayCheck) -> bool {
    check.differing == 0
}

/// Whether a site can be repaired: its items are found by a selector (not
/// by structured data, not in JSON).
pub fn repairable(spec: &SiteSpec) -> bool {
    matches!(
        spec.extraction,
        Extraction::Html {
            items: HtmlItems::Selector(_),
            ..
        }
    )
}

/// `spec` read with a proposal's selectors: its item selector, and each
/// proposed field's selector and attribute; every field keeps its value
/// rules and whether it is a link, and a field the proposal does not name
/// keeps its spec. A `wait_for` that waited for the old items waits for the
/// new ones. `None` for a site that is not [`repairable`].
pub fn repaired(
    spec: &SiteSpec,
    item_selector: &CssSelector,
    proposed: &BTreeMap<String, FieldSpec>,
) -> Option<SiteSpec> {
    let Extraction::Html {
        items: HtmlItems::Selector(old_items),
        fields,
        wait_for,
        blocked_selector,
    } = &spec.extraction
    else {
        return None;
    };
    let fields = fields
        .iter()
        .map(|(name, old)| {
            let field = match proposed.get(name) {
                Some(new) => FieldSpec {
                    selector: new.selector.clone(),
                    attr: new.attr.clone(),
                    link: old.link || new.link,
                    ..old.clone()
                },
                None => old.clone(),
            };
            (name.clone(), field)
        })
        .collect();
    let wait_for = match wait_for {
        Some(waited) if waited == old_items => Some(item_selector.clone()),
        other => other.clone(),
    };
    Some(SiteSpec {
        extraction: Extraction::Html {
            items: HtmlItems::Selector(item_selector.clone()),
            fields,
            wait_for,
            blocked_selector: blocked_selector.clone(),
        },
        ..spec.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::site::SiteInput;

    #[test]
    fn a_repaired_spec_takes_the_selectors_and_keeps_value_rules_and_other_fields() {
        let input: SiteInput = serde_json::from_value(serde_json::json!({
            "name": "shop", "search_url": "http://shop.test/?q={keyword}",
            "item_selector": "li.product", "wait_for": "li.product",
            "fields": {
                "title": {"selector": "h2"},
                "price": {"selector": ".price", "number": {"locale": "en-US"}},
                "note": {"selector": ".note"}
            }
        }))
        .unwrap();
        let spec = input.parse().unwrap();
        let css = |s: &str| CssSelector::parse(s, "test").unwrap();
        let proposed = BTreeMap::from([
            (
                "title".to_owned(),
                FieldSpec {
                    selector: Some(css("h3 a")),
                    ..FieldSpec::default()
                },
            ),
            (
                "price".to_owned(),
                FieldSpec {
                    selector: Some(css("div.card")),
                    attr: Some("data-price".to_owned()),
                    ..FieldSpec::default()
                },
            ),
        ]);
        let repaired = repaired(&spec, &css("div.card"), &proposed).unwrap();
        let Extraction::Html {
            items: HtmlItems::Selector(items),
            fields,
            wait_for,
            ..
        } = &repaired.extraction
        else {
            panic!("an html site stays one");
        };
        assert_eq!(items.as_str(), "div.card");
        assert_eq!(wait_for.as_ref().map(CssSelector::as_str), Some("div.card"));
        assert_eq!(fields["title"].selector.as_ref().unwrap().as_str(), "h3 a");
        assert_eq!(fields["price"].attr.as_deref(), Some("data-price"));
        assert_eq!(
            fields["price"].rules,
            spec.extraction.fields()["price"].rules,
            "the value rules stay the site's"
        );
        assert_eq!(fields["note"], spec.extraction.fields()["note"]);
        assert_eq!(repaired.name, spec.name);
    }

    fn check(passed: bool) -> Check {
        Check {
            passed,
            on_page: 10,
            reproduced: if passed { 10 } else { 2 },
            extra: 0,
            items: 10,
            url: None,
            note: None,
        }
    }

    #[test]
    fn policies_and_states_round_trip_and_suggest_is_the_default() {
        assert_eq!(RepairPolicy::default(), RepairPolicy::Suggest);
        for p in RepairPolicy::ALL {
            assert_eq!(p.as_str().parse::<RepairPolicy>().unwrap(), p);
        }
        for s in RepairState::ALL {
            assert_eq!(s.as_str().parse::<RepairState>().unwrap(), s);
        }
        assert!(RepairState::Proposed.is_open());
        assert!(!RepairState::Applied.is_open());
    }

    #[test]
    fn auto_needs_every_check_made_to_pass() {
        let mut evidence = RepairEvidence {
            item_selector: FieldChange {
                before: Some("li.a".into()),
                after: Some("li.b".into()),
                attr: None,
            },
            fields: BTreeMap::new(),
            good_run_id: 1,
            before: Vec::new(),
            after: Vec::new(),
            failing_page_source: "live".into(),
            failing_page: check(true),
            live: None,
            replay: ReplayCheck {
                passed: true,
                ..ReplayCheck::default()
            },
            confidence: 0.9,
            repair_ms: 5,
        };
        assert!(
            evidence.all_passed(),
            "no live check made: the others decide"
        );
        evidence.live = Some(check(false));
        assert!(!evidence.all_passed());
        evidence.live = Some(check(true));
        evidence.replay.passed = false;
        assert!(!evidence.all_passed());
    }

    #[test]
    fn a_replay_with_a_wrong_value_fails_and_unread_pages_do_not() {
        let unread = ReplayCheck {
            pages: 3,
            not_read: 3,
            ..ReplayCheck::default()
        };
        assert!(replay_passes(&unread));
        let wrong = ReplayCheck {
            pages: 3,
            same: 2,
            differing: 1,
            ..ReplayCheck::default()
        };
        assert!(!replay_passes(&wrong));
    }
}

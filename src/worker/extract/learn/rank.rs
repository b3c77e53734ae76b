//! Candidates tried: each item selector is run over the page, each field
//! selector is run inside its items by [`extract_html`] (the code a crawl
//! runs), and only those giving back every example are kept; proposals are
//! ranked by examples given back, items with every field, items found, and
//! how stable their selectors are.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{
    Bounds, Examples, LearnError, MAX_PROPOSALS, Proposal, Reasons,
    generalize::{Candidate, field_candidates, item_candidates},
    page::{Hit, PageIndex, gives_back},
    rows::{Rows, field_hits},
};
use crate::{
    domain::site::{CssSelector, FieldSpec},
    worker::extract::{HtmlPage, extract_html, select::select_in_document},
};

/// A field selector chosen for a set of items.
pub(super) struct Chosen {
    pub spec: FieldSpec,
    pub stability: f64,
}

/// The page's elements an item selector finds, in order; None if it does
/// not parse, or if an element it finds is inside another (items inside
/// items read every value twice: `div` over cards with a `div` body).
pub(super) fn select(
    page: &HtmlPage,
    index: &PageIndex<'_>,
    selector: &str,
    bounds: &Bounds,
) -> Result<Option<(CssSelector, Vec<usize>)>, LearnError> {
    bounds.run()?;
    let Ok(parsed) = CssSelector::parse(selector, "item_selector") else {
        return Ok(None);
    };
    let Ok(compiled) = parsed.compile("item_selector") else {
        return Ok(None);
    };
    let found = select_in_document(page.document(), &compiled, &bounds.budget)
        .filter_map(|el| index.index_of(el))
        .collect::<Vec<usize>>();
    bounds.check()?;
    let set: std::collections::HashSet<usize> = found.iter().copied().collect();
    let nested = found
        .iter()
        .any(|&f| index.ancestors_or_self(f).skip(1).any(|a| set.contains(&a)));
    bounds.check()?;
    Ok((!nested).then_some((parsed, found)))
}

/// The page's items as `item` and `fields` read them.
pub(super) fn extract(
    page: &HtmlPage,
    item: &CssSelector,
    fields: &BTreeMap<String, FieldSpec>,
    bounds: &Bounds,
) -> Result<Vec<Map<String, Value>>, LearnError> {
    bounds.run()?;
    extract_html(page, item, fields, &Map::new(), usize::MAX, &bounds.budget).map_err(|_| {
        bounds
            .check()
            .err()
            .unwrap_or(LearnError::OverBudget(super::Spent::Time))
    })
}

/// The most stable field selector that gives back `examples[k]` in the item
/// at `places[k]` of those `item` finds, preferring one that fills most items.
#[allow(clippy::too_many_arguments)]
pub(super) fn choose_field(
    page: &HtmlPage,
    index: &PageIndex<'_>,
    item: &CssSelector,
    rows: &[usize],
    places: &[usize],
    hit_groups: &[Vec<Hit>],
    examples: &[String],
    bounds: &Bounds,
) -> Result<Option<Chosen>, LearnError> {
    let mut best: Option<(f64, Chosen)> = None;
    for hits in hit_groups.iter().take(4) {
        for candidate in field_candidates(index, rows, hits) {
            let spec = field_spec(&candidate, hits);
            let Some(spec) = spec else { continue };
            let fields = BTreeMap::from([("f".to_owned(), spec.clone())]);
            let items = extract(page, item, &fields, bounds)?;
            let value = |place: usize| items.get(place).and_then(|i| i["f"].as_str());
            let all_back = places
                .iter()
                .zip(examples)
                .all(|(&p, ex)| value(p).is_some_and(|v| gives_back(ex, v, page.base())));
            if !all_back {
                continue;
            }
            let filled = items.iter().filter(|i| !i["f"].is_null()).count() as f64;
            let fill = filled / items.len().max(1) as f64;
            let score = fill * 2.0 + candidate.stability;
            if best.as_ref().is_none_or(|(s, _)| score > *s) {
                best = Some((
                    score,
                    Chosen {
                        spec,
                        stability: candidate.stability,
                    },
                ));
            }
            if fill >= 1.0 && candidate.stability >= 0.95 {
                return Ok(best.map(|(_, c)| c));
            }
        }
    }
    Ok(best.map(|(_, c)| c))
}

fn field_spec(candidate: &Candidate, hits: &[Hit]) -> Option<FieldSpec> {
    let selector = match &candidate.selector {
        Some(s) => Some(CssSelector::parse(s, "selector").ok()?),
        None => None,
    };
    let attr = match &hits[0].source {
        super::page::Source::Attr(name) => Some(name.clone()),
        super::page::Source::Text => None,
    };
    Some(FieldSpec {
        selector,
        attr,
        ..FieldSpec::default()
    })
}

/// A proposal with its items read, its examples checked and its confidence.
pub(super) fn finish(
    page: &HtmlPage,
    item: CssSelector,
    fields: BTreeMap<String, FieldSpec>,
    stability: f64,
    checks: &[(String, usize, String)],
    bounds: &Bounds,
) -> Result<Proposal, LearnError> {
    let items = extract(page, &item, &fields, bounds)?;
    let reproduced = checks
        .iter()
        .filter(|(field, place, example)| {
            items
                .get(*place)
                .and_then(|i| i[field.as_str()].as_str())
                .is_some_and(|v| gives_back(example, v, page.base()))
        })
        .count();
    let complete = items
        .iter()
        .filter(|i| i.values().all(|v| !v.is_null()))
        .count();
    let reasons = Reasons {
        examples_reproduced: reproduced,
        examples_given: checks.len(),
        items_found: items.len(),
        items_complete: complete,
        stability,
    };
    Ok(Proposal {
        item_selector: item,
        fields,
        items,
        confidence: confidence(&reasons),
        reasons,
    })
}

/// Half for the examples given back, a quarter for items with every field,
/// the rest for stable selectors and for a list of three items or more.
fn confidence(r: &Reasons) -> f64 {
    // Without examples (a structure found by itself) there is nothing to give back: half.
    let back = match r.examples_given {
        0 => 0.5,
        given => r.examples_reproduced as f64 / given as f64,
    };
    let complete = r.items_complete as f64 / r.items_found.max(1) as f64;
    let many = (r.items_found as f64 / 3.0).min(1.0);
    (0.5 * back + 0.25 * complete + 0.15 * r.stability + 0.1 * many).clamp(0.0, 1.0)
}

/// Proposals best first: examples given back, items complete, items found,
/// stability.
pub(super) fn ranked(mut proposals: Vec<Proposal>) -> Vec<Proposal> {
    let key = |p: &Proposal| {
        let r = &p.reasons;
        (
            r.examples_reproduced,
            (1000.0 * r.items_complete as f64 / r.items_found.max(1) as f64) as u64,
            r.items_found,
            (1000.0 * r.stability) as u64,
        )
    };
    proposals.sort_by_key(|p| std::cmp::Reverse(key(p)));
    let mut seen = Vec::new();
    proposals.retain(|p| {
        let items = serde_json::to_string(&p.items).unwrap_or_default();
        let new = !seen.contains(&(p.item_selector.as_str().to_owned(), items.clone()));
        seen.push((p.item_selector.as_str().to_owned(), items));
        new
    });
    proposals.truncate(MAX_PROPOSALS);
    proposals
}

/// Proposals from examples found in `rows`.
pub(super) fn propose(
    page: &HtmlPage,
    index: &PageIndex<'_>,
    rows: &Rows,
    examples: &Examples,
    bounds: &Bounds,
) -> Result<Vec<Proposal>, LearnError> {
    let mut proposals = Vec::new();
    let mut failed_field = None;
    for level in &rows.levels {
        let mut seen_sets: Vec<Vec<usize>> = Vec::new();
        for candidate in item_candidates(index, level) {
            let selector = candidate.selector.as_deref().expect("items have selectors");
            let Some((item, found)) = select(page, index, selector, bounds)? else {
                continue;
            };
            let places: Option<Vec<usize>> = level
                .iter()
                .map(|n| found.iter().position(|f| f == n))
                .collect();
            let Some(places) = places else { continue };
            if seen_sets.contains(&found) {
                continue;
            }
            seen_sets.push(found.clone());
            match fields_for(page, index, rows, level, &item, &places, examples, bounds)? {
                Ok((fields, stability)) => {
                    let stability = (stability + candidate.stability) / 2.0;
                    let checks = checks(examples, &places);
                    let proposal = finish(page, item, fields, stability, &checks, bounds)?;
                    let refined = refine(page, index, &proposal, level, &checks, bounds)?;
                    proposals.push(proposal);
                    proposals.extend(refined);
                }
                Err(field) => failed_field = failed_field.or(Some(field)),
            }
        }
    }
    if proposals.is_empty() {
        return Err(match failed_field {
            Some(field) => LearnError::NoSelector { field },
            None => LearnError::NoItems,
        });
    }
    Ok(ranked(proposals))
}

/// Each (field, item place, example) a proposal must give back.
fn checks(examples: &Examples, places: &[usize]) -> Vec<(String, usize, String)> {
    examples
        .iter()
        .flat_map(|(field, values)| {
            values
                .iter()
                .enumerate()
                .map(move |(row, ex)| (field.clone(), places[row], ex.clone()))
        })
        .collect()
}

/// A spec per field and their mean stability.
type FieldsFound = (BTreeMap<String, FieldSpec>, f64);

/// A selector per field for the items `item` finds, or the field none fits.
#[allow(clippy::too_many_arguments)]
fn fields_for(
    page: &HtmlPage,
    index: &PageIndex<'_>,
    rows: &Rows,
    level: &[usize],
    item: &CssSelector,
    places: &[usize],
    examples: &Examples,
    bounds: &Bounds,
) -> Result<Result<FieldsFound, String>, LearnError> {
    let mut fields = BTreeMap::new();
    let mut stability = 0.0;
    for (name, values) in examples {
        let n = values.len();
        let groups = field_hits(index, rows, &level[..n], name);
        let chosen = choose_field(
            page,
            index,
            item,
            &level[..n],
            &places[..n],
            &groups,
            values,
            bounds,
        )?;
        let Some(chosen) = chosen else {
            return Ok(Err(name.clone()));
        };
        stability += chosen.stability;
        fields.insert(name.clone(), chosen.spec);
    }
    Ok(Ok((fields, stability / examples.len().max(1) as f64)))
}

/// For a proposal some of whose items miss a field (ads, banners between
/// the items): its item selector narrowed to items that have that field's
/// element (`li:has(span.price)`), when it still finds the examples' items.
fn refine(
    page: &HtmlPage,
    index: &PageIndex<'_>,
    proposal: &Proposal,
    level: &[usize],
    checks: &[(String, usize, String)],
    bounds: &Bounds,
) -> Result<Vec<Proposal>, LearnError> {
    let r = &proposal.reasons;
    if r.items_complete == r.items_found {
        return Ok(Vec::new());
    }
    let mut refined = Vec::new();
    for (name, spec) in &proposal.fields {
        let missing = proposal.items.iter().any(|i| i[name.as_str()].is_null());
        let Some(selector) = spec.selector.as_ref().filter(|_| missing) else {
            continue;
        };
        let inner = match selector.as_str().strip_prefix(":scope ") {
            Some(child) => child.to_owned(),
            None => selector.as_str().to_owned(),
        };
        let narrowed = format!("{}:has({inner})", proposal.item_selector.as_str());
        let Some((item, found)) = select(page, index, &narrowed, bounds)? else {
            continue;
        };
        let places: Option<Vec<usize>> = level
            .iter()
            .map(|n| found.iter().position(|f| f == n))
            .collect();
        let Some(places) = places else { continue };
        let checks: Vec<(String, usize, String)> = checks
            .iter()
            .map(|(f, place, ex)| {
                let row = proposal_row(checks, *place);
                (f.clone(), places[row], ex.clone())
            })
            .collect();
        let stability = proposal.reasons.stability * 0.95;
        refined.push(finish(
            page,
            item,
            proposal.fields.clone(),
            stability,
            &checks,
            bounds,
        )?);
    }
    Ok(refined)
}

/// The row whose item sits at `place` (rows' places are in row order).
fn proposal_row(checks: &[(String, usize, String)], place: usize) -> usize {
    let mut places: Vec<usize> = checks.iter().map(|(_, p, _)| *p).collect();
    places.dedup();
    let mut distinct: Vec<usize> = Vec::new();
    for p in places {
        if !distinct.contains(&p) {
            distinct.push(p);
        }
    }
    distinct.iter().position(|&p| p == place).unwrap_or(0)
}

//! A page's items with no examples: its main repeated structure (three or
//! more sibling elements of one tag and stable classes, scored by how many
//! they are and how much text and how many links they hold), and the fields
//! most of its items have (texts, the first link, the first image), named
//! `text_1`, `text_2`, ..., `link`, `image`. The values of the group's own
//! elements stand in for examples, so every field selector is checked the
//! way a learned one is.

use std::collections::BTreeMap;

use super::{
    Bounds, LearnError, MAX_PROPOSALS, Proposal,
    generalize::{item_candidates, stable_classes},
    page::{Hit, PageIndex, Source},
    rank::{choose_field, finish, select},
};
use crate::worker::extract::HtmlPage;

/// Fewest alike siblings that make a repeated structure.
const MIN_GROUP: usize = 3;
/// Groups turned into proposals.
const GROUPS_TRIED: usize = 3;
/// Most text fields proposed.
const MAX_TEXT_FIELDS: usize = 6;
/// Share of the items a field must be in.
const FIELD_SHARE: f64 = 0.6;
/// Elements looked at inside one item.
const ITEM_ELEMENTS: usize = 200;
/// Tags never items, nor holders of a field's text.
const NOT_CONTENT: &[&str] = &[
    "script", "style", "noscript", "template", "head", "meta", "link", "br", "option", "svg",
    "path", "source",
];

pub(super) fn discover(
    page: &HtmlPage,
    index: &PageIndex<'_>,
    bounds: &Bounds,
) -> Result<Vec<Proposal>, LearnError> {
    let mut groups = groups(index, bounds)?;
    groups.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut proposals = Vec::new();
    for (_, members) in groups.into_iter().take(GROUPS_TRIED) {
        if let Some(proposal) = propose_group(page, index, &members, bounds)? {
            proposals.push(proposal);
        }
    }
    if proposals.is_empty() {
        return Err(LearnError::NoRepeatedStructure);
    }
    // The group the page is about first: most complete items, most fields.
    proposals.sort_by(|a, b| weight(b).total_cmp(&weight(a)));
    proposals.truncate(MAX_PROPOSALS);
    Ok(proposals)
}

fn weight(p: &Proposal) -> f64 {
    p.reasons.items_complete as f64 * (1.0 + p.fields.len() as f64)
}

/// Groups of alike siblings and their scores.
fn groups(index: &PageIndex<'_>, bounds: &Bounds) -> Result<Vec<(f64, Vec<usize>)>, LearnError> {
    let mut children: BTreeMap<(usize, String), Vec<usize>> = BTreeMap::new();
    for (i, element) in index.elements.iter().enumerate() {
        bounds.check_step()?;
        let Some(parent) = element.parent else {
            continue;
        };
        if NOT_CONTENT.contains(&index.tag(i)) || element.text_len == 0 {
            continue;
        }
        let signature = signature_of(index, i);
        // Siblings, and cousins: alike elements in alike parents (rows of tiles).
        if let Some(grand) = index.elements[parent].parent {
            let mut cousins = signature_of(index, parent);
            cousins.push('>');
            cousins.push_str(&signature);
            children.entry((grand, cousins)).or_default().push(i);
        }
        children.entry((parent, signature)).or_default().push(i);
    }
    bounds.check()?;
    let groups = children
        .into_values()
        .filter(|members| members.len() >= MIN_GROUP)
        .map(|members| {
            let n = members.len() as f64;
            let text = members
                .iter()
                .map(|&m| index.elements[m].text_len.min(300) as f64)
                .sum::<f64>()
                / n;
            let linked = members
                .iter()
                .filter(|&&m| has_tag(index, m, "a", bounds))
                .count() as f64
                / n;
            let score = n * (1.0 + text / 40.0) * (0.5 + linked);
            (score, members)
        })
        .collect();
    bounds.check()?;
    Ok(groups)
}

/// The element's tag and stable classes: `div.tile`.
fn signature_of(index: &PageIndex<'_>, i: usize) -> String {
    let mut signature = index.tag(i).to_owned();
    for class in stable_classes(index.elements[i].el) {
        signature.push('.');
        signature.push_str(&class);
    }
    signature
}

fn has_tag(index: &PageIndex<'_>, item: usize, tag: &str, bounds: &Bounds) -> bool {
    item_elements(index, item)
        .take_while(|_| bounds.budget.step())
        .any(|e| index.tag(e) == tag)
}

/// The elements inside `item` (at most [`ITEM_ELEMENTS`]).
fn item_elements<'i>(index: &'i PageIndex<'_>, item: usize) -> impl Iterator<Item = usize> + 'i {
    index.elements[item]
        .el
        .descendants()
        .skip(1)
        .filter_map(scraper::ElementRef::wrap)
        .filter_map(|el| index.index_of(el))
        .take(ITEM_ELEMENTS)
}

/// What kind of field an element of an item holds.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Text,
    Link,
    Image,
}

/// A proposal for one group: its item selector and its common fields.
fn propose_group(
    page: &HtmlPage,
    index: &PageIndex<'_>,
    members: &[usize],
    bounds: &Bounds,
) -> Result<Option<Proposal>, LearnError> {
    let mut item = None;
    for candidate in item_candidates(index, members) {
        let selector = candidate.selector.expect("items have selectors");
        let Some((parsed, found)) = select(page, index, &selector, bounds)? else {
            continue;
        };
        if members.iter().all(|m| found.contains(m)) && found.len() <= members.len() * 3 / 2 {
            item = Some((parsed, found, candidate.stability));
            break;
        }
    }
    let Some((item, found, item_stability)) = item else {
        return Ok(None);
    };
    // Per path inside an item (tags and classes) and kind: each member's first element there.
    let mut paths: BTreeMap<(Kind, String), BTreeMap<usize, usize>> = BTreeMap::new();
    let mut first_seen: BTreeMap<(Kind, String), usize> = BTreeMap::new();
    for (order, &m) in members.iter().enumerate() {
        for (at, e) in item_elements(index, m).enumerate() {
            bounds.check_step()?;
            let el = index.elements[e].el.value();
            let kind = match index.tag(e) {
                "a" if el.attr("href").is_some() => Some(Kind::Link),
                "img" if el.attr("src").is_some() => Some(Kind::Image),
                tag if !NOT_CONTENT.contains(&tag) && own_text(index, e) => Some(Kind::Text),
                _ => None,
            };
            let Some(kind) = kind else { continue };
            let key = (kind, path(index, m, e));
            paths.entry(key.clone()).or_default().entry(m).or_insert(e);
            first_seen.entry(key).or_insert(order * ITEM_ELEMENTS + at);
        }
    }
    let needed = (members.len() as f64 * FIELD_SHARE).ceil() as usize;
    let mut common: Vec<((Kind, String), BTreeMap<usize, usize>)> = paths
        .into_iter()
        .filter(|(_, at)| at.len() >= needed)
        .collect();
    common.sort_by_key(|(key, _)| first_seen[key]);
    let mut fields = BTreeMap::new();
    let mut stability = item_stability;
    let mut texts = 0;
    for ((kind, _), at) in common {
        let name = match kind {
            Kind::Link if !fields.contains_key("link") => "link".to_owned(),
            Kind::Image if !fields.contains_key("image") => "image".to_owned(),
            Kind::Text if texts < MAX_TEXT_FIELDS => {
                texts += 1;
                format!("text_{texts}")
            }
            _ => continue,
        };
        // Three members holding it stand in for a field's examples.
        let holders: Vec<(usize, usize)> = at.into_iter().collect();
        let picks = [0, holders.len() / 2, holders.len() - 1];
        let mut rows = Vec::new();
        let mut hits = Vec::new();
        let mut examples = Vec::new();
        let mut places = Vec::new();
        for &p in &picks {
            let (m, e) = holders[p];
            if rows.contains(&m) {
                continue;
            }
            let source = match kind {
                Kind::Link => Source::Attr("href".into()),
                Kind::Image => Source::Attr("src".into()),
                Kind::Text => Source::Text,
            };
            let value = match &source {
                Source::Attr(a) => index.elements[e]
                    .el
                    .value()
                    .attr(a)
                    .unwrap_or("")
                    .to_owned(),
                Source::Text => index.text(e, bounds),
            };
            let Some(place) = found.iter().position(|f| *f == m) else {
                continue;
            };
            rows.push(m);
            hits.push(Hit { node: e, source });
            examples.push(value);
            places.push(place);
        }
        let chosen = choose_field(
            page,
            index,
            &item,
            &rows,
            &places,
            &[hits],
            &examples,
            bounds,
        )?;
        if let Some(chosen) = chosen
            && !fields.values().any(|f| *f == chosen.spec)
        {
            stability += chosen.stability;
            fields.insert(name, chosen.spec);
        }
    }
    if fields.is_empty() {
        return Ok(None);
    }
    let stability = stability / (1 + fields.len()) as f64;
    Ok(Some(finish(page, item, fields, stability, &[], bounds)?))
}

/// Whether the element holds text of its own (not only its children's).
fn own_text(index: &PageIndex<'_>, e: usize) -> bool {
    index.elements[e]
        .el
        .children()
        .any(|c| c.value().as_text().is_some_and(|t| !t.trim().is_empty()))
}

/// The tags and stable classes from `item` down to `e`: `div.info>span.price`.
fn path(index: &PageIndex<'_>, item: usize, e: usize) -> String {
    let mut steps: Vec<String> = index
        .ancestors_or_self(e)
        .take_while(|&a| a != item)
        .map(|a| signature_of(index, a))
        .collect();
    steps.reverse();
    steps.join(">")
}

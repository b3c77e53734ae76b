//! The examples as rows (the first example of each field is one item, the
//! second another, ...) and the levels of the page an item could be: the
//! elements between where the rows part and where a row's examples meet.

use std::collections::BTreeMap;

use url::Url;

use super::{
    Bounds, Examples, LearnError,
    page::{Hit, PageIndex, Source},
};

/// Levels above a lone row's examples looked at for an item.
const LONE_ROW_LEVELS: usize = 6;
/// Hits of a field's rarest example tried as where a row sits.
const ANCHORS: usize = 6;

/// The examples found on the page.
pub(super) struct Rows {
    /// Per row, per field, every element holding that row's example.
    pub hits: Vec<BTreeMap<String, Vec<Hit>>>,
    /// Candidate items: per level, one element per row (outermost level first).
    pub levels: Vec<Vec<usize>>,
}

/// Finds every example on the page, and the candidate items.
pub(super) fn find_rows(
    index: &PageIndex<'_>,
    examples: &Examples,
    base: &Url,
    bounds: &Bounds,
) -> Result<Rows, LearnError> {
    let count = examples.values().map(Vec::len).max().unwrap_or(0);
    let mut hits = vec![BTreeMap::new(); count];
    for (field, values) in examples {
        for (row, example) in values.iter().enumerate() {
            let found = index.hits(example, base, bounds)?;
            if found.is_empty() {
                return Err(LearnError::NotOnPage {
                    field: field.clone(),
                    example: example.clone(),
                });
            }
            hits[row].insert(field.clone(), found);
        }
    }
    let meets: Vec<usize> = hits.iter().map(|row| meeting_point(index, row)).collect();
    let levels = match meets.as_slice() {
        [lone] => lone_levels(index, *lone),
        _ => shared_levels(index, &meets),
    };
    // The walks above stop early once the budget is spent.
    bounds.check()?;
    if levels.is_empty() {
        return Err(LearnError::NoItems);
    }
    Ok(Rows { hits, levels })
}

/// Where one row's examples meet: of the rarest field's hits, the one whose
/// fields' nearest hits meet deepest (a title also in a "recently viewed"
/// box sits apart from its price).
fn meeting_point(index: &PageIndex<'_>, row: &BTreeMap<String, Vec<Hit>>) -> usize {
    let (_, rarest) = row
        .iter()
        .min_by_key(|(_, hits)| hits.len())
        .expect("a row has a field");
    let mut best: Option<(usize, usize)> = None;
    for anchor in rarest.iter().take(ANCHORS) {
        let mut meet = anchor.node;
        for hits in row.values() {
            let nearest = hits
                .iter()
                .map(|h| index.common_ancestor(meet, h.node))
                .max_by_key(|&a| index.elements[a].depth)
                .expect("a found example has a hit");
            meet = nearest;
        }
        let depth = index.elements[meet].depth;
        if best.is_none_or(|(_, d)| depth > d) {
            best = Some((meet, depth));
        }
    }
    best.expect("an anchor").0
}

/// The levels between the element all rows share and each row's meeting
/// point: level `t` is each row's ancestor `t` steps below the shared one,
/// kept while the rows' elements there are distinct and of one tag.
fn shared_levels(index: &PageIndex<'_>, meets: &[usize]) -> Vec<Vec<usize>> {
    let shared = meets[1..]
        .iter()
        .fold(meets[0], |a, &b| index.common_ancestor(a, b));
    // Each row's path from just below the shared element down to its meeting point.
    let paths: Vec<Vec<usize>> = meets
        .iter()
        .map(|&m| {
            let mut path: Vec<usize> = index
                .ancestors_or_self(m)
                .take_while(|&a| a != shared)
                .collect();
            path.reverse();
            path
        })
        .collect();
    let mut levels = Vec::new();
    for t in 0.. {
        let Some(level) = paths
            .iter()
            .map(|p| p.get(t).copied())
            .collect::<Option<Vec<usize>>>()
        else {
            break;
        };
        let distinct = level
            .iter()
            .enumerate()
            .all(|(i, a)| !level[..i].contains(a));
        let one_tag = level.iter().all(|&e| index.tag(e) == index.tag(level[0]));
        if !distinct || !one_tag {
            break;
        }
        levels.push(level);
    }
    levels
}

/// For a single row: its meeting point and the ancestors above it that have
/// a sibling of their own tag (an item repeats).
fn lone_levels(index: &PageIndex<'_>, meet: usize) -> Vec<Vec<usize>> {
    let mut levels: Vec<Vec<usize>> = index
        .ancestors_or_self(meet)
        .take(LONE_ROW_LEVELS)
        .filter(|&a| has_twin(index, a))
        .map(|a| vec![a])
        .collect();
    levels.reverse();
    levels
}

fn has_twin(index: &PageIndex<'_>, i: usize) -> bool {
    let el = index.elements[i].el;
    let tag = el.value().name();
    el.prev_siblings()
        .chain(el.next_siblings())
        .filter_map(scraper::ElementRef::wrap)
        .any(|s| s.value().name() == tag)
}

/// Per row, the hits of `field` inside that row's item, grouped by how they
/// hold the value (text or which attribute) and their tag: the groups every
/// row has, as one hit per row, best first (text before attributes, deeper
/// before shallower).
pub(super) fn field_hits(
    index: &PageIndex<'_>,
    rows: &Rows,
    items: &[usize],
    field: &str,
) -> Vec<Vec<Hit>> {
    let mut groups: BTreeMap<(Source, String), Vec<Option<Hit>>> = BTreeMap::new();
    for (row, item) in items.iter().enumerate() {
        let Some(hits) = rows.hits[row].get(field) else {
            continue;
        };
        for hit in hits.iter().filter(|h| index.is_within(h.node, *item)) {
            let key = (hit.source.clone(), index.tag(hit.node).to_owned());
            let slots = groups.entry(key).or_insert_with(|| vec![None; items.len()]);
            // The deepest hit of the group in this row (a text in `h2 > a` is `a`'s).
            let deeper = slots[row].as_ref().is_none_or(|h: &Hit| {
                index.elements[hit.node].depth > index.elements[h.node].depth
            });
            if deeper {
                slots[row] = Some(hit.clone());
            }
        }
    }
    let rows_with_field: Vec<usize> = (0..items.len())
        .filter(|&r| rows.hits[r].contains_key(field))
        .collect();
    let mut found: Vec<(bool, usize, Vec<Hit>)> = groups
        .into_values()
        .filter_map(|slots| {
            let hits: Option<Vec<Hit>> =
                rows_with_field.iter().map(|&r| slots[r].clone()).collect();
            hits
        })
        .map(|hits| {
            let attr = hits[0].source != Source::Text;
            let depth = index.elements[hits[0].node].depth;
            (attr, usize::MAX - depth, hits)
        })
        .collect();
    found.sort_by_key(|(attr, shallow, _)| (*attr, *shallow));
    found.into_iter().map(|(_, _, hits)| hits).collect()
}

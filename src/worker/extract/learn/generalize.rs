//! Selectors generalised from elements that play one part in several items:
//! what they have in common, stable names first (classes and attributes a
//! site's authors chose), structure (tags, `:nth-of-type`) last. Class names
//! a build tool generated (CSS modules' `card_x7f3a`, `css-1q2w3e`,
//! styled-components' `sc-bdVaJa`) change with every deploy and are never used.

use scraper::ElementRef;

use super::page::{Hit, PageIndex, Source};

/// A candidate selector and how stable it is (0..1).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Candidate {
    /// None: the item itself (a field only).
    pub selector: Option<String>,
    pub stability: f64,
}

/// Candidates in the order they were found, each selector once (the first,
/// most stable, kept).
#[derive(Default)]
struct Found(Vec<Candidate>);

impl Found {
    fn add(&mut self, selector: String, stability: f64) {
        if !self
            .0
            .iter()
            .any(|c| c.selector.as_deref() == Some(&selector))
        {
            self.0.push(Candidate {
                selector: Some(selector),
                stability,
            });
        }
    }
}

/// Attributes whose values name what an element is, not which one it is.
const NAMING_ATTRS: &[&str] = &[
    "itemprop",
    "itemtype",
    "role",
    "data-testid",
    "data-test",
    "data-qa",
    "data-component",
    "data-type",
    "data-role",
];

/// Prefixes of class names CSS-in-JS libraries and frameworks generate
/// (emotion's `css-1x2y3z`, styled-components' `sc-aBcD`, Angular's
/// animation and insertion marks).
const GENERATED_PREFIXES: &[&str] = &[
    "css-",
    "sc-",
    "jsx-",
    "emotion-",
    "svelte-",
    "tw-",
    "ng-tns-",
    "ng-star-inserted",
];

/// Prefixes of attributes a framework puts on every element of a component
/// to scope its styles (Vue's `data-v-7ba5bd90`, Angular's
/// `_ngcontent-ng-c12`, `_nghost-`): the name is a hash, never a selector's.
const GENERATED_ATTR_PREFIXES: &[&str] = &["data-v-", "_ngcontent-", "_nghost-", "ng-reflect-"];

/// Whether an attribute's name was generated ([`GENERATED_ATTR_PREFIXES`],
/// or a `data-` name with a hash in it).
pub(super) fn is_generated_attr(name: &str) -> bool {
    GENERATED_ATTR_PREFIXES.iter().any(|p| name.starts_with(p))
        || name
            .strip_prefix("data-")
            .is_some_and(|rest| !rest.is_empty() && is_generated(rest))
}

/// JSS's `sheet-rule-counter` (`makeStyles-root-12`, `MuiButton-label-3`):
/// a camel-cased sheet name, a rule, and a counter that changes with the
/// order styles were mounted; `jss12` in production.
fn is_jss(class: &str) -> bool {
    if let Some(counter) = class.strip_prefix("jss") {
        return !counter.is_empty() && counter.chars().all(|c| c.is_ascii_digit());
    }
    let parts: Vec<&str> = class.split('-').collect();
    match parts.as_slice() {
        [sheet, .., counter] if parts.len() >= 3 => {
            sheet.chars().skip(1).any(|c| c.is_ascii_uppercase())
                && sheet.chars().all(|c| c.is_ascii_alphabetic())
                && !counter.is_empty()
                && counter.chars().all(|c| c.is_ascii_digit())
        }
        _ => false,
    }
}

/// Whether a class name looks generated: a known generator's prefix, a long
/// random token, or a part that mixes letters and digits (`x7f3a`) or cases
/// at random (`bdVaJa`).
pub(super) fn is_generated(class: &str) -> bool {
    if class.len() > 40 || GENERATED_PREFIXES.iter().any(|p| class.starts_with(p)) || is_jss(class)
    {
        return true;
    }
    if class
        .chars()
        .all(|c| c.is_ascii_digit() || c == '-' || c == '_')
    {
        return true;
    }
    // CSS modules' `Name_hash`: a short token after the last underscore with
    // a digit or a capital inside it (`Cardtitle_klnJ9`), where a chosen
    // name's part is a word (`item_title`, `btn_Primary`).
    if let Some((_, token)) = class.rsplit_once('_')
        && (5..=8).contains(&token.len())
        && token.chars().all(|c| c.is_ascii_alphanumeric())
        && token
            .chars()
            .enumerate()
            .any(|(i, c)| c.is_ascii_digit() || i > 0 && c.is_ascii_uppercase())
    {
        return true;
    }
    class
        .split(['_', '-'])
        .filter(|part| part.len() >= 4)
        .any(|part| {
            let digits = part.chars().filter(char::is_ascii_digit).count();
            let letters = part.chars().filter(char::is_ascii_alphabetic).count();
            let inner_upper = part
                .chars()
                .skip(1)
                .filter(char::is_ascii_uppercase)
                .count();
            // `h2`, `col12` carry a number as words do; a hash spreads them.
            let mixed = digits > 0
                && letters > 0
                && !part
                    .trim_end_matches(|c: char| c.is_ascii_digit())
                    .chars()
                    .all(|c| c.is_ascii_alphabetic());
            mixed || inner_upper >= 2 && part.len() <= 8
        })
}

/// The element's classes a selector may use, in its order.
pub(super) fn stable_classes(el: ElementRef<'_>) -> Vec<String> {
    let styled = el.value().classes().any(|c| c.starts_with("sc-"));
    el.value()
        .classes()
        .filter(|c| !(is_generated(c) || (styled && is_styled_pair(c))))
        .map(str::to_owned)
        .collect()
}

/// styled-components gives an element two classes: its component's
/// `sc-` id and a hash of its styles (`kDsUuF`, `fzfbkF`), letters in both
/// cases. Beside an `sc-` class, a short word with a capital is that hash.
fn is_styled_pair(class: &str) -> bool {
    (5..=8).contains(&class.len())
        && class.chars().all(|c| c.is_ascii_alphabetic())
        && class.chars().any(|c| c.is_ascii_uppercase())
}

fn common_classes(index: &PageIndex<'_>, nodes: &[usize]) -> Vec<String> {
    let mut classes = stable_classes(index.elements[nodes[0]].el);
    for &n in &nodes[1..] {
        let el = index.elements[n].el;
        classes.retain(|c| {
            el.value()
                .has_class(c, scraper::CaseSensitivity::CaseSensitive)
        });
    }
    classes
}

/// Naming attributes (`itemprop="price"`) every node has with one value.
fn common_attrs(index: &PageIndex<'_>, nodes: &[usize]) -> Vec<(String, String)> {
    let first = index.elements[nodes[0]].el.value();
    NAMING_ATTRS
        .iter()
        .filter_map(|name| first.attr(name).map(|v| (*name, v)))
        .filter(|(_, v)| v.len() <= 60 && !v.is_empty())
        .filter(|(name, v)| {
            nodes[1..]
                .iter()
                .all(|&n| index.elements[n].el.value().attr(name) == Some(*v))
        })
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .collect()
}

/// `data-*` attributes every node has (with any values): `li[data-sku]`.
fn common_data_attrs(index: &PageIndex<'_>, nodes: &[usize]) -> Vec<String> {
    index.elements[nodes[0]]
        .el
        .value()
        .attrs()
        .map(|(name, _)| name)
        .filter(|name| name.starts_with("data-") && plain_name(name) && !is_generated_attr(name))
        .filter(|name| {
            nodes[1..]
                .iter()
                .all(|&n| index.elements[n].el.value().attr(name).is_some())
        })
        .map(str::to_owned)
        .collect()
}

fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn ident(name: &str) -> String {
    let mut out = String::new();
    cssparser::serialize_identifier(name, &mut out).expect("writing to a String");
    out
}

fn quoted(value: &str) -> String {
    let mut out = String::new();
    cssparser::serialize_string(value, &mut out).expect("writing to a String");
    out
}

fn one_tag<'i>(index: &'i PageIndex<'_>, nodes: &[usize]) -> Option<&'i str> {
    let tag = index.tag(nodes[0]);
    nodes.iter().all(|&n| index.tag(n) == tag).then_some(tag)
}

/// A selector for one node of a group by its own name: `ul.results`,
/// `div#grid`, `[role="list"]`; None when it has none stable.
fn named(index: &PageIndex<'_>, nodes: &[usize]) -> Option<String> {
    let tag = one_tag(index, nodes)?;
    if let Some(class) = common_classes(index, nodes).first() {
        return Some(format!("{tag}.{}", ident(class)));
    }
    let id = index.elements[nodes[0]].el.value().id();
    if let Some(id) = id.filter(|id| !is_generated(id) && plain_name(id))
        && nodes
            .iter()
            .all(|&n| index.elements[n].el.value().id() == Some(id))
    {
        return Some(format!("{tag}#{}", ident(id)));
    }
    common_attrs(index, nodes)
        .first()
        .map(|(n, v)| format!("{tag}[{n}={}]", quoted(v)))
}

fn parents(index: &PageIndex<'_>, nodes: &[usize]) -> Option<Vec<usize>> {
    nodes.iter().map(|&n| index.elements[n].parent).collect()
}

/// Item selectors for `nodes` (one item per row), most stable first.
pub(super) fn item_candidates(index: &PageIndex<'_>, nodes: &[usize]) -> Vec<Candidate> {
    let Some(tag) = one_tag(index, nodes) else {
        return Vec::new();
    };
    let mut found = Found::default();
    let classes = common_classes(index, nodes);
    for class in classes.iter().take(2) {
        found.add(format!("{tag}.{}", ident(class)), 1.0);
    }
    if let [a, b, ..] = classes.as_slice() {
        found.add(format!("{tag}.{}.{}", ident(a), ident(b)), 0.95);
    }
    for (name, value) in common_attrs(index, nodes) {
        found.add(format!("{tag}[{name}={}]", quoted(&value)), 0.95);
    }
    if let Some(up) = parents(index, nodes) {
        match named(index, &up) {
            Some(parent) => found.add(format!("{parent} > {tag}"), 0.8),
            None => {
                if let Some(ptag) = one_tag(index, &up) {
                    let grand = parents(index, &up);
                    if let Some(g) = grand.as_deref().and_then(|g| named(index, g)) {
                        found.add(format!("{g} > {ptag} > {tag}"), 0.7);
                    }
                    found.add(format!("{ptag} > {tag}"), 0.5);
                }
            }
        }
    }
    // By tags alone, from up to three levels above: `main > div > div`.
    let mut path = tag.to_owned();
    let mut level = nodes.to_vec();
    for _ in 0..3 {
        let Some(up) = parents(index, &level) else {
            break;
        };
        let Some(ptag) = one_tag(index, &up) else {
            break;
        };
        path = format!("{ptag} > {path}");
        found.add(path.clone(), 0.4);
        level = up;
    }
    for name in common_data_attrs(index, nodes).into_iter().take(2) {
        found.add(format!("{tag}[{name}]"), 0.7);
    }
    found.add(tag.to_owned(), 0.3);
    found.0
}

/// The element's place among its parent's children of its tag (1-based).
fn nth_of_type(el: ElementRef<'_>) -> usize {
    let tag = el.value().name();
    1 + el
        .prev_siblings()
        .filter_map(ElementRef::wrap)
        .filter(|s| s.value().name() == tag)
        .count()
}

/// Field selectors inside `items` for the elements `hits` (one per row,
/// alike in source and tag), most stable first.
pub(super) fn field_candidates(
    index: &PageIndex<'_>,
    items: &[usize],
    hits: &[Hit],
) -> Vec<Candidate> {
    if hits.iter().zip(items).all(|(h, &i)| h.node == i) {
        return vec![Candidate {
            selector: None,
            stability: 1.0,
        }];
    }
    let nodes: Vec<usize> = hits.iter().map(|h| h.node).collect();
    let Some(tag) = one_tag(index, &nodes) else {
        return Vec::new();
    };
    let with = match &hits[0].source {
        Source::Attr(name) if plain_name(name) => format!("[{name}]"),
        Source::Attr(_) => return Vec::new(),
        Source::Text => String::new(),
    };
    let mut found = Found::default();
    for class in common_classes(index, &nodes).iter().take(2) {
        found.add(format!("{tag}.{}{with}", ident(class)), 1.0);
        found.add(format!(".{}{with}", ident(class)), 0.95);
    }
    for (name, value) in common_attrs(index, &nodes) {
        found.add(format!("{tag}[{name}={}]", quoted(&value)), 0.95);
    }
    // The nearest ancestor inside the item with a stable name: `.meta span`.
    let ups: Vec<Vec<usize>> = nodes
        .iter()
        .zip(items)
        .map(|(&n, &item)| {
            index
                .ancestors_or_self(n)
                .skip(1)
                .take_while(|&a| a != item)
                .collect()
        })
        .collect();
    let depth = ups.iter().map(Vec::len).min().unwrap_or(0);
    for step in 0..depth {
        let level: Vec<usize> = ups.iter().map(|u| u[step]).collect();
        if let Some(class) = common_classes(index, &level).first() {
            found.add(format!(".{} {tag}{with}", ident(class)), 0.85);
            break;
        }
    }
    found.add(format!("{tag}{with}"), 0.6);
    // The path from the item down, by tags, then by places among siblings.
    let paths: Vec<Vec<usize>> = ups
        .iter()
        .zip(&nodes)
        .map(|(up, &n)| up.iter().rev().copied().chain([n]).collect())
        .collect();
    if paths.iter().all(|p| p.len() == paths[0].len()) {
        let steps = paths[0].len();
        let tags: Option<Vec<&str>> = (0..steps)
            .map(|s| {
                let level: Vec<usize> = paths.iter().map(|p| p[s]).collect();
                one_tag(index, &level)
            })
            .collect();
        if let Some(tags) = tags {
            found.add(format!(":scope > {}{with}", tags.join(" > ")), 0.5);
            let nth: Option<Vec<String>> = (0..steps)
                .map(|s| {
                    let place = nth_of_type(index.elements[paths[0][s]].el);
                    paths
                        .iter()
                        .all(|p| nth_of_type(index.elements[p[s]].el) == place)
                        .then(|| format!("{}:nth-of-type({place})", tags[s]))
                })
                .collect();
            if let Some(nth) = nth {
                found.add(format!(":scope > {}{with}", nth.join(" > ")), 0.3);
            }
        }
    }
    found.0
}

#[cfg(test)]
mod tests {
    use super::{is_generated, is_generated_attr, stable_classes};

    #[test]
    fn generated_class_names_are_told_from_chosen_ones() {
        for generated in [
            "card_x7f3a",
            "Card_title__3kX9a",
            "css-1q2w3e",
            "sc-bdVaJa",
            "jsx-2841",
            "a8f3k2j9",
            "title_7Hq2Z",
            "Cardtitle_klnJ9",
            "Price_aB3cd",
            "12345",
            "css-1x2y3z",
            "css-1q2w3e-Button",
            "emotion-0",
            "sc-aBcD",
            "sc-bdVaJa-1",
            "makeStyles-root-12",
            "MuiButton-label-3",
            "jss12",
            "svelte-1ab2c3d",
            "ng-tns-c12-0",
            "ng-star-inserted",
        ] {
            assert!(is_generated(generated), "{generated}");
        }
        for chosen in [
            "product",
            "product-card",
            "col-12",
            "h2",
            "price__amount",
            "grid-row",
            "searchResult",
            "item_title",
            "btn_Primary",
            "mt-4",
            "col-md-12",
            "MuiButton-root",
            "page-2",
            "navBar",
        ] {
            assert!(!is_generated(chosen), "{chosen}");
        }
    }

    #[test]
    fn a_styled_components_hash_beside_its_sc_class_is_generated_and_alone_is_not() {
        let html = scraper::Html::parse_fragment(
            r#"<p class="sc-bdVaJa kDsUuF fzfbkF card"></p><p class="navBar card"></p>"#,
        );
        let selector = scraper::Selector::parse("p").unwrap();
        let classes: Vec<Vec<String>> = html
            .select(&selector)
            .map(|p| {
                let mut classes = stable_classes(p);
                classes.sort();
                classes
            })
            .collect();
        assert_eq!(classes, [vec!["card"], vec!["card", "navBar"]]);
    }

    #[test]
    fn framework_scoping_attributes_are_generated_and_naming_data_attributes_are_not() {
        for generated in [
            "data-v-7ba5bd90",
            "_ngcontent-ng-c1234",
            "_nghost-xyz-c12",
            "ng-reflect-router-link",
            "data-x7f3a9",
        ] {
            assert!(is_generated_attr(generated), "{generated}");
        }
        for chosen in ["data-sku", "data-price", "data-testid", "data-item-id"] {
            assert!(!is_generated_attr(chosen), "{chosen}");
        }
    }
}

//! Learning over the corpus's pages (crates/markup-corpus) and over pages
//! written here for one behaviour each.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use markup_corpus::{Change, Layout, PAGE_URL, Page, changed, original};
use url::Url;

use super::{
    Examples, LEARN_MAX_ELEMENTS, LearnError, Proposal, Spent, learn, learn_page, learn_within,
};

fn url() -> Url {
    Url::parse(PAGE_URL).unwrap()
}

/// Whether the proposal's items are the page's items, field by field.
fn exact(proposal: &Proposal, page: &Page) -> bool {
    proposal.items.len() == page.items.len()
        && proposal.items.iter().zip(&page.items).all(|(got, want)| {
            want.iter()
                .all(|(f, v)| got.get(f).and_then(|g| g.as_str()) == Some(v.as_str()))
        })
}

fn two_examples(page: &Page) -> Examples {
    page.examples(&[1, page.items.len() - 2])
}

#[test]
fn for_each_layout_two_examples_per_field_give_a_top_proposal_that_extracts_exactly_its_items() {
    for layout in Layout::ALL {
        let page = original(layout);
        let proposals = learn(&page.html, &url(), &two_examples(&page)).unwrap();
        let top = &proposals[0];
        assert!(
            exact(top, &page),
            "{}: {} -> {:?}",
            page.name(),
            top.item_selector.as_str(),
            top.items
        );
        let r = top.reasons;
        assert_eq!(r.examples_reproduced, r.examples_given, "{}", page.name());
        assert!(top.confidence > 0.8, "{}: {}", page.name(), top.confidence);
    }
}

#[test]
fn changed_markup_is_learned_again_from_its_own_examples() {
    for layout in Layout::ALL {
        for seed in [2, 5, 9] {
            let page = changed(layout, seed);
            let proposals = learn(&page.html, &url(), &two_examples(&page)).unwrap();
            assert!(exact(&proposals[0], &page), "{}", page.name());
        }
    }
}

#[test]
fn with_no_examples_the_main_repeated_structure_and_its_fields_are_found() {
    for layout in Layout::ALL {
        let page = original(layout);
        let proposals = learn(&page.html, &url(), &BTreeMap::new()).unwrap();
        let top = &proposals[0];
        assert_eq!(top.items.len(), page.items.len(), "{}", page.name());
        assert!(
            top.fields.contains_key("link"),
            "{}: {:?}",
            page.name(),
            top.fields
        );
        assert!(top.fields.contains_key("text_1"), "{}", page.name());
        // The nav bar's three links are a repeated structure too, but not the page's.
        assert!(
            !top.item_selector.as_str().contains("nav"),
            "{}",
            page.name()
        );
        let first = page.items[0]["link"].as_str();
        assert_eq!(top.items[0]["link"], first, "{}", page.name());
    }
}

#[test]
fn generated_class_names_are_never_in_a_proposal() {
    let mut seen = 0;
    for seed in 1..=markup_corpus::CHANGED_PER_LAYOUT {
        for layout in [Layout::List, Layout::Cards] {
            let page = changed(layout, seed);
            if !page.changes.contains(&Change::HashedClasses) {
                continue;
            }
            seen += 1;
            assert!(page.html.contains("_"), "a hashed page");
            let proposals = learn(&page.html, &url(), &two_examples(&page)).unwrap();
            assert!(exact(&proposals[0], &page), "{}", page.name());
            for proposal in &proposals {
                let selectors = std::iter::once(proposal.item_selector.as_str()).chain(
                    proposal
                        .fields
                        .values()
                        .filter_map(|f| f.selector.as_ref().map(|s| s.as_str())),
                );
                for selector in selectors {
                    for class in selector.split('.').skip(1) {
                        let class: String = class
                            .chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || "-_".contains(*c))
                            .collect();
                        // The corpus writes its own names with `-`, the generated ones `Name_k3x9q`.
                        assert!(!class.contains('_'), "{}: {selector}", page.name());
                    }
                }
            }
        }
    }
    assert!(seen >= 3, "{seen} hashed pages");
}

const SHOP: &str = r#"<html><body><ul class="results">
    <li class="product"><a class="title" href="/p/17">Blue Kettle</a><span class="price">₩12,900</span></li>
    <li class="product"><a class="title" href="/p/18">Red Pan</a><span class="price">₩8,500</span></li>
    <li class="product"><a class="title" href="/p/19">Glass Pot</a><span class="price">₩21,000</span></li>
    </ul><aside><h3>Recently viewed</h3><p>Blue Kettle</p></aside></body></html>"#;

fn examples(pairs: &[(&str, &[&str])]) -> Examples {
    pairs
        .iter()
        .map(|(f, v)| ((*f).to_owned(), v.iter().map(|s| (*s).to_owned()).collect()))
        .collect()
}

#[test]
fn numbers_match_by_value_and_links_as_written_and_the_proposal_is_a_sites_fields() {
    let given = examples(&[
        ("title", &["Blue Kettle", "Red Pan"]),
        ("price", &["12900", "8.500 ₩"]),
        ("link", &["/p/17"]),
    ]);
    let proposals = learn(SHOP, &url(), &given).unwrap();
    let top = &proposals[0];
    assert_eq!(top.item_selector.as_str(), "li.product");
    assert_eq!(top.items.len(), 3);
    assert_eq!(top.items[0]["price"], "₩12,900");
    assert_eq!(top.items[2]["link"], "http://shop.test/p/19");
    assert_eq!(top.fields["link"].attr.as_deref(), Some("href"));
    assert_eq!(
        top.fields["title"].selector.as_ref().unwrap().as_str(),
        "a.title"
    );
    // As a site's fields: serialised and read back the way a stored site is.
    let stored = serde_json::to_value(&top.fields).unwrap();
    let read: BTreeMap<String, crate::domain::site::FieldSpec> =
        serde_json::from_value(stored).unwrap();
    assert_eq!(read, top.fields);
}

#[test]
fn an_example_that_is_not_on_the_page_is_an_error_naming_its_field() {
    let given = examples(&[("title", &["Blue Kettle"]), ("price", &["₩99,999"])]);
    let error = learn(SHOP, &url(), &given).unwrap_err();
    assert_eq!(
        error,
        LearnError::NotOnPage {
            field: "price".into(),
            example: "₩99,999".into()
        }
    );
    assert_eq!(
        error.to_string(),
        "fields.price: \"₩99,999\" is not on the page"
    );
    let error = learn(SHOP, &url(), &examples(&[("title", &[" "])])).unwrap_err();
    assert!(error.to_string().starts_with("fields.title: "), "{error}");
}

#[test]
fn a_huge_page_is_refused_at_the_element_bound_and_costly_work_at_the_time_and_run_bounds() {
    // About 5 MB: a hostile page of tiny elements.
    let huge = format!(
        "<html><body>{}</body></html>",
        "<div><i>x</i></div>".repeat(5 * 1024 * 1024 / 19)
    );
    let started = Instant::now();
    let error = learn(&huge, &url(), &examples(&[("title", &["x"])])).unwrap_err();
    assert_eq!(error, LearnError::OverBudget(Spent::Elements));
    assert!(error.to_string().contains(&LEARN_MAX_ELEMENTS.to_string()));
    // Parsing 5 MB in a debug build takes seconds; learning stops at once after.
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );

    let given = examples(&[("title", &["Blue Kettle", "Red Pan"])]);
    let error = learn_within(SHOP, &url(), &given, Duration::ZERO, 100).unwrap_err();
    assert_eq!(error, LearnError::OverBudget(Spent::Time));
    let error = learn_within(SHOP, &url(), &given, Duration::from_secs(5), 1).unwrap_err();
    assert_eq!(error, LearnError::OverBudget(Spent::Runs));
}

/// A page nested `depth` elements deep with two values at the bottom.
fn deep_page(depth: usize) -> String {
    format!(
        "<html><body>{}<span>Blue Kettle</span><b>₩12,900</b>{}</body></html>",
        "<div class=\"level\"><i>a</i><i>b</i><i>c</i>".repeat(depth),
        "</div>".repeat(depth)
    )
}

/// Two items, each nested `depth` elements deep: finding them is quick, and
/// every candidate item selector then matches thousands of nested elements.
fn deep_pair(depth: usize) -> String {
    let item = |title: &str| {
        format!(
            "{}<span>{title}</span>{}",
            "<div class=\"level\">".repeat(depth),
            "</div>".repeat(depth)
        )
    };
    format!(
        "<html><body>{}{}</body></html>",
        item("Blue Kettle"),
        item("Red Pan")
    )
}

/// How far past its budget a learn may end. A step is charged every few
/// microseconds at most, even in a debug build; the rest is room for a test
/// machine busy with other tests.
const SLACK: Duration = Duration::from_millis(1_500);

#[test]
fn a_page_nested_eight_thousand_deep_stops_within_the_budget_with_a_clear_error() {
    let pair = crate::worker::extract::HtmlPage::parse(&deep_pair(4_000), &url());
    let budget = Duration::from_millis(300);
    let started = Instant::now();
    let outcome = learn_page(
        &pair,
        &examples(&[("title", &["Blue Kettle", "Red Pan"])]),
        budget,
        400,
    );
    let took = started.elapsed();
    assert_eq!(outcome.unwrap_err(), LearnError::OverBudget(Spent::Time));
    assert!(took < budget + SLACK, "{took:?}");

    let html = deep_page(8_000);
    // Parsing is outside the budget (bounded by the page's size); learning
    // from the parsed page is what must stop.
    let page = crate::worker::extract::HtmlPage::parse(&html, &url());
    let budget = Duration::from_millis(300);
    for given in [
        examples(&[("title", &["Blue Kettle"]), ("price", &["₩12,900"])]),
        examples(&[("title", &["Blue Kettle", "Blue Kettle"])]),
        Examples::new(),
    ] {
        let started = Instant::now();
        let outcome = learn_page(&page, &given, budget, 400);
        let took = started.elapsed();
        let error = outcome.expect_err("nothing to learn from a page this deep");
        assert_eq!(error, LearnError::OverBudget(Spent::Time), "{given:?}");
        assert!(error.to_string().contains("budget"), "{error}");
        assert!(took < budget + SLACK, "{given:?}: {took:?}");
    }
}

#[test]
fn walks_up_the_tree_are_charged_to_the_budget_and_end_once_it_is_spent() {
    let html = deep_page(8_000);
    let page = crate::worker::extract::HtmlPage::parse(&html, &url());
    let bounds = super::Bounds::new(Duration::from_millis(200), 400);
    let index = super::page::PageIndex::build(&page, &bounds).unwrap();
    let bottom = index.elements.len() - 1;
    let top = 0;
    assert!(index.ancestors_or_self(bottom).count() > 8_000);
    assert!(index.is_within(bottom, top));
    std::thread::sleep(Duration::from_millis(250));
    assert_eq!(
        bounds.check().unwrap_err(),
        LearnError::OverBudget(Spent::Time)
    );
    // Spent: every walk ends at its first step instead of walking 8,000.
    assert_eq!(index.ancestors_or_self(bottom).count(), 1);
    assert!(!index.is_within(bottom, top));
    assert_eq!(index.common_ancestor(bottom, top), bottom);
}

#[test]
fn an_example_found_all_over_a_page_is_taken_from_its_first_64_places() {
    let html = format!(
        "<html><body><ul>{}</ul></body></html>",
        "<li><span>Add to cart</span><b>₩1,000</b></li>".repeat(500)
    );
    let page = crate::worker::extract::HtmlPage::parse(&html, &url());
    let bounds = super::Bounds::new(Duration::from_secs(30), 400);
    let index = super::page::PageIndex::build(&page, &bounds).unwrap();
    let hits = index.hits("Add to cart", page.base(), &bounds).unwrap();
    assert_eq!(hits.len(), super::page::MAX_HITS);
    // By value (`1000` is `₩1,000`): capped alike.
    let hits = index.hits("1000", page.base(), &bounds).unwrap();
    assert_eq!(hits.len(), super::page::MAX_HITS);
}

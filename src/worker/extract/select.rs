//! CSS selector matching over a parsed page, step by step within the page's
//! [`ExtractBudget`]. The matcher is the `selectors` crate's, as scraper's
//! own `select` uses it, with the same results in the same order; only the
//! element it walks is ours: each move to a parent, sibling or child and
//! each test of an element is charged, and once the budget is spent there
//! is no parent, sibling or child any more, so every recursion of the
//! matcher ends at once.

use std::fmt;

use scraper::{
    ElementRef, Html,
    selector::{CssLocalName, NonTSPseudoClass, PseudoElement, Simple},
};
use selectors::{
    Element, OpaqueElement,
    attr::{AttrSelectorOperation, CaseSensitivity, NamespaceConstraint},
    bloom::BloomFilter,
    matching::{
        self, ElementSelectorFlags, MatchingContext, MatchingForInvalidation, MatchingMode,
        NeedsSelectorFlags, QuirksMode, SelectorCaches,
    },
    parser::{SelectorImpl, SelectorList},
};

use super::budget::ExtractBudget;

/// A selector list as the matcher takes it (scraper's grammar).
pub type Selectors = SelectorList<Simple>;

type Impl = Simple;
type NamespaceUrl = <Simple as SelectorImpl>::NamespaceUrl;
type AttrValue = <Simple as SelectorImpl>::AttrValue;

/// A page element that charges the budget for every step the matcher takes.
#[derive(Clone, Copy)]
pub struct Budgeted<'a> {
    element: ElementRef<'a>,
    budget: &'a ExtractBudget,
}

impl fmt::Debug for Budgeted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.element, f)
    }
}

impl<'a> Budgeted<'a> {
    pub fn new(element: ElementRef<'a>, budget: &'a ExtractBudget) -> Self {
        Budgeted { element, budget }
    }

    /// The first element among `nodes` (each node passed is a step).
    fn first_element<I: Iterator>(
        &self,
        nodes: I,
        element: impl Fn(I::Item) -> Option<ElementRef<'a>>,
    ) -> Option<Self> {
        for node in nodes {
            if !self.budget.step() {
                return None;
            }
            if let Some(found) = element(node) {
                return Some(Budgeted::new(found, self.budget));
            }
        }
        None
    }

    /// `test` of the element, if the budget allows one more step.
    fn test(&self, test: impl FnOnce(&ElementRef<'a>) -> bool) -> bool {
        self.budget.step() && test(&self.element)
    }
}

/// Every method charges a step and then asks scraper's element, except the
/// moves, which walk node by node themselves so that a run of comments or
/// text between two elements is charged too.
impl<'a> Element for Budgeted<'a> {
    type Impl = Impl;

    fn opaque(&self) -> OpaqueElement {
        self.element.opaque()
    }

    fn parent_element(&self) -> Option<Self> {
        if !self.budget.step() {
            return None;
        }
        self.element
            .parent()
            .and_then(ElementRef::wrap)
            .map(|parent| Budgeted::new(parent, self.budget))
    }

    fn parent_node_is_shadow_root(&self) -> bool {
        false
    }

    fn containing_shadow_host(&self) -> Option<Self> {
        None
    }

    fn is_pseudo_element(&self) -> bool {
        false
    }

    fn prev_sibling_element(&self) -> Option<Self> {
        self.first_element(self.element.prev_siblings(), ElementRef::wrap)
    }

    fn next_sibling_element(&self) -> Option<Self> {
        self.first_element(self.element.next_siblings(), ElementRef::wrap)
    }

    fn first_element_child(&self) -> Option<Self> {
        self.first_element(self.element.children(), ElementRef::wrap)
    }

    fn is_html_element_in_html_document(&self) -> bool {
        self.test(|e| e.is_html_element_in_html_document())
    }

    fn has_local_name(&self, name: &CssLocalName) -> bool {
        self.test(|e| e.has_local_name(name))
    }

    fn has_namespace(&self, namespace: &<Impl as SelectorImpl>::BorrowedNamespaceUrl) -> bool {
        self.test(|e| e.has_namespace(namespace))
    }

    fn is_same_type(&self, other: &Self) -> bool {
        self.test(|e| e.is_same_type(&other.element))
    }

    fn attr_matches(
        &self,
        ns: &NamespaceConstraint<&NamespaceUrl>,
        local_name: &CssLocalName,
        operation: &AttrSelectorOperation<&AttrValue>,
    ) -> bool {
        // Each attribute compared is a step.
        let attributes = self.element.value().attrs.len() as u64;
        self.budget.charge(attributes) && self.test(|e| e.attr_matches(ns, local_name, operation))
    }

    fn match_non_ts_pseudo_class(
        &self,
        class: &NonTSPseudoClass,
        _context: &mut MatchingContext<'_, Impl>,
    ) -> bool {
        // scraper has none (the type has no value).
        match *class {}
    }

    fn match_pseudo_element(
        &self,
        element: &PseudoElement,
        _context: &mut MatchingContext<'_, Impl>,
    ) -> bool {
        match *element {}
    }

    fn apply_selector_flags(&self, _flags: ElementSelectorFlags) {}

    fn is_link(&self) -> bool {
        self.test(|e| e.is_link())
    }

    fn is_html_slot_element(&self) -> bool {
        self.test(|e| e.is_html_slot_element())
    }

    fn has_id(&self, id: &CssLocalName, case_sensitivity: CaseSensitivity) -> bool {
        self.test(|e| e.has_id(id, case_sensitivity))
    }

    fn has_class(&self, name: &CssLocalName, case_sensitivity: CaseSensitivity) -> bool {
        self.test(|e| e.has_class(name, case_sensitivity))
    }

    fn has_custom_state(&self, name: &CssLocalName) -> bool {
        self.test(|e| e.has_custom_state(name))
    }

    fn imported_part(&self, name: &CssLocalName) -> Option<CssLocalName> {
        self.element.imported_part(name)
    }

    fn is_part(&self, name: &CssLocalName) -> bool {
        self.test(|e| e.is_part(name))
    }

    fn is_empty(&self) -> bool {
        // Every child looked at is a step.
        for child in self.element.children() {
            if !self.budget.step() {
                return false;
            }
            if child.value().is_element() || child.value().is_text() {
                return false;
            }
        }
        true
    }

    fn is_root(&self) -> bool {
        self.test(|e| e.is_root())
    }

    fn add_element_unique_hashes(&self, filter: &mut BloomFilter) -> bool {
        self.element.add_element_unique_hashes(filter)
    }
}

/// Whether `element` matches `selectors`, `:scope` being `scope` (none: the
/// root), as scraper's `Selector::matches_with_scope` decides.
fn matches(
    selectors: &Selectors,
    element: &Budgeted<'_>,
    scope: Option<OpaqueElement>,
    caches: &mut SelectorCaches,
) -> bool {
    let mut context = MatchingContext::new(
        MatchingMode::Normal,
        None,
        caches,
        QuirksMode::NoQuirks,
        NeedsSelectorFlags::No,
        MatchingForInvalidation::No,
    );
    context.scope_element = scope;
    matching::matches_selector_list(selectors, element, &mut context)
}

/// The elements of `document` that match `selectors`, as `Html::select`
/// yields them (in the order the parser made them). Stops early once the
/// budget is spent (the caller asks it).
pub fn select_in_document<'a>(
    document: &'a Html,
    selectors: &'a Selectors,
    budget: &'a ExtractBudget,
) -> impl Iterator<Item = ElementRef<'a>> + 'a {
    let mut caches = SelectorCaches::default();
    document
        .tree
        .nodes()
        .take_while(move |_| budget.step())
        .filter_map(ElementRef::wrap)
        // The document node's own element child is matched; the tree's
        // root never is.
        .filter(|element| element.parent().is_some())
        .filter(move |element| {
            let candidate = Budgeted::new(*element, budget);
            matches(selectors, &candidate, None, &mut caches) && budget.spent().is_none()
        })
}

/// The elements inside `scope` (not `scope` itself) that match `selectors`,
/// `:scope` being `scope`, in document order, as `ElementRef::select`
/// yields them. Stops early once the budget is spent.
pub fn select_within<'a>(
    scope: ElementRef<'a>,
    selectors: &'a Selectors,
    budget: &'a ExtractBudget,
) -> impl Iterator<Item = ElementRef<'a>> + 'a {
    let mut caches = SelectorCaches::default();
    let opaque = scope.opaque();
    scope
        .descendants()
        .skip(1)
        .take_while(move |_| budget.step())
        .filter_map(ElementRef::wrap)
        .filter(move |element| {
            let candidate = Budgeted::new(*element, budget);
            matches(selectors, &candidate, Some(opaque), &mut caches) && budget.spent().is_none()
        })
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::worker::extract::budget::{CancelFlag, Spent};

    fn parse(selector: &str) -> Selectors {
        let mut input = cssparser::ParserInput::new(selector);
        let mut parser = cssparser::Parser::new(&mut input);
        SelectorList::parse(
            &scraper::selector::Parser,
            &mut parser,
            selectors::parser::ParseRelative::No,
        )
        .unwrap()
    }

    const PAGE: &str = r#"<!doctype html><html><head><title>t</title></head><body>
        <ul id="r"><li class="p a"><a href="/1" class=t>One</a><span>$1</span></li>
        <!-- an ad --><li class="p ad"><a href="/2">Two</a></li>
        <li class="p"><a href="/3" class=t>Three</a><em></em></li></ul>
        <table><tr><td>cell</td></tr></table><p>after <b>bold</b></p>
        <a href="/out">out</a></body></html>"#;

    /// Selectors of every kind the grammar has: the same elements in the
    /// same order as scraper's own `select`, in the document and inside an item.
    #[test]
    fn results_are_scrapers_in_scrapers_order() {
        let document = Html::parse_document(PAGE);
        let budget = ExtractBudget::unlimited();
        for selector in [
            "li",
            "*",
            ":root",
            ":root > body li",
            "li.p > a[href]",
            "li:is(.a, :not(.ad)) > a[href^='/']",
            "li:has(> em)",
            "li:nth-child(2n+1)",
            "li:nth-last-child(1), td",
            "li ~ li",
            "li + li a",
            "em:empty, span:empty",
            "a[href$='3' i]",
            ":scope li",
            "#r li:first-child a.t",
            "tbody td",
            "p:not(:has(b)), p b",
            "nothing",
        ] {
            let ours: Vec<_> = select_in_document(&document, &parse(selector), &budget)
                .map(|e| e.id())
                .collect();
            let theirs: Vec<_> = document
                .select(&scraper::Selector::parse(selector).unwrap())
                .map(|e| e.id())
                .collect();
            assert_eq!(ours, theirs, "{selector}");
            let ul = document
                .select(&scraper::Selector::parse("ul").unwrap())
                .next()
                .unwrap();
            let ours: Vec<_> = select_within(ul, &parse(selector), &budget)
                .map(|e| e.id())
                .collect();
            let theirs: Vec<_> = ul
                .select(&scraper::Selector::parse(selector).unwrap())
                .map(|e| e.id())
                .collect();
            assert_eq!(ours, theirs, "{selector} inside the list");
        }
        assert_eq!(budget.spent(), None);
    }

    /// `:is(` nested `depth` deep, each level a descendant combinator: the
    /// matcher visits every ancestor of every ancestor, depth times over.
    pub(crate) fn worst_case(depth: usize) -> String {
        let mut selector = ".zz *".to_owned();
        for _ in 1..depth {
            selector = format!(":is({selector}) *");
        }
        format!(":is({selector})")
    }

    /// A page of `depth` elements, each inside the one before.
    pub(crate) fn nested_page(depth: usize) -> String {
        format!(
            "<!doctype html><html><body>{}x{}</body></html>",
            "<div>".repeat(depth),
            "</div>".repeat(depth)
        )
    }

    #[test]
    fn a_worst_case_selector_stops_at_its_budget_not_seconds_later() {
        let document = Html::parse_document(&nested_page(60));
        // Seconds at least, unbounded (4 levels: about 20 s in a release build).
        let selectors = parse(&worst_case(6));
        let limit = Duration::from_millis(200);
        let budget = ExtractBudget::new(limit, CancelFlag::default());
        let started = Instant::now();
        let found = select_in_document(&document, &selectors, &budget).count();
        let took = started.elapsed();
        assert_eq!(budget.spent(), Some(Spent::Time));
        assert_eq!(found, 0);
        // Unbounded it runs for minutes; the margin is for a loaded machine.
        assert!(took < Duration::from_secs(1), "took {took:?}");
    }
}

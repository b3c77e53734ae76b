//! The page's elements, indexed once: each with its parent, depth and the
//! length of the text below it, so an element's text is read only when it
//! could equal an example; and the elements an example is found in.

use std::collections::HashMap;

use scraper::{ElementRef, Node};
use url::Url;

use super::{Bounds, LEARN_MAX_ELEMENTS, LearnError, Spent};
use crate::{
    domain::value::{collapse_whitespace, js_trim, read_number},
    worker::extract::{HtmlPage, absolute, html::text},
};

/// Elements whose text is never a value.
const SKIPPED: &[&str] = &["script", "style", "noscript", "template", "head", "svg"];

/// One element of the page.
pub(super) struct Element<'a> {
    pub el: ElementRef<'a>,
    pub parent: Option<usize>,
    pub depth: usize,
    /// Bytes of text below it (before whitespace is collapsed).
    pub text_len: usize,
}

/// Every element of the page in document order.
pub(super) struct PageIndex<'a> {
    pub elements: Vec<Element<'a>>,
    at: HashMap<ego_tree::NodeId, usize>,
    /// Every step of a walk up the tree is charged here: a page nested
    /// thousands deep makes each walk as long as the page.
    bounds: &'a Bounds,
}

/// Most elements taken as holding one example: a value repeated all over a
/// page (a currency sign, "Add to cart") says nothing more past this.
pub(super) const MAX_HITS: usize = 64;

/// Where an example's value was found in an element.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Source {
    Text,
    Attr(String),
}

/// An element holding an example.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Hit {
    pub node: usize,
    pub source: Source,
}

impl<'a> PageIndex<'a> {
    /// Indexes `page` (the elements of its body and head alike, those in
    /// [`SKIPPED`] without their text).
    pub fn build(page: &'a HtmlPage, bounds: &'a Bounds) -> Result<Self, LearnError> {
        let mut elements: Vec<Element<'a>> = Vec::new();
        let mut at = HashMap::new();
        let root = page.document().root_element();
        for node in root.descendants() {
            if !bounds.budget.step() {
                return Err(LearnError::OverBudget(Spent::Time));
            }
            let parent = node.parent().and_then(|p| at.get(&p.id()).copied());
            match node.value() {
                Node::Element(_) => {
                    if elements.len() >= LEARN_MAX_ELEMENTS {
                        return Err(LearnError::OverBudget(Spent::Elements));
                    }
                    let el = ElementRef::wrap(node).expect("an element node");
                    at.insert(node.id(), elements.len());
                    elements.push(Element {
                        el,
                        parent,
                        depth: parent.map_or(0, |p| elements[p].depth + 1),
                        text_len: 0,
                    });
                }
                Node::Text(piece) => {
                    if let Some(p) = parent {
                        elements[p].text_len += piece.len();
                    }
                }
                _ => {}
            }
        }
        // Children come after their parent: summing backwards gives each
        // element the text of everything below it.
        for i in (0..elements.len()).rev() {
            if let Some(p) = elements[i].parent {
                elements[p].text_len += elements[i].text_len;
            }
        }
        Ok(PageIndex {
            elements,
            at,
            bounds,
        })
    }

    pub fn tag(&self, i: usize) -> &str {
        self.elements[i].el.value().name()
    }

    /// The index of an element of the page.
    pub fn index_of(&self, el: ElementRef<'_>) -> Option<usize> {
        self.at.get(&el.id()).copied()
    }

    /// Whether `i`'s text is never a value (inside a script, a style, ...).
    fn skipped(&self, i: usize) -> bool {
        self.ancestors_or_self(i)
            .any(|a| SKIPPED.contains(&self.tag(a)))
    }

    /// `i`, its parent, its parent's parent, ..., each step charged to the
    /// budget: once it is spent the walk ends early, and what it found is
    /// not used, since the learning's next check fails.
    pub fn ancestors_or_self(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(Some(i), move |&a| {
            self.elements[a]
                .parent
                .filter(|_| self.bounds.budget.step())
        })
    }

    /// The nearest element both `a` and `b` are in (or are); each step
    /// charged, as [`Self::ancestors_or_self`]'s.
    pub fn common_ancestor(&self, mut a: usize, mut b: usize) -> usize {
        let up = |i: usize| self.elements[i].parent.expect("deeper than the root");
        while self.elements[a].depth > self.elements[b].depth {
            if !self.bounds.budget.step() {
                return a;
            }
            a = up(a);
        }
        while self.elements[b].depth > self.elements[a].depth {
            if !self.bounds.budget.step() {
                return a;
            }
            b = up(b);
        }
        while a != b {
            if !self.bounds.budget.step() {
                return a;
            }
            a = up(a);
            b = up(b);
        }
        a
    }

    /// Whether `inner` is `outer` or below it (a walk of the depths between).
    pub fn is_within(&self, inner: usize, outer: usize) -> bool {
        let steps = self.elements[inner]
            .depth
            .checked_sub(self.elements[outer].depth);
        steps.is_some_and(|steps| {
            self.ancestors_or_self(inner)
                .take(steps + 1)
                .any(|a| a == outer)
        })
    }

    /// The element's text, whitespace collapsed, as extraction reads it.
    pub fn text(&self, i: usize, bounds: &Bounds) -> String {
        collapse_whitespace(&text(self.elements[i].el, &bounds.budget))
    }

    /// The elements holding `example`: its text equal (or, for a number, its
    /// value), or an attribute equal (a link also once made absolute).
    /// Numbers are matched by value only when nothing equals the example.
    pub fn hits(&self, example: &str, base: &Url, bounds: &Bounds) -> Result<Vec<Hit>, LearnError> {
        let example = collapse_whitespace(example);
        let example_link = absolute(&example, base);
        let longest = example.len() * 4 + 64;
        let mut exact = Vec::new();
        let mut by_value = Vec::new();
        let number = numeric(&example);
        for i in 0..self.elements.len() {
            bounds.check()?;
            if exact.len() >= MAX_HITS {
                break;
            }
            let element = &self.elements[i];
            for (name, value) in element.el.value().attrs() {
                if matches!(name, "class" | "style") || !bounds.budget.charge_bytes(value.len()) {
                    continue;
                }
                let value = js_trim(value);
                let link = matches!(name, "href" | "src") && absolute(value, base) == example_link;
                if value == example || link {
                    exact.push(Hit {
                        node: i,
                        source: Source::Attr(name.to_owned()),
                    });
                } else if number.is_some() && by_value.len() < MAX_HITS && numeric(value) == number
                {
                    by_value.push(Hit {
                        node: i,
                        source: Source::Attr(name.to_owned()),
                    });
                }
            }
            let len = element.text_len;
            if len == 0 || len > longest || self.skipped(i) {
                continue;
            }
            let text = self.text(i, bounds);
            if text == example {
                exact.push(Hit {
                    node: i,
                    source: Source::Text,
                });
            } else if number.is_some() && by_value.len() < MAX_HITS && numeric(&text) == number {
                by_value.push(Hit {
                    node: i,
                    source: Source::Text,
                });
            }
        }
        bounds.check()?;
        exact.truncate(MAX_HITS);
        Ok(match exact.is_empty() {
            true => by_value,
            false => exact,
        })
    }
}

/// The value of a text that is a number and little else (`₩12,900`,
/// `12.900 €`, `12900원`): at most three letters beside its digits.
pub(super) fn numeric(text: &str) -> Option<String> {
    let letters = text.chars().filter(|c| c.is_alphabetic()).count();
    if letters > 3 || text.chars().count() > 40 {
        return None;
    }
    read_number(text, None, false)
        .ok()
        .map(|n| n.value.to_string())
}

/// Whether `value`, as extraction read it, gives back `example`: equal once
/// whitespace is collapsed, equal as links, or the same number.
pub(super) fn gives_back(example: &str, value: &str, base: &Url) -> bool {
    let example = collapse_whitespace(example);
    example == value
        || absolute(&example, base) == value
        || numeric(&example).is_some_and(|n| numeric(value).as_ref() == Some(&n))
}

//! Selectors learned from a page: given a page's HTML and, per field, one to
//! three values as they appear on it (an item's title, its price, its link),
//! proposals of an item selector and one [`FieldSpec`] per field, ranked,
//! each with the items it extracts (read by [`extract_html`], the code a
//! crawl runs) and a confidence with its reasons. Without examples, the
//! page's main repeated structure and the fields most of its items have.
//!
//! How: every element of the page is indexed once (`page`); the elements
//! whose text or attribute equals an example are found (numbers also by
//! value, `₩12,900` = `12900`); the examples of one row (the first of each
//! field, then the second, ...) sit in one item, and the item is the level
//! below the elements the rows share whose nodes repeat (`rows`); selectors
//! are generalised from what the rows' elements have in common, stable
//! classes and attributes first, generated class names never (`generalize`);
//! every candidate is run and kept only if it gives back every example
//! (`rank`). All of it within [`LEARN_MAX_ELEMENTS`], [`LEARN_MAX_RUNS`]
//! and a time budget, so a hostile page cannot hold a worker.

mod discover;
mod generalize;
mod page;
mod rank;
pub mod repair;
mod rows;
#[cfg(test)]
mod tests;

use std::{collections::BTreeMap, fmt, time::Duration};

use serde_json::{Map, Value};
use url::Url;

use super::{
    HtmlPage,
    budget::{CancelFlag, ExtractBudget},
};
use crate::domain::site::{CssSelector, FieldSpec};

/// Most elements a page may have for learning: a results page has a few
/// thousand; past this it is refused whole rather than learned from a part.
pub const LEARN_MAX_ELEMENTS: usize = 60_000;
/// Most candidate extractions one learning runs (each reads the page's items once).
pub const LEARN_MAX_RUNS: usize = 400;
/// Most time one learning may take once the page is parsed.
pub const LEARN_TIME: Duration = Duration::from_secs(3);
/// Most examples a field may have.
pub const MAX_EXAMPLES: usize = 3;
/// Most proposals returned.
pub const MAX_PROPOSALS: usize = 5;

/// Per field, its example values as they appear on the page (1 to 3).
pub type Examples = BTreeMap<String, Vec<String>>;

/// Selectors for a page, as a site keeps them, and what they extract.
#[derive(Debug, Clone)]
pub struct Proposal {
    pub item_selector: CssSelector,
    pub fields: BTreeMap<String, FieldSpec>,
    /// The page's items as these selectors read them.
    pub items: Vec<Map<String, Value>>,
    /// 0..1: how much the proposal can be trusted.
    pub confidence: f64,
    pub reasons: Reasons,
}

/// What a proposal's confidence is made of.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reasons {
    /// Examples given back by the items, of all examples given.
    pub examples_reproduced: usize,
    pub examples_given: usize,
    /// Items found, and those with a value in every field.
    pub items_found: usize,
    pub items_complete: usize,
    /// 0..1: how much the selectors lean on stable names (classes,
    /// attributes) rather than on positions and bare tags.
    pub stability: f64,
}

/// Why nothing could be learned from a page.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LearnError {
    /// A field's examples are missing, too many, or empty.
    #[error("fields.{field}: {message}")]
    BadExamples { field: String, message: String },
    /// No element of the page has this example of `field`.
    #[error("fields.{field}: \"{example}\" is not on the page")]
    NotOnPage { field: String, example: String },
    /// The examples are on the page, but no selectors give them all back.
    #[error("fields.{field}: no selector gives back every example of the field")]
    NoSelector { field: String },
    /// The examples of different rows do not sit in repeated items.
    #[error("the examples do not sit in items that repeat on the page")]
    NoItems,
    /// Without examples: no group of three or more alike elements.
    #[error("the page has no repeated structure (3 or more alike elements)")]
    NoRepeatedStructure,
    /// The page or the work it asks for is over the learning budget.
    #[error("{0}")]
    OverBudget(Spent),
}

/// Which bound learning hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spent {
    Elements,
    Runs,
    Time,
}

impl fmt::Display for Spent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Spent::Elements => write!(
                f,
                "the page has more than {LEARN_MAX_ELEMENTS} elements: too large to learn from"
            ),
            Spent::Runs => write!(
                f,
                "learning tried {LEARN_MAX_RUNS} candidate selectors without finishing"
            ),
            Spent::Time => write!(
                f,
                "learning went over its {} ms budget",
                LEARN_TIME.as_millis()
            ),
        }
    }
}

/// Bounds one learning: the extraction budget (time, steps) every run of
/// a candidate and every look at the page is charged to, and a count of runs.
pub(super) struct Bounds {
    budget: ExtractBudget,
    runs: std::cell::Cell<usize>,
    max_runs: usize,
}

impl Bounds {
    fn new(time: Duration, max_runs: usize) -> Self {
        Bounds {
            budget: ExtractBudget::new(time, CancelFlag::default()),
            runs: std::cell::Cell::new(0),
            max_runs,
        }
    }

    /// Charges one candidate run.
    fn run(&self) -> Result<(), LearnError> {
        self.runs.set(self.runs.get() + 1);
        if self.runs.get() > self.max_runs {
            return Err(LearnError::OverBudget(Spent::Runs));
        }
        self.check()
    }

    /// Charges one step of a walk over the page.
    fn check_step(&self) -> Result<(), LearnError> {
        match self.budget.step() {
            true => Ok(()),
            false => Err(LearnError::OverBudget(Spent::Time)),
        }
    }

    fn check(&self) -> Result<(), LearnError> {
        self.budget
            .look_now()
            .map_err(|_| LearnError::OverBudget(Spent::Time))
    }
}

/// Proposals for `html` served at `url`, from `examples` (see [`Examples`]),
/// best first; none of them fails to give back every example.
pub fn learn(html: &str, url: &Url, examples: &Examples) -> Result<Vec<Proposal>, LearnError> {
    learn_within(html, url, examples, LEARN_TIME, LEARN_MAX_RUNS)
}

/// [`learn`] within the given time and runs.
pub fn learn_within(
    html: &str,
    url: &Url,
    examples: &Examples,
    time: Duration,
    max_runs: usize,
) -> Result<Vec<Proposal>, LearnError> {
    check_examples(examples)?;
    let page = HtmlPage::parse(html, url);
    learn_page(&page, examples, time, max_runs)
}

/// [`learn_within`] over a page already parsed: the time starts now.
pub fn learn_page(
    page: &HtmlPage,
    examples: &Examples,
    time: Duration,
    max_runs: usize,
) -> Result<Vec<Proposal>, LearnError> {
    let bounds = Bounds::new(time, max_runs);
    let index = page::PageIndex::build(page, &bounds)?;
    learn_indexed(page, &index, examples, &bounds)
}

/// [`learn_page`] over a page already indexed, charged to `bounds`.
fn learn_indexed(
    page: &HtmlPage,
    index: &page::PageIndex<'_>,
    examples: &Examples,
    bounds: &Bounds,
) -> Result<Vec<Proposal>, LearnError> {
    check_examples(examples)?;
    let proposals = match examples.is_empty() {
        true => discover::discover(page, index, bounds)?,
        false => {
            let rows = rows::find_rows(index, examples, page.base(), bounds)?;
            rank::propose(page, index, &rows, examples, bounds)?
        }
    };
    // A walk cut short by the budget found less than it should have: none
    // of what followed is returned.
    bounds.check()?;
    Ok(proposals)
}

fn check_examples(examples: &Examples) -> Result<(), LearnError> {
    for (field, values) in examples {
        let bad = |message: &str| LearnError::BadExamples {
            field: field.clone(),
            message: message.to_owned(),
        };
        if field.trim().is_empty() {
            return Err(bad("a field needs a name"));
        }
        if values.is_empty() || values.len() > MAX_EXAMPLES {
            return Err(bad("give 1 to 3 example values"));
        }
        if values.iter().any(|v| v.trim().is_empty()) {
            return Err(bad("an example value is empty"));
        }
    }
    Ok(())
}

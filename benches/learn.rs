//! Selectors learned from examples, measured on the markup-change corpus
//! (crates/markup-corpus): for every page, two examples per field (the
//! second item's and the second-to-last's values) are given to
//! `worker::learn::learn`, and the top proposal is correct when the items
//! it extracts are exactly the page's items. Also: proposals per page, CPU
//! time per proposal (this thread's), and, with no examples, whether the
//! page's items are found as its main repeated structure.
//!
//! And repair: for every changed page, the items of the page before the
//! change (the last good run) are given to `learn::repair::repair` with the
//! changed page; the first proposal that passes verification is the one a
//! site would be offered. Exact when its items are the changed page's; a
//! false repair when it passes verification with other items.
//!
//!   cargo bench --bench learn
//!
//! Prints a table per layout and change kind; exits non-zero below 90 %
//! correct over the corpus. With `LEARN_RESULTS=file`, also writes each
//! page's outcome there as a JSON line (`name`, `examples`: exact, wrong or
//! none, `cpu_ms`; on a changed page `repair` and `repair_cpu_ms` too),
//! which scripts/bench-repair sets beside the peers'.

use std::collections::BTreeMap;

use crawlfleet::worker::learn::{self, Proposal, repair::repair_html};
use markup_corpus::{Change, Layout, PAGE_URL, Page, before, corpus};
use serde_json::{Map, Value};
use url::Url;

const REQUIRED_CORRECT: f64 = 0.90;

/// This thread's CPU time, in milliseconds.
fn cpu_ms() -> f64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid pointer to a timespec the call fills.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    now.tv_sec as f64 * 1e3 + now.tv_nsec as f64 / 1e6
}

/// Whether the proposal's items are the page's, field by field.
fn exact(proposal: &Proposal, page: &Page) -> bool {
    proposal.items.len() == page.items.len()
        && proposal.items.iter().zip(&page.items).all(|(got, want)| {
            want.iter()
                .all(|(field, value)| got.get(field).and_then(|v| v.as_str()) == Some(value))
        })
}

#[derive(Default)]
struct Tally {
    pages: usize,
    correct: usize,
    proposals: usize,
    cpu_ms: f64,
    discovered: usize,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.pages += other.pages;
        self.correct += other.correct;
        self.proposals += other.proposals;
        self.cpu_ms += other.cpu_ms;
        self.discovered += other.discovered;
    }

    fn row(&self, name: &str) {
        println!(
            "{name:<22} {:>6} {:>9.1} % {:>10.2} {:>12.2} {:>11.1} %",
            self.pages,
            100.0 * self.correct as f64 / self.pages.max(1) as f64,
            self.proposals as f64 / self.pages.max(1) as f64,
            self.cpu_ms / self.proposals.max(1) as f64,
            100.0 * self.discovered as f64 / self.pages.max(1) as f64,
        );
    }
}

fn main() {
    let url = Url::parse(PAGE_URL).expect("a URL");
    let pages = corpus();
    let mut by_layout: BTreeMap<String, (Tally, Tally)> = BTreeMap::new();
    let mut by_change: BTreeMap<&'static str, Tally> = BTreeMap::new();
    let mut wrong = Vec::new();
    let mut results = Vec::new();
    let mut repairs: BTreeMap<String, RepairTally> = BTreeMap::new();
    let mut repairs_by_change: BTreeMap<String, RepairTally> = BTreeMap::new();
    for page in &pages {
        let n = page.items.len();
        let examples = page.examples(&[1, n - 2]);
        let started = cpu_ms();
        let learned = learn::learn(&page.html, &url, &examples);
        let took = cpu_ms() - started;
        let mut tally = Tally {
            pages: 1,
            cpu_ms: took,
            ..Tally::default()
        };
        match &learned {
            Ok(proposals) => {
                tally.proposals = proposals.len();
                if exact(&proposals[0], page) {
                    tally.correct = 1;
                } else {
                    wrong.push(format!(
                        "{}: top {} {:?} -> {} items",
                        page.name(),
                        proposals[0].item_selector.as_str(),
                        proposals[0]
                            .fields
                            .iter()
                            .map(|(k, f)| format!(
                                "{k}={}{}",
                                f.selector.as_ref().map_or("", |s| s.as_str()),
                                f.attr
                                    .as_deref()
                                    .map(|a| format!("@{a}"))
                                    .unwrap_or_default()
                            ))
                            .collect::<Vec<_>>(),
                        proposals[0].items.len()
                    ));
                }
            }
            Err(e) => wrong.push(format!("{}: {e}", page.name())),
        }
        let outcome = match &learned {
            Ok(_) if tally.correct == 1 => "exact",
            Ok(_) => "wrong",
            Err(_) => "none",
        };
        let mut result =
            serde_json::json!({ "name": page.name(), "examples": outcome, "cpu_ms": took });
        if !page.changes.is_empty() {
            let (outcome, cpu) = repaired(page, &url);
            result["repair"] = outcome.into();
            result["repair_cpu_ms"] = cpu.into();
            let layout = format!("{:?}", page.layout);
            repairs.entry(layout).or_default().add(outcome, cpu);
            for change in &page.changes {
                repairs_by_change
                    .entry(change.kind().to_owned())
                    .or_default()
                    .add(outcome, cpu);
            }
        }
        results.push(result);
        let discovered = learn::learn(&page.html, &url, &BTreeMap::new());
        if let Ok(found) = discovered
            && found[0].items.len() == n
        {
            tally.discovered = 1;
        }
        let layout = format!("{:?}", page.layout);
        let entry = by_layout.entry(layout).or_default();
        match page.changes.is_empty() {
            true => entry.0.add(&tally),
            false => entry.1.add(&tally),
        }
        for change in &page.changes {
            by_change.entry(change.kind()).or_default().add(&tally);
        }
    }
    let header = || {
        println!(
            "{:<22} {:>6} {:>11} {:>10} {:>12} {:>13}",
            "", "pages", "correct", "proposals", "cpu ms/prop", "no-ex found"
        )
    };
    println!("examples -> correct selectors: 2 examples per field, top proposal exact\n");
    header();
    let (mut originals, mut changed) = (Tally::default(), Tally::default());
    for layout in Layout::ALL {
        let (o, c) = &by_layout[&format!("{layout:?}")];
        o.row(&format!("{layout:?} original"));
        c.row(&format!("{layout:?} changed"));
        originals.add(o);
        changed.add(c);
    }
    originals.row("all originals");
    changed.row("all changed");
    let mut all = Tally::default();
    all.add(&originals);
    all.add(&changed);
    all.row("all");
    println!("\nby change (a page with several changes counts under each)\n");
    header();
    for kind in Change::KINDS {
        if let Some(t) = by_change.get(kind) {
            t.row(kind);
        }
    }
    if !wrong.is_empty() {
        println!("\nnot exact ({}):", wrong.len());
        for line in &wrong {
            println!("  {line}");
        }
    }
    println!(
        "\nrepair: the items of the page before the change, the changed page; the first proposal verified\n"
    );
    println!(
        "{:<22} {:>6} {:>9} {:>9} {:>9} {:>9}",
        "", "pages", "exact", "false", "none", "cpu ms"
    );
    let mut all_repairs = RepairTally::default();
    for (layout, tally) in &repairs {
        tally.row(layout);
        all_repairs.merge(tally);
    }
    all_repairs.row("all changed");
    println!();
    for (kind, tally) in &repairs_by_change {
        tally.row(kind);
    }
    if let Ok(path) = std::env::var("LEARN_RESULTS") {
        let lines: String = results.iter().map(|r| format!("{r}\n")).collect();
        std::fs::write(&path, lines).expect("writing LEARN_RESULTS");
    }
    let rate = all.correct as f64 / all.pages as f64;
    if rate < REQUIRED_CORRECT {
        eprintln!(
            "correct {:.1} % is below {:.0} %",
            100.0 * rate,
            100.0 * REQUIRED_CORRECT
        );
        std::process::exit(1);
    }
}

/// Repairs of one layout or kind of change: exact, false (verified, wrong
/// items), none (no proposal passed).
#[derive(Default)]
struct RepairTally {
    outcomes: BTreeMap<&'static str, usize>,
    cpu_ms: f64,
}

impl RepairTally {
    fn add(&mut self, outcome: &'static str, cpu_ms: f64) {
        *self.outcomes.entry(outcome).or_default() += 1;
        self.cpu_ms += cpu_ms;
    }

    fn merge(&mut self, other: &RepairTally) {
        for (outcome, n) in &other.outcomes {
            *self.outcomes.entry(outcome).or_default() += n;
        }
        self.cpu_ms += other.cpu_ms;
    }

    fn row(&self, name: &str) {
        let pages: usize = self.outcomes.values().sum();
        let share =
            |o: &str| 100.0 * *self.outcomes.get(o).unwrap_or(&0) as f64 / pages.max(1) as f64;
        println!(
            "{name:<22} {pages:>6} {:>7.1} % {:>7.1} % {:>7.1} % {:>9.2}",
            share("exact"),
            share("wrong"),
            share("none"),
            self.cpu_ms / pages.max(1) as f64
        );
    }
}

/// The repair of a changed page from the items of the page before it: its
/// outcome (exact, wrong, none) and this thread's CPU time in milliseconds.
fn repaired(page: &Page, url: &Url) -> (&'static str, f64) {
    let good: Vec<Map<String, Value>> = before(page.layout, page.seed)
        .items
        .iter()
        .map(|item| {
            item.iter()
                .map(|(field, value)| (field.clone(), Value::String(value.clone())))
                .collect()
        })
        .collect();
    let started = cpu_ms();
    let verified = repair_html(&page.html, url, &good);
    let took = cpu_ms() - started;
    let outcome = match verified {
        Ok(proposals) => match proposals.iter().find(|v| v.passes()) {
            Some(v) if exact(&v.proposal, page) => "exact",
            Some(_) => "wrong",
            None => "none",
        },
        Err(_) => "none",
    };
    (outcome, took)
}

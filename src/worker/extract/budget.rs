//! The CPU one page's extraction may use. Selector matching can cost time
//! exponential in a selector's nesting (`:is(:is(.a *) *)` walks every
//! ancestor of every ancestor), so every step of it (an element visited, a
//! node read) is charged here, and once the budget is spent every further
//! step is refused: the matcher's recursions all end at once and the page's
//! extraction reports that it went over budget. The bytes of values read are
//! counted too: items that overlap (every element of a deep page, each with
//! all the text below it) would copy a page many times over.

use std::{
    cell::Cell,
    fmt,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

/// Steps between two looks at the clock and the cancel flag: a step is a
/// few nanoseconds, so the budget is overrun by microseconds at most.
const CHECK_EVERY: u64 = 1024;
/// Most bytes of values one page's items may hold (a page is at most 20 MiB).
pub const MAX_READ_BYTES: u64 = 64 * 1024 * 1024;

/// Why an extraction stopped before it finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spent {
    /// It used all of its time.
    Time,
    /// Its items held more than [`MAX_READ_BYTES`].
    Size,
    /// Whoever waited for it gave up (the page's stuck timeout, a crawl
    /// that was stopped).
    Cancelled,
}

/// Set by whoever waits for an extraction to tell it to stop.
#[derive(Debug, Clone, Default)]
pub struct CancelFlag(Arc<AtomicBool>);

impl CancelFlag {
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// One page's extraction budget: a deadline and a cancel flag, looked at
/// every [`CHECK_EVERY`] steps. Used by one thread (the one extracting).
pub struct ExtractBudget {
    limit: Duration,
    deadline: Cell<Instant>,
    cancel: CancelFlag,
    steps: Cell<u64>,
    next_check: Cell<u64>,
    bytes: Cell<u64>,
    spent: Cell<Option<Spent>>,
}

impl ExtractBudget {
    /// A budget of `limit` from now, that `cancel` can end sooner.
    pub fn new(limit: Duration, cancel: CancelFlag) -> Self {
        let now = Instant::now();
        ExtractBudget {
            limit,
            deadline: Cell::new(deadline_after(now, limit)),
            cancel,
            steps: Cell::new(0),
            next_check: Cell::new(CHECK_EVERY),
            bytes: Cell::new(0),
            spent: Cell::new(None),
        }
    }

    /// A budget no test page exhausts (unit tests of what is extracted).
    #[cfg(test)]
    pub fn unlimited() -> Self {
        Self::new(Duration::from_secs(3600), CancelFlag::default())
    }

    /// Gives the budget's whole time again from now: called once the page is
    /// parsed. Parsing is linear in the page, which `PAGE_MAX_BYTES` bounds,
    /// and cannot be stopped midway; the budget is for what the site's
    /// selectors and values cost, which can grow without bound.
    pub fn start_matching(&self) {
        self.deadline
            .set(deadline_after(Instant::now(), self.limit));
    }

    /// Charges one step; false once the budget is spent.
    #[inline]
    pub fn step(&self) -> bool {
        self.charge(1)
    }

    /// Charges `n` steps (work proportional to `n`, such as bytes copied);
    /// false once the budget is spent.
    #[inline]
    pub fn charge(&self, n: u64) -> bool {
        if self.spent.get().is_some() {
            return false;
        }
        let steps = self.steps.get().saturating_add(n);
        self.steps.set(steps);
        if steps >= self.next_check.get() {
            self.next_check.set(steps.saturating_add(CHECK_EVERY));
            self.look();
        }
        self.spent.get().is_none()
    }

    /// Charges `n` bytes of values read (and the steps of copying them);
    /// false once the budget is spent.
    pub fn charge_bytes(&self, n: usize) -> bool {
        let bytes = self.bytes.get().saturating_add(n as u64);
        self.bytes.set(bytes);
        if bytes > MAX_READ_BYTES && self.spent.get().is_none() {
            self.spent.set(Some(Spent::Size));
        }
        self.charge(1 + n as u64 / 64)
    }

    /// Looks at the clock and the cancel flag now rather than at the next
    /// check: before work whose one step costs much (a pattern over a long
    /// value), so the budget is overrun by one such step at most.
    pub fn look_now(&self) -> Result<(), OverBudget> {
        if self.spent.get().is_none() {
            self.look();
        }
        self.check()
    }

    fn look(&self) {
        if self.cancel.is_cancelled() {
            self.spent.set(Some(Spent::Cancelled));
        } else if Instant::now() >= self.deadline.get() {
            self.spent.set(Some(Spent::Time));
        }
    }

    /// Whether the budget ran out (and why); every result read since may be
    /// incomplete.
    pub fn spent(&self) -> Option<Spent> {
        self.spent.get()
    }

    /// `Ok` while the budget lasts.
    pub fn check(&self) -> Result<(), OverBudget> {
        match self.spent.get() {
            None => Ok(()),
            Some(spent) => Err(OverBudget {
                spent,
                limit: self.limit,
                steps: self.steps.get(),
            }),
        }
    }
}

fn deadline_after(now: Instant, limit: Duration) -> Instant {
    now.checked_add(limit)
        .unwrap_or(now + Duration::from_secs(86_400))
}

/// An extraction that stopped before it finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverBudget {
    pub spent: Spent,
    /// The budget it had.
    pub limit: Duration,
    /// Steps taken until it stopped.
    pub steps: u64,
}

impl std::error::Error for OverBudget {}

impl fmt::Display for OverBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.spent {
            Spent::Time => write!(
                f,
                "reading the page went over its budget of {} ms (EXTRACT_BUDGET_MS) after {} steps: \
                 the site's selectors cost too much on this page (deeply nested :is/:not/:has \
                 with descendant combinators); simplify them",
                self.limit.as_millis(),
                self.steps
            ),
            Spent::Size => write!(
                f,
                "reading the page went over its budget: its items hold more than {} MiB \
                 (items inside items copy the page again and again); make the item selector \
                 match the items only",
                MAX_READ_BYTES / 1024 / 1024
            ),
            Spent::Cancelled => {
                write!(f, "reading the page was stopped after {} steps", self.steps)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spent_budget_refuses_every_later_step() {
        let budget = ExtractBudget::new(Duration::ZERO, CancelFlag::default());
        let mut taken = 0;
        while budget.step() {
            taken += 1;
        }
        assert!(taken < CHECK_EVERY, "{taken}");
        assert!(!budget.step() && !budget.charge(0));
        let over = budget.check().unwrap_err();
        assert_eq!(over.spent, Spent::Time);
        assert!(over.to_string().contains("0 ms"), "{over}");
    }

    #[test]
    fn a_cancel_stops_it_within_a_check() {
        let cancel = CancelFlag::default();
        let budget = ExtractBudget::new(Duration::from_secs(60), cancel.clone());
        assert!(budget.charge(10 * CHECK_EVERY));
        cancel.cancel();
        let mut taken = 0;
        while budget.step() {
            taken += 1;
        }
        assert!(taken <= CHECK_EVERY, "{taken}");
        assert_eq!(budget.spent(), Some(Spent::Cancelled));
    }

    #[test]
    fn bytes_read_are_bounded_too() {
        let budget = ExtractBudget::unlimited();
        assert!(budget.charge_bytes(MAX_READ_BYTES as usize));
        assert!(!budget.charge_bytes(1));
        assert_eq!(budget.spent(), Some(Spent::Size));
    }
}

//! The run lifecycle as values (docs/design.md, "Crawl run state machine"):
//! each move of a run is decided here from what the run is, before anything
//! is written, and the store applies it with one statement guarded on the
//! states it may leave (`from`) and, for a held run, on its fence, so a run
//! that moved meanwhile changes nothing.

use std::time::Duration;

use super::{AttemptOutcome, RunHealth, RunState, retry_backoff};
use crate::domain::failure::FailureKind;

impl RunState {
    /// The states a worker holds a run in: its fence (run, attempt, worker) is live.
    pub const HELD: [RunState; 3] = [RunState::Running, RunState::UrlCall, RunState::CallDone];

    /// The backlog and the held states: a keyword/site pair has at most one
    /// run in them.
    pub const ACTIVE: [RunState; 4] = [
        RunState::Queued,
        RunState::Running,
        RunState::UrlCall,
        RunState::CallDone,
    ];

    /// The states a run stays in until a user retries it (or retention deletes it).
    pub const ENDED: [RunState; 4] = [
        RunState::Completed,
        RunState::Failed,
        RunState::Skipped,
        RunState::Cancelled,
    ];

    /// The ended states a user may retry from.
    pub const RETRYABLE: [RunState; 2] = [RunState::Failed, RunState::Cancelled];

    /// The states a crawl asks for its next page from, or completes from
    /// when it stored its last page already.
    pub const BETWEEN_PAGES: [RunState; 2] = [RunState::Running, RunState::CallDone];

    /// A page request is in flight.
    pub const IN_CALL: [RunState; 1] = [RunState::UrlCall];
}

/// What a run's end says about its site: the store changes the site only
/// when it was not so already, so each change is told once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SiteTransition {
    /// The site refuses us: a run failed as `blocked`, or completed degraded
    /// by refusals.
    Blocked,
    /// A healthy run after the site had been refusing us.
    Recovered,
}

/// One move of a run, decided before it is written.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    /// The states the run may be in for the move to apply (the guard).
    pub from: &'static [RunState],
    pub to: RunState,
    /// The run's attempt after the move.
    pub attempt: i32,
    /// The run's attempt budget after the move, when the move sets it (a retry).
    pub max_attempts: Option<i32>,
    /// How long a retried attempt waits before it may be dispatched.
    pub not_before: Option<Duration>,
    /// How the held attempt's record closes, when the move ends the attempt.
    pub closes: Option<AttemptOutcome>,
    /// The verdict on a completed run.
    pub health: Option<RunHealth>,
    /// What the move says about the run's site, applied only if it changes it.
    pub site: Option<SiteTransition>,
}

impl Transition {
    fn new(from: &'static [RunState], to: RunState, attempt: i32) -> Self {
        Transition {
            from,
            to,
            attempt,
            max_attempts: None,
            not_before: None,
            closes: None,
            health: None,
            site: None,
        }
    }

    /// A worker claims a queued run at the attempt its job message names.
    pub fn claim(attempt: i32) -> Self {
        Transition::new(&[RunState::Queued], RunState::Running, attempt)
    }

    /// The held run asks for a page.
    pub fn enter_url_call(attempt: i32) -> Self {
        Transition::new(&RunState::BETWEEN_PAGES, RunState::UrlCall, attempt)
    }

    /// The held run asks for an item's detail page, after its list page
    /// came back (or between tries of a refused one): still in a call, the
    /// stuck clock started again for the new request.
    pub fn enter_detail_call(attempt: i32) -> Self {
        Transition::new(&RunState::HELD, RunState::UrlCall, attempt)
    }

    /// The page came back and was stored.
    pub fn store_page(attempt: i32) -> Self {
        Transition::new(&RunState::IN_CALL, RunState::CallDone, attempt)
    }

    /// A URL list's page came back and was stored, or could not be read
    /// and was recorded: from any held state, as a list run may have
    /// several of its URLs in flight.
    pub fn store_list_url(attempt: i32) -> Self {
        Transition::new(&RunState::HELD, RunState::CallDone, attempt)
    }

    /// The site refused the page (429, 503, a block page): the run waits out
    /// the site's pause out of `url_call`, so the watchdog does not take a
    /// patient crawl for a stuck one.
    pub fn page_refused(attempt: i32) -> Self {
        Transition::new(&RunState::IN_CALL, RunState::CallDone, attempt)
    }

    /// The states a held attempt completes from: `url_call` with its last
    /// page still to store (`with_last_page`), otherwise between pages.
    pub fn completes_from(with_last_page: bool) -> &'static [RunState] {
        match with_last_page {
            true => &RunState::IN_CALL,
            false => &RunState::BETWEEN_PAGES,
        }
    }

    /// The held attempt read its pages: the run completes, judged `health`
    /// (from [`Transition::completes_from`]). A healthy run tells a blocked
    /// site it recovered; one degraded by refusals tells it is blocked.
    pub fn complete(attempt: i32, with_last_page: bool, health: RunHealth) -> Self {
        let from = Transition::completes_from(with_last_page);
        let site = match &health {
            RunHealth::Healthy => Some(SiteTransition::Recovered),
            RunHealth::Degraded { blocked: true, .. } => Some(SiteTransition::Blocked),
            RunHealth::Degraded { blocked: false, .. } => None,
        };
        Transition {
            closes: Some(AttemptOutcome::Completed),
            health: Some(health),
            site,
            ..Transition::new(from, RunState::Completed, attempt)
        }
    }

    /// The held attempt (`attempt` of `max_attempts`) failed as `kind`: queued
    /// again for the next attempt after a backoff while the kind may succeed
    /// later and attempts are left, otherwise `failed`. A run that fails for
    /// good as `blocked` tells its site is blocked.
    pub fn fail(attempt: i32, max_attempts: i32, kind: FailureKind) -> Self {
        let closes = Some(AttemptOutcome::Failed);
        if kind.may_succeed_later() && attempt < max_attempts {
            let next = attempt + 1;
            return Transition {
                not_before: Some(retry_backoff(next)),
                closes,
                ..Transition::new(&RunState::HELD, RunState::Queued, next)
            };
        }
        Transition {
            closes,
            site: (kind == FailureKind::Blocked).then_some(SiteTransition::Blocked),
            ..Transition::new(&RunState::HELD, RunState::Failed, attempt)
        }
    }

    /// A draining worker hands the held run back: queued at the same
    /// attempt, not counted against it.
    pub fn release(attempt: i32) -> Self {
        Transition {
            closes: Some(AttemptOutcome::Released),
            ..Transition::new(&RunState::HELD, RunState::Queued, attempt)
        }
    }

    /// A user stops an active run.
    pub fn cancel(attempt: i32) -> Self {
        Transition {
            closes: Some(AttemptOutcome::Cancelled),
            ..Transition::new(&RunState::ACTIVE, RunState::Cancelled, attempt)
        }
    }

    /// A user queues a failed or cancelled run again with a fresh budget of
    /// `budget` attempts counted from the next one (attempt numbers keep
    /// counting, so the history stays readable). `None` from any other state.
    pub fn retry(state: RunState, attempt: i32, budget: i32) -> Option<Self> {
        RunState::RETRYABLE.contains(&state).then(|| Transition {
            max_attempts: Some(attempt + budget),
            ..Transition::new(&RunState::RETRYABLE, RunState::Queued, attempt + 1)
        })
    }

    /// Whether the move ends the run (it leaves the active states).
    pub fn ends_run(&self) -> bool {
        RunState::ENDED.contains(&self.to)
    }

    /// Whether the run keeps its worker after the move: it does while held,
    /// and an ended run names the worker of its last attempt.
    pub fn keeps_worker(&self) -> bool {
        self.to != RunState::Queued
    }
}

/// Why the watchdog takes back a held run: its worker sent no heartbeat
/// (`heartbeat_lost`: `worker_lost`), or its page request outlived the site's
/// stuck timeout (`stuck`). The rescue is [`Transition::fail`] with this kind,
/// under the old fence, as the worker would have ended the attempt.
pub fn rescued_as(heartbeat_lost: bool) -> FailureKind {
    match heartbeat_lost {
        true => FailureKind::WorkerLost,
        false => FailureKind::Stuck,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEGRADED: fn(bool) -> RunHealth = |blocked| RunHealth::Degraded {
        reason: "too few items".to_owned(),
        blocked,
    };

    /// A move, where it may start, where it goes, its attempt after and how
    /// it closes the attempt's record.
    type Case = (
        &'static str,
        Transition,
        &'static [RunState],
        RunState,
        i32,
        Option<AttemptOutcome>,
    );

    /// Every move: where it may start, where it goes, the attempt after it,
    /// how the attempt's record closes and what it says about the site.
    #[test]
    fn each_move_goes_from_its_states_to_its_state() {
        use RunState::*;
        let cases: Vec<Case> = vec![
            ("claim", Transition::claim(2), &[Queued], Running, 2, None),
            (
                "url call",
                Transition::enter_url_call(2),
                &[Running, CallDone],
                UrlCall,
                2,
                None,
            ),
            (
                "store page",
                Transition::store_page(2),
                &[UrlCall],
                CallDone,
                2,
                None,
            ),
            (
                "refused",
                Transition::page_refused(2),
                &[UrlCall],
                CallDone,
                2,
                None,
            ),
            (
                "complete",
                Transition::complete(2, false, RunHealth::Healthy),
                &[Running, CallDone],
                Completed,
                2,
                Some(AttemptOutcome::Completed),
            ),
            (
                "complete with the last page",
                Transition::complete(2, true, RunHealth::Healthy),
                &[UrlCall],
                Completed,
                2,
                Some(AttemptOutcome::Completed),
            ),
            (
                "fail, retried",
                Transition::fail(2, 3, FailureKind::Network),
                &[Running, UrlCall, CallDone],
                Queued,
                3,
                Some(AttemptOutcome::Failed),
            ),
            (
                "fail, last attempt",
                Transition::fail(3, 3, FailureKind::Network),
                &[Running, UrlCall, CallDone],
                Failed,
                3,
                Some(AttemptOutcome::Failed),
            ),
            (
                "fail, permanent",
                Transition::fail(1, 3, FailureKind::HttpStatus),
                &[Running, UrlCall, CallDone],
                Failed,
                1,
                Some(AttemptOutcome::Failed),
            ),
            (
                "release",
                Transition::release(2),
                &[Running, UrlCall, CallDone],
                Queued,
                2,
                Some(AttemptOutcome::Released),
            ),
            (
                "cancel",
                Transition::cancel(2),
                &[Queued, Running, UrlCall, CallDone],
                Cancelled,
                2,
                Some(AttemptOutcome::Cancelled),
            ),
            (
                "retry",
                Transition::retry(Failed, 3, 3).unwrap(),
                &[Failed, Cancelled],
                Queued,
                4,
                None,
            ),
        ];
        for (name, transition, from, to, attempt, closes) in cases {
            assert_eq!(transition.from, from, "{name}");
            assert_eq!(transition.to, to, "{name}");
            assert_eq!(transition.attempt, attempt, "{name}");
            assert_eq!(transition.closes, closes, "{name}");
            assert_eq!(
                transition.ends_run(),
                RunState::ENDED.contains(&to),
                "{name}"
            );
            assert_eq!(transition.keeps_worker(), to != Queued, "{name}");
        }
    }

    #[test]
    fn a_failed_attempt_is_retried_only_when_it_may_pass_and_attempts_are_left() {
        for kind in FailureKind::ALL {
            for (attempt, max) in [(1, 3), (2, 3), (3, 3), (4, 3)] {
                let t = Transition::fail(attempt, max, kind);
                let retried = kind.may_succeed_later() && attempt < max;
                assert_eq!(t.to == RunState::Queued, retried, "{kind} {attempt}/{max}");
                assert_eq!(t.not_before.is_some(), retried, "{kind} {attempt}/{max}");
                assert_eq!(t.attempt, attempt + i32::from(retried));
            }
        }
    }

    #[test]
    fn a_retry_waits_out_the_backoff_of_its_next_attempt() {
        let second = Transition::fail(1, 3, FailureKind::Stuck)
            .not_before
            .unwrap();
        assert!((2_000..=3_000).contains(&second.as_millis()), "{second:?}");
        let third = Transition::fail(2, 3, FailureKind::Stuck)
            .not_before
            .unwrap();
        assert!((4_000..=6_000).contains(&third.as_millis()), "{third:?}");
    }

    #[test]
    fn the_site_is_blocked_by_refusals_or_a_final_blocked_failure_and_recovers_when_healthy() {
        let site = |t: Transition| t.site;
        assert_eq!(
            site(Transition::complete(1, false, RunHealth::Healthy)),
            Some(SiteTransition::Recovered)
        );
        assert_eq!(
            site(Transition::complete(1, true, DEGRADED(true))),
            Some(SiteTransition::Blocked)
        );
        assert_eq!(site(Transition::complete(1, true, DEGRADED(false))), None);
        assert_eq!(
            site(Transition::fail(3, 3, FailureKind::Blocked)),
            Some(SiteTransition::Blocked)
        );
        // Retried: the next attempt may get through.
        assert_eq!(site(Transition::fail(1, 3, FailureKind::Blocked)), None);
        assert_eq!(site(Transition::fail(3, 3, FailureKind::Network)), None);
        assert_eq!(site(Transition::release(1)), None);
        assert_eq!(site(Transition::cancel(1)), None);
    }

    #[test]
    fn a_completion_carries_its_verdict() {
        let t = Transition::complete(1, true, DEGRADED(false));
        assert_eq!(t.health, Some(DEGRADED(false)));
        assert_eq!(Transition::fail(3, 3, FailureKind::Network).health, None);
    }

    #[test]
    fn the_watchdog_fails_a_silent_worker_as_lost_and_a_long_call_as_stuck() {
        let t = Transition::fail(1, 3, rescued_as(true));
        assert_eq!(rescued_as(true), FailureKind::WorkerLost);
        assert_eq!((t.to, t.attempt), (RunState::Queued, 2));
        let t = Transition::fail(3, 3, rescued_as(false));
        assert_eq!(rescued_as(false), FailureKind::Stuck);
        assert_eq!((t.to, t.attempt), (RunState::Failed, 3));
        assert_eq!(t.from, RunState::HELD);
    }

    #[test]
    fn only_a_failed_or_cancelled_run_is_retried_with_a_fresh_budget() {
        for state in RunState::ALL {
            let retried = Transition::retry(state, 3, 2);
            assert_eq!(
                retried.is_some(),
                RunState::RETRYABLE.contains(&state),
                "{state}"
            );
        }
        let t = Transition::retry(RunState::Cancelled, 3, 2).unwrap();
        assert_eq!((t.attempt, t.max_attempts), (4, Some(5)));
        assert_eq!(t.not_before, None);
    }

    #[test]
    fn the_state_sets_partition_the_states() {
        for state in RunState::ALL {
            let active = RunState::ACTIVE.contains(&state);
            assert_eq!(active, state.is_active());
            assert_ne!(active, RunState::ENDED.contains(&state), "{state}");
            assert_eq!(
                RunState::HELD.contains(&state),
                active && state != RunState::Queued,
                "{state}"
            );
        }
    }
}

//! Searching policy settings: which step or target-tracking settings drain a
//! burst within a factor of the ideal fleet's drain time, and at what cost.

use super::fleet::{FleetSettings, Outcome, Scaling, simulate};
use super::policy::{Adjustment, AlarmMetric, AutoScaling, Comparison, StepPolicy};
use super::work::RunWork;

/// One setting tried.
pub struct Candidate {
    pub label: String,
    pub scaling: AutoScaling,
    /// The alarms' metric period (the api publishing that often).
    pub period_secs: f64,
}

/// The name a scale-out step gets when infra/'s policies have none.
const LARGE_STEP: &str = "scale-out-large";
/// Evaluation periods of the scale-to-zero alarm tried.
const TO_ZERO_PERIODS: [u32; 2] = [10, 3];
/// Metric periods tried for the step alarms: CloudWatch's standard 60 s and a
/// high-resolution 10 s.
const STEP_PERIODS: [f64; 2] = [60.0, 10.0];

/// The scale-to-zero alarm waits `periods` datapoints of an empty queue.
fn with_to_zero_periods(scaling: &mut AutoScaling, periods: u32) {
    for step in scaling
        .steps
        .iter_mut()
        .filter(|s| s.adjustment == Adjustment::Exact(0))
    {
        step.periods = periods;
    }
}

/// The scale-out step that answers the largest backlog (the one of highest
/// threshold), if any.
fn largest_scale_out(scaling: &mut AutoScaling) -> Option<&mut StepPolicy> {
    scaling
        .steps
        .iter_mut()
        .filter(|s| {
            s.metric == AlarmMetric::Backlog
                && matches!(
                    s.comparison,
                    Comparison::GreaterThan | Comparison::GreaterThanOrEqualTo
                )
        })
        .max_by(|a, b| a.threshold.total_cmp(&b.threshold))
}

/// Step mode: infra/'s policies with the scale-out step for the largest
/// backlog varied (threshold, adjustment, cooldown), the scale-to-zero wait,
/// and the period.
pub fn step_candidates(infra: &AutoScaling) -> Vec<Candidate> {
    let mut out = Vec::new();
    for threshold in [20.0, 50.0, 100.0, 200.0] {
        for adjustment in [10, 25, 50] {
            for cooldown in [30.0, 60.0] {
                for to_zero in TO_ZERO_PERIODS {
                    for period in STEP_PERIODS {
                        let mut scaling = infra.clone();
                        let large = |name: String| StepPolicy {
                            name,
                            metric: AlarmMetric::Backlog,
                            comparison: Comparison::GreaterThan,
                            threshold,
                            periods: 1,
                            adjustment: Adjustment::Change(adjustment),
                            cooldown_secs: cooldown,
                        };
                        match largest_scale_out(&mut scaling) {
                            Some(step) => *step = large(step.name.clone()),
                            None => scaling.steps.insert(0, large(LARGE_STEP.into())),
                        }
                        with_to_zero_periods(&mut scaling, to_zero);
                        out.push(Candidate {
                            label: format!(
                                "step: > {threshold} -> +{adjustment}, cooldown {cooldown} s, \
                                 to zero after {to_zero}, period {period} s"
                            ),
                            scaling,
                            period_secs: period,
                        });
                    }
                }
            }
        }
    }
    out
}

/// Target-tracking mode: the target, how many tasks the from-zero step adds,
/// and the scale-to-zero wait, on the mode's `period_secs` (AWS's own
/// tracking alarms are 1-minute ones).
pub fn tracking_candidates(infra: &AutoScaling, period_secs: f64) -> Vec<Candidate> {
    let mut out = Vec::new();
    for target in [2.0, 4.0, 8.0, 16.0, 32.0, 64.0] {
        for from_zero in [1, 10, 50] {
            for to_zero in TO_ZERO_PERIODS {
                let mut scaling = infra.clone();
                if let Some(tracking) = scaling.tracking.as_mut() {
                    tracking.target = target;
                }
                for step in scaling
                    .steps
                    .iter_mut()
                    .filter(|s| s.metric == AlarmMetric::Starved)
                {
                    step.adjustment = Adjustment::Change(from_zero);
                }
                with_to_zero_periods(&mut scaling, to_zero);
                out.push(Candidate {
                    label: format!(
                        "target_tracking: {target} per task, from zero +{from_zero}, \
                         to zero after {to_zero}"
                    ),
                    scaling,
                    period_secs,
                });
            }
        }
    }
    out
}

/// A candidate's outcome and how it compares with the ideal.
pub struct Found {
    pub label: String,
    pub outcome: Outcome,
    pub ratio: f64,
}

/// Every candidate on the same runs (same seed), each on the fleet
/// `fleet_for` its period gives, sorted: within `limit` of `ideal_drain`
/// first, cheapest first; then the rest, fastest first (then cheapest).
pub fn search(
    candidates: Vec<Candidate>,
    arrivals: &[f64],
    work: &RunWork,
    fleet_for: impl Fn(f64) -> FleetSettings,
    seed: u64,
    ideal_drain: f64,
    limit: f64,
) -> Vec<Found> {
    let mut found: Vec<Found> = candidates
        .into_iter()
        .map(|c| {
            let fleet = fleet_for(c.period_secs);
            let outcome = simulate(arrivals, work, &Scaling::Auto(c.scaling), &fleet, seed);
            let ratio = outcome.drain_secs / ideal_drain;
            Found {
                label: c.label,
                outcome,
                ratio,
            }
        })
        .collect();
    let cost = |f: &Found| f.outcome.billed_task_secs;
    found.sort_by(|a, b| {
        let (a_in, b_in) = (a.ratio <= limit, b.ratio <= limit);
        b_in.cmp(&a_in).then_with(|| {
            if a_in {
                cost(a).total_cmp(&cost(b))
            } else {
                a.ratio
                    .total_cmp(&b.ratio)
                    .then_with(|| cost(a).total_cmp(&cost(b)))
            }
        })
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::work::PageSecs;

    fn infra_like() -> AutoScaling {
        AutoScaling {
            steps: vec![
                StepPolicy {
                    name: "scale-out-small".into(),
                    metric: AlarmMetric::Backlog,
                    comparison: Comparison::GreaterThan,
                    threshold: 20.0,
                    periods: 1,
                    adjustment: Adjustment::Change(1),
                    cooldown_secs: 60.0,
                },
                StepPolicy {
                    name: LARGE_STEP.into(),
                    metric: AlarmMetric::Backlog,
                    comparison: Comparison::GreaterThan,
                    threshold: 200.0,
                    periods: 1,
                    adjustment: Adjustment::Change(10),
                    cooldown_secs: 30.0,
                },
                StepPolicy {
                    name: "scale-to-zero".into(),
                    metric: AlarmMetric::Backlog,
                    comparison: Comparison::LessThanOrEqualTo,
                    threshold: 0.0,
                    periods: 10,
                    adjustment: Adjustment::Exact(0),
                    cooldown_secs: 300.0,
                },
            ],
            tracking: None,
            min_tasks: 0,
            max_tasks: 50,
        }
    }

    #[test]
    fn a_bigger_large_step_drains_a_long_burst_sooner() {
        let work = RunWork {
            pages: (1, 1),
            page_secs: PageSecs::Samples(vec![60.0]),
            overhead_secs: 0.0,
        };
        let fleet = FleetSettings {
            slots_per_task: 4,
            base_slots: 2,
            startup_secs: (60.0, 60.0),
            period_secs: 60.0,
            publish_offset_secs: 30.0,
            alarm_lag_secs: 60.0,
            tail_limit_secs: 3600.0,
        };
        let arrivals = vec![0.0; 4000];
        let found = search(
            step_candidates(&infra_like()),
            &arrivals,
            &work,
            |period| fleet.with_period(period, None),
            1,
            1.0,
            0.0,
        );
        assert_eq!(found.len(), 96);
        let best = &found[0];
        assert!(best.label.contains("+50"), "{}", best.label);
        assert!(best.label.contains("period 10 s"), "{}", best.label);
        let infra = found
            .iter()
            .find(|f| f.label == "step: > 200 -> +10, cooldown 30 s, to zero after 10, period 60 s")
            .unwrap();
        assert!(best.outcome.drain_secs < infra.outcome.drain_secs);
        // The same drain costs less when the idle fleet stops sooner.
        let sooner = found
            .iter()
            .find(|f| f.label == "step: > 200 -> +10, cooldown 30 s, to zero after 3, period 60 s")
            .unwrap();
        assert_eq!(sooner.outcome.drain_secs, infra.outcome.drain_secs);
        assert!(sooner.outcome.billed_task_secs < infra.outcome.billed_task_secs);
    }
}

//! Scaling policies as CloudWatch alarms and Application Auto Scaling apply
//! them to the Fargate service's desired count, one metric period at a time.
//!
//! The rules, from the AWS documentation (Application Auto Scaling user guide,
//! "How step scaling works" and `StepScalingPolicyConfiguration.Cooldown`):
//! - an alarm is in ALARM when its last `periods` datapoints all breach; a
//!   missing datapoint does not breach (`treat_missing_data = "notBreaching"`);
//! - while in ALARM the policy is invoked at every evaluation ("the adjustments
//!   can continue for additional alarm breaches until the alarm state returns
//!   to OK");
//! - after a scale-out, for the policy's cooldown, the capacity that scale-out
//!   added counts as part of the next one: the same policy adds nothing more
//!   until its cooldown ends;
//! - after a scale-in, scale-ins of that policy are blocked for its cooldown,
//!   but a scale-out goes ahead at once and ends every scale-in cooldown.
//!
//! Cooldowns are kept per policy, as infra/autoscaling.tf reads them (above 200
//! both of its scale-out alarms fire, +1 and +50, each on its own cooldown).
//!
//! Target tracking is modelled on the alarms AWS creates for it: "high" when
//! the metric is above the target for 3 consecutive 1-minute datapoints, "low"
//! when below 90 % of it for 15; either sets the capacity to
//! `ceil(running tasks x metric / target)` = `ceil(backlog / target)`.

/// What a step alarm watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlarmMetric {
    /// `QueueWaitingJobs`: runs queued or running.
    Backlog,
    /// 1 when runs wait and no worker task runs, else 0 (the from-zero alarm).
    Starved,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    GreaterThan,
    GreaterThanOrEqualTo,
    LessThan,
    LessThanOrEqualTo,
}

impl Comparison {
    /// CloudWatch's `comparison_operator` names.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "GreaterThanThreshold" => Comparison::GreaterThan,
            "GreaterThanOrEqualToThreshold" => Comparison::GreaterThanOrEqualTo,
            "LessThanThreshold" => Comparison::LessThan,
            "LessThanOrEqualToThreshold" => Comparison::LessThanOrEqualTo,
            _ => return None,
        })
    }

    fn breaches(self, value: f64, threshold: f64) -> bool {
        match self {
            Comparison::GreaterThan => value > threshold,
            Comparison::GreaterThanOrEqualTo => value >= threshold,
            Comparison::LessThan => value < threshold,
            Comparison::LessThanOrEqualTo => value <= threshold,
        }
    }
}

/// A step adjustment: `ChangeInCapacity` or `ExactCapacity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adjustment {
    Change(i64),
    Exact(u32),
}

/// One alarm and the step policy it invokes (one step covering the whole
/// breaching side of the threshold, as infra/ writes them).
#[derive(Debug, Clone, PartialEq)]
pub struct StepPolicy {
    pub name: String,
    pub metric: AlarmMetric,
    pub comparison: Comparison,
    pub threshold: f64,
    pub periods: u32,
    pub adjustment: Adjustment,
    pub cooldown_secs: f64,
}

/// Target tracking on backlog per running task.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetTracking {
    pub target: f64,
    pub scale_out_cooldown_secs: f64,
    pub scale_in_cooldown_secs: f64,
}

/// The datapoints of AWS's own target-tracking alarms (1-minute metrics).
const TRACKING_HIGH_PERIODS: usize = 3;
const TRACKING_LOW_PERIODS: usize = 15;
const TRACKING_LOW_RATIO: f64 = 0.9;

/// The policies of one scaling mode and the service's bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoScaling {
    pub steps: Vec<StepPolicy>,
    pub tracking: Option<TargetTracking>,
    pub min_tasks: u32,
    pub max_tasks: u32,
}

/// One metric period as the alarms see it: `None` when nothing was published.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Datapoint {
    /// QueueWaitingJobs (Maximum over the period).
    pub backlog: f64,
    /// ECS RunningTaskCount: tasks started and running.
    pub running_tasks: u32,
}

/// The last scaling activity of one policy, for its cooldown.
#[derive(Debug, Clone, Copy)]
struct Activity {
    at: f64,
    scaled_out: bool,
    /// The desired count before it (what a scale-out in cooldown adds to).
    from: u32,
}

/// The alarms' memory and the cooldowns: what turns datapoints into desired counts.
pub struct Scaler {
    policy: AutoScaling,
    history: Vec<Option<Datapoint>>,
    /// One per step policy, then the tracking's scale-out and scale-in.
    last: Vec<Option<Activity>>,
}

impl Scaler {
    pub fn new(policy: AutoScaling) -> Self {
        let slots = policy.steps.len() + 2;
        Scaler {
            policy,
            history: Vec::new(),
            last: vec![None; slots],
        }
    }

    /// One alarm evaluation at `now` with the newest datapoint the alarms can
    /// see; returns the new desired count.
    pub fn evaluate(&mut self, now: f64, datapoint: Option<Datapoint>, desired: u32) -> u32 {
        self.history.push(datapoint);
        let mut desired = desired;
        for i in 0..self.policy.steps.len() {
            let step = &self.policy.steps[i];
            if !self.in_alarm(step.periods as usize, |d| step_breaches(step, d)) {
                continue;
            }
            let (adjustment, cooldown) = (step.adjustment, step.cooldown_secs);
            let target = match adjustment {
                Adjustment::Change(by) => desired as i64 + by,
                Adjustment::Exact(n) => i64::from(n),
            };
            desired = self.apply(i, now, desired, target, cooldown, adjustment);
        }
        if let Some(tracking) = self.policy.tracking.clone() {
            desired = self.track(now, &tracking, desired);
        }
        desired
    }

    fn track(&mut self, now: f64, tracking: &TargetTracking, desired: u32) -> u32 {
        let per_task =
            |d: &Datapoint| (d.running_tasks > 0).then(|| d.backlog / f64::from(d.running_tasks));
        let Some(Some(latest)) = self.history.last().copied() else {
            return desired;
        };
        let wanted = (latest.backlog / tracking.target).ceil() as i64;
        let out_slot = self.policy.steps.len();
        let high = self.in_alarm(TRACKING_HIGH_PERIODS, |d| {
            per_task(d).is_some_and(|v| v > tracking.target)
        });
        if high && wanted > i64::from(desired) {
            let cooldown = tracking.scale_out_cooldown_secs;
            return self.apply(
                out_slot,
                now,
                desired,
                wanted,
                cooldown,
                Adjustment::Exact(0),
            );
        }
        let low = self.in_alarm(TRACKING_LOW_PERIODS, |d| {
            per_task(d).is_some_and(|v| v < tracking.target * TRACKING_LOW_RATIO)
        });
        if low && wanted < i64::from(desired) {
            let cooldown = tracking.scale_in_cooldown_secs;
            return self.apply(
                out_slot + 1,
                now,
                desired,
                wanted,
                cooldown,
                Adjustment::Exact(0),
            );
        }
        desired
    }

    /// Whether the last `periods` datapoints all breach (missing: not breaching).
    fn in_alarm(&self, periods: usize, breaches: impl Fn(&Datapoint) -> bool) -> bool {
        periods > 0
            && self.history.len() >= periods
            && self.history[self.history.len() - periods..]
                .iter()
                .all(|d| d.as_ref().is_some_and(&breaches))
    }

    /// Moves the desired count toward `target` under policy `slot`'s cooldown.
    fn apply(
        &mut self,
        slot: usize,
        now: f64,
        desired: u32,
        target: i64,
        cooldown: f64,
        adjustment: Adjustment,
    ) -> u32 {
        let bounds = (
            i64::from(self.policy.min_tasks),
            i64::from(self.policy.max_tasks),
        );
        let mut target = target.clamp(bounds.0, bounds.1) as u32;
        let cooling = self.last[slot].filter(|a| now < a.at + cooldown);
        if target > desired {
            if let Some(previous) = cooling.filter(|a| a.scaled_out) {
                // What that scale-out added counts: only a larger step adds more.
                let from_there = match adjustment {
                    Adjustment::Change(by) => i64::from(previous.from) + by,
                    Adjustment::Exact(_) => i64::from(target),
                };
                target = from_there.clamp(bounds.0, bounds.1) as u32;
                if target <= desired {
                    return desired;
                }
            }
            // A scale-out ends every scale-in cooldown.
            for activity in self.last.iter_mut() {
                if activity.is_some_and(|a| !a.scaled_out) {
                    *activity = None;
                }
            }
            let from = cooling.filter(|a| a.scaled_out).map_or(desired, |a| a.from);
            let at = cooling.filter(|a| a.scaled_out).map_or(now, |a| a.at);
            self.last[slot] = Some(Activity {
                at,
                scaled_out: true,
                from,
            });
            target
        } else if target < desired {
            if cooling.is_some() {
                return desired;
            }
            self.last[slot] = Some(Activity {
                at: now,
                scaled_out: false,
                from: desired,
            });
            target
        } else {
            desired
        }
    }
}

fn step_breaches(step: &StepPolicy, d: &Datapoint) -> bool {
    let value = match step.metric {
        AlarmMetric::Backlog => d.backlog,
        AlarmMetric::Starved => f64::from(u8::from(d.backlog > 0.0 && d.running_tasks == 0)),
    };
    step.comparison.breaches(value, step.threshold)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(
        name: &str,
        comparison: Comparison,
        threshold: f64,
        periods: u32,
        adjustment: Adjustment,
        cooldown: f64,
    ) -> StepPolicy {
        StepPolicy {
            name: name.into(),
            metric: AlarmMetric::Backlog,
            comparison,
            threshold,
            periods,
            adjustment,
            cooldown_secs: cooldown,
        }
    }

    fn scaler(steps: Vec<StepPolicy>) -> Scaler {
        Scaler::new(AutoScaling {
            steps,
            tracking: None,
            min_tasks: 0,
            max_tasks: 50,
        })
    }

    fn point(backlog: f64, running_tasks: u32) -> Option<Datapoint> {
        Some(Datapoint {
            backlog,
            running_tasks,
        })
    }

    /// Feeds one datapoint a minute; the desired count after each.
    fn feed(scaler: &mut Scaler, points: &[Option<Datapoint>]) -> Vec<u32> {
        let mut desired = 0;
        points
            .iter()
            .enumerate()
            .map(|(minute, p)| {
                desired = scaler.evaluate(minute as f64 * 60.0, *p, desired);
                desired
            })
            .collect()
    }

    #[test]
    fn a_scale_out_alarm_adds_at_every_evaluation_once_its_cooldown_is_over() {
        let mut s = scaler(vec![step(
            "out",
            Comparison::GreaterThan,
            20.0,
            1,
            Adjustment::Change(1),
            120.0,
        )]);
        // Cooldown 120 s with one evaluation a minute: every other minute.
        let got = feed(&mut s, &[point(100.0, 0); 5]);
        assert_eq!(got, vec![1, 1, 2, 2, 3]);
    }

    #[test]
    fn an_alarm_needs_all_its_evaluation_periods_to_breach_and_missing_data_does_not() {
        let mut s = scaler(vec![step(
            "out",
            Comparison::GreaterThan,
            20.0,
            3,
            Adjustment::Change(5),
            0.0,
        )]);
        let got = feed(
            &mut s,
            &[
                point(30.0, 0),
                point(30.0, 0),
                None,
                point(30.0, 0),
                point(30.0, 0),
                point(30.0, 0),
                point(10.0, 0),
            ],
        );
        assert_eq!(got, vec![0, 0, 0, 0, 0, 5, 5]);
    }

    #[test]
    fn a_scale_in_is_blocked_for_its_cooldown_but_a_scale_out_is_not_and_ends_it() {
        let mut s = scaler(vec![
            step(
                "out",
                Comparison::GreaterThan,
                20.0,
                1,
                Adjustment::Change(1),
                0.0,
            ),
            step(
                "in",
                Comparison::LessThan,
                10.0,
                1,
                Adjustment::Change(-1),
                300.0,
            ),
        ]);
        let mut desired = 10;
        desired = s.evaluate(0.0, point(5.0, 10), desired);
        assert_eq!(desired, 9, "first scale-in");
        desired = s.evaluate(60.0, point(5.0, 9), desired);
        assert_eq!(desired, 9, "blocked by its cooldown");
        desired = s.evaluate(120.0, point(50.0, 9), desired);
        assert_eq!(desired, 10, "a scale-out goes ahead during it");
        desired = s.evaluate(180.0, point(5.0, 10), desired);
        assert_eq!(desired, 9, "and ended the scale-in cooldown");
    }

    #[test]
    fn two_scale_out_policies_keep_their_own_cooldowns() {
        let mut s = scaler(vec![
            step(
                "small",
                Comparison::GreaterThan,
                20.0,
                1,
                Adjustment::Change(1),
                60.0,
            ),
            step(
                "large",
                Comparison::GreaterThan,
                200.0,
                1,
                Adjustment::Change(10),
                30.0,
            ),
        ]);
        let got = feed(&mut s, &[point(8000.0, 0); 6]);
        assert_eq!(got, vec![11, 22, 33, 44, 50, 50], "+11 a minute up to 50");
    }

    #[test]
    fn scale_to_zero_waits_for_its_evaluation_periods_of_an_empty_queue() {
        let mut s = scaler(vec![step(
            "zero",
            Comparison::LessThanOrEqualTo,
            0.0,
            10,
            Adjustment::Exact(0),
            300.0,
        )]);
        let mut desired = 7;
        for minute in 0..9 {
            desired = s.evaluate(f64::from(minute) * 60.0, point(0.0, 7), desired);
            assert_eq!(desired, 7, "minute {minute}");
        }
        assert_eq!(s.evaluate(540.0, point(0.0, 7), desired), 0);
    }

    #[test]
    fn the_from_zero_alarm_watches_runs_waiting_with_no_task_running() {
        let from_zero = StepPolicy {
            metric: AlarmMetric::Starved,
            ..step(
                "from-zero",
                Comparison::GreaterThanOrEqualTo,
                1.0,
                1,
                Adjustment::Change(1),
                60.0,
            )
        };
        let mut s = scaler(vec![from_zero]);
        assert_eq!(s.evaluate(0.0, point(0.0, 0), 0), 0, "nothing waits");
        assert_eq!(s.evaluate(60.0, point(5.0, 0), 0), 1);
        // The task is still starting (not running): it fires again.
        assert_eq!(s.evaluate(120.0, point(5.0, 0), 1), 2);
        assert_eq!(s.evaluate(180.0, point(5.0, 1), 2), 2, "a task runs");
    }

    #[test]
    fn target_tracking_scales_out_after_three_high_minutes_to_backlog_over_target() {
        let mut s = Scaler::new(AutoScaling {
            steps: vec![],
            tracking: Some(TargetTracking {
                target: 8.0,
                scale_out_cooldown_secs: 60.0,
                scale_in_cooldown_secs: 300.0,
            }),
            min_tasks: 0,
            max_tasks: 50,
        });
        assert_eq!(s.evaluate(0.0, point(100.0, 1), 1), 1);
        assert_eq!(s.evaluate(60.0, point(100.0, 1), 1), 1);
        assert_eq!(s.evaluate(120.0, point(100.0, 1), 1), 13, "ceil(100 / 8)");
        assert_eq!(s.evaluate(180.0, point(8000.0, 1), 13), 50, "capped");
        // Low for 15 minutes before scaling in.
        let mut desired = 50;
        for minute in 0..14 {
            desired = s.evaluate(240.0 + f64::from(minute) * 60.0, point(16.0, 50), desired);
            assert_eq!(desired, 50, "minute {minute}");
        }
        assert_eq!(s.evaluate(1200.0, point(16.0, 50), desired), 2);
    }
}

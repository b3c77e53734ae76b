use super::*;
use crate::policy::{Adjustment, AlarmMetric, Comparison, StepPolicy};
use crate::work::PageSecs;

/// Every run takes exactly `secs`.
fn runs_of(secs: f64) -> RunWork {
    RunWork {
        pages: (1, 1),
        page_secs: PageSecs::Samples(vec![secs]),
        overhead_secs: 0.0,
    }
}

fn settings(startup: f64) -> FleetSettings {
    FleetSettings {
        slots_per_task: 4,
        base_slots: 0,
        startup_secs: (startup, startup),
        period_secs: 60.0,
        publish_offset_secs: 30.0,
        alarm_lag_secs: 60.0,
        tail_limit_secs: 3600.0,
    }
}

fn step(
    comparison: Comparison,
    threshold: f64,
    periods: u32,
    adjustment: Adjustment,
) -> StepPolicy {
    StepPolicy {
        name: "test".into(),
        metric: AlarmMetric::Backlog,
        comparison,
        threshold,
        periods,
        adjustment,
        cooldown_secs: 0.0,
    }
}

/// +1 task whenever anything waits; 0 tasks after 10 empty minutes.
fn out_and_to_zero() -> Scaling {
    Scaling::Auto(AutoScaling {
        steps: vec![
            step(Comparison::GreaterThan, 0.0, 1, Adjustment::Change(1)),
            step(Comparison::LessThanOrEqualTo, 0.0, 10, Adjustment::Exact(0)),
        ],
        tracking: None,
        min_tasks: 0,
        max_tasks: 50,
    })
}

#[test]
fn a_fixed_fleet_drains_in_work_over_slots() {
    let out = simulate(
        &[0.0; 400],
        &runs_of(1.0),
        &Scaling::Fixed { tasks: 4 },
        &settings(0.0),
        1,
    );
    assert_eq!(out.drain_secs, 25.0, "400 one-second runs on 16 slots");
    assert_eq!(out.unfinished_runs, 0);
    assert_eq!(
        out.billed_task_secs,
        4.0 * MIN_BILLED_SECS,
        "a minute at least"
    );
    assert_eq!(out.fleet_at_zero_secs, Some(25.0));
}

#[test]
fn a_task_takes_runs_only_after_its_start_up_and_is_billed_from_launch() {
    let out = simulate(
        &[0.0; 8],
        &runs_of(30.0),
        &Scaling::Fixed { tasks: 1 },
        &settings(100.0),
        1,
    );
    assert_eq!(out.drain_secs, 160.0, "ready at 100, two rounds of 30 s");
    assert_eq!(out.billed_task_secs, 160.0);
    assert!(
        (out.mean_wait_secs - 115.0).abs() < 1e-9,
        "{}",
        out.mean_wait_secs
    );
}

#[test]
fn the_alarm_sees_the_backlog_a_period_after_the_api_published_it() {
    // Published at 30 s, seen at 90 s: the first task launches then and is
    // ready at 100 s; 50 one-second runs on its 4 slots end at 113 s. The
    // datapoint of 90 s (50 still waiting) is seen at 150 s: a second task
    // starts for nothing.
    let out = simulate(
        &[0.0; 50],
        &runs_of(1.0),
        &out_and_to_zero(),
        &settings(10.0),
        1,
    );
    assert_eq!(out.drain_secs, 113.0);
    assert_eq!(out.tasks_launched, 2);
    assert_eq!(out.peak_tasks, 2);
    // Empty from the datapoint of 150 s; the tenth empty one (690 s) is seen
    // at 750 s and both tasks stop.
    assert_eq!(out.fleet_at_zero_secs, Some(750.0));
    assert_eq!(out.billed_task_secs, (750.0 - 90.0) + (750.0 - 150.0));
}

#[test]
fn without_a_scale_to_zero_policy_the_fleet_keeps_its_tasks() {
    let Scaling::Auto(mut policy) = out_and_to_zero() else {
        unreachable!()
    };
    policy.steps.pop();
    let out = simulate(
        &[0.0; 50],
        &runs_of(1.0),
        &Scaling::Auto(policy),
        &settings(10.0),
        1,
    );
    assert_eq!(out.drain_secs, 113.0);
    assert_eq!(
        out.fleet_at_zero_secs, None,
        "still running at the tail limit"
    );
}

#[test]
fn the_ec2_hosts_workers_start_at_once_and_cost_nothing_on_fargate() {
    let out = simulate(
        &[0.0; 10],
        &runs_of(2.0),
        &Scaling::Fixed { tasks: 0 },
        &FleetSettings {
            base_slots: 2,
            ..settings(60.0)
        },
        1,
    );
    assert_eq!(out.drain_secs, 10.0);
    assert_eq!(out.billed_task_secs, 0.0);
    assert_eq!(out.peak_tasks, 0);
}

#[test]
fn a_busy_task_is_protected_from_scale_in_and_stops_when_idle() {
    let settings = settings(0.0);
    let work = runs_of(1.0);
    let mut sim = Sim {
        settings: &settings,
        work: &work,
        rng: StdRng::seed_from_u64(1),
        now: 0.0,
        seq: 0,
        events: BinaryHeap::new(),
        workers: vec![Worker {
            slots: 0,
            busy: 0,
            ready: true,
            fargate: false,
            launched_at: 0.0,
            stopped_at: None,
        }],
        queue: VecDeque::new(),
        desired: 3,
        running_runs: 0,
        done: 0,
        waits: (0.0, 0.0),
        peak_tasks: 0,
        launched: 0,
    };
    sim.reconcile();
    assert_eq!(sim.live_tasks(), 3);
    // Tasks 1 and 2 ready; task 3 still starting.
    sim.workers[1].ready = true;
    sim.workers[2].ready = true;
    sim.workers[1].busy = 2;
    sim.desired = 1;
    sim.reconcile();
    assert!(
        sim.workers[3].stopped_at.is_some(),
        "the starting task first"
    );
    assert!(sim.workers[2].stopped_at.is_some(), "then the idle one");
    assert!(sim.workers[1].stopped_at.is_none(), "the busy one stays");
    sim.desired = 0;
    sim.reconcile();
    assert!(sim.workers[1].stopped_at.is_none(), "protected while busy");
    sim.workers[1].busy = 0;
    sim.now = 5.0;
    sim.reconcile();
    assert_eq!(sim.workers[1].stopped_at, Some(5.0), "stopped once idle");
}

#[test]
fn the_same_seed_gives_the_same_outcome_and_another_seed_another() {
    let work = RunWork {
        pages: (1, 5),
        page_secs: PageSecs::LogNormal { mean: 2.0, cv: 0.5 },
        overhead_secs: 0.1,
    };
    let settings = FleetSettings {
        startup_secs: (40.0, 90.0),
        base_slots: 2,
        ..settings(0.0)
    };
    let run = |seed| simulate(&[0.0; 2000], &work, &out_and_to_zero(), &settings, seed);
    assert_eq!(run(7), run(7));
    assert_ne!(run(7).drain_secs, run(8).drain_secs);
}

#[test]
fn a_fleet_with_no_slot_at_all_gives_up_with_its_runs_unfinished() {
    let out = simulate(
        &[0.0; 3],
        &runs_of(1.0),
        &Scaling::Fixed { tasks: 0 },
        &settings(0.0),
        1,
    );
    assert_eq!(out.unfinished_runs, 3);
}

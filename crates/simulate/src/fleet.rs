//! The event loop: runs arrive, wait in the queue and take free slots; the
//! api publishes the backlog once a period, the alarms see it after a lag and
//! move the desired count; ECS starts tasks (after a start-up delay) or stops
//! idle ones. Time is in seconds from the first arrival.
//!
//! What it leaves out, on purpose: dispatch latency (the dispatcher moves runs
//! every 250 ms, small against a crawl), site rate limits and per-site
//! concurrency caps, retries, and Fargate Spot interruptions.

use std::{cmp::Ordering, collections::BinaryHeap, collections::VecDeque};

use rand::{Rng, SeedableRng, rngs::StdRng};

use super::policy::{AutoScaling, Datapoint, Scaler};
use super::work::RunWork;

/// How the Fargate service's desired count is decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Scaling {
    /// CloudWatch alarms and Application Auto Scaling.
    Auto(AutoScaling),
    /// `tasks` tasks launched at t = 0, stopped when the last run ends (the
    /// ideal fleet, the local check, or none at all: the EC2 host alone).
    Fixed { tasks: u32 },
}

/// The fleet and CloudWatch's timing.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetSettings {
    /// Crawls per Fargate task (WORKER_CONCURRENCY).
    pub slots_per_task: u32,
    /// Crawls the EC2 host's base workers run (workers x their concurrency).
    pub base_slots: u32,
    /// A task's start-up (image pull, ENI, container start), uniform in this range.
    pub startup_secs: (f64, f64),
    /// CloudWatch's metric period and the api's publishing interval.
    pub period_secs: f64,
    /// When in its period the api publishes, relative to t = 0 (taken modulo
    /// the period).
    pub publish_offset_secs: f64,
    /// From a datapoint's publication to the alarm evaluation that first sees it.
    pub alarm_lag_secs: f64,
    /// Give up this long after the last run ended if the fleet is not at zero.
    pub tail_limit_secs: f64,
}

impl FleetSettings {
    /// The same fleet under alarms of `period_secs`: the api publishes once a
    /// period, and the alarms see a datapoint `alarm_lag_secs` after it is
    /// published, one period when `None`.
    pub fn with_period(&self, period_secs: f64, alarm_lag_secs: Option<f64>) -> FleetSettings {
        FleetSettings {
            period_secs,
            alarm_lag_secs: alarm_lag_secs.unwrap_or(period_secs),
            ..self.clone()
        }
    }
}

/// What one simulation gives.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub runs: usize,
    /// Runs still queued or running when the simulation gave up (0: drained).
    pub unfinished_runs: usize,
    /// From the first arrival to the last run's end.
    pub drain_secs: f64,
    /// Most Fargate tasks at once (starting or running).
    pub peak_tasks: u32,
    pub tasks_launched: u32,
    /// Fargate billing: per second from launch to stop, at least a minute a task.
    pub billed_task_secs: f64,
    /// When the last task stopped (None: still running at the tail limit).
    pub fleet_at_zero_secs: Option<f64>,
    pub mean_wait_secs: f64,
    pub max_wait_secs: f64,
}

/// A fleet that cannot drain (no slot at all) is given up on after a week.
const HORIZON_SECS: f64 = 7.0 * 86_400.0;

/// Fargate bills per second with a one-minute minimum.
pub const MIN_BILLED_SECS: f64 = 60.0;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Event {
    Arrival,
    RunDone { worker: usize },
    TaskReady { worker: usize },
    Publish,
}

struct Scheduled {
    at: f64,
    seq: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    /// Earliest first (BinaryHeap is a max-heap), then in the order scheduled.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .at
            .total_cmp(&self.at)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// The EC2 host's workers (index 0) or one Fargate task.
struct Worker {
    slots: u32,
    busy: u32,
    ready: bool,
    fargate: bool,
    launched_at: f64,
    stopped_at: Option<f64>,
}

impl Worker {
    fn free(&self) -> u32 {
        if self.ready && self.stopped_at.is_none() {
            self.slots - self.busy
        } else {
            0
        }
    }

    fn live_task(&self) -> bool {
        self.fargate && self.stopped_at.is_none()
    }
}

struct Sim<'a> {
    settings: &'a FleetSettings,
    work: &'a RunWork,
    rng: StdRng,
    now: f64,
    seq: u64,
    events: BinaryHeap<Scheduled>,
    workers: Vec<Worker>,
    /// Arrival times of the runs waiting for a slot.
    queue: VecDeque<f64>,
    desired: u32,
    running_runs: usize,
    done: usize,
    waits: (f64, f64),
    peak_tasks: u32,
    launched: u32,
}

impl Sim<'_> {
    fn at(&mut self, at: f64, event: Event) {
        self.seq += 1;
        self.events.push(Scheduled {
            at,
            seq: self.seq,
            event,
        });
    }

    fn live_tasks(&self) -> u32 {
        self.workers.iter().filter(|w| w.live_task()).count() as u32
    }

    fn backlog(&self) -> usize {
        self.queue.len() + self.running_runs
    }

    /// Starts waiting runs on free slots, each slot as likely as any other
    /// (the workers poll the same queue).
    fn dispatch(&mut self) {
        while !self.queue.is_empty() {
            let free: u32 = self.workers.iter().map(Worker::free).sum();
            if free == 0 {
                return;
            }
            let mut pick = self.rng.random_range(0..free);
            let worker = self
                .workers
                .iter()
                .position(|w| {
                    if pick < w.free() {
                        return true;
                    }
                    pick -= w.free();
                    false
                })
                .expect("a free slot was counted");
            let arrived = self.queue.pop_front().expect("not empty");
            let wait = self.now - arrived;
            self.waits = (self.waits.0 + wait, self.waits.1.max(wait));
            self.workers[worker].busy += 1;
            self.running_runs += 1;
            let secs = self.work.sample(&mut self.rng);
            self.at(self.now + secs, Event::RunDone { worker });
        }
    }

    /// Brings the live tasks to the desired count: launches what is missing;
    /// stops what is over it, starting tasks first, then idle ones. A task
    /// holding runs is protected from scale-in (the worker's ECS task
    /// protection) and stops when it is idle.
    fn reconcile(&mut self) {
        let live = self.live_tasks();
        if live < self.desired {
            for _ in live..self.desired {
                let (min, max) = self.settings.startup_secs;
                let startup = if max > min {
                    self.rng.random_range(min..=max)
                } else {
                    min
                };
                self.workers.push(Worker {
                    slots: self.settings.slots_per_task,
                    busy: 0,
                    ready: false,
                    fargate: true,
                    launched_at: self.now,
                    stopped_at: None,
                });
                let worker = self.workers.len() - 1;
                self.at(self.now + startup, Event::TaskReady { worker });
                self.launched += 1;
            }
            self.peak_tasks = self.peak_tasks.max(self.desired);
            return;
        }
        let mut excess = live - self.desired;
        let now = self.now;
        for starting in [true, false] {
            for w in self.workers.iter_mut().rev() {
                if excess == 0 {
                    return;
                }
                if w.live_task() && w.ready != starting && w.busy == 0 {
                    w.stopped_at = Some(now);
                    excess -= 1;
                }
            }
        }
    }

    fn stop_all_tasks(&mut self) {
        let now = self.now;
        for w in self.workers.iter_mut().filter(|w| w.live_task()) {
            w.stopped_at = Some(now);
        }
    }
}

/// Simulates runs queued at `arrivals` (seconds, ascending) on the fleet.
pub fn simulate(
    arrivals: &[f64],
    work: &RunWork,
    scaling: &Scaling,
    settings: &FleetSettings,
    seed: u64,
) -> Outcome {
    let mut sim = Sim {
        settings,
        work,
        rng: StdRng::seed_from_u64(seed),
        now: 0.0,
        seq: 0,
        events: BinaryHeap::new(),
        workers: vec![Worker {
            slots: settings.base_slots,
            busy: 0,
            ready: true,
            fargate: false,
            launched_at: 0.0,
            stopped_at: None,
        }],
        queue: VecDeque::new(),
        desired: 0,
        running_runs: 0,
        done: 0,
        waits: (0.0, 0.0),
        peak_tasks: 0,
        launched: 0,
    };
    let first = arrivals.first().copied().unwrap_or(0.0);
    for &t in arrivals {
        sim.at(t - first, Event::Arrival);
    }
    let mut scaler = None;
    match scaling {
        Scaling::Fixed { tasks } => {
            sim.desired = *tasks;
            sim.reconcile();
        }
        Scaling::Auto(policy) => {
            scaler = Some(Scaler::new(policy.clone()));
            sim.desired = policy.min_tasks;
            sim.reconcile();
            sim.at(
                settings.publish_offset_secs % settings.period_secs,
                Event::Publish,
            );
        }
    }
    // Datapoints published, waiting for the alarm evaluation that sees them.
    let mut published: VecDeque<(f64, Datapoint)> = VecDeque::new();
    let mut drained_at = if arrivals.is_empty() { Some(0.0) } else { None };

    while let Some(Scheduled { at, event, .. }) = sim.events.pop() {
        sim.now = at;
        let limit = drained_at.map_or(HORIZON_SECS, |d| d + settings.tail_limit_secs);
        if at > limit {
            break;
        }
        match event {
            Event::Arrival => {
                sim.queue.push_back(at);
                sim.dispatch();
            }
            Event::RunDone { worker } => {
                sim.workers[worker].busy -= 1;
                sim.running_runs -= 1;
                sim.done += 1;
                sim.dispatch();
                if sim.done == arrivals.len() {
                    drained_at = Some(at);
                    if matches!(scaling, Scaling::Fixed { .. }) {
                        sim.desired = 0;
                        sim.stop_all_tasks();
                    }
                }
                sim.reconcile();
            }
            Event::TaskReady { worker } => {
                if sim.workers[worker].stopped_at.is_none() {
                    sim.workers[worker].ready = true;
                    sim.dispatch();
                    sim.reconcile();
                }
            }
            Event::Publish => {
                let running_tasks = sim
                    .workers
                    .iter()
                    .filter(|w| w.live_task() && w.ready)
                    .count() as u32;
                published.push_back((
                    at,
                    Datapoint {
                        backlog: sim.backlog() as f64,
                        running_tasks,
                    },
                ));
                // The alarms evaluate once a period, on the newest datapoint
                // old enough to be seen (or on nothing: missing data).
                let mut seen = None;
                while published
                    .front()
                    .is_some_and(|(t, _)| *t + settings.alarm_lag_secs <= at)
                {
                    seen = published.pop_front().map(|(_, d)| d);
                }
                if let Some(scaler) = scaler.as_mut() {
                    sim.desired = scaler.evaluate(at, seen, sim.desired);
                }
                sim.reconcile();
                if drained_at.is_some() && sim.desired == 0 && sim.live_tasks() == 0 {
                    break;
                }
                sim.at(at + settings.period_secs, Event::Publish);
            }
        }
        if drained_at.is_some() && scaler.is_none() && sim.live_tasks() == 0 {
            break;
        }
    }

    let end = sim.now;
    let billed_task_secs = sim
        .workers
        .iter()
        .filter(|w| w.fargate)
        .map(|w| (w.stopped_at.unwrap_or(end) - w.launched_at).max(MIN_BILLED_SECS))
        .fold(0.0, |total, secs| total + secs);
    let fleet_at_zero_secs = drained_at.filter(|_| sim.live_tasks() == 0).map(|drained| {
        sim.workers
            .iter()
            .filter_map(|w| w.stopped_at)
            .fold(drained, f64::max)
    });
    Outcome {
        runs: arrivals.len(),
        unfinished_runs: arrivals.len() - sim.done,
        drain_secs: drained_at.unwrap_or(end),
        peak_tasks: sim.peak_tasks,
        tasks_launched: sim.launched,
        billed_task_secs,
        fleet_at_zero_secs,
        mean_wait_secs: if arrivals.is_empty() {
            0.0
        } else {
            sim.waits.0 / arrivals.len() as f64
        },
        max_wait_secs: sim.waits.1,
    }
}

#[cfg(test)]
mod tests;

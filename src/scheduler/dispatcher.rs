//! Moves queued runs from Postgres into Redis, never more than the window of
//! each lane (browser crawls, http/json crawls), and never more runs of a site
//! at once than the site allows.

use std::time::{Duration, Instant};

use apalis::prelude::TaskSink;
use apalis_redis::ConnectionManager;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::{
    config::{CommonConfig, SchedulerConfig},
    ops::metrics::metrics,
    queue::{self, Job, JobQueue, Lane},
    store::{self, workers::Slots},
};

use super::heartbeat::Pulse;

/// Hard cap of the window: apalis-redis 1.0 breaks near 8,000 due jobs.
pub const MAX_WINDOW: i64 = 1000;
/// Window while no worker is seen (scale from zero): enough to wake the first one.
const MIN_WINDOW: i64 = 10;
/// Window per unit of fleet concurrency when `DISPATCH_WINDOW` is not set.
const WINDOW_PER_SLOT: i64 = 4;
/// How often the fleet's size and lost messages are looked at.
const SLOW_CHECKS_EVERY: Duration = Duration::from_secs(5);
/// How soon a lane whose last fill pushed jobs is looked at again: fast
/// crawls empty a window within a tick, and would wait out the rest of it.
/// Between ticks a lane is filled only once half its window is free: each
/// fill reads the backlog, and a few big fills cost less than many small.
const REFILL_AFTER: Duration = Duration::from_millis(10);

#[derive(Debug, Clone)]
pub struct DispatchSettings {
    pub queue_name: String,
    /// Fixed window; `None` follows the fleet's concurrency.
    pub window: Option<u32>,
    pub interval: Duration,
    pub claim_timeout: Duration,
}

impl DispatchSettings {
    pub fn from_config(common: &CommonConfig, config: &SchedulerConfig) -> Self {
        Self {
            queue_name: common.queue_name.clone(),
            window: config.dispatch_window,
            interval: config.dispatch_interval(),
            claim_timeout: config.dispatch_claim_timeout(),
        }
    }
}

/// The window of a lane whose workers have `fleet_concurrency` slots in all.
pub fn window_for(settings: &DispatchSettings, fleet_concurrency: i64) -> i64 {
    let window = match settings.window {
        Some(fixed) => fixed as i64,
        None => (fleet_concurrency * WINDOW_PER_SLOT).max(MIN_WINDOW),
    };
    window.clamp(1, MAX_WINDOW)
}

pub struct Dispatcher {
    pool: PgPool,
    lanes: Vec<(Lane, JobQueue)>,
    settings: DispatchSettings,
    /// A beat per turn of the loop (the heartbeat's).
    pulse: Pulse,
}

impl Dispatcher {
    pub fn new(pool: PgPool, redis: ConnectionManager, settings: DispatchSettings) -> Self {
        let lanes = Lane::ALL
            .into_iter()
            .map(|lane| {
                let queue =
                    queue::storage(redis.clone(), &lane.queue_name(&settings.queue_name), 1);
                (lane, queue)
            })
            .collect();
        Self {
            pool,
            lanes,
            settings,
            pulse: Pulse::default(),
        }
    }

    /// The turns of [`Self::run`]'s loop.
    pub fn pulse(&self) -> Pulse {
        self.pulse.clone()
    }

    pub async fn run(mut self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let mut fleet = Slots::default();
        let mut last_slow_check: Option<Instant> = None;
        // Lanes whose last fill pushed jobs: their workers drain the window
        // faster than the tick, so they are filled again soon.
        let mut hot = vec![false; self.lanes.len()];
        let mut next_tick = Instant::now();
        while !shutdown.is_cancelled() {
            self.pulse.beat();
            let tick = Instant::now() >= next_tick;
            if tick {
                next_tick = Instant::now() + self.settings.interval;
            }
            if last_slow_check.is_none_or(|t| t.elapsed() >= SLOW_CHECKS_EVERY) {
                last_slow_check = Some(Instant::now());
                match self.slow_checks().await {
                    Ok(slots) => fleet = slots,
                    Err(e) => tracing::warn!(error = ?e, "dispatcher checks failed"),
                }
            }
            for (index, lane_hot) in hot.iter_mut().enumerate() {
                if !tick && !*lane_hot {
                    continue;
                }
                let lane = self.lanes[index].0;
                let window = window_for(&self.settings, lane_slots(fleet, lane));
                metrics()
                    .dispatch_window
                    .with_label_values(&[lane.as_str()])
                    .set(window);
                let least = match tick {
                    true => 1,
                    false => (window / 2).max(1),
                };
                *lane_hot = match self.dispatch_once(lane, window, least).await {
                    Ok(n) if n > 0 => {
                        tracing::debug!(dispatched = n, window, lane = lane.as_str(), "dispatched");
                        true
                    }
                    // Not filled yet: still hot until the next tick.
                    Ok(_) if !tick => *lane_hot,
                    Ok(_) => false,
                    Err(e) => {
                        tracing::warn!(error = ?e, lane = lane.as_str(), "dispatch failed; retrying");
                        false
                    }
                };
            }
            let pause = match hot.iter().any(|h| *h) {
                true => REFILL_AFTER.min(self.settings.interval),
                false => next_tick.saturating_duration_since(Instant::now()),
            };
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = tokio::time::sleep(pause) => {}
            }
        }
        Ok(())
    }

    /// Re-dispatches lost messages and reads the fleet's slots.
    async fn slow_checks(&self) -> anyhow::Result<Slots> {
        let lost =
            store::runs::redispatch_unclaimed(&self.pool, self.settings.claim_timeout).await?;
        if lost > 0 {
            tracing::warn!(
                runs = lost,
                "dispatched runs never claimed; dispatching them again"
            );
        }
        Ok(store::workers::fleet_slots(&self.pool).await?)
    }

    /// Fills one lane's window once, when at least `least` of it is free;
    /// returns how many jobs were pushed.
    pub async fn dispatch_once(
        &mut self,
        lane: Lane,
        window: i64,
        least: i64,
    ) -> anyhow::Result<usize> {
        let modes = lane.render_modes();
        let in_redis = store::runs::count_in_redis(&self.pool, modes).await?;
        let room = window - in_redis;
        if room <= 0 || room < least {
            return Ok(0);
        }
        let runs = store::runs::take_for_dispatch(&self.pool, modes, room).await?;
        if runs.is_empty() {
            return Ok(0);
        }
        let jobs = runs
            .iter()
            .map(|r| Job::crawl(r.run_id, r.attempt, r.of_list))
            .collect();
        let queue = &mut self
            .lanes
            .iter_mut()
            .find(|(l, _)| *l == lane)
            .expect("every lane has a queue")
            .1;
        if let Err(e) = queue.push_bulk(jobs).await {
            let ids: Vec<i64> = runs.iter().map(|r| r.run_id).collect();
            store::runs::undispatch(&self.pool, &ids).await?;
            return Err(anyhow::anyhow!(
                "pushing {} jobs to Redis: {e:?}",
                ids.len()
            ));
        }
        metrics().dispatched.inc_by(runs.len() as u64);
        Ok(runs.len())
    }
}

fn lane_slots(fleet: Slots, lane: Lane) -> i64 {
    match lane {
        Lane::Browser => fleet.browser,
        Lane::Http => fleet.http,
    }
}

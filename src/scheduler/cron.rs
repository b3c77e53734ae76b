//! Keeps one tokio-cron-scheduler job per enabled keyword, in step with
//! Postgres so API changes take effect without a restart.

use std::{collections::HashMap, time::Duration};

use anyhow::Context;
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use sqlx::PgPool;
use tokio_cron_scheduler::{Job, JobScheduler};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::{
    domain::{keyword::CronSchedule, run::Trigger},
    events::EventPublisher,
    ops::metrics::metrics,
    store::{self, keywords::ScheduleEntry, runs::QueueOutcome},
};

pub(super) async fn run(
    pool: PgPool,
    events: EventPublisher,
    sync_every: Duration,
    default_max_attempts: i32,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut scheduler = JobScheduler::new()
        .await
        .context("creating the cron scheduler")?;
    scheduler
        .start()
        .await
        .context("starting the cron scheduler")?;
    let mut jobs: HashMap<i64, (Uuid, ScheduleEntry)> = HashMap::new();
    loop {
        if let Err(e) = sync(&scheduler, &mut jobs, &pool, &events, default_max_attempts).await {
            tracing::warn!(error = ?e, "could not sync keyword schedules; retrying");
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(sync_every) => {}
        }
    }
    scheduler
        .shutdown()
        .await
        .context("stopping the cron scheduler")?;
    Ok(())
}

/// Adds, replaces and removes cron jobs so they match the enabled keywords.
async fn sync(
    scheduler: &JobScheduler,
    jobs: &mut HashMap<i64, (Uuid, ScheduleEntry)>,
    pool: &PgPool,
    events: &EventPublisher,
    default_max_attempts: i32,
) -> anyhow::Result<()> {
    let wanted: HashMap<i64, ScheduleEntry> = store::keywords::enabled_schedules(pool)
        .await?
        .into_iter()
        .map(|entry| (entry.id, entry))
        .collect();
    let stale: Vec<i64> = jobs
        .iter()
        .filter(|(id, (_, entry))| wanted.get(id) != Some(entry))
        .map(|(id, _)| *id)
        .collect();
    for id in stale {
        let (job_id, _) = jobs.remove(&id).expect("listed above");
        scheduler.remove(&job_id).await?;
        tracing::info!(keyword_id = id, "cron job removed");
    }
    for (id, entry) in wanted {
        if jobs.contains_key(&id) {
            continue;
        }
        let (pool, events) = (pool.clone(), events.clone());
        let job = Job::new_async(entry.schedule.as_str(), move |_, _| {
            let (pool, events) = (pool.clone(), events.clone());
            Box::pin(async move {
                match fire_keyword(&pool, id, Utc::now(), default_max_attempts).await {
                    Ok(Some(outcome)) => {
                        for run in outcome.queued.iter().chain(&outcome.skipped) {
                            events.run_updated(run).await;
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::error!(keyword_id = id, error = ?e, "scheduled crawl not queued")
                    }
                }
            })
        });
        match job {
            Ok(job) => {
                let job_id = scheduler.add(job).await?;
                tracing::info!(keyword_id = id, schedule = %entry.schedule, "cron job added");
                jobs.insert(id, (job_id, entry));
            }
            // Stored schedules were checked by the API; one that fails here is logged, not fatal.
            Err(e) => tracing::error!(keyword_id = id, error = ?e, "unusable schedule"),
        }
    }
    Ok(())
}

/// Queues a keyword for the schedule period that `fired_at` falls in. A site
/// that already completed a run since the period started gets a `skipped` run:
/// the period's result already exists. `None` when the keyword is gone or
/// disabled.
pub async fn fire_keyword(
    pool: &PgPool,
    keyword_id: i64,
    fired_at: DateTime<Utc>,
    default_max_attempts: i32,
) -> anyhow::Result<Option<QueueOutcome>> {
    let Some((schedule, enabled)) = store::keywords::schedule_of(pool, keyword_id).await? else {
        return Ok(None);
    };
    if !enabled {
        return Ok(None);
    }
    let schedule = CronSchedule::parse(&schedule)?;
    // Cron fires on whole seconds; rounding absorbs the timer's jitter either side.
    let tick = fired_at
        .duration_round(TimeDelta::seconds(1))
        .unwrap_or(fired_at);
    let period_start = schedule.period_start(tick).unwrap_or(tick);
    let outcome = store::runs::queue_for_keyword(
        pool,
        keyword_id,
        Trigger::Schedule,
        Some(period_start),
        default_max_attempts,
    )
    .await?;
    if let Some(outcome) = &outcome {
        let scheduled = &metrics().scheduled_runs;
        scheduled
            .with_label_values(&["queued"])
            .inc_by(outcome.queued.len() as u64);
        scheduled
            .with_label_values(&["skipped"])
            .inc_by(outcome.skipped.len() as u64);
        scheduled
            .with_label_values(&["already_active"])
            .inc_by(outcome.already_active.len() as u64);
        scheduled
            .with_label_values(&["site_disabled"])
            .inc_by(outcome.disabled_sites.len() as u64);
        tracing::info!(
            keyword_id,
            queued = outcome.queued.len(),
            skipped = outcome.skipped.len(),
            already_active = outcome.already_active.len(),
            sites_disabled = outcome.disabled_sites.len(),
            %period_start,
            "scheduled crawl"
        );
    }
    Ok(outcome)
}

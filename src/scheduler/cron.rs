//! The cron loop: sleeps until the earliest next fire among the enabled
//! keywords and URL lists, then queues it. Both are re-read from Postgres
//! every `SCHEDULE_SYNC_INTERVAL_MS`, so API changes apply without a restart.
//! Only the leader runs it. A new leader fires what was missed within
//! `SCHEDULE_CATCH_UP_SECS` (the previous leader died or was being replaced);
//! `store::runs::queue_scheduled` (and `queue_list_scheduled`) fire each
//! period once, whoever fires it.
//!
//! Our own loop rather than a cron crate's: fires are computed in each
//! schedule's zone by `KeywordSchedule` (one instant per wall time across
//! daylight-saving changes, jitter included), the same code the API shows
//! the next fire times with.

use std::{collections::HashMap, time::Duration};

use chrono::{DateTime, TimeDelta, Utc};
use sqlx::PgPool;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::{
    domain::schedule::{Fire, KeywordSchedule},
    events::EventPublisher,
    ops::metrics::metrics,
    store::{
        self,
        keywords::ScheduleEntry,
        runs::{ListQueued, ScheduledFire},
    },
};

use super::heartbeat::Pulse;

/// How long a fire that could not be queued (Postgres unreachable) waits
/// before it is tried again, while it is within the catch-up window.
const RETRY_AFTER: TimeDelta = TimeDelta::seconds(5);

/// How the cron loop runs.
pub(super) struct CronSettings {
    /// How often keywords and lists are re-read.
    pub sync_every: Duration,
    /// How late a fire may still be queued.
    pub catch_up: TimeDelta,
    pub default_max_attempts: i32,
}

/// What a schedule fires: a keyword's searches, or a URL list's run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Subject {
    Keyword(i64),
    List(i64),
}

impl Subject {
    fn id(self) -> i64 {
        match self {
            Subject::Keyword(id) | Subject::List(id) => id,
        }
    }
}

/// One enabled keyword or list: its schedule, and the fire it waits for.
struct Planned {
    entry: ScheduleEntry,
    /// `None` when the stored schedule does not parse (logged once).
    schedule: Option<KeywordSchedule>,
    next: Option<Fire>,
    /// When to try `next`: its `at`, later after a failed try.
    wake: Option<DateTime<Utc>>,
}

pub(super) async fn run(
    pool: PgPool,
    events: EventPublisher,
    settings: CronSettings,
    pulse: Pulse,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut plans: HashMap<Subject, Planned> = HashMap::new();
    let mut next_sync = Instant::now();
    loop {
        pulse.beat();
        if Instant::now() >= next_sync {
            if let Err(e) = sync(&mut plans, &pool, settings.catch_up).await {
                tracing::warn!(error = ?e, "could not sync schedules; retrying");
            }
            next_sync = Instant::now() + settings.sync_every;
        }
        fire_due(&mut plans, &pool, &events, &settings).await;
        // Until the soonest fire, and never past the next sync. The wall
        // clock is read again on every turn, so a clock step is noticed at
        // the next sync at the latest.
        let now = Utc::now();
        let wake = plans
            .values()
            .filter_map(|plan| plan.wake)
            .min()
            .map(|at| Instant::now() + (at - now).to_std().unwrap_or_default())
            .map_or(next_sync, |at| at.min(next_sync));
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep_until(wake) => {}
        }
    }
    Ok(())
}

/// Plans the enabled keywords and lists: drops the gone, disabled and
/// changed ones, and plans the new and changed ones from their first fire
/// after the catch-up window opened or they were written, whichever is later
/// (a fire of a previous schedule is not this one's).
async fn sync(
    plans: &mut HashMap<Subject, Planned>,
    pool: &PgPool,
    catch_up: TimeDelta,
) -> anyhow::Result<()> {
    let keywords = store::keywords::enabled_schedules(pool).await?;
    let lists = store::url_lists::enabled_schedules(pool).await?;
    let wanted: HashMap<Subject, ScheduleEntry> = (keywords.into_iter())
        .map(|entry| (Subject::Keyword(entry.id), entry))
        .chain(
            lists
                .into_iter()
                .map(|entry| (Subject::List(entry.id), entry)),
        )
        .collect();
    plans.retain(|subject, plan| {
        let keep = wanted.get(subject) == Some(&plan.entry);
        if !keep {
            tracing::info!(?subject, "unscheduled");
        }
        keep
    });
    let now = Utc::now();
    for (subject, entry) in wanted {
        if plans.contains_key(&subject) {
            continue;
        }
        let id = subject.id();
        let parsed =
            KeywordSchedule::parse(&entry.schedule, &entry.timezone, entry.jitter_secs.into());
        let schedule = match parsed {
            Ok(schedule) => Some(schedule),
            Err(e) => {
                // The API checked it; one that fails here is logged, not fatal.
                tracing::error!(?subject, error = %e, "unusable schedule");
                None
            }
        };
        let since = (now - catch_up).max(entry.updated_at);
        let next = schedule.as_ref().and_then(|s| s.next_fire_after(id, since));
        tracing::info!(
            ?subject,
            schedule = %entry.schedule,
            timezone = %entry.timezone,
            next_fire = ?next.map(|f| f.at),
            "scheduled"
        );
        plans.insert(
            subject,
            Planned {
                entry,
                schedule,
                next,
                wake: next.map(|f| f.at),
            },
        );
    }
    Ok(())
}

/// Fires every keyword and list whose time has come, the earliest first.
async fn fire_due(
    plans: &mut HashMap<Subject, Planned>,
    pool: &PgPool,
    events: &EventPublisher,
    settings: &CronSettings,
) {
    let now = Utc::now();
    let mut due: Vec<(DateTime<Utc>, Subject)> = plans
        .iter()
        .filter_map(|(subject, plan)| plan.wake.filter(|wake| *wake <= now).map(|w| (w, *subject)))
        .collect();
    due.sort_unstable();
    for (_, subject) in due {
        let plan = plans.get_mut(&subject).expect("listed above");
        let id = subject.id();
        let (Some(schedule), Some(mut fire)) = (&plan.schedule, plan.next) else {
            continue;
        };
        // Fires this loop slept through (a suspended host, a slow Postgres):
        // only the latest is the current period's.
        while let Some(later) = schedule.next_fire_after(id, fire.at)
            && later.at <= now
        {
            fire = later;
        }
        plan.next = schedule.next_fire_after(id, fire.at);
        plan.wake = plan.next.map(|f| f.at);
        if now - fire.at > settings.catch_up {
            tracing::warn!(?subject, fire = %fire.at, "scheduled fire too late; given up");
            continue;
        }
        let attempts = settings.default_max_attempts;
        let fired = match subject {
            Subject::Keyword(id) => match fire_keyword(pool, id, fire.nominal, attempts).await {
                Ok(ScheduledFire::Queued(outcome)) => {
                    for run in outcome.queued.iter().chain(&outcome.skipped) {
                        events.run_updated(run).await;
                    }
                    Ok(())
                }
                Ok(_) => Ok(()),
                Err(e) => Err(e),
            },
            Subject::List(id) => match fire_list(pool, id, fire.nominal, attempts).await {
                Ok(ScheduledFire::Queued(ListQueued::Queued(run))) => {
                    events.run_updated(&run).await;
                    Ok(())
                }
                Ok(_) => Ok(()),
                Err(e) => Err(e),
            },
        };
        if let Err(e) = fired {
            tracing::error!(?subject, error = ?e, "scheduled crawl not queued; will retry");
            plan.next = Some(fire);
            plan.wake = Some(Utc::now() + RETRY_AFTER);
        }
    }
}

/// Fires keyword `keyword_id` for the schedule period `at` falls in, read in
/// the keyword's zone: a site that already completed a run since the period
/// started gets a `skipped` run (the period's result already exists). A
/// period already fired, by this scheduler or another, is not fired again.
pub async fn fire_keyword(
    pool: &PgPool,
    keyword_id: i64,
    at: DateTime<Utc>,
    default_max_attempts: i32,
) -> anyhow::Result<ScheduledFire> {
    let Some(entry) = store::keywords::schedule_of(pool, keyword_id).await? else {
        return Ok(ScheduledFire::NotScheduled);
    };
    let schedule =
        KeywordSchedule::parse(&entry.schedule, &entry.timezone, entry.jitter_secs.into())?;
    let period_start = schedule.period_start(at).unwrap_or(at);
    let fired =
        store::runs::queue_scheduled(pool, keyword_id, period_start, default_max_attempts).await?;
    match &fired {
        ScheduledFire::Queued(outcome) => {
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
        ScheduledFire::AlreadyFired { last_fired_at } => {
            tracing::info!(keyword_id, %period_start, ?last_fired_at, "period already fired");
        }
        ScheduledFire::NotScheduled => {}
    }
    Ok(fired)
}

/// Fires URL list `list_id` for the schedule period `at` falls in, read in
/// the list's zone: its run reads each URL not read since the period
/// started. A period already fired is not fired again; a list whose previous
/// run is still going keeps that run.
pub async fn fire_list(
    pool: &PgPool,
    list_id: i64,
    at: DateTime<Utc>,
    default_max_attempts: i32,
) -> anyhow::Result<ScheduledFire<ListQueued>> {
    let Some(entry) = store::url_lists::schedule_of(pool, list_id).await? else {
        return Ok(ScheduledFire::NotScheduled);
    };
    let schedule =
        KeywordSchedule::parse(&entry.schedule, &entry.timezone, entry.jitter_secs.into())?;
    let period_start = schedule.period_start(at).unwrap_or(at);
    let fired =
        store::runs::queue_list_scheduled(pool, list_id, period_start, default_max_attempts)
            .await?;
    let label = match &fired {
        ScheduledFire::Queued(ListQueued::Queued(_)) => "queued",
        ScheduledFire::Queued(ListQueued::AlreadyActive(_)) => "already_active",
        ScheduledFire::Queued(ListQueued::SiteDisabled) => "site_disabled",
        ScheduledFire::AlreadyFired { last_fired_at } => {
            tracing::info!(url_list_id = list_id, %period_start, ?last_fired_at, "period already fired");
            return Ok(fired);
        }
        ScheduledFire::NotScheduled => return Ok(fired),
    };
    metrics().scheduled_runs.with_label_values(&[label]).inc();
    tracing::info!(url_list_id = list_id, outcome = label, %period_start, "scheduled list crawl");
    Ok(fired)
}

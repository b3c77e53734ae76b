//! The scheduler room: one leader at a time queues keywords on their cron (in
//! each keyword's time zone) and dispatches the backlog from Postgres into
//! Redis a bounded window at a time; its watchdog takes back stuck and
//! orphaned runs, retention prunes, the webhook sender delivers the outbox,
//! and the heartbeat tells CloudWatch the leader's loops turn.
//! May import `config`, `domain`, `store`, `queue`, `events`, `net`, `ops`;
//! never `api` or `worker`.

mod cron;
mod dispatcher;
pub mod heartbeat;
mod retention;
mod watchdog;
mod webhooks;

use std::time::Duration;

use apalis_redis::ConnectionManager;
use chrono::TimeDelta;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::{
    config::{CommonConfig, SchedulerConfig},
    events::EventPublisher,
    store::leader::{Leadership, SCHEDULER_LOCK},
};

pub use cron::{fire_keyword, fire_list};
pub use dispatcher::{DispatchSettings, Dispatcher};
pub use heartbeat::SCHEDULER_HEARTBEAT;
pub use watchdog::{WatchdogSettings, sweep as watchdog_sweep};

/// How often a standby scheduler tries to take over.
const TAKEOVER_POLL: Duration = Duration::from_secs(1);

/// Runs until `shutdown`: waits for leadership, then acts until it is lost.
pub async fn run(
    common: CommonConfig,
    config: SchedulerConfig,
    pool: PgPool,
    redis: ConnectionManager,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut announced_standby = false;
    while !shutdown.is_cancelled() {
        let leadership = match Leadership::try_acquire(
            &common.database_url,
            SCHEDULER_LOCK,
            "scheduler",
        )
        .await
        {
            Ok(Some(leadership)) => leadership,
            Ok(None) => {
                if !announced_standby {
                    tracing::info!("another scheduler leads; standing by");
                    announced_standby = true;
                }
                sleep_or_stop(TAKEOVER_POLL, &shutdown).await;
                continue;
            }
            Err(e) => {
                tracing::warn!(error = ?e, "could not contend for leadership");
                sleep_or_stop(TAKEOVER_POLL, &shutdown).await;
                continue;
            }
        };
        announced_standby = false;
        tracing::info!("scheduler is the leader");
        lead(&common, &config, &pool, &redis, leadership, &shutdown).await?;
    }
    Ok(())
}

/// The leader's duties, until shutdown or loss of the lock.
async fn lead(
    common: &CommonConfig,
    config: &SchedulerConfig,
    pool: &PgPool,
    redis: &ConnectionManager,
    mut leadership: Leadership,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let duties = shutdown.child_token();
    let events = EventPublisher::new(redis.clone(), &common.queue_name);
    let cron_pulse = heartbeat::Pulse::default();
    let cron = tokio::spawn(cron::run(
        pool.clone(),
        events.clone(),
        cron::CronSettings {
            sync_every: config.schedule_sync_interval(),
            catch_up: TimeDelta::from_std(config.schedule_catch_up()).unwrap_or(TimeDelta::MAX),
            default_max_attempts: common.max_attempts as i32,
        },
        cron_pulse.clone(),
        duties.clone(),
    ));
    let dispatcher = Dispatcher::new(
        pool.clone(),
        redis.clone(),
        DispatchSettings::from_config(common, config),
    );
    let loops = vec![("dispatch", dispatcher.pulse()), ("cron", cron_pulse)];
    let dispatch = tokio::spawn(dispatcher.run(duties.clone()));
    let heartbeat = match config.scheduler_heartbeat_enabled {
        true => {
            let settings =
                heartbeat::HeartbeatSettings::from_config(&common.cloudwatch_namespace, config);
            let duties = duties.clone();
            tokio::spawn(async move {
                let client = crate::ops::cloudwatch::client_from_env().await;
                heartbeat::run(client, settings, loops, duties).await
            })
        }
        false => tokio::spawn(async { Ok(()) }),
    };
    let watchdog = tokio::spawn(watchdog::run(
        pool.clone(),
        events,
        WatchdogSettings {
            interval: Duration::from_secs(config.watchdog_interval_secs.max(1)),
            heartbeat_timeout: Duration::from_secs(config.heartbeat_timeout_secs),
            default_stuck_timeout: Duration::from_secs(common.stuck_timeout_secs as u64),
        },
        duties.clone(),
    ));
    let retention = tokio::spawn(retention::run(
        pool.clone(),
        redis.clone(),
        retention::RetentionSettings {
            queue_name: common.queue_name.clone(),
            keep: (config.retention_days > 0)
                .then(|| Duration::from_secs(config.retention_days * 24 * 3600)),
        },
        duties.clone(),
    ));
    let webhooks = tokio::spawn(webhooks::run(
        pool.clone(),
        webhooks::WebhookSettings::from_config(common, config),
        duties.clone(),
    ));
    tokio::select! {
        _ = shutdown.cancelled() => {}
        _ = leadership.lost() => tracing::warn!("lost the scheduler lock; standing down"),
    }
    duties.cancel();
    let (cron, dispatch, watchdog, retention, webhooks, heartbeat) =
        tokio::join!(cron, dispatch, watchdog, retention, webhooks, heartbeat);
    leadership.release().await;
    heartbeat??;
    cron??;
    dispatch??;
    watchdog??;
    retention??;
    webhooks??;
    Ok(())
}

async fn sleep_or_stop(period: Duration, shutdown: &CancellationToken) {
    tokio::select! {
        _ = tokio::time::sleep(period) => {}
        _ = shutdown.cancelled() => {}
    }
}

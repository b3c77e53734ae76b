//! A scheduled fire: each period of a keyword or a URL list is fired once,
//! whichever scheduler fires it and however often, in the transaction that
//! queues it.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::{ListQueued, QueueOutcome, listed::queue_list_in, queue_in};
use crate::domain::run::Trigger;

/// What a scheduled fire did; `Q` what queueing did (a keyword's runs site
/// by site, or a list's run).
#[derive(Debug, Clone)]
pub enum ScheduledFire<Q = QueueOutcome> {
    /// The period is this fire's.
    Queued(Q),
    /// The period (or a later one) was fired already, by this scheduler
    /// before a restart or by the one it took over from.
    AlreadyFired {
        last_fired_at: Option<DateTime<Utc>>,
    },
    /// The keyword or list is gone or disabled.
    NotScheduled,
}

/// Fires keyword `keyword_id` for the period starting at `period_start`:
/// claims the period by moving the keyword's `last_fired_at` forward to it,
/// then queues its runs as [`super::queue_for_keyword`] does with the period
/// rule (a site that completed a run since `period_start` gets `skipped`).
/// One transaction: a period is never claimed without its runs, nor queued
/// twice.
pub async fn queue_scheduled(
    pool: &PgPool,
    keyword_id: i64,
    period_start: DateTime<Utc>,
    default_max_attempts: i32,
) -> sqlx::Result<ScheduledFire> {
    let mut tx = pool.begin().await?;
    // The row lock taken here also holds off a concurrent delete or edit.
    let claimed = sqlx::query_scalar!(
        "UPDATE keywords SET last_fired_at = $2
         WHERE id = $1 AND enabled AND (last_fired_at IS NULL OR last_fired_at < $2)
         RETURNING id",
        keyword_id,
        period_start
    )
    .fetch_optional(&mut *tx)
    .await?;
    if claimed.is_none() {
        let keyword = sqlx::query!(
            "SELECT enabled, last_fired_at FROM keywords WHERE id = $1",
            keyword_id
        )
        .fetch_optional(&mut *tx)
        .await?;
        return Ok(match keyword {
            Some(k) if k.enabled => ScheduledFire::AlreadyFired {
                last_fired_at: k.last_fired_at,
            },
            _ => ScheduledFire::NotScheduled,
        });
    }
    let outcome = queue_in(
        &mut tx,
        keyword_id,
        Trigger::Schedule,
        Some(period_start),
        default_max_attempts,
    )
    .await?;
    tx.commit().await?;
    Ok(outcome.map_or(ScheduledFire::NotScheduled, ScheduledFire::Queued))
}

/// Fires URL list `list_id` for the period starting at `period_start`: claims
/// the period by moving the list's `last_fired_at` forward to it, then queues
/// its run as [`super::queue_for_list`] does, in one transaction. A list whose
/// previous run is still active keeps that run (the period is claimed all the
/// same: the active run reads on in its own).
pub async fn queue_list_scheduled(
    pool: &PgPool,
    list_id: i64,
    period_start: DateTime<Utc>,
    default_max_attempts: i32,
) -> sqlx::Result<ScheduledFire<ListQueued>> {
    let mut tx = pool.begin().await?;
    let claimed = sqlx::query_scalar!(
        "UPDATE url_lists SET last_fired_at = $2
         WHERE id = $1 AND enabled AND (last_fired_at IS NULL OR last_fired_at < $2)
         RETURNING id",
        list_id,
        period_start
    )
    .fetch_optional(&mut *tx)
    .await?;
    if claimed.is_none() {
        let list = sqlx::query!(
            "SELECT enabled, last_fired_at FROM url_lists WHERE id = $1",
            list_id
        )
        .fetch_optional(&mut *tx)
        .await?;
        return Ok(match list {
            Some(l) if l.enabled => ScheduledFire::AlreadyFired {
                last_fired_at: l.last_fired_at,
            },
            _ => ScheduledFire::NotScheduled,
        });
    }
    let outcome = queue_list_in(
        &mut tx,
        list_id,
        Trigger::Schedule,
        period_start,
        default_max_attempts,
    )
    .await?;
    tx.commit().await?;
    Ok(outcome.map_or(ScheduledFire::NotScheduled, ScheduledFire::Queued))
}

//! A scheduled fire: each period of a keyword is fired once, whichever
//! scheduler fires it and however often, in the transaction that queues it.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::{QueueOutcome, queue_in};
use crate::domain::run::Trigger;

/// What a scheduled fire did.
#[derive(Debug, Clone)]
pub enum ScheduledFire {
    /// The period is this fire's: its runs, site by site.
    Queued(QueueOutcome),
    /// The period (or a later one) was fired already, by this scheduler
    /// before a restart or by the one it took over from.
    AlreadyFired {
        last_fired_at: Option<DateTime<Utc>>,
    },
    /// The keyword is gone or disabled.
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

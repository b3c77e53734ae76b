//! A run's health, judged in the transaction that ends it: a completed run
//! against its site's expectations, and whether the site now blocks us or
//! has stopped blocking us (`sites.blocked_since`), changed only on those
//! transitions so an operator hears of each once.

use sqlx::{Postgres, Transaction};

use crate::domain::{
    run::RunHealth,
    site::{Expectations, RunTally},
};

/// What a run's end changed about its site.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SiteTransition {
    /// The site started refusing us with this run.
    Blocked,
    /// A healthy run after the site had been blocking us.
    Recovered,
}

/// Judges completed run `run_id` against its site's expectations, what the
/// crawl bounds left out of it and the values that did not parse (`notes`:
/// `PagesRead::health_notes`), and stores the verdict on the run.
pub(super) async fn judge_completed(
    tx: &mut Transaction<'_, Postgres>,
    run_id: i64,
    (bounded, unparsed): (Vec<String>, Vec<String>),
) -> sqlx::Result<(RunHealth, Option<SiteTransition>)> {
    let run = sqlx::query!(
        r#"SELECT r.keyword_id, r.site_id, r.items_found, r.refusals,
                  s.expect_min_items, s.expect_required_fields, s.expect_max_empty_runs
           FROM crawl_runs r JOIN sites s ON s.id = r.site_id
           WHERE r.id = $1"#,
        run_id
    )
    .fetch_one(&mut **tx)
    .await?;
    let expectations = Expectations {
        min_items: run.expect_min_items,
        required_fields: run.expect_required_fields,
        max_empty_runs: run.expect_max_empty_runs,
    };
    let tally = RunTally {
        items: run.items_found,
        refusals: run.refusals,
        bounded,
        unparsed,
        ..RunTally::default()
    };
    let health = judge(
        tx,
        run_id,
        (run.keyword_id, run.site_id),
        &expectations,
        tally,
    )
    .await?;
    sqlx::query!(
        "UPDATE crawl_runs SET health = $2, health_reason = $3 WHERE id = $1",
        run_id,
        health.as_str(),
        health.reason()
    )
    .execute(&mut **tx)
    .await?;
    let transition = match &health {
        RunHealth::Healthy => recovered(tx, run.site_id).await?,
        RunHealth::Degraded { blocked: true, .. } => blocked(tx, run.site_id).await?,
        RunHealth::Degraded { blocked: false, .. } => None,
    };
    Ok((health, transition))
}

/// Judges completing run `run_id` of (keyword, site) against `expectations`:
/// `tally` holds its items and refusals; what else the expectations ask
/// about (empty required fields, the empty runs before it) is read here,
/// only when they ask.
pub(super) async fn judge(
    tx: &mut Transaction<'_, Postgres>,
    run_id: i64,
    (keyword_id, site_id): (i64, i64),
    expectations: &Expectations,
    mut tally: RunTally,
) -> sqlx::Result<RunHealth> {
    if !expectations.required_fields.is_empty() {
        for row in sqlx::query!(
            r#"SELECT field AS "field!",
                      count(*) FILTER (WHERE coalesce(btrim(r.fields ->> field), '') = '') AS "missing!"
               FROM crawl_results r CROSS JOIN UNNEST($2::text[]) AS field
               WHERE r.run_id = $1
               GROUP BY field"#,
            run_id,
            &expectations.required_fields
        )
        .fetch_all(&mut **tx)
        .await?
        {
            tally.missing.insert(row.field, row.missing);
        }
    }
    if let Some(max) = expectations.max_empty_runs
        && tally.items == 0
    {
        // The keyword's runs on the site just before this one, newest first,
        // as far as the limit needs: how many of them in a row were empty.
        let before = sqlx::query_scalar!(
            r#"SELECT items_found FROM crawl_runs
               WHERE keyword_id = $1 AND site_id = $2 AND state = 'completed' AND id <> $3
               ORDER BY finished_at DESC
               LIMIT $4"#,
            keyword_id,
            site_id,
            run_id,
            i64::from(max) + 1
        )
        .fetch_all(&mut **tx)
        .await?;
        tally.empty_before = before.iter().take_while(|&&items| items == 0).count() as i32;
    }
    Ok(expectations.judge(&tally))
}

/// Marks site `site_id` as blocking us, unless it already was.
pub(super) async fn blocked(
    tx: &mut Transaction<'_, Postgres>,
    site_id: i64,
) -> sqlx::Result<Option<SiteTransition>> {
    let changed = sqlx::query!(
        "UPDATE sites SET blocked_since = now() WHERE id = $1 AND blocked_since IS NULL",
        site_id
    )
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok((changed > 0).then_some(SiteTransition::Blocked))
}

/// Marks site `site_id` as no longer blocking us, if it was.
async fn recovered(
    tx: &mut Transaction<'_, Postgres>,
    site_id: i64,
) -> sqlx::Result<Option<SiteTransition>> {
    let changed = sqlx::query!(
        "UPDATE sites SET blocked_since = NULL WHERE id = $1 AND blocked_since IS NOT NULL",
        site_id
    )
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok((changed > 0).then_some(SiteTransition::Recovered))
}

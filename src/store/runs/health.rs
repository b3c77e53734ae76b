//! What judging a run's end reads and writes, in the transaction that ends
//! it: a completed run's tally against its site's expectations (the verdict
//! is `Expectations::judge`), and the site's standing (`sites.blocked_since`)
//! changed as `Transition::site` says, only on a change, so an operator hears
//! of each once.

use sqlx::PgConnection;

use crate::domain::{
    run::{RunHealth, SiteTransition},
    site::{Expectations, RunTally},
};

/// Judges completing run `run_id` of (keyword, site) against `expectations`:
/// `tally` holds its items and refusals; what else the expectations ask
/// about (empty required fields, the empty runs before it) is read here,
/// only when they ask.
pub(super) async fn judge(
    tx: &mut PgConnection,
    run_id: i64,
    (keyword_id, url_list_id, site_id): (Option<i64>, Option<i64>, i64),
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
        .fetch_all(&mut *tx)
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
        // The state is written out: it is the predicate of the partial index
        // this reads (crawl_runs_keyword_site_finished), which a bound
        // parameter would not match (tests/it/lifecycle.rs holds them equal).
        // A list's runs are read by the list (one site's).
        let before = match (keyword_id, url_list_id) {
            (Some(keyword_id), _) => {
                sqlx::query_scalar!(
                    r#"SELECT items_found FROM crawl_runs
                       WHERE keyword_id = $1 AND site_id = $2 AND state = 'completed' AND id <> $3
                       ORDER BY finished_at DESC
                       LIMIT $4"#,
                    keyword_id,
                    site_id,
                    run_id,
                    i64::from(max) + 1
                )
                .fetch_all(&mut *tx)
                .await?
            }
            (None, list) => {
                sqlx::query_scalar!(
                    r#"SELECT items_found FROM crawl_runs
                       WHERE url_list_id = $1 AND state = 'completed' AND id <> $2
                       ORDER BY finished_at DESC
                       LIMIT $3"#,
                    list,
                    run_id,
                    i64::from(max) + 1
                )
                .fetch_all(&mut *tx)
                .await?
            }
        };
        tally.empty_before = before.iter().take_while(|&&items| items == 0).count() as i32;
    }
    Ok(expectations.judge(&tally))
}

/// Changes site `site_id`'s standing as a run's end says (`change`), only
/// if it was not so already; the change when it happened, so each is told once.
pub(super) async fn change_standing(
    tx: &mut PgConnection,
    site_id: i64,
    change: SiteTransition,
) -> sqlx::Result<Option<SiteTransition>> {
    let blocks = change == SiteTransition::Blocked;
    let changed = sqlx::query!(
        r#"UPDATE sites SET blocked_since = CASE WHEN $2 THEN now() END
           WHERE id = $1 AND (blocked_since IS NULL) = $2"#,
        site_id,
        blocks
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    Ok((changed > 0).then_some(change))
}

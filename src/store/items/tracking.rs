//! Change tracking as a crawl writes it: each page's items judged against
//! what their keyword/site stored (new, changed, unchanged) in the same
//! statement that stores the page's results, and, when the run completes,
//! the items it did not find removed and what it found summed up. Both run
//! inside the fenced transaction of their write (`runs::store_page`,
//! `runs::complete`): a superseded worker changes nothing.

use sqlx::{PgConnection, types::Json};

use crate::{
    domain::{
        change::{CHANGE_SAMPLES, Change, ChangeSummary, FieldDiff, ItemChange},
        page::CrawledPage,
        run::RunState,
        site::Expectations,
    },
    store::{columns::decode, fence::Fence},
};

/// What storing one page did.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::store) struct PageWritten {
    /// Results stored for the page.
    pub stored: i64,
    /// Items new to the keyword/site, not counted by this run before.
    pub new: i64,
    /// Items found changed, not counted by this run before.
    pub changed: i64,
    /// Results the run has now, on every page (counted for the last page
    /// only, `last`; 0 otherwise).
    pub run_results: i64,
    /// The held run's keyword (or URL list) and site, its refusals so far,
    /// and its site's expectations: what judging a completion needs.
    pub keyword_id: Option<i64>,
    pub url_list_id: Option<i64>,
    pub site_id: i64,
    /// A list run's URLs that could not be read so far.
    pub urls_failed: i32,
    pub refusals: i32,
    pub expectations: Expectations,
}

/// Judges and stores one page's items and its results, if the fence still
/// holds in one of the states `held_in` (the run's row is locked for the
/// rest of the transaction); `None`
/// when it does not, and then nothing is written.
///
/// One statement: the items are compared by content hash in SQL; only an
/// item whose value differs is rewritten whole (and its value added to its
/// history), the others only get when and where they were seen. A result is
/// stored for each item, except, in an incremental crawl, for one an earlier
/// run stored that did not change. An item the run saw before (a retried
/// page, an item listed twice) keeps what the run recorded for it and is
/// not counted again. The last page of a run (`last`) also drops the
/// results of pages after it (an earlier attempt that went further).
pub(in crate::store) async fn record_page(
    conn: &mut PgConnection,
    fence: &Fence,
    held_in: &[RunState],
    crawled: &CrawledPage<'_>,
    last: bool,
) -> sqlx::Result<Option<PageWritten>> {
    let n = crawled.items.len();
    let (mut keys, mut by) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut urls, mut fields, mut hashes, mut before) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for item in crawled.items {
        let identity = crawled.identity(item);
        before.push(crawled.stored_before.contains(&identity.key));
        keys.push(identity.key);
        by.push(identity.by.as_str());
        urls.push(item.item_url.clone());
        fields.push(item.fields.clone());
        hashes.push(item.content_hash.clone());
    }
    let positions: Vec<i32> = (1..=n as i32).collect();
    let written = sqlx::query!(
        r#"WITH held AS MATERIALIZED (
               SELECT r.keyword_id, r.url_list_id, r.urls_failed, r.site_id, r.refusals, s.expect_min_items, s.expect_required_fields,
                      s.expect_max_empty_runs
               FROM crawl_runs r JOIN sites s ON s.id = r.site_id
               WHERE r.id = $1 AND r.attempt = $2 AND r.worker_id = $3 AND r.state = ANY($14)
               FOR UPDATE OF r
           ),
           listed AS MATERIALIZED (
               SELECT held.keyword_id, held.url_list_id, held.site_id, l.position, l.item_key, l.identified_by, l.item_url,
                      l.fields, l.content_hash, l.stored_before
               FROM held,
                    UNNEST($6::int[], $7::text[], $8::text[], $9::text[], $10::jsonb[], $11::text[], $12::bool[])
                    AS l(position, item_key, identified_by, item_url, fields, content_hash, stored_before)
           ),
           -- Each item once, as first listed, against what is stored of it.
           compared AS (
               SELECT f.keyword_id, f.url_list_id, f.site_id, f.position, f.item_key, f.identified_by, f.item_url, f.fields,
                      f.content_hash, f.stored_before, i.id AS known_id, i.fields AS old_fields,
                      i.last_change, i.last_diff,
                      i.content_hash IS DISTINCT FROM f.content_hash AS differs,
                      i.last_run_id IS NOT DISTINCT FROM $1 AS seen_in_run,
                      CASE WHEN i.id IS NULL THEN 'new'
                           WHEN i.last_run_id = $1 AND i.content_hash = f.content_hash THEN i.last_change
                           WHEN i.last_run_id = $1 AND i.last_change = 'new' THEN 'new'
                           WHEN i.removed_at IS NOT NULL THEN 'new'
                           WHEN i.content_hash = f.content_hash THEN 'unchanged'
                           ELSE 'changed'
                      END AS change
               FROM (SELECT DISTINCT ON (item_key) keyword_id, url_list_id, site_id, position, item_key, identified_by,
                            item_url, fields, content_hash, stored_before
                     FROM listed ORDER BY item_key, position) AS f
               -- A lookup per item by the unique index (LIMIT 1 keeps it one):
               -- a plain join was planned as a scan of every item whenever the
               -- table's statistics were older than its rows, as in a new
               -- fleet's first batch (2 ms a page at 15,000 items).
               -- A keyword's items and a list's apart, each by its own unique index.
               LEFT JOIN LATERAL (
                   (SELECT id, fields, last_change, last_diff, content_hash, last_run_id, removed_at FROM items
                    WHERE keyword_id = f.keyword_id AND site_id = f.site_id AND item_key = f.item_key
                    LIMIT 1)
                   UNION ALL
                   (SELECT id, fields, last_change, last_diff, content_hash, last_run_id, removed_at FROM items
                    WHERE url_list_id = f.url_list_id AND site_id = f.site_id AND item_key = f.item_key
                    LIMIT 1)
                   LIMIT 1
               ) AS i ON true
           ),
           judged AS MATERIALIZED (
               SELECT c.keyword_id, c.url_list_id, c.site_id, c.position, c.item_key, c.identified_by, c.item_url, c.fields,
                      c.content_hash, c.stored_before, c.known_id, c.old_fields, c.last_change, c.last_diff,
                      c.differs, c.seen_in_run, c.change,
                      CASE WHEN c.change <> 'changed' THEN NULL
                           WHEN c.differs THEN field_diff(c.old_fields, c.fields)
                           ELSE c.last_diff
                      END AS diff
               FROM compared c
           ),
           added AS (
               INSERT INTO items (keyword_id, url_list_id, site_id, identified_by, item_key, item_url, fields,
                                  content_hash, last_page, last_position, last_page_url, last_run_id, last_change)
               SELECT keyword_id, url_list_id, site_id, identified_by, item_key, item_url, fields, content_hash,
                      $4, position, $5, $1, 'new'
               FROM judged WHERE known_id IS NULL
               RETURNING id, item_key
           ),
           -- Another value: the row rewritten whole.
           rewritten AS (
               UPDATE items i
               SET item_url = j.item_url, fields = j.fields, content_hash = j.content_hash,
                   last_changed_at = now(), last_seen_at = now(), removed_at = NULL, last_page = $4,
                   last_position = j.position, last_page_url = $5, last_run_id = $1,
                   last_change = j.change, last_diff = j.diff
               FROM judged j
               WHERE i.id = j.known_id AND j.differs
           ),
           -- The same value: only when and where it was seen (nothing when
           -- this run saw it already).
           seen_again AS (
               UPDATE items i
               SET last_seen_at = now(), removed_at = NULL, last_page = $4, last_position = j.position,
                   last_page_url = $5, last_run_id = $1, last_change = j.change, last_diff = j.diff
               FROM judged j
               WHERE i.id = j.known_id AND NOT j.differs AND NOT j.seen_in_run
           ),
           history AS (
               INSERT INTO item_history (item_id, run_id, fields, content_hash)
               SELECT a.id, $1, j.fields, j.content_hash FROM added a JOIN judged j USING (item_key)
               UNION ALL
               SELECT known_id, $1, fields, content_hash FROM judged WHERE known_id IS NOT NULL AND differs
           ),
           stored AS MATERIALIZED (
               SELECT l.keyword_id, l.url_list_id, l.site_id, l.item_url, l.fields, l.content_hash, l.item_key,
                      COALESCE(j.known_id, a.id) AS item_id, j.change, j.diff,
                      row_number() OVER (ORDER BY l.position)::int AS position
               FROM listed l
               JOIN judged j ON j.item_key = l.item_key
               LEFT JOIN added a ON a.item_key = l.item_key
               WHERE NOT l.stored_before OR j.change <> 'unchanged'
           ),
           -- A page stored again (a retried attempt) replaces its rows.
           results AS (
               INSERT INTO crawl_results (run_id, keyword_id, url_list_id, site_id, page, position, page_url,
                                          item_url, fields, content_hash, item_key, item_id, change, diff)
               SELECT $1, keyword_id, url_list_id, site_id, $4, position, $5, item_url, fields, content_hash, item_key,
                      item_id, change, diff
               FROM stored
               ON CONFLICT (run_id, page, position) DO UPDATE
               SET page_url = EXCLUDED.page_url, item_url = EXCLUDED.item_url, fields = EXCLUDED.fields,
                   content_hash = EXCLUDED.content_hash, item_key = EXCLUDED.item_key,
                   item_id = EXCLUDED.item_id, change = EXCLUDED.change, diff = EXCLUDED.diff,
                   fetched_at = EXCLUDED.fetched_at
           ),
           -- Rows of the page past its items now, and on the last page, of
           -- the pages after it.
           dropped AS (
               DELETE FROM crawl_results
               WHERE run_id = $1 AND EXISTS (SELECT 1 FROM held)
                 AND ((page = $4 AND position > (SELECT count(*) FROM stored)) OR ($13 AND page > $4))
           )
           SELECT EXISTS (SELECT 1 FROM held) AS "held!",
                  (SELECT count(*) FROM stored) AS "stored!",
                  -- Only the last page's completion reads it: a count of every
                  -- result per page would make a run of many pages quadratic.
                  CASE WHEN $13 THEN (SELECT count(*) FROM crawl_results WHERE run_id = $1 AND page < $4)
                                     + (SELECT count(*) FROM stored)
                       ELSE 0 END AS "run_results!",
                  (SELECT keyword_id FROM held) AS "keyword_id?",
                  (SELECT url_list_id FROM held) AS "url_list_id?",
                  (SELECT urls_failed FROM held) AS "urls_failed?",
                  (SELECT site_id FROM held) AS "site_id?",
                  (SELECT refusals FROM held) AS "refusals?",
                  (SELECT expect_min_items FROM held) AS "expect_min_items?",
                  (SELECT expect_required_fields FROM held) AS "expect_required_fields?",
                  (SELECT expect_max_empty_runs FROM held) AS "expect_max_empty_runs?",
                  (SELECT count(*) FROM judged WHERE change = 'new' AND NOT seen_in_run) AS "new!",
                  (SELECT count(*) FROM judged
                   WHERE change = 'changed' AND (NOT seen_in_run OR last_change = 'unchanged')) AS "changed!""#,
        fence.run_id,
        fence.attempt,
        fence.worker_id,
        crawled.page,
        crawled.url,
        &positions,
        &keys,
        &by as &[&str],
        &urls as &[Option<String>],
        &fields,
        &hashes,
        &before,
        last,
        held_in as &[RunState],
    )
    .fetch_one(&mut *conn)
    .await?;
    let (keyword_id, url_list_id) = (written.keyword_id, written.url_list_id);
    let (Some(site_id), Some(refusals), true) = (written.site_id, written.refusals, written.held)
    else {
        return Ok(None);
    };
    if !crawled.details_read.is_empty() {
        // Same transaction as the merged values: a detail page counts as
        // read only once what it gave is stored.
        sqlx::query!(
            r#"UPDATE items SET detail_read_at = now()
               WHERE (keyword_id = $1 OR url_list_id = $4) AND site_id = $2 AND item_key = ANY($3)"#,
            keyword_id,
            site_id,
            crawled.details_read,
            url_list_id
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(Some(PageWritten {
        stored: written.stored,
        new: written.new,
        changed: written.changed,
        run_results: written.run_results,
        keyword_id,
        url_list_id,
        site_id,
        urls_failed: written.urls_failed.unwrap_or_default(),
        refusals,
        expectations: Expectations {
            min_items: written.expect_min_items,
            required_fields: written.expect_required_fields.unwrap_or_default(),
            max_empty_runs: written.expect_max_empty_runs,
        },
    }))
}

/// Settles a completing run's changes (inside its fenced transaction, after
/// results past its last page are gone): when it read every page, the items
/// of its keyword/site it did not see are removed, as they were last seen;
/// then its new, changed and removed items are counted and the first
/// [`CHANGE_SAMPLES`] of each described.
pub(in crate::store) async fn settle(
    conn: &mut PgConnection,
    run_id: i64,
    (keyword_id, site_id): (Option<i64>, i64),
    read_every_page: bool,
) -> sqlx::Result<ChangeSummary> {
    // A URL list's run reads the URLs it was given: an item it did not read
    // is not gone (removals are judged for a keyword's search only).
    if let (true, Some(keyword_id)) = (read_every_page, keyword_id) {
        sqlx::query!(
            r#"WITH gone AS (
                   UPDATE items SET removed_at = now()
                   WHERE keyword_id = $2 AND site_id = $3 AND removed_at IS NULL
                     AND last_run_id IS DISTINCT FROM $1
                   RETURNING id, keyword_id, site_id, item_key, item_url, fields, content_hash, last_page,
                             last_position, last_page_url, first_seen_at, last_seen_at
               )
               INSERT INTO item_removals (run_id, item_id, keyword_id, site_id, item_key, item_url, fields,
                                          content_hash, page, position, page_url, first_seen_at, last_seen_at)
               SELECT $1, id, keyword_id, site_id, item_key, item_url, fields, content_hash, last_page,
                      last_position, last_page_url, first_seen_at, last_seen_at
               FROM gone"#,
            run_id,
            keyword_id,
            site_id
        )
        .execute(&mut *conn)
        .await?;
    }
    // Each kind's count and its first items in page order; an item on two
    // pages counts once, where it was first listed.
    let rows = sqlx::query!(
        r#"WITH run_results AS MATERIALIZED (
               -- The run's results by its own index: with the change
               -- condition beside run_id, a plan made on stale statistics
               -- also read every new or changed result ever stored
               -- (crawl_results_changes) and intersected the two.
               SELECT change, item_id, item_url, fields, diff, page, position
               FROM crawl_results WHERE run_id = $1
           ),
           found AS (
               SELECT DISTINCT ON (item_id) change, item_id, item_url, fields, diff, page, position
               FROM run_results
               WHERE change IN ('new', 'changed')
               ORDER BY item_id, page, position
           ),
           described AS (
               SELECT change, item_id, item_url, fields, diff, page, position FROM found
               UNION ALL
               SELECT 'removed', item_id, item_url, fields, NULL, page, position
               FROM item_removals WHERE run_id = $1
           )
           SELECT change AS "change!", item_id AS "item_id!", item_url, fields AS "fields!",
                  diff AS "diff: Json<FieldDiff>", total AS "total!"
           FROM (SELECT d.change, d.item_id, d.item_url, d.fields, d.diff, d.page, d.position,
                        row_number() OVER (PARTITION BY change ORDER BY page, position, item_id) AS nth,
                        count(*) OVER (PARTITION BY change) AS total
                 FROM described d) AS ranked
           WHERE nth <= $2
           ORDER BY change, page, position, item_id"#,
        run_id,
        CHANGE_SAMPLES as i64
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut summary = ChangeSummary {
        removals_judged: read_every_page,
        ..ChangeSummary::default()
    };
    for row in rows {
        let change: Change = decode("change", &row.change)?;
        let total = row.total as i32;
        match change {
            Change::New => summary.new = total,
            Change::Changed => summary.changed = total,
            Change::Removed => summary.removed = total,
            Change::Unchanged => continue,
        }
        summary.samples.push(ItemChange {
            item_id: row.item_id,
            change,
            item_url: row.item_url,
            fields: row.fields,
            diff: row.diff.map(|Json(diff)| diff),
        });
    }
    Ok(summary)
}

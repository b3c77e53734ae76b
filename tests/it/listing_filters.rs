//! The run and result listings (`store::runs::list`, `store::results::list`),
//! whose queries hold only the filters a request gives: every filter alone
//! and in every combination, walked a page at a time by the cursor, lists
//! what the filters select, as worked out here from the rows themselves.

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use crawlfleet::{
    domain::{
        change::{Change, FieldDiff},
        failure::FailureKind,
        run::RunState,
    },
    store::{
        self,
        listing::MAX_LIMIT,
        results::{CrawlResult, ResultFilter},
        runs::RunFilter,
    },
};
use serde_json::json;
use sqlx::PgPool;

use crate::support::TestDb;

/// More pages than any listing here has rows.
const PAGES_AT_MOST: usize = 100;

/// When the first of the rows happened; each next one a minute later.
fn at(minute: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 1, 8, 0, 0).unwrap() + TimeDelta::minutes(minute)
}

/// Two keywords and two sites.
struct Pairs {
    keywords: [i64; 2],
    sites: [i64; 2],
}

async fn pairs(pool: &PgPool) -> Pairs {
    let keywords: Vec<i64> = sqlx::query_scalar(
        "INSERT INTO keywords (keyword, schedule) VALUES ('lamp', '0 0 0 1 1 *'), ('desk', '0 0 0 1 1 *')
         RETURNING id",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let sites: Vec<i64> = sqlx::query_scalar(
        r#"INSERT INTO sites (name, search_url, fields)
           VALUES ('a', 'http://127.0.0.1/a', '{}'), ('b', 'http://127.0.0.1/b', '{}')
           RETURNING id"#,
    )
    .fetch_all(pool)
    .await
    .unwrap();
    Pairs {
        keywords: [keywords[0], keywords[1]],
        sites: [sites[0], sites[1]],
    }
}

/// 24 runs over the four keyword/site pairs, queued a minute apart, in
/// every ended state, failed ones blocked or with a site error; and one
/// queued. Their ids, oldest first.
async fn runs(pool: &PgPool, pairs: &Pairs) -> Vec<i64> {
    let mut ids = Vec::new();
    for n in 0..25_i64 {
        let (state, error_kind) = match n % 6 {
            _ if n == 24 => ("queued", None),
            0 | 3 => ("completed", None),
            1 => ("failed", Some("blocked")),
            2 => ("failed", Some("site_error")),
            4 => ("skipped", None),
            _ => ("cancelled", Some("cancelled")),
        };
        let id: i64 = sqlx::query_scalar(
            r#"INSERT INTO crawl_runs (keyword_id, site_id, state, trigger, max_attempts, error_kind,
                                       queued_at, finished_at)
               VALUES ($1, $2, $3, 'manual', 3, $4, $5, CASE WHEN $3 <> 'queued' THEN $5 END)
               RETURNING id"#,
        )
        .bind(pairs.keywords[(n % 2) as usize])
        .bind(pairs.sites[(n / 2 % 2) as usize])
        .bind(state)
        .bind(error_kind)
        .bind(at(n))
        .fetch_one(pool)
        .await
        .unwrap();
        ids.push(id);
    }
    ids
}

/// What a run listing's filters look at, read back from the table.
#[derive(sqlx::FromRow)]
struct RunFacts {
    id: i64,
    keyword_id: i64,
    site_id: i64,
    state: String,
    error_kind: Option<String>,
    queued_at: DateTime<Utc>,
}

fn selects_run(filter: &RunFilter, run: &RunFacts) -> bool {
    filter.keyword_id.is_none_or(|k| run.keyword_id == k)
        && filter.site_id.is_none_or(|s| run.site_id == s)
        && filter.state.is_none_or(|s| run.state == s.as_str())
        && filter
            .error_kind
            .is_none_or(|k| run.error_kind.as_deref() == Some(k.as_str()))
        && filter.queued_after.is_none_or(|t| run.queued_at >= t)
        && filter.queued_before.is_none_or(|t| run.queued_at < t)
        && filter.before.is_none_or(|id| run.id < id)
}

/// Every run the filter selects, following the cursor `page` at a time as
/// `/api/runs` does.
async fn walk_runs(pool: &PgPool, filter: &RunFilter, page: i64) -> Vec<i64> {
    let mut filter = RunFilter {
        limit: page,
        ..filter.clone()
    };
    let mut ids = Vec::new();
    // More pages than rows: the cursor is not moving on.
    for _ in 0..=PAGES_AT_MOST {
        let runs = store::runs::list(pool, &filter).await.unwrap();
        assert!(runs.len() as i64 <= page);
        ids.extend(runs.iter().map(|r| r.id));
        match runs.last() {
            Some(last) if runs.len() as i64 == page => filter.before = Some(last.id),
            _ => return ids,
        }
    }
    panic!("more than {PAGES_AT_MOST} pages: the cursor does not move on ({filter:?})");
}

/// Sets one of a listing's filters.
type Setter<F> = Box<dyn Fn(&mut F)>;

/// `base` with each combination of `setters` applied (none, each alone,
/// every pair, ..., all), and how many each has.
fn every_combination<F: Clone>(base: &F, setters: &[Setter<F>]) -> Vec<(u32, F)> {
    (0..1_u32 << setters.len())
        .map(|set| {
            let mut filter = base.clone();
            for (n, set_one) in setters.iter().enumerate() {
                if set & (1 << n) != 0 {
                    set_one(&mut filter);
                }
            }
            (set.count_ones(), filter)
        })
        .collect()
}

#[tokio::test]
async fn runs_are_listed_by_every_filter_alone_and_combined_page_by_page() {
    let db = TestDb::new().await;
    let pool = &db.pool;
    let pairs = pairs(pool).await;
    let ids = runs(pool, &pairs).await;
    let facts: Vec<RunFacts> = sqlx::query_as(
        "SELECT id, keyword_id, site_id, state, error_kind, queued_at FROM crawl_runs ORDER BY id DESC",
    )
    .fetch_all(pool)
    .await
    .unwrap();

    // Each filter, set to a value that selects some runs, not all.
    let (keyword, site, cursor) = (pairs.keywords[1], pairs.sites[0], ids[17]);
    let setters: Vec<Setter<RunFilter>> = vec![
        Box::new(move |f| f.keyword_id = Some(keyword)),
        Box::new(move |f| f.site_id = Some(site)),
        Box::new(|f| f.state = Some(RunState::Failed)),
        Box::new(|f| f.error_kind = Some(FailureKind::Blocked)),
        Box::new(|f| f.queued_after = Some(at(5))),
        Box::new(|f| f.queued_before = Some(at(20))),
        Box::new(move |f| f.before = Some(cursor)),
    ];
    let base = RunFilter {
        limit: MAX_LIMIT,
        ..RunFilter::default()
    };
    for (filters, filter) in every_combination(&base, &setters) {
        let expected: Vec<i64> = facts
            .iter()
            .filter(|run| selects_run(&filter, run))
            .map(|run| run.id)
            .collect();
        if filters == 1 {
            assert!(
                !expected.is_empty() && expected.len() < facts.len(),
                "a filter alone selects some runs, not all: {filter:?}"
            );
        }
        for page in [1, 4, MAX_LIMIT] {
            assert_eq!(
                walk_runs(pool, &filter, page).await,
                expected,
                "{filter:?}, {page} a page"
            );
        }
    }
    db.drop().await;
}

#[tokio::test]
async fn a_run_listing_reads_every_column_and_refuses_a_limit_out_of_range() {
    let db = TestDb::new().await;
    let pool = &db.pool;
    let pairs = pairs(pool).await;
    let ids = runs(pool, &pairs).await;
    sqlx::query(
        "UPDATE crawl_runs SET pages_crawled = 3, items_found = 7, error = 'HTTP 503', worker_id = 'w-1'
         WHERE id = $1",
    )
    .bind(ids[1])
    .execute(pool)
    .await
    .unwrap();

    let listed = store::runs::list(
        pool,
        &RunFilter {
            before: Some(ids[2]),
            limit: 1,
            ..RunFilter::default()
        },
    )
    .await
    .unwrap();
    let got = store::runs::get(pool, ids[1]).await.unwrap().unwrap();
    assert_eq!(listed.len(), 1);
    let run = &listed[0];
    assert_eq!(run, &got, "as a run is read alone");
    assert_eq!(
        (run.state, run.error_kind, run.queued_at, run.items_found),
        (RunState::Failed, Some(FailureKind::Blocked), at(1), 7)
    );

    for limit in [0, -1, MAX_LIMIT + 1] {
        let refused = store::runs::list(
            pool,
            &RunFilter {
                limit,
                ..RunFilter::default()
            },
        )
        .await;
        assert!(
            matches!(refused, Err(sqlx::Error::InvalidArgument(_))),
            "limit {limit}: {refused:?}"
        );
    }
    db.drop().await;
}

/// Results of the first eight runs (three each, on page 1) with words to
/// search and a change each (none on the first run's: stored before change
/// tracking), two of each run's with an item first seen 50 minutes before
/// (the third has none); and a removal of an item of each of those runs.
async fn results(pool: &PgPool, runs: &[i64]) {
    let changes = [Some("new"), Some("changed"), Some("unchanged")];
    let words = ["red lamp", "blue desk", "red chair"];
    for (n, &run) in runs[..8].iter().enumerate() {
        for position in 0..3 {
            let key = format!("http://127.0.0.1/item/{n}-{position}");
            let change = if n == 0 { None } else { changes[position] };
            let fetched = at(60 + n as i64 * 3 + position as i64);
            sqlx::query(
                r#"INSERT INTO crawl_results (run_id, keyword_id, site_id, page, position, page_url,
                                              item_url, fields, content_hash, fetched_at, item_key,
                                              change, diff)
                   SELECT id, keyword_id, site_id, 1, $2, 'http://127.0.0.1/search', $3,
                          jsonb_build_object('title', $4::text, 'price', $2), md5($3), $5, $3, $6,
                          CASE WHEN $6 = 'changed' THEN '{"price": {"old": "1", "new": "2"}}'::jsonb END
                   FROM crawl_runs WHERE id = $1"#,
            )
            .bind(run)
            .bind(position as i32)
            .bind(&key)
            .bind(words[(n + position) % 3])
            .bind(fetched)
            .bind(change)
            .execute(pool)
            .await
            .unwrap();
        }
    }
    // Items for most results, first seen at times apart from their results'
    // (a result without one is first seen when it was fetched).
    sqlx::query(
        r#"INSERT INTO items (keyword_id, site_id, identified_by, item_key, item_url, fields,
                              content_hash, first_seen_at, last_seen_at, last_changed_at,
                              last_page, last_position, last_page_url)
           SELECT DISTINCT ON (keyword_id, site_id, item_key)
                  keyword_id, site_id, 'url', item_key, item_url, fields, content_hash,
                  fetched_at - interval '50 minutes', fetched_at + interval '1 hour', fetched_at,
                  page, position, page_url
           FROM crawl_results WHERE position <> 2
           ORDER BY keyword_id, site_id, item_key, id"#,
    )
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        r#"UPDATE crawl_results r SET item_id = i.id FROM items i
           WHERE i.keyword_id = r.keyword_id AND i.site_id = r.site_id AND i.item_key = r.item_key"#,
    )
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        r#"INSERT INTO item_removals (run_id, item_id, keyword_id, site_id, item_key, item_url, fields,
                                      content_hash, page, position, page_url, first_seen_at,
                                      last_seen_at)
           SELECT DISTINCT ON (r.run_id) r.run_id, i.id, i.keyword_id, i.site_id, i.item_key,
                  i.item_url, i.fields, i.content_hash, i.last_page, i.last_position,
                  i.last_page_url, i.first_seen_at, i.last_seen_at
           FROM crawl_results r JOIN items i ON i.id = r.item_id
           ORDER BY r.run_id, r.id"#,
    )
    .execute(pool)
    .await
    .unwrap();
}

/// What a result listing's filters look at, read back from the tables.
#[derive(sqlx::FromRow)]
struct ResultFacts {
    id: i64,
    run_id: i64,
    keyword_id: i64,
    site_id: i64,
    first_seen_at: DateTime<Utc>,
    change: Option<String>,
    title: String,
}

fn selects_result(filter: &ResultFilter, result: &ResultFacts) -> bool {
    filter.keyword_id.is_none_or(|k| result.keyword_id == k)
        && filter.site_id.is_none_or(|s| result.site_id == s)
        && filter.run_id.is_none_or(|r| result.run_id == r)
        && filter.after.is_none_or(|id| result.id > id)
        && filter
            .text
            .as_deref()
            .is_none_or(|word| result.title.split(' ').any(|w| w == word))
        && filter
            .first_seen_after
            .is_none_or(|t| result.first_seen_at >= t)
        && filter
            .first_seen_before
            .is_none_or(|t| result.first_seen_at < t)
}

/// Every result the filter selects, following the cursor `page` at a time
/// as `/api/results` does.
async fn walk_results(pool: &PgPool, filter: &ResultFilter, page: i64) -> Vec<i64> {
    let mut filter = ResultFilter {
        limit: page,
        ..filter.clone()
    };
    let mut ids = Vec::new();
    // More pages than rows: the cursor is not moving on.
    for _ in 0..=PAGES_AT_MOST {
        let results = store::results::list(pool, &filter).await.unwrap();
        assert!(results.len() as i64 <= page);
        ids.extend(results.iter().map(|r| r.id));
        match results.last() {
            Some(last) if results.len() as i64 == page => filter.after = Some(last.id),
            _ => return ids,
        }
    }
    panic!("more than {PAGES_AT_MOST} pages: the cursor does not move on ({filter:?})");
}

#[tokio::test]
async fn results_are_listed_by_every_filter_alone_and_combined_page_by_page() {
    let db = TestDb::new().await;
    let pool = &db.pool;
    let pairs = pairs(pool).await;
    let runs = runs(pool, &pairs).await;
    results(pool, &runs).await;
    let stored: Vec<ResultFacts> = sqlx::query_as(
        r#"SELECT r.id, r.run_id, r.keyword_id, r.site_id,
                  COALESCE(i.first_seen_at, r.fetched_at) AS first_seen_at, r.change,
                  r.fields->>'title' AS title
           FROM crawl_results r LEFT JOIN items i ON i.id = r.item_id
           ORDER BY r.id"#,
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let removed: Vec<ResultFacts> = sqlx::query_as(
        r#"SELECT id, run_id, keyword_id, site_id, first_seen_at, 'removed' AS change,
                  fields->>'title' AS title
           FROM item_removals ORDER BY id"#,
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(removed.len() >= 6, "{} removals", removed.len());

    // Each filter, set to a value that selects some results, not all.
    let (keyword, site, run, cursor) = (pairs.keywords[0], pairs.sites[1], runs[6], stored[10].id);
    let setters: Vec<Setter<ResultFilter>> = vec![
        Box::new(move |f| f.keyword_id = Some(keyword)),
        Box::new(move |f| f.site_id = Some(site)),
        Box::new(move |f| f.run_id = Some(run)),
        Box::new(move |f| f.after = Some(cursor)),
        Box::new(|f| f.text = Some("red".into())),
        Box::new(|f| f.first_seen_after = Some(at(20))),
        Box::new(|f| f.first_seen_before = Some(at(75))),
    ];
    for change in [
        None,
        Some(Change::New),
        Some(Change::Changed),
        Some(Change::Unchanged),
        Some(Change::Removed),
    ] {
        let (rows, removals) = match change {
            Some(Change::Removed) => (&removed, true),
            _ => (&stored, false),
        };
        let base = ResultFilter {
            change,
            limit: MAX_LIMIT,
            ..ResultFilter::default()
        };
        for (filters, filter) in every_combination(&base, &setters) {
            let expected: Vec<i64> = rows
                .iter()
                .filter(|row| selects_result(&filter, row))
                .filter(|row| {
                    removals || change.is_none_or(|c| row.change.as_deref() == Some(c.as_str()))
                })
                .map(|row| row.id)
                .collect();
            // Each filter alone, and the change alone, is worth testing.
            let alone = match change {
                None => filters == 1,
                Some(_) => filters == 0 && !removals,
            };
            if alone {
                assert!(
                    !expected.is_empty() && expected.len() < rows.len(),
                    "a filter alone selects some results, not all: {filter:?}"
                );
            }
            for page in [1, 4, MAX_LIMIT] {
                assert_eq!(
                    walk_results(pool, &filter, page).await,
                    expected,
                    "{filter:?}, {page} a page"
                );
            }
        }
    }
    db.drop().await;
}

#[tokio::test]
async fn a_result_listing_reads_every_column_and_refuses_a_limit_out_of_range() {
    let db = TestDb::new().await;
    let pool = &db.pool;
    let pairs = pairs(pool).await;
    let runs = runs(pool, &pairs).await;
    results(pool, &runs).await;
    let list = |run_id, change| ResultFilter {
        run_id: Some(run_id),
        change,
        limit: MAX_LIMIT,
        ..ResultFilter::default()
    };

    // The second run's: new (an item first seen 50 minutes before), changed
    // with its diff, and unchanged without an item (first seen when fetched).
    let listed = store::results::list(pool, &list(runs[1], None))
        .await
        .unwrap();
    assert_eq!(listed.len(), 3);
    let fetched = at(63);
    let first = &listed[0];
    assert_eq!(
        (
            first.run_id,
            first.keyword_id,
            first.site_id,
            first.page,
            first.position
        ),
        (runs[1], Some(pairs.keywords[1]), pairs.sites[0], 1, 0)
    );
    assert_eq!(first.page_url, "http://127.0.0.1/search");
    assert_eq!(first.item_url.as_deref(), Some("http://127.0.0.1/item/1-0"));
    assert_eq!(first.fields, json!({"title": "blue desk", "price": 0}));
    assert_eq!(
        (first.fetched_at, first.first_seen_at, first.last_seen_at),
        (
            fetched,
            fetched - TimeDelta::minutes(50),
            fetched + TimeDelta::hours(1)
        )
    );
    assert!(first.item_id.is_some());
    assert_eq!((first.change, &first.diff), (Some(Change::New), &None));
    let diff: FieldDiff =
        serde_json::from_value(json!({"price": {"old": "1", "new": "2"}})).unwrap();
    assert_eq!(
        (listed[1].change, &listed[1].diff),
        (Some(Change::Changed), &Some(diff))
    );
    let last = &listed[2];
    assert_eq!(
        (
            last.change,
            last.item_id,
            last.first_seen_at,
            last.last_seen_at
        ),
        (Some(Change::Unchanged), None, at(65), at(65))
    );
    // The first run's, stored before change tracking.
    let before_tracking = store::results::list(pool, &list(runs[0], None))
        .await
        .unwrap();
    assert!(before_tracking.iter().all(|r| r.change.is_none()));

    // A removal, as its item was last seen.
    let removals = store::results::list(pool, &list(runs[1], Some(Change::Removed)))
        .await
        .unwrap();
    let item = first.item_id.unwrap();
    let removal: &CrawlResult = &removals[0];
    assert_eq!(removals.len(), 1);
    assert_eq!(
        (
            removal.run_id,
            removal.item_id,
            removal.change,
            &removal.diff
        ),
        (runs[1], Some(item), Some(Change::Removed), &None)
    );
    assert_eq!(
        (
            removal.fetched_at,
            removal.first_seen_at,
            removal.last_seen_at
        ),
        (first.last_seen_at, first.first_seen_at, first.last_seen_at)
    );
    assert_eq!(removal.fields, first.fields);

    for limit in [0, -1, MAX_LIMIT + 1] {
        for change in [None, Some(Change::Removed)] {
            let refused = store::results::list(
                pool,
                &ResultFilter {
                    change,
                    limit,
                    ..ResultFilter::default()
                },
            )
            .await;
            assert!(
                matches!(refused, Err(sqlx::Error::InvalidArgument(_))),
                "limit {limit}, {change:?}: {refused:?}"
            );
        }
    }
    db.drop().await;
}

//! What change tracking costs per stored item: a run's pages stored and the
//! run completed through the store's fenced writes as a worker makes them
//! (`store_page`, `complete`), against the same pages through the store path
//! from before change tracking (its SQL kept here as text: the results and
//! `seen_items` written, nothing judged). Both paths run interleaved, round
//! after round (their order swapped each round), on keywords of their own in
//! one database, so the machine's noise falls on both alike. Three cases:
//! every item new (a keyword's first run), every item unchanged (a re-crawl of
//! the same items), and a re-crawl where 10% of the items changed and 10% are
//! gone (and the previous round's gone ones are back, as new). Needs Postgres
//! and Redis.
//!
//!   cargo bench --bench change_tracking      (or scripts/bench)
//!
//! Prints the median µs per stored item of each path and the median of the
//! paired differences (each page's commit does not wait for its WAL flush:
//! that wait is the same on both paths, and the noisiest part), and how many
//! of the items' row updates were HOT; exits non-zero if a run's counts are
//! not what the case makes them (then the figures would not measure what
//! they say).

#[allow(dead_code, unused_imports)]
#[path = "../../tests/it/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use crawlfleet::{
    domain::{
        item::PageItem,
        page::{CrawledPage, PagesRead, PagingEnd},
        run::Trigger,
    },
    store,
    worker::content_hash,
};
use serde_json::json;
use sqlx::PgPool;

use support::{ON_DEMAND, TestApp, dispatch_and_claim};

mod before;

/// Items a run stores, and how many a page holds.
const ITEMS: usize = 400;
const PER_PAGE: usize = 20;
const ROUNDS: usize = 20;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Path {
    /// The store path before change tracking.
    Before,
    /// `store::runs::store_page` and `complete`.
    Tracked,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Case {
    AllNew,
    AllUnchanged,
    /// 10% changed, 10% removed.
    Churn,
}

/// Item `n` with a price of `version` (another version: another value).
fn item(n: usize, version: usize) -> PageItem {
    let fields = json!({
        "title": format!("Brass lamp, model {n}"),
        "link": format!("http://127.0.0.1/item/{n}"),
        "price": format!("${}.{:02}", 10 + n % 90, version % 100),
    });
    PageItem {
        content_hash: content_hash(&fields),
        item_url: Some(format!("http://127.0.0.1/item/{n}")),
        fields,
    }
}

/// The tenth of the items whose price changes in round `round` (churn).
fn changed_in(round: usize) -> std::ops::Range<usize> {
    let start = (round * ITEMS / 5) % ITEMS;
    start..start + ITEMS / 10
}

/// The tenth of the items gone in round `round` (churn): the next one.
fn gone_in(round: usize) -> std::ops::Range<usize> {
    let start = changed_in(round).end % ITEMS;
    start..start + ITEMS / 10
}

/// The items of round `round` of `case`. In the churn case each round gives
/// a tenth of the items a new price and leaves the next tenth out (a
/// different fifth each round); an item keeps the price it was last given.
fn items(case: Case, round: usize) -> Vec<PageItem> {
    let version = |n: usize| {
        (0..=round)
            .rev()
            .find(|r| changed_in(*r).contains(&n))
            .map_or(0, |r| r + 1)
    };
    (0..ITEMS)
        .filter(|n| case != Case::Churn || !gone_in(round).contains(n))
        .map(|n| match case {
            Case::Churn => item(n, version(n)),
            _ => item(n, 0),
        })
        .collect()
}

/// Stores `items` as one run of `keyword` by `path`; the time its writes
/// took (pages and completion; not queueing and claiming the run), and its
/// counts (new, changed, removed; zero by the path before).
async fn run(pool: &PgPool, keyword: i64, path: Path, items: &[PageItem]) -> (Duration, [i32; 3]) {
    let queued = store::runs::queue_for_keyword(pool, keyword, Trigger::Manual, None, 3)
        .await
        .unwrap()
        .unwrap();
    let fence = dispatch_and_claim(pool, queued.queued[0].id, 1, "bench")
        .await
        .unwrap()
        .fence;
    let mut took = Duration::ZERO;
    let pages = items.chunks(PER_PAGE).len() as i32;
    for (at, chunk) in items.chunks(PER_PAGE).enumerate() {
        let url = format!("http://127.0.0.1/search?page={}", at + 1);
        store::runs::enter_url_call(pool, &fence, &url)
            .await
            .unwrap();
        let crawled = CrawledPage {
            page: at as i32 + 1,
            url: &url,
            items: chunk,
            item_key: None,
            stored_before: &[],
            details_read: &[],
        };
        let started = Instant::now();
        match path {
            Path::Before => before::store_page(pool, &fence, &crawled).await,
            Path::Tracked => {
                store::runs::store_page(pool, &fence, &crawled)
                    .await
                    .unwrap();
            }
        }
        took += started.elapsed();
    }
    let started = Instant::now();
    let counts = match path {
        Path::Before => {
            before::complete(pool, &fence, pages).await;
            [0; 3]
        }
        Path::Tracked => {
            let read = PagesRead::new(pages, PagingEnd::LastPage);
            let done = store::runs::complete(pool, &fence, read).await.unwrap();
            [
                done.run.items_new,
                done.run.items_changed,
                done.run.items_removed,
            ]
        }
    };
    (took + started.elapsed(), counts)
}

/// What each case's tracked runs must count.
fn expected(case: Case, round: usize) -> [i32; 3] {
    let tenth = (ITEMS / 10) as i32;
    match case {
        Case::AllNew => [ITEMS as i32, 0, 0],
        Case::AllUnchanged => [0, 0, 0],
        // The tenth gone last round is back (new), unless this is the first.
        Case::Churn => [if round == 0 { 0 } else { tenth }, tenth, tenth],
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main]
async fn main() {
    let app = TestApp::spawn().await;
    // Each page is one commit on both paths: the wait for its WAL flush is
    // the same for both (and, on a busy disk, most of the noise). Without
    // it, what is measured is the work each path does.
    sqlx::query(&format!(
        "ALTER DATABASE {} SET synchronous_commit = off",
        app.db.name
    ))
    .execute(app.pool())
    .await
    .unwrap();
    let pool = store::connect(&app.db.url, 4).await.unwrap();
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let mut keywords = 0;
    let mut keyword = async || {
        keywords += 1;
        app.create_keyword(&format!("k{keywords}"), &[site], ON_DEMAND)
            .await
    };
    for case in [Case::AllNew, Case::AllUnchanged, Case::Churn] {
        // A keyword per path, crawled once before the rounds (re-crawl cases).
        let mut steady = Vec::new();
        for path in [Path::Before, Path::Tracked] {
            let k = keyword().await;
            if case != Case::AllNew {
                run(&pool, k, path, &items(Case::AllUnchanged, 0)).await;
            }
            steady.push((path, k));
        }
        let (mut before, mut tracked, mut extra) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            let items = items(case, round);
            let mut order = steady.clone();
            if round % 2 == 1 {
                order.reverse();
            }
            let mut this_round = [0.0; 2];
            for (path, k) in order {
                let k = if case == Case::AllNew {
                    keyword().await
                } else {
                    k
                };
                let (took, counts) = run(&pool, k, path, &items).await;
                let per_item = took.as_secs_f64() * 1e6 / items.len() as f64;
                if path == Path::Tracked && counts != expected(case, round) {
                    eprintln!(
                        "{case:?} round {round}: counted {counts:?}, expected {:?}",
                        expected(case, round)
                    );
                    std::process::exit(1);
                }
                this_round[(path == Path::Tracked) as usize] = per_item;
            }
            // As autovacuum keeps them in production: statistics that know
            // how big the tables grew (the plans cached for the statements
            // are made again with them), outside the time measured.
            sqlx::query("ANALYZE items, item_history, crawl_results, seen_items")
                .execute(&pool)
                .await
                .unwrap();
            before.push(this_round[0]);
            tracked.push(this_round[1]);
            extra.push(this_round[1] - this_round[0]);
        }
        println!(
            "{:<13} before {:>6.1} µs/item, with change tracking {:>6.1} µs/item: {:>+6.1} µs/item \
             (medians of {ROUNDS} interleaved rounds of {} items, {PER_PAGE} a page)",
            format!("{case:?}:"),
            median(before),
            median(tracked),
            median(extra),
            items(case, 1).len(),
        );
    }
    // Every run rewrites the rows of the items it sees: HOT updates (no index
    // touched, the new version on the same page) keep that cheap.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (updates, hot): (i64, i64) = sqlx::query_as(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'items'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    println!(
        "items: {hot} of {updates} row updates were HOT ({:.0}%)",
        100.0 * hot as f64 / updates.max(1) as f64
    );
    pool.close().await;
    app.stop().await;
}

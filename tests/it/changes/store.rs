//! The store's change-tracking rules, driven by hand through the fenced
//! writes a worker makes: an item seen again in the same run, a superseded
//! worker, the diff Postgres computes, and the items made from the results
//! stored before change tracking.

use crawlfleet::{
    domain::{
        change::{Change, FieldDiff},
        failure::{Failure, FailureKind},
        item::PageItem,
        page::{CrawledPage, PagesRead, PagingEnd},
        run::Trigger,
    },
    store::{
        self,
        runs::{Fence, FenceError},
    },
    worker::content_hash,
};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::{ON_DEMAND, TestApp, TestDb, dispatch_and_claim};

fn item(url: &str, price: &str) -> PageItem {
    let fields = json!({"link": url, "price": price});
    PageItem {
        content_hash: content_hash(&fields),
        item_url: Some(url.to_owned()),
        fields,
    }
}

async fn store(app: &TestApp, fence: &Fence, page: i32, items: &[PageItem]) -> (usize, usize) {
    let pool = app.pool();
    let url = format!("http://127.0.0.1/?page={page}");
    store::runs::enter_url_call(pool, fence, &url)
        .await
        .unwrap();
    let crawled = CrawledPage {
        page,
        url: &url,
        items,
        item_key: None,
        stored_before: &[],
        details_read: &[],
    };
    let stored = store::runs::store_page(pool, fence, &crawled)
        .await
        .unwrap();
    (stored.new, stored.changed)
}

/// A new run of `keyword`, claimed by `worker`.
async fn claimed(app: &TestApp, keyword: i64, worker: &str) -> Fence {
    let queued = store::runs::queue_for_keyword(app.pool(), keyword, Trigger::Manual, None, 3)
        .await
        .unwrap()
        .unwrap();
    let run = queued.queued[0].id;
    dispatch_and_claim(app.pool(), run, 1, worker)
        .await
        .unwrap()
        .fence
}

#[tokio::test]
async fn an_item_seen_again_in_the_same_run_keeps_its_change_and_counts_once() {
    let app = TestApp::spawn().await;
    let pool = app.pool();
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let keyword = app.create_keyword("vase", &[site], ON_DEMAND).await;
    let (a, b) = ("http://127.0.0.1/a", "http://127.0.0.1/b");

    let first = claimed(&app, keyword, "w").await;
    assert_eq!(
        store(&app, &first, 1, &[item(a, "$1"), item(b, "$2")]).await,
        (2, 0)
    );
    let done = store::runs::complete(pool, &first, PagesRead::new(1, PagingEnd::LastPage))
        .await
        .unwrap();
    assert_eq!((done.changes.new, done.changes.removals_judged), (2, true));

    // a costs more. The page is listed with a twice; then the attempt fails
    // and the next one stores the same page again, and a once more on page 2.
    let second = claimed(&app, keyword, "w").await;
    let page = [item(a, "$5"), item(b, "$2"), item(a, "$5")];
    assert_eq!(store(&app, &second, 1, &page).await, (0, 1));
    let stuck = Failure::new(FailureKind::Stuck, "stuck: test");
    store::runs::fail_attempt(pool, &second, &stuck)
        .await
        .unwrap();
    let retried = dispatch_and_claim(pool, second.run_id, 2, "w2")
        .await
        .unwrap()
        .fence;
    assert_eq!(
        store(&app, &retried, 1, &page).await,
        (0, 0),
        "counted once"
    );
    assert_eq!(store(&app, &retried, 2, &[item(a, "$5")]).await, (0, 0));
    let done = store::runs::complete(pool, &retried, PagesRead::new(2, PagingEnd::LastPage))
        .await
        .unwrap();
    assert_eq!(
        (
            done.run.items_new,
            done.run.items_changed,
            done.run.items_removed
        ),
        (0, 1, 0)
    );
    let diff = json!({"price": {"old": "$1", "new": "$5"}});
    assert_eq!(done.changes.samples.len(), 1);
    let sample = &done.changes.samples[0];
    assert_eq!(sample.change, Change::Changed);
    assert_eq!(serde_json::to_value(&sample.diff).unwrap(), diff);
    // Every listing of a in the run's results says the same.
    let results = app.results_of_run(second.run_id).await;
    let of_a: Vec<&Value> = results.iter().filter(|r| r["item_url"] == a).collect();
    assert_eq!(of_a.len(), 3);
    for result in of_a {
        assert_eq!(
            (&result["change"], &result["diff"]),
            (&json!("changed"), &diff)
        );
    }

    // The superseded first attempt's worker writes nothing, items included.
    let url = "http://127.0.0.1/?page=3";
    let late = CrawledPage {
        page: 3,
        url,
        items: &[item("http://127.0.0.1/late", "$9")],
        item_key: None,
        stored_before: &[],
        details_read: &[],
    };
    let refused = store::runs::store_page(pool, &second, &late).await;
    assert!(matches!(refused, Err(FenceError::Superseded { .. })));
    let items: i64 = sqlx::query_scalar("SELECT count(*) FROM items")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(items, 2);
    app.stop().await;
}

#[tokio::test]
async fn the_diff_postgres_computes_is_the_domains() {
    let db = TestDb::new().await;
    let cases = [
        (
            json!({"title": "Lamp", "price": "$5"}),
            json!({"title": "Lamp", "price": "$6"}),
        ),
        (
            json!({"a": 1, "gone": [1, 2]}),
            json!({"a": 1, "added": {"x": null}}),
        ),
        (json!({"a": null}), json!({"a": "now"})),
        (
            json!({"same": {"deep": [1]}}),
            json!({"same": {"deep": [1]}}),
        ),
        (json!({}), json!({"only": "new"})),
    ];
    for (old, new) in cases {
        let computed: Value = sqlx::query_scalar("SELECT field_diff($1, $2)")
            .bind(&old)
            .bind(&new)
            .fetch_one(&db.pool)
            .await
            .unwrap();
        let expected = serde_json::to_value(FieldDiff::between(&old, &new)).unwrap();
        assert_eq!(computed, expected, "{old} -> {new}");
    }
    db.drop().await;
}

/// The version of the migration that brought change tracking.
const CHANGE_TRACKING: i64 = 20261125000040;

/// A completed run of keyword 1 on site 1 that stored `items`, `days_ago`,
/// as the store before change tracking wrote it.
async fn stored_before_tracking(pool: &PgPool, items: &[PageItem], days_ago: i32) {
    let run: i64 = sqlx::query_scalar(
        r#"INSERT INTO crawl_runs (keyword_id, site_id, state, trigger, max_attempts, finished_at)
           VALUES (1, 1, 'completed', 'manual', 3, now() - make_interval(days => $1)) RETURNING id"#,
    )
    .bind(days_ago)
    .fetch_one(pool)
    .await
    .unwrap();
    for (at, item) in items.iter().enumerate() {
        sqlx::query(
            r#"INSERT INTO crawl_results (run_id, keyword_id, site_id, page, position, page_url, item_url,
                                          fields, content_hash, item_key, fetched_at)
               VALUES ($1, 1, 1, 1, $2, 'http://127.0.0.1/', $3, $4, $5, $3,
                       now() - make_interval(days => $6))"#,
        )
        .bind(run)
        .bind(at as i32 + 1)
        .bind(&item.item_url)
        .bind(&item.fields)
        .bind(&item.content_hash)
        .bind(days_ago)
        .execute(pool)
        .await
        .unwrap();
    }
}

#[tokio::test]
async fn results_stored_before_change_tracking_become_items_the_next_run_compares_with() {
    let db = TestDb::unmigrated().await;
    let pool = &db.pool;
    store::schema::migrate_before(pool, CHANGE_TRACKING)
        .await
        .unwrap();
    sqlx::raw_sql(
        r#"INSERT INTO sites (name, search_url, item_selector, fields)
           VALUES ('shop', 'http://127.0.0.1/?q={keyword}', 'li', '{}');
           INSERT INTO keywords (keyword, schedule) VALUES ('vase', '0 0 0 1 1 *');
           INSERT INTO keyword_sites (keyword_id, site_id) VALUES (1, 1);"#,
    )
    .execute(pool)
    .await
    .unwrap();
    let (a, b) = ("http://127.0.0.1/a", "http://127.0.0.1/b");
    stored_before_tracking(pool, &[item(a, "$1"), item(b, "$2")], 3).await;
    stored_before_tracking(pool, &[item(a, "$4"), item(b, "$2")], 2).await;

    store::migrate(pool).await.unwrap();
    let a_id: i64 = sqlx::query_scalar("SELECT id FROM items WHERE item_key = $1")
        .bind(a)
        .fetch_one(pool)
        .await
        .unwrap();
    let history = store::items::history(pool, a_id, None, 10).await.unwrap();
    let prices: Vec<&Value> = history.iter().map(|v| &v.fields["price"]).collect();
    assert_eq!(prices, [&json!("$4"), &json!("$1")], "newest first");
    assert_eq!(
        serde_json::to_value(&history[0].diff).unwrap(),
        json!({"price": {"old": "$1", "new": "$4"}})
    );
    let kept = store::items::get(pool, a_id).await.unwrap().unwrap();
    assert!(kept.first_seen_at < history[0].seen_at, "{kept:?}");

    // The first run after: b is the same item, unchanged; a changed again.
    let queued = store::runs::queue_for_keyword(pool, 1, Trigger::Manual, None, 3)
        .await
        .unwrap()
        .unwrap();
    let fence = dispatch_and_claim(pool, queued.queued[0].id, 1, "w")
        .await
        .unwrap()
        .fence;
    store::runs::enter_url_call(pool, &fence, "http://127.0.0.1/")
        .await
        .unwrap();
    let page = [item(a, "$5"), item(b, "$2")];
    let crawled = CrawledPage {
        page: 1,
        url: "http://127.0.0.1/",
        items: &page,
        item_key: None,
        stored_before: &[],
        details_read: &[],
    };
    let stored = store::runs::store_page(pool, &fence, &crawled)
        .await
        .unwrap();
    assert_eq!((stored.new, stored.changed), (0, 1));
    db.drop().await;
}

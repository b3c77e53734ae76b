//! The run lifecycle as the store applies it: each guarded statement moves
//! the run as `domain::run::Transition` decides, and under a stale fence
//! (an old attempt, another worker) changes nothing. The states written out
//! in SQL, where a partial index needs them, are the ones Rust defines.

use crawlfleet::{
    domain::{
        failure::{Failure, FailureKind},
        item::PageItem,
        page::{CrawledPage, PagesRead, PagingEnd},
        run::{AttemptOutcome, CrawlRun, RunState},
    },
    store::{
        self,
        runs::{Evidence, Fence, FenceError},
    },
};
use serde_json::json;
use sqlx::PgPool;

use crate::{
    crawl::claimed,
    support::{TestApp, TestDb, dispatch_and_claim},
};

async fn run(pool: &PgPool, id: i64) -> CrawlRun {
    store::runs::get(pool, id).await.unwrap().unwrap()
}

fn superseded<T: std::fmt::Debug>(result: Result<T, FenceError>, what: &str) {
    assert!(
        matches!(result, Err(FenceError::Superseded { .. })),
        "{what} under a stale fence: {result:?}"
    );
}

/// A run claimed by `worker-a`, its page request in flight.
async fn in_url_call(app: &TestApp) -> (i64, Fence) {
    let (run_id, fence) = claimed(app, "worker-a").await;
    store::runs::enter_url_call(app.pool(), &fence, "http://127.0.0.1/p1")
        .await
        .unwrap();
    (run_id, fence)
}

/// Every fenced write, tried with a fence of another worker and with one of
/// an earlier attempt: each is refused and the run stays exactly as it was.
#[tokio::test]
async fn every_fenced_move_under_a_stale_fence_changes_nothing() {
    let app = TestApp::spawn().await;
    let pool = app.pool();
    let (run_id, fence) = in_url_call(&app).await;
    let before = run(pool, run_id).await;
    let items = [PageItem {
        fields: json!({"title": "one"}),
        item_url: None,
        content_hash: "h1".to_owned(),
    }];
    let page = CrawledPage {
        page: 1,
        url: "http://127.0.0.1/p1",
        items: &items,
        item_key: None,
        stored_before: &[],
        details_read: &[],
    };
    let failure = Failure::new(FailureKind::Network, "boom");
    let evidence = Evidence {
        page_url: None,
        html: Some("<p>".to_owned()),
        screenshot: None,
    };
    let stale = [
        Fence {
            worker_id: "worker-b".to_owned(),
            ..fence.clone()
        },
        Fence {
            attempt: fence.attempt - 1,
            ..fence.clone()
        },
    ];
    for stale in &stale {
        superseded(
            store::runs::enter_url_call(pool, stale, "http://127.0.0.1/x").await,
            "enter_url_call",
        );
        superseded(store::runs::heartbeat(pool, stale).await, "heartbeat");
        superseded(store::runs::page_refused(pool, stale).await, "page_refused");
        superseded(
            store::runs::store_page(pool, stale, &page).await,
            "store_page",
        );
        superseded(
            store::runs::complete(pool, stale, PagesRead::new(1, PagingEnd::LastPage)).await,
            "complete",
        );
        superseded(
            store::runs::fail_attempt(pool, stale, &failure).await,
            "fail_attempt",
        );
        superseded(store::runs::release(pool, stale).await, "release");
        superseded(
            store::runs::keep_evidence(pool, stale, &evidence).await,
            "keep_evidence",
        );
        assert!(!store::runs::is_held(pool, stale).await.unwrap());
    }
    assert_eq!(run(pool, run_id).await, before, "the run did not move");
    let results: i64 = sqlx::query_scalar("SELECT count(*) FROM crawl_results WHERE run_id = $1")
        .bind(run_id)
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(results, 0, "no stale page landed");
    assert!(store::runs::is_held(pool, &fence).await.unwrap());
    app.stop().await;
}

/// The moves a crawl does not make on the happy path, each by its own
/// guarded statement: a refused page, a release, a retried failure, a final
/// one, a user's retry and cancel.
#[tokio::test]
async fn each_move_applies_its_transition_once() {
    let app = TestApp::spawn().await;
    let pool = app.pool();
    let (run_id, fence) = in_url_call(&app).await;
    let refused = store::runs::page_refused(pool, &fence).await.unwrap();
    assert_eq!((refused.state, refused.refusals), (RunState::CallDone, 1));
    // Out of url_call: refused again is not a move it can make.
    superseded(
        store::runs::page_refused(pool, &fence).await,
        "page_refused twice",
    );

    let released = store::runs::release(pool, &fence).await.unwrap();
    assert_eq!((released.state, released.attempt), (RunState::Queued, 1));
    assert_eq!(released.worker_id, None);
    superseded(store::runs::release(pool, &fence).await, "release twice");

    let fence = dispatch_and_claim(pool, run_id, 1, "worker-b")
        .await
        .unwrap()
        .fence;
    let retried = store::runs::fail_attempt(pool, &fence, &Failure::new(FailureKind::Network, "n"))
        .await
        .unwrap();
    assert_eq!((retried.state, retried.attempt), (RunState::Queued, 2));
    assert!(retried.not_before.is_some(), "a retry waits its backoff");
    assert_eq!(retried.finished_at, None);

    let fence = dispatch_and_claim(pool, run_id, 2, "worker-b")
        .await
        .unwrap()
        .fence;
    let failed =
        store::runs::fail_attempt(pool, &fence, &Failure::new(FailureKind::HttpStatus, "404"))
            .await
            .unwrap();
    assert_eq!((failed.state, failed.attempt), (RunState::Failed, 2));
    assert_eq!(failed.worker_id.as_deref(), Some("worker-b"));
    assert_eq!(failed.not_before, None);
    assert!(failed.finished_at.is_some());
    let outcomes: Vec<Option<AttemptOutcome>> = store::runs::attempts(pool, run_id)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.outcome)
        .collect();
    assert_eq!(
        outcomes,
        [
            Some(AttemptOutcome::Released),
            Some(AttemptOutcome::Failed),
            Some(AttemptOutcome::Failed)
        ]
    );

    let again = store::runs::retry(pool, run_id, 3)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!((again.state, again.attempt), (RunState::Queued, 3));
    assert_eq!(
        again.max_attempts,
        2 + 3,
        "a fresh budget from the next attempt"
    );
    assert!(
        store::runs::retry(pool, run_id, 3)
            .await
            .unwrap()
            .unwrap()
            .is_err(),
        "a queued run is not retried"
    );

    let cancelled = store::runs::cancel(pool, run_id).await.unwrap().unwrap();
    assert_eq!(cancelled.state, RunState::Cancelled);
    assert!(cancelled.finished_at.is_some());
    let unchanged = store::runs::cancel(pool, run_id).await.unwrap().unwrap();
    assert_eq!(unchanged, cancelled, "an ended run is not cancelled again");
    app.stop().await;
}

/// The states an index's predicate names, in order.
async fn states(pool: &PgPool, index: &str) -> Vec<String> {
    let predicate: String = sqlx::query_scalar(
        "SELECT pg_get_expr(i.indpred, i.indrelid) FROM pg_index i
         JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = $1",
    )
    .bind(index)
    .fetch_one(pool)
    .await
    .unwrap();
    // The quoted names: every other piece between quotes.
    predicate
        .split('\'')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The partial indexes over run states are written in SQL (a bound
/// parameter cannot match an index predicate); they hold the states Rust
/// defines, so the two cannot drift apart.
#[tokio::test]
async fn the_partial_indexes_over_run_states_hold_the_states_rust_defines() {
    let db = TestDb::new().await;
    let names = |states: &[RunState]| -> Vec<String> {
        states.iter().map(|s| s.as_str().to_owned()).collect()
    };
    let pool = &db.pool;
    assert_eq!(
        states(pool, "crawl_runs_one_active").await,
        names(&RunState::ACTIVE)
    );
    // The dispatcher's count of a site's runs: held, or queued and dispatched.
    let held_or_dispatched = [RunState::HELD.as_slice(), &[RunState::Queued]].concat();
    assert_eq!(
        states(pool, "crawl_runs_site_active").await,
        names(&held_or_dispatched)
    );
    assert_eq!(
        states(pool, "crawl_runs_keyword_site_finished").await,
        names(&[RunState::Completed])
    );
    db.drop().await;
}

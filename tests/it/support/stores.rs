//! The Postgres and Redis a test owns: a database of its own, a queue
//! namespace of its own, and the reads and hand-made steps tests check the
//! stores with.

use std::collections::HashMap;

use crawlfleet::{
    domain::{
        item::PageItem,
        page::{CrawledPage, PagesRead, PagingEnd},
    },
    queue, store,
};
use sqlx::{Connection, PgConnection, PgPool};
use uuid::Uuid;

/// The Postgres server the tests share (`DATABASE_URL`), as its `postgres`
/// database: where test databases are created and dropped.
pub fn database_server() -> url::Url {
    let mut url: url::Url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
        .parse()
        .expect("DATABASE_URL is a URL");
    url.set_path("/postgres");
    url
}

/// The Redis server the tests share (`REDIS_URL`); each test keeps to a
/// queue namespace of its own ([`test_queue_name`]).
pub fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A queue name no other test uses: the prefix of every Redis key of a test.
pub fn test_queue_name() -> String {
    format!("test-{}", Uuid::new_v4().simple())
}

/// A database of its own, migrated, dropped by [`TestDb::drop`].
pub struct TestDb {
    pub name: String,
    pub url: String,
    pub pool: PgPool,
}

impl TestDb {
    /// A new database with the schema of this build.
    pub async fn new() -> TestDb {
        let db = Self::unmigrated().await;
        store::migrate(&db.pool)
            .await
            .expect("migrate test database");
        db
    }

    /// A new database nobody has migrated yet, as a fresh deployment finds it.
    pub async fn unmigrated() -> TestDb {
        let server = database_server();
        let name = format!("cf_test_{}", Uuid::new_v4().simple());
        let mut admin = PgConnection::connect(server.as_str())
            .await
            .expect("Postgres reachable");
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await
            .expect("create test database");
        admin.close().await.ok();
        let mut url = server.clone();
        url.set_path(&format!("/{name}"));
        let pool = store::connect(url.as_str(), 10)
            .await
            .expect("connect test database");
        TestDb {
            name,
            url: url.to_string(),
            pool,
        }
    }

    /// Drops the database, whoever is still connected to it.
    pub async fn drop(self) {
        self.pool.close().await;
        let mut admin = PgConnection::connect(database_server().as_str())
            .await
            .expect("Postgres reachable");
        sqlx::query(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ))
        .execute(&mut admin)
        .await
        .expect("drop test database");
    }
}

/// Removes every Redis key of a test's queue.
pub async fn clear_queue(queue_name: &str) {
    let mut redis = queue::connect(&redis_url()).await.expect("Redis reachable");
    let _: () = redis::cmd("ZREM")
        .arg("core:apalis:queues:list")
        .arg(format!("{queue_name}:workers"))
        .query_async(&mut redis)
        .await
        .expect("ZREM");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{queue_name}:*"))
        .query_async(&mut redis)
        .await
        .expect("KEYS");
    if !keys.is_empty() {
        let _: () = redis::cmd("DEL")
            .arg(keys)
            .query_async(&mut redis)
            .await
            .expect("DEL");
    }
}

/// Claims a run by hand as a worker would after its message arrived: the
/// dispatcher's mark first (only a dispatched run can be claimed).
pub async fn dispatch_and_claim(
    pool: &PgPool,
    run_id: i64,
    attempt: i32,
    worker: &str,
) -> Option<store::runs::ClaimedRun> {
    sqlx::query("UPDATE crawl_runs SET dispatched_at = now() WHERE id = $1 AND state = 'queued'")
        .bind(run_id)
        .execute(pool)
        .await
        .unwrap();
    store::runs::claim(pool, run_id, attempt, worker)
        .await
        .unwrap()
}

/// Crawls run `run_id` by hand as a worker would: claimed, one page at `url`
/// holding `items` stored, completed.
pub async fn complete_with_one_page(pool: &PgPool, run_id: i64, url: &str, items: &[PageItem]) {
    let fence = dispatch_and_claim(pool, run_id, 1, "w")
        .await
        .unwrap()
        .fence;
    store::runs::enter_url_call(pool, &fence, url)
        .await
        .unwrap();
    let page = CrawledPage {
        page: 1,
        url,
        items,
        item_key: None,
        stored_before: &[],
        details_read: &[],
    };
    store::runs::store_page(pool, &fence, &page).await.unwrap();
    store::runs::complete(pool, &fence, PagesRead::new(1, PagingEnd::LastPage))
        .await
        .unwrap();
}

/// Runs of a database by state.
pub async fn count_states(pool: &PgPool) -> HashMap<String, i64> {
    store::runs::count_by_state(pool)
        .await
        .unwrap()
        .into_iter()
        .map(|(state, n)| (state.as_str().to_owned(), n))
        .collect()
}

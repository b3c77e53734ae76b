//! Domain enums as Postgres text columns (`store::columns`): each name goes in
//! and comes back as the same value, a list binds as `text[]`, and a name the
//! enum does not know is an error, never another value.

use crawlfleet::domain::{
    failure::FailureKind,
    run::{AttemptOutcome, RunState, Trigger},
    webhook::WebhookEventType,
};
use sqlx::PgPool;

use crate::support::TestDb;

async fn round_trip<T>(pool: &PgPool, all: &[T])
where
    T: for<'r> sqlx::Decode<'r, sqlx::Postgres>
        + for<'q> sqlx::Encode<'q, sqlx::Postgres>
        + sqlx::Type<sqlx::Postgres>
        + sqlx::postgres::PgHasArrayType
        + Copy
        + PartialEq
        + std::fmt::Debug
        + Send
        + Sync
        + Unpin
        + 'static,
{
    for value in all {
        let back: T = sqlx::query_scalar("SELECT $1::text")
            .bind(*value)
            .fetch_one(pool)
            .await
            .unwrap();
        assert_eq!(back, *value);
    }
    let listed: Vec<T> = sqlx::query_scalar("SELECT unnest($1::text[])")
        .bind(all.to_vec())
        .fetch_all(pool)
        .await
        .unwrap();
    assert_eq!(listed, all);
}

#[tokio::test]
async fn every_text_enum_round_trips_through_postgres_by_its_name() {
    let db = TestDb::new().await;
    round_trip(&db.pool, &RunState::ALL).await;
    round_trip(&db.pool, &Trigger::ALL).await;
    round_trip(&db.pool, &FailureKind::ALL).await;
    round_trip(&db.pool, &AttemptOutcome::ALL).await;
    round_trip(&db.pool, &WebhookEventType::ALL).await;

    let stored: String = sqlx::query_scalar("SELECT $1::text")
        .bind(RunState::UrlCall)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(stored, "url_call", "stored by its name");

    let unknown = sqlx::query_scalar::<_, RunState>("SELECT 'done'::text")
        .fetch_one(&db.pool)
        .await
        .unwrap_err();
    assert!(
        unknown.to_string().contains("unknown run state \"done\""),
        "{unknown}"
    );
    db.drop().await;
}

#[tokio::test]
async fn every_run_state_is_allowed_by_the_runs_table() {
    let db = TestDb::new().await;
    // The table's CHECK constraints list the names again (SQL cannot read
    // Rust): a variant added in Rust and not there would fail at the first
    // run that reaches it.
    for state in RunState::ALL {
        let allowed: bool = sqlx::query_scalar(
            "SELECT bool_and(pg_get_constraintdef(c.oid) LIKE '%''' || $1 || '''%')
               FROM pg_constraint c
              WHERE c.conrelid = 'crawl_runs'::regclass AND c.contype = 'c'
                AND pg_get_constraintdef(c.oid) LIKE '%(state%'",
        )
        .bind(state)
        .fetch_one(&db.pool)
        .await
        .unwrap();
        assert!(allowed, "crawl_runs.state does not allow {state}");
    }
    db.drop().await;
}

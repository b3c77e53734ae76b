//! Secrets rotated while the fleet runs, as docs/deploy.md says to: the
//! Postgres and Redis passwords (the new credential made valid beside the
//! old, every process rolled onto it, then the old one revoked), and
//! SESSION_KEY (the new key beside the old as SESSION_KEY_PREVIOUS for one
//! start of the api, which seals every stored value again).

use std::time::Duration;

use crawlfleet::store::{
    self,
    sealing::{self, Sealed, SessionKey},
};
use reqwest::StatusCode;
use serde_json::json;
use sqlx::PgPool;

use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgSslMode};

use crate::support::{
    CaFile, DatastoreLogin, ON_DEMAND, PG_USER, RoleProcess, Roles, TEST_SESSION_KEY, TestApp,
    TestCa, TlsPostgres, TlsRedis, eventually, post_ok, tls_fleet_env,
};

const NEW_KEY: &str = "a11ce0a11ce0a11ce0a11ce0a11ce0a11ce0a11ce0a11ce0a11ce0a11ce0a11c";

/// Every sealed value stored, with what it is bound to (restated here, not
/// borrowed from the code under test).
async fn sealed_values(pool: &PgPool) -> Vec<(String, Sealed, Vec<u8>)> {
    let mut values = Vec::new();
    for (id, nonce, sealed) in sqlx::query_as::<_, (i64, Vec<u8>, Vec<u8>)>(
        "SELECT id, secrets_nonce, secrets_sealed FROM sites WHERE secrets_nonce IS NOT NULL",
    )
    .fetch_all(pool)
    .await
    .unwrap()
    {
        let bound = format!("site {id} secrets").into_bytes();
        values.push((format!("site {id}"), Sealed { nonce, sealed }, bound));
    }
    for (id, nonce, sealed) in sqlx::query_as::<_, (i64, Vec<u8>, Vec<u8>)>(
        "SELECT id, secret_nonce, secret_sealed FROM webhooks",
    )
    .fetch_all(pool)
    .await
    .unwrap()
    {
        let bound = format!("webhook {id} secret").into_bytes();
        values.push((format!("webhook {id}"), Sealed { nonce, sealed }, bound));
    }
    for (id, nonce, sealed) in sqlx::query_as::<_, (i64, Vec<u8>, Vec<u8>)>(
        "SELECT site_id, nonce, sealed FROM site_sessions",
    )
    .fetch_all(pool)
    .await
    .unwrap()
    {
        let bound = id.to_be_bytes().to_vec();
        values.push((format!("session {id}"), Sealed { nonce, sealed }, bound));
    }
    values
}

#[tokio::test]
async fn a_rotated_session_key_reseals_every_stored_value_at_the_api_start_and_the_old_key_can_go()
{
    let old: SessionKey = TEST_SESSION_KEY.parse().unwrap();
    let new: SessionKey = NEW_KEY.parse().unwrap();
    let mut app = TestApp::spawn().await;
    let pool = app.pool().clone();

    // Stored with the old key: a site's header, a webhook's secret, a session.
    let mut body = app.site_body("private", "/search");
    body["headers"] = json!({"Authorization": "Bearer rotate-me"});
    let site = app.create_site(body).await;
    let (status, webhook) = app
        .post(
            "/api/webhooks",
            json!({"url": "http://127.0.0.1:9/hook", "events": ["run.failed"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{webhook}");
    let session = sealing::seal(&old, &site.to_be_bytes(), br#"{"cookies":[]}"#);
    sqlx::query("INSERT INTO site_sessions (site_id, nonce, sealed) VALUES ($1, $2, $3)")
        .bind(site)
        .bind(&session.nonce)
        .bind(&session.sealed)
        .execute(&pool)
        .await
        .unwrap();
    app.stop_roles().await;
    let before = sealed_values(&pool).await;
    assert_eq!(
        before.len(),
        3,
        "{:?}",
        before.iter().map(|v| &v.0).collect::<Vec<_>>()
    );
    for (what, sealed, bound) in &before {
        assert!(sealing::open(sealed, &old, bound).is_ok(), "{what}");
    }

    // A new api starts with the new key and the old one as the previous.
    let mut api = RoleProcess::spawn(
        "api",
        &app.config,
        &[
            ("SESSION_KEY", NEW_KEY.to_owned()),
            ("SESSION_KEY_PREVIOUS", TEST_SESSION_KEY.to_owned()),
        ],
    );
    let line = api
        .log_line("SESSION_KEY rotation", Duration::from_secs(30))
        .await;
    assert!(
        line.contains("resealed=3") && line.contains("unopenable=0"),
        "{line}"
    );
    api.child.kill().await.unwrap();

    // Everything opens with the new key alone, nothing with the old one, and
    // the values are the same: the previous key can be removed.
    let after = sealed_values(&pool).await;
    for ((what, sealed, bound), (_, was, _)) in after.iter().zip(&before) {
        assert_eq!(
            sealing::open(sealed, &old, bound),
            Err(sealing::NotOpened),
            "{what}"
        );
        assert_eq!(
            sealing::open(sealed, &new, bound).unwrap(),
            sealing::open(was, &old, bound).unwrap(),
            "{what}"
        );
    }
    let site = store::sites::get(&pool, site, Some(&new))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        site.spec.identity.headers["Authorization"],
        "Bearer rotate-me"
    );

    // A second start with both keys finds nothing left to move.
    let mut again = RoleProcess::spawn(
        "api",
        &app.config,
        &[
            ("SESSION_KEY", NEW_KEY.to_owned()),
            ("SESSION_KEY_PREVIOUS", TEST_SESSION_KEY.to_owned()),
        ],
    );
    let line = again
        .log_line("SESSION_KEY rotation", Duration::from_secs(30))
        .await;
    assert!(line.contains("resealed=0"), "{line}");
    again.child.kill().await.unwrap();
    app.finish().await;
}

/// One of the two Postgres login roles that take turns (the "alternating
/// users" rotation): both act as the owner role, so either can run the fleet
/// and its migrations while the other's password changes.
const BLUE: &str = "crawlfleet_blue";
const GREEN: &str = "crawlfleet_green";

/// Credentials one process is started with.
#[tokio::test]
async fn postgres_and_redis_passwords_rotate_while_a_worker_crawls_and_no_run_is_lost() {
    let ca = TestCa::new("rotation CA");
    let cert = ca.server_cert();
    let pg = TlsPostgres::start(&cert, "admin-pw").await;
    let redis = TlsRedis::start(&cert, &ca, "redis-old").await;
    let ca_file = CaFile::of(&ca);
    let app = TestApp::spawn_without_browsers(Roles::default(), |_| {}).await;

    let admin = PgPoolOptions::new()
        .max_connections(2)
        .connect_with(
            PgConnectOptions::new()
                .host("localhost")
                .port(pg.port)
                .username(PG_USER)
                .password("admin-pw")
                .database("postgres")
                .ssl_mode(PgSslMode::VerifyFull)
                .ssl_root_cert(&ca_file.path),
        )
        .await
        .unwrap();
    for role in [BLUE, GREEN] {
        for statement in [
            format!("CREATE ROLE {role} LOGIN IN ROLE {PG_USER}"),
            format!("ALTER ROLE {role} SET role = '{PG_USER}'"),
        ] {
            sqlx::query(&statement).execute(&admin).await.unwrap();
        }
    }
    sqlx::query(&format!("ALTER ROLE {BLUE} PASSWORD 'blue-1'"))
        .execute(&admin)
        .await
        .unwrap();
    let mut redis_admin = crawlfleet::queue::connect_client(
        crawlfleet::queue::client(
            &format!("rediss://:redis-old@localhost:{}", redis.port),
            Some(&ca_file.path),
        )
        .unwrap(),
    )
    .await
    .unwrap();

    let old = DatastoreLogin {
        pg_user: BLUE,
        pg_password: "blue-1",
        redis_password: "redis-old",
    };
    let new = DatastoreLogin {
        pg_user: GREEN,
        pg_password: "green-2",
        redis_password: "redis-new",
    };
    let old_env = tls_fleet_env(&pg, &redis, &ca_file.path, &old);
    let new_env = tls_fleet_env(&pg, &redis, &ca_file.path, &new);

    // The fleet on the old credentials: api and scheduler, and a worker.
    let control = RoleProcess::spawn("api", &app.config, &old_env);
    let api = control.listening_on("api listening").await;
    let scheduler = RoleProcess::spawn("scheduler", &app.config, &old_env);
    let old_worker = RoleProcess::spawn("worker", &app.config, &old_env);
    let http = reqwest::Client::new();
    let post = |path: String, body: Value| post_ok(&http, api, path, body);
    let site = post(
        "/api/sites".into(),
        json!({
            "name": "slow-http",
            "search_url": format!("{}/slow?ms=400&q={{keyword}}", app.site.base_url()),
            "render": "http",
            "item_selector": "li.product",
            "fields": {"title": {"selector": "a.title"}},
            "max_pages": 1,
        }),
    )
    .await;
    let mut keywords = Vec::new();
    for i in 0..12 {
        let keyword = post(
            "/api/keywords".into(),
            json!({"keyword": format!("k{i}"), "site_ids": [site["id"]],
                   "schedule": ON_DEMAND, "enabled": true}),
        )
        .await;
        keywords.push(keyword["id"].as_i64().unwrap());
    }
    for keyword in &keywords[..6] {
        post(format!("/api/keywords/{keyword}/crawl"), json!({})).await;
    }
    let states = |pool: PgPool| async move {
        sqlx::query_as::<_, (String, i64)>(
            "SELECT state, count(*) FROM crawl_runs GROUP BY state ORDER BY state",
        )
        .fetch_all(&pool)
        .await
        .unwrap()
    };
    // Some crawls done, the worker busy with others.
    eventually(Duration::from_secs(60), "crawls under way", || async {
        let now = states(admin.clone()).await;
        now.iter()
            .any(|(state, n)| state == "completed" && *n >= 1)
            .then_some(())
    })
    .await;

    // 1. The new credentials become valid beside the old ones.
    sqlx::query(&format!("ALTER ROLE {GREEN} PASSWORD 'green-2'"))
        .execute(&admin)
        .await
        .unwrap();
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "default", ">redis-new"])
        .query_async(&mut redis_admin)
        .await
        .unwrap();
    // 2. Every process rolls onto them: the new worker first, then the old
    //    one drains (SIGTERM), then the api and the scheduler.
    let new_worker = RoleProcess::spawn("worker", &app.config, &new_env);
    new_worker
        .log_line("worker started", Duration::from_secs(30))
        .await;
    assert_eq!(old_worker.terminate(Duration::from_secs(60)).await, 0);
    assert_eq!(scheduler.terminate(Duration::from_secs(30)).await, 0);
    assert_eq!(control.terminate(Duration::from_secs(30)).await, 0);
    // 3. The old credentials are revoked.
    sqlx::query(&format!("ALTER ROLE {BLUE} PASSWORD NULL"))
        .execute(&admin)
        .await
        .unwrap();
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "default", "<redis-old"])
        .query_async(&mut redis_admin)
        .await
        .unwrap();
    let control = RoleProcess::spawn("api", &app.config, &new_env);
    let api = control.listening_on("api listening").await;
    let scheduler = RoleProcess::spawn("scheduler", &app.config, &new_env);
    let http = reqwest::Client::new();
    for keyword in &keywords[6..] {
        post_ok(
            &http,
            api,
            format!("/api/keywords/{keyword}/crawl"),
            json!({}),
        )
        .await;
    }

    // Every run, from before and after, completes once.
    eventually(Duration::from_secs(90), "every run completed", || async {
        let now = states(admin.clone()).await;
        (now == [("completed".to_owned(), 12)]).then_some(())
    })
    .await;
    let duplicates: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT run_id, page, position FROM crawl_results
                               GROUP BY 1, 2, 3 HAVING count(*) > 1) d",
    )
    .fetch_one(&admin)
    .await
    .unwrap();
    assert_eq!(duplicates, 0);
    // The old credentials no longer open anything.
    let refused = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(
            PgConnectOptions::new()
                .host("localhost")
                .port(pg.port)
                .username(BLUE)
                .password("blue-1")
                .database("postgres")
                .ssl_mode(PgSslMode::VerifyFull)
                .ssl_root_cert(&ca_file.path),
        )
        .await;
    assert!(refused.is_err(), "the old Postgres password still works");
    let stale = crawlfleet::queue::client(
        &format!("rediss://:redis-old@localhost:{}", redis.port),
        Some(&ca_file.path),
    )
    .unwrap()
    .get_multiplexed_async_connection()
    .await;
    assert!(stale.is_err(), "the old Redis password still works");

    for process in [new_worker, scheduler, control] {
        assert_eq!(process.terminate(Duration::from_secs(60)).await, 0);
    }
    app.stop().await;
}

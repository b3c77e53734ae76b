//! crawlfleet on datastores as a cloud runs them: Postgres and Redis that
//! speak TLS only, their certificates checked (`sslmode=verify-full`,
//! `rediss://` against the CA given), the passwords given apart from the
//! rest of the settings; and `crawlfleet migrate` as its own step.

use std::{path::Path, time::Duration};

use serde_json::{Value, json};

use crate::support::{
    CaFile, DatastoreLogin, ON_DEMAND, PG_USER, RoleProcess, Roles, TestApp, TestCa, TlsPostgres,
    TlsRedis, eventually, post_ok, tls_fleet_env,
};

const PG_PASSWORD: &str = "pg p@ss/word";
const REDIS_PASSWORD: &str = "redis:secret";

/// What `crawlfleet migrate` did: its exit code and what it said.
struct Migrated {
    code: Option<i32>,
    said: String,
}

/// How `crawlfleet migrate` is given the CA: a file, or the PEM itself (as a
/// Fargate task gets the host's CA from Parameter Store).
enum Ca<'a> {
    File(&'a Path),
    Text(&'a str),
}

/// `crawlfleet migrate` with Postgres given by parts only.
async fn migrate(pg: &TlsPostgres, ca: &Path, check: bool) -> Migrated {
    migrate_with(pg, Ca::File(ca), check).await
}

async fn migrate_with(pg: &TlsPostgres, ca: Ca<'_>, check: bool) -> Migrated {
    let log =
        std::env::temp_dir().join(format!("cf-migrate-{}.log", uuid::Uuid::new_v4().simple()));
    let out = std::fs::File::create(&log).unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_crawlfleet"));
    cmd.arg("migrate")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("NO_COLOR", "1")
        .env("DATABASE_HOST", "localhost")
        .env("DATABASE_PORT", pg.port.to_string())
        .env("DATABASE_NAME", "postgres")
        .env("DATABASE_USER", PG_USER)
        .env("DATABASE_PASSWORD", PG_PASSWORD)
        .env("DATABASE_SSLMODE", "verify-full")
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .kill_on_drop(true);
    match ca {
        Ca::File(path) => cmd.env("DATABASE_SSLROOTCERT", path),
        Ca::Text(pem) => cmd.env("DATABASE_SSLROOTCERT_PEM", pem),
    };
    if check {
        cmd.arg("--check");
    }
    let mut child = cmd.spawn().unwrap();
    // A migration of the whole schema takes seconds; a refused certificate
    // is not retried. 60 s on a loaded machine.
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait()).await;
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    let status = status.unwrap_or_else(|_| panic!("crawlfleet migrate did not end: {said}"));
    Migrated {
        code: status.unwrap().code(),
        said,
    }
}

/// The settings of a process on the TLS datastores: URLs without the
/// passwords, which come as parts, with TLS asked for by name.
const LOGIN: DatastoreLogin = DatastoreLogin {
    pg_user: PG_USER,
    pg_password: PG_PASSWORD,
    redis_password: REDIS_PASSWORD,
};

#[tokio::test]
async fn the_fleet_crawls_on_postgres_and_redis_over_tls_with_their_certificates_checked() {
    let ca = TestCa::new("crawlfleet test CA");
    let cert = ca.server_cert();
    let pg = TlsPostgres::start(&cert, PG_PASSWORD).await;
    let redis = TlsRedis::start(&cert, &ca, REDIS_PASSWORD).await;
    let ca_file = CaFile::of(&ca);
    // The fixture site (and an api of its own on the local stores, unused).
    let app = TestApp::spawn_without_browsers(Roles::default(), |_| {}).await;

    // The schema as a step of its own: behind, migrated, current.
    let behind = migrate(&pg, &ca_file.path, true).await;
    assert_eq!(behind.code, Some(1), "{}", behind.said);
    assert!(behind.said.contains("behind"), "{}", behind.said);
    let migrated = migrate(&pg, &ca_file.path, false).await;
    assert_eq!(migrated.code, Some(0), "{}", migrated.said);
    let current = migrate(&pg, &ca_file.path, true).await;
    assert_eq!(current.code, Some(0), "{}", current.said);

    // Every role in one process, on the TLS datastores only (each accepts
    // nothing but TLS): a crawl goes through.
    let fleet = RoleProcess::spawn(
        "all",
        &app.config,
        &tls_fleet_env(&pg, &redis, &ca_file.path, &LOGIN),
    );
    let api = fleet.listening_on("api listening").await;
    let http = reqwest::Client::new();
    let post = |path: String, body: Value| post_ok(&http, api, path, body);
    let site = post(
        "/api/sites".into(),
        json!({
            "name": "over-tls",
            "search_url": format!("{}/search?q={{keyword}}", app.site.base_url()),
            "render": "http",
            "item_selector": "li.product",
            "fields": {"title": {"selector": "a.title"}},
            "max_pages": 1,
        }),
    )
    .await;
    let keyword = post(
        "/api/keywords".into(),
        json!({"keyword": "lamp", "site_ids": [site["id"]], "schedule": ON_DEMAND, "enabled": true}),
    )
    .await;
    let queued = post(format!("/api/keywords/{}/crawl", keyword["id"]), json!({})).await;
    let run = queued["queued"][0]["id"].as_i64().expect("a run queued");
    // One http page: well under a second once dispatched; 60 s is ample.
    let done = eventually(Duration::from_secs(60), "the run completes", || async {
        let run: Value = http
            .get(format!("http://{api}/api/runs/{run}"))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        (run["state"] == "completed").then_some(run)
    })
    .await;
    assert!(done["items_found"].as_i64().unwrap() > 0, "{done}");
    assert_eq!(fleet.terminate(Duration::from_secs(30)).await, 0);

    // A CA that did not sign the servers' certificates: refused at once,
    // saying why, never connected in the clear.
    let stranger = CaFile::of(&TestCa::new("someone else's CA"));
    let refused = migrate(&pg, &stranger.path, true).await;
    assert_eq!(refused.code, Some(2), "{}", refused.said);
    assert!(
        refused.said.to_lowercase().contains("certificate"),
        "{}",
        refused.said
    );
    let mut env = tls_fleet_env(&pg, &redis, &ca_file.path, &LOGIN);
    env.retain(|(name, _)| *name != "REDIS_CA_CERT");
    env.push(("REDIS_CA_CERT", stranger.path.display().to_string()));
    let mut worker = RoleProcess::spawn("worker", &app.config, &env);
    // The worker gives up on Redis within seconds (a handful of retries).
    let status = tokio::time::timeout(Duration::from_secs(60), worker.child.wait())
        .await
        .expect("a worker that cannot trust Redis exits")
        .unwrap();
    assert!(!status.success());
    let log = std::fs::read_to_string(&worker.log).unwrap();
    assert!(log.contains("Redis"), "{log}");
    for secret in [PG_PASSWORD, REDIS_PASSWORD] {
        assert!(!log.contains(secret), "a password in the log: {log}");
    }
    app.stop().await;
}

#[tokio::test]
async fn a_ca_given_as_text_is_trusted_like_its_file_and_a_strangers_is_refused() {
    let ca = TestCa::new("the host's CA");
    let cert = ca.server_cert();
    let pg = TlsPostgres::start(&cert, PG_PASSWORD).await;
    let redis = TlsRedis::start(&cert, &ca, REDIS_PASSWORD).await;
    let app = TestApp::spawn_without_browsers(Roles::default(), |_| {}).await;

    let migrated = migrate_with(&pg, Ca::Text(ca.pem()), false).await;
    assert_eq!(migrated.code, Some(0), "{}", migrated.said);

    // Every role, the CA as text for both datastores beside a file of someone
    // else's (as a task definition names the image's RDS bundle in every mode):
    // the text wins. The api listens only once Postgres and Redis answered over
    // TLS.
    let stranger = TestCa::new("someone else's CA");
    let stranger_file = CaFile::of(&stranger);
    let as_text = |pem: &str| {
        let mut env = tls_fleet_env(&pg, &redis, &stranger_file.path, &LOGIN);
        env.push(("DATABASE_SSLROOTCERT_PEM", pem.to_owned()));
        env.push(("REDIS_CA_CERT_PEM", pem.to_owned()));
        env
    };
    let fleet = RoleProcess::spawn("all", &app.config, &as_text(ca.pem()));
    let api = fleet.listening_on("api listening").await;
    let ready = reqwest::get(format!("http://{api}/ready")).await.unwrap();
    assert_eq!(ready.status(), 200, "{}", ready.text().await.unwrap());
    assert_eq!(fleet.terminate(Duration::from_secs(30)).await, 0);

    // Someone else's CA as text: refused, for Postgres and for Redis.
    let refused = migrate_with(&pg, Ca::Text(stranger.pem()), true).await;
    assert_eq!(refused.code, Some(2), "{}", refused.said);
    assert!(
        refused.said.to_lowercase().contains("certificate"),
        "{}",
        refused.said
    );
    let mut env = as_text(ca.pem());
    env.retain(|(name, _)| *name != "REDIS_CA_CERT_PEM");
    env.push(("REDIS_CA_CERT_PEM", stranger.pem().to_owned()));
    let mut worker = RoleProcess::spawn("worker", &app.config, &env);
    let status = tokio::time::timeout(Duration::from_secs(60), worker.child.wait())
        .await
        .expect("a worker that cannot trust Redis exits")
        .unwrap();
    assert!(!status.success());
    let log = std::fs::read_to_string(&worker.log).unwrap();
    assert!(log.contains("Redis"), "{log}");
    app.stop().await;
}

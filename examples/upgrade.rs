//! `scripts/check-upgrade`: the previous release's worker on this release's
//! schema, as during a deployment (migrate first, then api and scheduler,
//! then the workers): this checkout's api migrates a new database and, with
//! its scheduler, queues crawls of the demo shop; the old worker binary crawls
//! them alone, then beside a worker of this release. Every run must complete
//! exactly once, with its items stored, in both render modes. A URL list's
//! run is queued while the old worker is alone: a worker older than list
//! runs drops its message, and the run completes once this release's worker
//! joins (the scheduler dispatches an unclaimed run again after 5 s here).
//!
//!   cargo run --example upgrade -- OLD_CRAWLFLEET_BINARY

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use crawlfleet_demo::site::DemoSite;
use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::process::Child;

#[path = "common/throwaway.rs"]
mod throwaway;

use throwaway::{
    Scratch, crawlfleet_binary, fleet_command, free_port, ready_api_client, remove_profiles_of,
};

const TOKEN: &str = "upgrade-local-token";
/// Runs per render mode and per phase (old worker alone, then both).
const RUNS: usize = 6;
/// URLs in the URL list crawled.
const LIST_URLS: usize = 5;
/// Ample for a dozen one-page crawls on a loaded 2-core machine.
const LIMIT: Duration = Duration::from_secs(180);

struct Fleet {
    scratch: Scratch,
    api_port: u16,
    log_dir: PathBuf,
}

impl Fleet {
    fn spawn(&self, binary: &Path, process: &str, name: &str) -> anyhow::Result<Child> {
        let log = self.log_dir.join(format!("{name}.log"));
        fleet_command(binary, process, &self.scratch, self.api_port, TOKEN, &log)?
            .env("DRAIN_TIMEOUT_SECS", "5")
            .env("DISPATCH_CLAIM_TIMEOUT_SECS", "5")
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let old_binary: PathBuf = std::env::args()
        .nth(1)
        .context("usage: upgrade OLD_CRAWLFLEET_BINARY")?
        .into();
    let scratch = Scratch::create("cf_upgrade").await?;
    let log_dir = std::env::temp_dir().join(format!("cf-upgrade-{}", scratch.db));
    std::fs::create_dir_all(&log_dir)?;
    let fleet = Fleet {
        scratch,
        api_port: free_port()?,
        log_dir: log_dir.clone(),
    };
    let site = DemoSite::start(0).await?;
    let new_binary = crawlfleet_binary();
    let mut children = vec![
        fleet.spawn(&new_binary, "api", "api")?,
        fleet.spawn(&new_binary, "scheduler", "scheduler")?,
    ];
    let outcome = check(&fleet, &site, &old_binary, &new_binary, &mut children).await;

    let pids: Vec<u32> = children.iter().filter_map(Child::id).collect();
    for pid in &pids {
        unsafe { libc::kill(*pid as i32, libc::SIGTERM) };
    }
    for child in &mut children {
        let _ = tokio::time::timeout(Duration::from_secs(15), child.wait()).await;
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    // A worker that had to be killed leaves its Chrome behind, as a container would not.
    pids.into_iter().for_each(remove_profiles_of);
    site.stop().await;
    fleet.scratch.drop().await?;
    match outcome {
        Ok(line) => {
            println!("{line}");
            let _ = std::fs::remove_dir_all(&log_dir);
            Ok(())
        }
        Err(e) => Err(e.context(format!("logs in {}", log_dir.display()))),
    }
}

async fn check(
    fleet: &Fleet,
    site: &DemoSite,
    old_binary: &Path,
    new_binary: &Path,
    children: &mut Vec<Child>,
) -> anyhow::Result<String> {
    let api = format!("http://127.0.0.1:{}", fleet.api_port);
    let http = ready_api_client(&api, TOKEN, Duration::from_secs(30)).await?;
    // The api has migrated: the old worker meets the new schema from its start.
    let old_worker = fleet.spawn(old_binary, "worker", "old-worker")?;
    // Worker ids are `<host>-<pid>-<nonce>`.
    let old_worker_id = format!("%-{}-%", old_worker.id().context("old worker running")?);
    children.push(old_worker);

    let mut sites = Vec::new();
    for render in ["http", "browser"] {
        let body = json!({
            "name": format!("upgrade-{render}"),
            "search_url": format!("{}/search?q={{keyword}}", site.base_url()),
            "render": render,
            "item_selector": "li.product",
            "fields": {"title": {"selector": "a.title"}, "link": {"selector": "a.title", "attr": "href"}},
            "max_pages": 2,
        });
        let created: Value = http
            .post(format!("{api}/api/sites"))
            .json(&body)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        sites.push(created["id"].as_i64().context("site created")?);
    }
    let pool = PgPool::connect(fleet.scratch.database_url.as_str()).await?;

    crawl(&http, &api, &sites, "alone").await?;
    let list_run = crawl_list(&http, &api, site, sites[0]).await?;
    wait_until_finished(&pool, RUNS * sites.len()).await?;
    // A worker of this release joins: old and new share the queue.
    children.push(fleet.spawn(new_binary, "worker", "new-worker")?);
    crawl(&http, &api, &sites, "mixed").await?;
    let total = 2 * RUNS * sites.len() + 1;
    wait_until_finished(&pool, total).await?;
    // On its first attempt: no worker took it for what it is not.
    let (list_state, list_attempt): (String, i32) =
        sqlx::query_as("SELECT state, attempt FROM crawl_runs WHERE id = $1")
            .bind(list_run)
            .fetch_one(&pool)
            .await?;

    let completed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM crawl_runs WHERE state = 'completed'")
            .fetch_one(&pool)
            .await?;
    let empty: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM crawl_runs r WHERE NOT EXISTS
           (SELECT 1 FROM crawl_results c WHERE c.run_id = r.id)",
    )
    .fetch_one(&pool)
    .await?;
    let doubled: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT run_id, page, position FROM crawl_results
                               GROUP BY 1, 2, 3 HAVING count(*) > 1) d",
    )
    .fetch_one(&pool)
    .await?;
    let by_old: i64 = sqlx::query_scalar("SELECT count(*) FROM crawl_runs WHERE worker_id LIKE $1")
        .bind(&old_worker_id)
        .fetch_one(&pool)
        .await?;
    let line = format!(
        "upgrade: {completed}/{total} runs completed ({by_old} by the previous release's worker), \
         {empty} without items, {doubled} stored twice; the URL list's run {list_state} \
         (attempt {list_attempt})"
    );
    if completed != total as i64
        || empty > 0
        || doubled > 0
        || by_old == 0
        || list_state != "completed"
        || list_attempt != 1
    {
        bail!("{line}");
    }
    Ok(line)
}

/// One run per keyword, `RUNS` keywords per site.
async fn crawl(
    http: &reqwest::Client,
    api: &str,
    sites: &[i64],
    phase: &str,
) -> anyhow::Result<()> {
    for site in sites {
        for i in 0..RUNS {
            let keyword: Value = http
                .post(format!("{api}/api/keywords"))
                .json(
                    &json!({"keyword": format!("{phase} {site} {i}"), "site_ids": [site],
                              "schedule": "0 0 0 1 1 *"}),
                )
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            http.post(format!("{api}/api/keywords/{}/crawl", keyword["id"]))
                .send()
                .await?
                .error_for_status()?;
        }
    }
    Ok(())
}

/// A URL list of `LIST_URLS` search pages on `site_id`, crawled now; the
/// run's id.
async fn crawl_list(
    http: &reqwest::Client,
    api: &str,
    site: &DemoSite,
    site_id: i64,
) -> anyhow::Result<i64> {
    let list: Value = http
        .post(format!("{api}/api/url-lists"))
        .json(&json!({"site_id": site_id, "name": "upgrade", "schedule": "0 0 0 1 1 *"}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let id = list["id"].as_i64().context("list created")?;
    let urls: String = (0..LIST_URLS)
        .map(|i| format!("{}/search?q=list{i}\n", site.base_url()))
        .collect();
    http.put(format!("{api}/api/url-lists/{id}/urls"))
        .header("content-type", "text/plain")
        .body(urls)
        .send()
        .await?
        .error_for_status()?;
    let run: Value = http
        .post(format!("{api}/api/url-lists/{id}/crawl"))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    run["id"].as_i64().context("list run queued")
}

async fn wait_until_finished(pool: &PgPool, runs: usize) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        let finished: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM crawl_runs WHERE state IN ('completed', 'failed', 'cancelled', 'skipped')",
        )
        .fetch_one(pool)
        .await?;
        if finished >= runs as i64 {
            return Ok(());
        }
        if started.elapsed() > LIMIT {
            bail!("{finished} of {runs} runs finished after {LIMIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

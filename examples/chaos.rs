//! `scripts/chaos`: the whole fleet as real processes (api, scheduler, three
//! workers) crawling the demo shop while faults are caused for real: a worker
//! killed with SIGKILL every few seconds (and started again, as ECS would), a
//! worker sent SIGTERM, a worker's Chrome killed, Redis flushed. At the end it
//! prints one line of figures and exits non-zero if any run was lost, failed
//! or done twice, if any fault went unrecovered for 120 s, or if any process
//! exited by itself during the run or did not stop with exit code 0 when sent
//! SIGTERM at the end.
//!
//!   cargo run --example chaos -- [RUNS] [FAULT_SECONDS]

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use crawlfleet::{
    queue,
    worker::browser::processes::{browser_of, descendants},
};
use crawlfleet_demo::site::DemoSite;
use rand::seq::IndexedRandom;
use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::process::Child;

#[path = "common/throwaway.rs"]
mod throwaway;

use throwaway::{
    Scratch, crawlfleet_binary, fleet_command, free_port, ready_api_client, remove_profiles_of,
};

const WORKERS: usize = 3;
/// The API token of this throwaway fleet.
const CHAOS_TOKEN: &str = "chaos-local-token";

struct Fleet {
    scratch: Scratch,
    api_port: u16,
    log_dir: std::path::PathBuf,
    spawned: usize,
}

impl Fleet {
    fn spawn(&mut self, process: &str) -> anyhow::Result<Child> {
        self.spawned += 1;
        let log = self.log_dir.join(format!("{process}-{}.log", self.spawned));
        fleet_command(
            &crawlfleet_binary(),
            process,
            &self.scratch,
            self.api_port,
            CHAOS_TOKEN,
            &log,
        )?
        // Crashes noticed and recovered within seconds, not minutes.
        .env("HEARTBEAT_INTERVAL_SECS", "1")
        .env("HEARTBEAT_TIMEOUT_SECS", "5")
        .env("WATCHDOG_INTERVAL_SECS", "1")
        .env("DISPATCH_CLAIM_TIMEOUT_SECS", "5")
        .env("DRAIN_TIMEOUT_SECS", "3")
        .spawn()
        .context("starting crawlfleet")
    }
}

fn signal(child: &Child, sig: i32) {
    if let Some(pid) = child.id() {
        // SAFETY: kill(2) on a child of ours.
        unsafe { libc::kill(pid as i32, sig) };
    }
}

async fn scalar(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap_or(-1)
}

/// Seconds until no run is held by a worker that is gone and the fleet completes work again.
async fn recovered_after(pool: &PgPool, since: Instant, worker_pid: Option<u32>) -> f64 {
    let completed_at_fault = scalar(
        pool,
        "SELECT count(*) FROM crawl_runs WHERE state = 'completed'",
    )
    .await;
    loop {
        let held_by_dead = match worker_pid {
            Some(pid) => sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM crawl_runs WHERE state IN ('running','url_call','call_done') AND worker_id LIKE $1",
            )
            .bind(format!("%-{pid}-%"))
            .fetch_one(pool)
            .await
            .unwrap_or(1),
            None => 0,
        };
        let completed = scalar(
            pool,
            "SELECT count(*) FROM crawl_runs WHERE state = 'completed'",
        )
        .await;
        let remaining = scalar(pool, "SELECT count(*) FROM crawl_runs WHERE state IN ('queued','running','url_call','call_done')").await;
        if held_by_dead == 0 && (completed > completed_at_fault || remaining == 0) {
            return since.elapsed().as_secs_f64();
        }
        if since.elapsed() > Duration::from_secs(120) {
            return f64::INFINITY;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let runs: usize = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(300);
    let fault_secs: u64 = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(60);

    let scratch = Scratch::create("cf_chaos").await?;
    let log_dir = std::env::temp_dir().join(format!("cf-chaos-{}", scratch.db));
    std::fs::create_dir_all(&log_dir)?;
    let mut fleet = Fleet {
        scratch,
        api_port: free_port()?,
        log_dir: log_dir.clone(),
        spawned: 0,
    };
    let site = DemoSite::start(0).await?;
    let mut api = fleet.spawn("api")?;
    let mut scheduler = fleet.spawn("scheduler")?;
    let mut workers: Vec<Child> = (0..WORKERS)
        .map(|_| fleet.spawn("worker"))
        .collect::<Result<_, _>>()?;
    let outcome = run_chaos(&mut fleet, &mut workers, &site, runs, fault_secs).await;

    let mut exits = Vec::new();
    let mut processes: Vec<(String, &mut Child)> = workers
        .iter_mut()
        .enumerate()
        .map(|(i, child)| (format!("worker {i}"), child))
        .chain([
            ("api".to_owned(), &mut api),
            ("scheduler".to_owned(), &mut scheduler),
        ])
        .collect();
    for (name, child) in &mut processes {
        // A process that is already gone died by itself: nothing stopped it.
        match child.try_wait() {
            Ok(Some(status)) => exits.push(format!("{name} exited during the run ({status})")),
            _ => signal(child, libc::SIGTERM),
        }
    }
    for (name, child) in &mut processes {
        match tokio::time::timeout(Duration::from_secs(15), child.wait()).await {
            Ok(Ok(status)) if status.success() => {}
            Ok(Ok(status)) => exits.push(format!("{name} stopped with {status} on SIGTERM")),
            Ok(Err(e)) => exits.push(format!("{name}: {e}")),
            Err(_) => exits.push(format!("{name} did not stop within 15 s of SIGTERM")),
        }
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    site.stop().await;
    fleet.scratch.drop().await?;
    let line = outcome?;
    println!("{line}");
    for exit in &exits {
        println!("chaos FAILED: {exit}");
    }
    if line.contains("FAILED") || !exits.is_empty() {
        bail!(
            "chaos found lost, failed or doubled work, an unrecovered fault or a bad exit; logs in {}",
            log_dir.display()
        );
    }
    let _ = std::fs::remove_dir_all(&log_dir);
    Ok(())
}

async fn run_chaos(
    fleet: &mut Fleet,
    workers: &mut [Child],
    site: &DemoSite,
    runs: usize,
    fault_secs: u64,
) -> anyhow::Result<String> {
    let api = format!("http://127.0.0.1:{}", fleet.api_port);
    let http = ready_api_client(&api, CHAOS_TOKEN, Duration::from_secs(30)).await?;
    let site_body = json!({
        "name": "chaos-shop",
        "search_url": format!("{}/slow?ms=400&q={{keyword}}", site.base_url()),
        "item_selector": "li.product",
        "fields": {"title": {"selector": "a.title"}, "link": {"selector": "a.title", "attr": "href"}},
        "stuck_timeout_secs": 20,
        "max_attempts": 5,
        // Every slot of the fleet may crawl this one site.
        "max_concurrent_runs": 6,
    });
    let site_id = http
        .post(format!("{api}/api/sites"))
        .json(&site_body)
        .send()
        .await?
        .json::<Value>()
        .await?["id"]
        .as_i64()
        .context("site created")?;
    for i in 0..runs {
        let kw = json!({"keyword": format!("chaos {i}"), "site_ids": [site_id], "schedule": "0 0 0 1 1 *"});
        let kw: Value = http
            .post(format!("{api}/api/keywords"))
            .json(&kw)
            .send()
            .await?
            .json()
            .await?;
        http.post(format!("{api}/api/keywords/{}/crawl", kw["id"]))
            .send()
            .await?
            .error_for_status()?;
    }
    let pool = PgPool::connect(fleet.scratch.database_url.as_str()).await?;

    // Faults, every few seconds, for `fault_secs`.
    let chaos_started = Instant::now();
    let mut recoveries: Vec<f64> = Vec::new();
    let mut faults = 0;
    let mut flushed = false;
    let mut step = 0;
    while chaos_started.elapsed() < Duration::from_secs(fault_secs) {
        tokio::time::sleep(Duration::from_secs(4)).await;
        step += 1;
        let index = (0..workers.len())
            .collect::<Vec<_>>()
            .choose(&mut rand::rng())
            .copied()
            .unwrap();
        let at = Instant::now();
        let kill = step % 4 == 1 || (step % 4 == 3 && flushed);
        let recovery = match step % 4 {
            // SIGKILL a worker; its browsers die with the "container"; ECS starts a new one.
            _ if kill => {
                let pid = workers[index].id().unwrap();
                let left = descendants(pid as i32);
                workers[index].start_kill()?;
                workers[index].wait().await?;
                for p in left {
                    // SAFETY: kill(2) on what the killed worker started.
                    unsafe { libc::kill(p, libc::SIGKILL) };
                }
                remove_profiles_of(pid);
                workers[index] = fleet.spawn("worker")?;
                recovered_after(&pool, at, Some(pid)).await
            }
            // SIGTERM (scale-in): drain, then a new one.
            2 => {
                let pid = workers[index].id().unwrap();
                signal(&workers[index], libc::SIGTERM);
                let status =
                    tokio::time::timeout(Duration::from_secs(20), workers[index].wait()).await;
                if !matches!(status, Ok(Ok(s)) if s.success()) {
                    bail!("a worker did not drain to exit 0: {status:?}");
                }
                workers[index] = fleet.spawn("worker")?;
                recovered_after(&pool, at, Some(pid)).await
            }
            // Redis flushed once, then a worker's Chrome killed.
            _ => {
                if step % 4 == 3 {
                    flushed = true;
                    let mut redis = queue::connect(&fleet.scratch.redis_url).await?;
                    let keys: Vec<String> = redis::cmd("KEYS")
                        .arg(format!("{}:*", fleet.scratch.queue))
                        .query_async(&mut redis)
                        .await?;
                    if !keys.is_empty() {
                        let _: () = redis::cmd("DEL").arg(keys).query_async(&mut redis).await?;
                    }
                } else if let Some(chrome) = browser_of(workers[index].id().unwrap() as i32) {
                    // SAFETY: kill(2) on a Chrome our worker started.
                    unsafe { libc::kill(chrome, libc::SIGKILL) };
                }
                recovered_after(&pool, at, None).await
            }
        };
        faults += 1;
        recoveries.push(recovery);
    }

    // No more faults: everything must end.
    let settle = Instant::now();
    loop {
        let active = scalar(&pool, "SELECT count(*) FROM crawl_runs WHERE state IN ('queued','running','url_call','call_done')").await;
        if active == 0 || settle.elapsed() > Duration::from_secs(180) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let total = scalar(&pool, "SELECT count(*) FROM crawl_runs").await;
    let completed = scalar(
        &pool,
        "SELECT count(*) FROM crawl_runs WHERE state = 'completed'",
    )
    .await;
    let failed = scalar(
        &pool,
        "SELECT count(*) FROM crawl_runs WHERE state = 'failed'",
    )
    .await;
    let lost = runs as i64 - completed - failed;
    let twice = scalar(&pool, "SELECT count(*) FROM (SELECT run_id FROM crawl_attempts WHERE outcome = 'completed' GROUP BY run_id HAVING count(*) > 1) AS t").await;
    let duplicates = scalar(&pool, "SELECT count(*) FROM (SELECT run_id, page, content_hash FROM crawl_results GROUP BY 1, 2, 3 HAVING count(*) > 1) AS t").await;
    let wrong_items = scalar(
        &pool,
        "SELECT count(*) FROM crawl_runs WHERE state = 'completed' AND items_found <> 5",
    )
    .await;
    let max_recovery = recoveries.iter().cloned().fold(0.0, f64::max);
    // Runs have 5 attempts and the faults strike one worker at a time: a failed
    // run means a fault was not recovered from, not bad luck.
    let verdict = if total == runs as i64
        && lost == 0
        && failed == 0
        && twice == 0
        && duplicates == 0
        && wrong_items == 0
        && max_recovery.is_finite()
    {
        "OK"
    } else {
        "FAILED"
    };
    pool.close().await;
    Ok(format!(
        "chaos {verdict}: runs {total}, completed {completed}, failed {failed}, lost {lost}, completed twice {twice}, \
         duplicate result rows {duplicates}, wrong item counts {wrong_items}, faults {faults}, \
         max fault-to-recovery {max_recovery:.1}s, took {:.0}s",
        chaos_started.elapsed().as_secs_f64()
    ))
}

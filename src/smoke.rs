//! `crawlfleet smoke`: whether a worker of this release can work, with the
//! worker's own settings (the same flags and environment as
//! `--process=worker`), step by step: Postgres reachable and its schema
//! current, a Redis round trip under the queue's prefix, the worker's browser
//! started and closed, and a page this command serves on 127.0.0.1 crawled
//! through the worker's fetch and extract path (http mode, then browser
//! mode), its items checked. Nothing is written to Postgres. Each step is
//! printed with its time; the first that fails is named and the command
//! exits 1 (2: settings it cannot use). Every step has its time limit, and
//! so has the whole command. A release runs it as its smoke task before the
//! workers are replaced (docs/deploy.md).

use std::{
    cell::Cell,
    future::Future,
    process::ExitCode,
    time::{Duration, Instant},
};

use anyhow::Context;
use clap::Parser;

use crate::{
    config::Config,
    domain::site::RenderMode,
    migrate, queue, store,
    worker::{
        browser_slots,
        smoke::{BuiltInSite, start_and_close_browser},
    },
};

/// Check that a worker with these settings can work: Postgres and its
/// schema, Redis, the browser, and a crawl of a built-in page.
#[derive(Debug, Parser)]
#[command(name = "crawlfleet smoke")]
pub struct Args {
    /// The worker's settings, as `--process=worker` takes them.
    #[command(flatten)]
    pub config: Config,

    /// Seconds one step may take.
    #[arg(long, default_value_t = 60)]
    pub step_timeout_secs: u64,

    /// Seconds the whole command may take.
    #[arg(long, default_value_t = 180)]
    pub timeout_secs: u64,
}

pub async fn run(args: Args) -> ExitCode {
    crate::ops::telemetry::init(args.config.common.log_format);
    let config = match args.config.resolve() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("crawlfleet smoke: settings: {e:#}");
            return ExitCode::from(2);
        }
    };
    let steps = Steps {
        step_limit: Duration::from_secs(args.step_timeout_secs.max(1)),
        current: Cell::new("start"),
    };
    let limit = Duration::from_secs(args.timeout_secs.max(1));
    let started = Instant::now();
    let failed = match tokio::time::timeout(limit, steps.all(&config)).await {
        Ok(Ok(())) => {
            println!(
                "smoke: every step passed in {} ms",
                started.elapsed().as_millis()
            );
            return ExitCode::SUCCESS;
        }
        Ok(Err(failed)) => failed,
        Err(_) => Failed {
            step: steps.current.get(),
            why: format!("the smoke test did not end within {}s", limit.as_secs()),
        },
    };
    eprintln!(
        "crawlfleet smoke: step {} failed: {}",
        failed.step, failed.why
    );
    ExitCode::FAILURE
}

/// The step that failed, and why.
#[derive(Debug)]
struct Failed {
    step: &'static str,
    why: String,
}

struct Steps {
    step_limit: Duration,
    /// The step under way (named if the whole command runs out of time).
    current: Cell<&'static str>,
}

impl Steps {
    async fn all(&self, config: &Config) -> Result<(), Failed> {
        let (common, worker) = (&config.common, &config.worker);
        let pool = self
            .step("postgres", async {
                let pool =
                    store::connect_within(&common.database_url, 2, Duration::from_secs(5)).await?;
                migrate::check_schema(&pool).await??;
                Ok((pool, "reachable, the schema is current".to_owned()))
            })
            .await?;
        let redis = self
            .step("redis", async {
                let client = common.redis.root_cert().and_then(|root_cert| {
                    queue::client_with_root_cert(&common.redis_url, root_cert)
                })?;
                let mut redis = queue::connect_client(client).await?;
                let key = format!("{}:smoke:{:016x}", common.queue_name, rand::random::<u64>());
                round_trip(&mut redis, &key).await?;
                Ok((redis, format!("wrote, read and deleted {key}")))
            })
            .await?;
        // A worker always has a browser slot (browser_slots): never skipped.
        let slots = browser_slots(worker);
        self.step("browser", async {
            let said = start_and_close_browser(common, worker).await?;
            Ok(((), format!("{said} ({slots} browser slots)")))
        })
        .await?;
        let stores = (pool.clone(), redis);
        let site = self
            .step("crawl-http", async {
                let site = BuiltInSite::serve().await?;
                let said = site
                    .crawl(
                        common,
                        worker,
                        stores.clone(),
                        RenderMode::Http,
                        self.step_limit,
                    )
                    .await?;
                Ok((site, said))
            })
            .await?;
        self.step("crawl-browser", async {
            let said = site
                .crawl(
                    common,
                    worker,
                    stores.clone(),
                    RenderMode::Browser,
                    self.step_limit,
                )
                .await?;
            Ok(((), said))
        })
        .await?;
        pool.close().await;
        Ok(())
    }

    /// Runs one step within its time limit and prints how it went.
    async fn step<T>(
        &self,
        name: &'static str,
        work: impl Future<Output = anyhow::Result<(T, String)>>,
    ) -> Result<T, Failed> {
        self.current.set(name);
        let started = Instant::now();
        let outcome = match tokio::time::timeout(self.step_limit, work).await {
            Ok(outcome) => outcome,
            Err(_) => Err(anyhow::anyhow!(
                "did not end within {}s",
                self.step_limit.as_secs()
            )),
        };
        let ms = started.elapsed().as_millis();
        match outcome {
            Ok((value, said)) => {
                println!("smoke: {name:<13} ok     {ms:>6} ms  {said}");
                Ok(value)
            }
            Err(e) => {
                let why = format!("{e:#}");
                println!("smoke: {name:<13} FAILED {ms:>6} ms  {why}");
                Err(Failed { step: name, why })
            }
        }
    }
}

/// Writes `key` (expiring within a minute, should the delete not happen),
/// reads it back and deletes it.
async fn round_trip(redis: &mut apalis_redis::ConnectionManager, key: &str) -> anyhow::Result<()> {
    let value = format!("{:016x}", rand::random::<u64>());
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(&value)
        .arg("EX")
        .arg(60)
        .query_async(redis)
        .await
        .context("writing the key")?;
    let read: Option<String> = redis::cmd("GET")
        .arg(key)
        .query_async(redis)
        .await
        .context("reading the key")?;
    anyhow::ensure!(
        read.as_deref() == Some(value.as_str()),
        "read back {read:?}, wrote {value:?}"
    );
    let deleted: u32 = redis::cmd("DEL")
        .arg(key)
        .query_async(redis)
        .await
        .context("deleting the key")?;
    anyhow::ensure!(deleted == 1, "the key was not there to delete");
    Ok(())
}

//! Builds the shared dependencies once and runs the roles this process plays.

use anyhow::Context;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::{
    api::{AppState, Application},
    config::Config,
    ops::exit::{Stop, StopContext, StopKind},
    queue, scheduler, store,
    tools::DemoShop,
    worker,
};

/// Seals the site secrets an earlier version stored in the clear, once an api
/// with SESSION_KEY starts, and while the key rotates seals again what the
/// previous key sealed; without the key, says how many wait for it.
async fn seal_stored_secrets(config: &Config, pool: &sqlx::PgPool) -> anyhow::Result<()> {
    match &config.common.session_key {
        Some(key) => {
            let resealed = store::rekey::reseal_all(pool, key)
                .await
                .context("sealing stored values again with the new SESSION_KEY")?;
            if key.is_rotating() {
                tracing::info!(
                    resealed = resealed.moved,
                    unopenable = resealed.unopenable,
                    "SESSION_KEY rotation: values sealed with SESSION_KEY_PREVIOUS are now sealed with SESSION_KEY"
                );
            }
            let sealed = store::sites::seal_unsealed(pool, key)
                .await
                .context("sealing the secrets of sites stored in the clear")?;
            if sealed > 0 {
                tracing::info!(
                    sites = sealed,
                    "sealed the header values and proxies of sites stored in the clear by an earlier version"
                );
            }
        }
        None => {
            let waiting = store::sites::count_unsealed(pool).await?;
            if waiting > 0 {
                tracing::warn!(
                    sites = waiting,
                    "sites keep header values or proxy credentials in the clear: set SESSION_KEY on the api to seal them"
                );
            }
        }
    }
    Ok(())
}

/// Runs the configured roles until `shutdown`; if one fails, the others are
/// stopped and the error is returned (so the process exits non-zero), with
/// the kind of failure a start-up step met (each kind its exit code). With
/// `--demo`, the demo shop serves before the roles start and is ended after.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), Stop> {
    // The demo shop is a program of its own: missing, say so before connecting anything.
    let demo_program = match config.demo {
        true => Some(DemoShop::program()?),
        false => None,
    };
    let common = &config.common;
    let pool = store::connect_within(
        &common.database_url,
        common.database_max_connections,
        common.database.wait(),
    )
    .await
    .stop_as(StopKind::DatabaseUnreachable)?;
    if config.process.runs_api() || config.process.runs_scheduler() {
        store::migrate(&pool)
            .await
            .stop_as(StopKind::MigrationFailed)?;
    }
    if config.process.runs_api() {
        seal_stored_secrets(&config, &pool)
            .await
            .stop_as(StopKind::Failed)?;
    }
    let redis = common
        .redis
        .root_cert()
        .and_then(|root_cert| queue::client_with_root_cert(&common.redis_url, root_cert))
        .stop_as(StopKind::Config)?;
    let redis = queue::connect_client(redis)
        .await
        .stop_as(StopKind::RedisUnreachable)?;
    let api_state = match config.process.runs_api() {
        true => Some(
            AppState::from_config(
                common,
                &config.api,
                pool.clone(),
                redis.clone(),
                shutdown.clone(),
            )
            .stop_as(StopKind::Config)?,
        ),
        false => None,
    };
    let demo = match demo_program {
        Some(program) => Some(DemoShop::start(&program).await?),
        None => None,
    };
    let outcome = started(config, pool, redis, api_state, shutdown).await;
    if let Some(demo) = demo {
        demo.stop().await;
    }
    outcome.map_err(Stop::classify)
}

/// Runs the roles on the stores reached; a taken port is told apart later,
/// by its error ([`Stop::classify`]).
async fn started(
    config: Config,
    pool: sqlx::PgPool,
    redis: apalis_redis::ConnectionManager,
    api_state: Option<AppState>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let common = &config.common;
    let mut roles = JoinSet::new();
    if let Some(state) = api_state {
        let app = Application::build(common, &config.api, config.api.api_port, state).await?;
        roles.spawn(async move { app.run_until_stopped().await.context("api") });
    } else {
        // Scheduler and worker processes serve /health and /metrics on a side port.
        let port = if config.process.runs_scheduler() {
            config.scheduler.scheduler_port
        } else {
            config.worker.metrics_port
        };
        let (host, limits, token) = (
            config.api.api_host.clone(),
            common.http_limits(),
            shutdown.clone(),
        );
        roles.spawn(async move {
            crate::net::side_port::serve(&host, port, limits, token)
                .await
                .context("ops server")
        });
    }
    if config.process.runs_scheduler() {
        let (common, settings, pool, redis, token) = (
            common.clone(),
            config.scheduler.clone(),
            pool.clone(),
            redis.clone(),
            shutdown.clone(),
        );
        roles.spawn(async move {
            scheduler::run(common, settings, pool, redis, token)
                .await
                .context("scheduler")
        });
    }
    if config.process.runs_worker() {
        let (common, settings, pool, redis, token) = (
            common.clone(),
            config.worker.clone(),
            pool.clone(),
            redis.clone(),
            shutdown.clone(),
        );
        roles.spawn(async move {
            worker::run(common, settings, pool, redis, token)
                .await
                .context("worker")
        });
    }

    let mut outcome = Ok(());
    while let Some(ended) = roles.join_next().await {
        let result = ended.context("a role panicked").and_then(|r| r);
        if let Err(e) = result {
            tracing::error!(error = %crate::ops::exit::one_line(&e), "role failed; stopping the process");
            shutdown.cancel();
            if outcome.is_ok() {
                outcome = Err(e);
            }
        } else if !shutdown.is_cancelled() {
            // A role that ends by itself while not asked to is a failure.
            shutdown.cancel();
            outcome = Err(anyhow::anyhow!("a role stopped unexpectedly"));
        }
    }
    pool.close().await;
    outcome
}

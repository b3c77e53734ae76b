//! `crawlfleet-demo` as `crawlfleet --demo` runs it: given the fleet's own
//! command line and environment, it serves the shop on `DEMO_PORT`, registers
//! it, writes `ready <url>` on stdout (its only line there: its log goes to
//! stderr), and serves until SIGTERM or SIGINT, or until its parent is gone
//! (a fleet killed outright leaves no shop holding the port).

use std::{io::Write as _, time::Duration};

use tokio_util::sync::CancellationToken;

use crawlfleet::{
    config::Config,
    ops::exit::{Stop, StopContext, StopKind},
    store,
};

use crate::{register::register_once, site::DemoSite};

/// The first word of the line that tells the fleet the shop serves.
pub const READY: &str = "ready";
/// How often the shop looks whether its parent is still there.
const PARENT_CHECK_EVERY: Duration = Duration::from_secs(1);

/// Serves the shop until `stop` (or the parent's end); a failure to start is
/// a [`Stop`] of its kind (a taken port: `port_taken`, exit code 5).
pub async fn run(config: &Config, stop: CancellationToken) -> Result<(), Stop> {
    if !config.common.allow_private_targets {
        return Err(Stop::new(
            StopKind::Failed,
            anyhow::anyhow!(
                "--demo crawls a shop on 127.0.0.1, which the SSRF guard refuses: set ALLOW_PRIVATE_TARGETS=true"
            ),
        ));
    }
    let parent = std::os::unix::process::parent_id();
    let site = DemoSite::start(config.demo_port)
        .await
        .map_err(Stop::classify)?;
    tracing::info!(url = %site.base_url(), "demo shop serving");
    let common = &config.common;
    // Two connections, closed once registered: the shop itself needs none.
    let pool = store::connect_within(&common.database_url, 2, common.database.wait())
        .await
        .stop_as(StopKind::DatabaseUnreachable)?;
    let registered = register_once(config, &pool, &site.base_url()).await;
    pool.close().await;
    registered.stop_as(StopKind::Failed)?;
    say_ready(&site.base_url()).stop_as(StopKind::Failed)?;
    tokio::select! {
        () = stop.cancelled() => {}
        () = parent_gone(parent) => tracing::info!("the fleet that started the demo shop is gone; stopping"),
    }
    site.stop().await;
    Ok(())
}

fn say_ready(url: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{READY} {url}")?;
    out.flush()
}

/// Returns once this process's parent is no longer `parent` (it ended and
/// the process was handed to init or a subreaper).
async fn parent_gone(parent: u32) {
    while std::os::unix::process::parent_id() == parent {
        tokio::time::sleep(PARENT_CHECK_EVERY).await;
    }
}

//! `scripts/abuse`: the fleet (api, scheduler and one worker as real
//! processes, logging at trace level) on loopback, under a catalogue of
//! hostile requests: hostile bodies, SSRF in many notations, transport and
//! WebSocket abuse, connection starvation, every route with every kind of
//! token, crawls of sites that carry secrets, crawls of pages that attack the
//! crawler, attempts to move a stored secret to another target, read secrets
//! with a read token or scrape /metrics where it must not be (or so often
//! that Postgres pays), and the worker's Chrome looked at as a local attacker
//! would. It prints what it found, then one line of figures, and exits
//! non-zero unless no such attempt got through, no request with a token was
//! starved, no hostile request was accepted, every refusal named its field,
//! every answer was the one due and every probe ran, no answer was a 5xx, no
//! answer that was due went missing, no process restarted, no secret showed
//! in an answer, a log or Chrome's environment, nothing connected to the
//! trap, and no hostile page got past a bound.
//!
//!   cargo run --example abuse
//!
//! Only loopback is ever connected to: the fleet listens on 127.0.0.1, the
//! fixture site, the trap and the proxy too, and the fleet refuses private
//! targets but the fixture and the proxy (ALLOWED_PRIVATE_TARGETS).

mod bodies;
mod browser;
mod client;
mod fleet;
mod ledger;
mod live;
mod moved_secrets;
mod pages;
mod proxy;
mod raw;
mod report;
mod routes;
mod secrets;
mod sightings;
mod ssrf;
mod starvation;
// Its client counts every request it sends (client.rs): not the shared one.
#[allow(dead_code)]
#[path = "../common/throwaway.rs"]
mod throwaway;
mod transport;

use std::{
    net::SocketAddr,
    process::ExitCode,
    time::{Duration, Instant},
};

use anyhow::bail;
use crawlfleet_demo::site::DemoSite;

use crate::{
    client::{Api, Tokens},
    fleet::Fleet,
    ledger::Ledger,
    proxy::FixtureProxy,
    secrets::Secrets,
    ssrf::Trap,
    throwaway::{Scratch, free_port},
};

/// Where the fleet may and may not go.
pub struct Targets {
    /// The fixture site, `http://127.0.0.1:PORT`: the one target allowed.
    pub fixture: String,
    /// A listener that must never see a connection.
    pub trap_port: u16,
    /// The proxy to the fixture (allowed too), with the secret credentials.
    pub proxy_port: u16,
}

/// The catalogue may not take longer than this, whatever hangs.
const CATALOGUE_LIMIT: Duration = Duration::from_secs(240);

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let secrets = Secrets::generate();

    let scratch = Scratch::create("cf_abuse").await?;
    let api_port = free_port()?;
    let api_metrics_port = free_port()?;
    let log_dir = std::env::temp_dir().join(format!("cf-abuse-{}", scratch.db));
    std::fs::create_dir_all(&log_dir)?;

    let site = DemoSite::start(0).await?;
    let trap = Trap::start().await?;
    let proxy =
        FixtureProxy::start(site.addr(), &secrets.proxy_user, &secrets.proxy_password).await?;
    let targets = Targets {
        fixture: site.base_url(),
        trap_port: trap.port,
        proxy_port: proxy.addr.port(),
    };
    let env = fleet_env(
        &secrets,
        scratch.database_url.as_str(),
        &scratch.redis_url,
        &scratch.queue,
        (api_port, api_metrics_port),
        site.addr(),
        proxy.addr,
    );
    let fleet = Fleet::start(env, &log_dir)?;
    let ledger = Ledger::default();
    let tokens = Tokens {
        write: secrets.write_token.clone(),
        read: secrets.read_token.clone(),
        wrong: format!("wrong{}", uuid::Uuid::new_v4().simple()),
    };
    let api = Api::new(api_port, api_metrics_port, tokens, ledger.clone())?;

    match tokio::time::timeout(CATALOGUE_LIMIT, catalogue(&api, &targets, &secrets)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => ledger.driver_error("the catalogue", format!("{e:#}")),
        Err(_) => ledger.driver_error(
            "the catalogue",
            format!("did not finish within {}s", CATALOGUE_LIMIT.as_secs()),
        ),
    }
    // Class 9 looks at the worker's Chrome, so before the fleet stops.
    let browser_places = browser::run(fleet.pid_of("worker"), &ledger).await;
    let restarts = fleet.stop().await;
    proxy_used(&proxy, &ledger);
    let trap_connections = trap.connections();
    let cookies = sightings::member_cookies(&site, &ledger);
    let mut tally = ledger.tally();
    let seen = sightings::secrets_seen(
        &secrets,
        &cookies,
        &tally,
        &log_dir,
        &browser_places,
        &ledger,
    );
    // What the search itself found missing.
    tally.unexpected.extend(ledger.tally().unexpected);
    let took = started.elapsed();

    site.stop().await;
    scratch.drop().await?;

    if !report::report(&tally, &restarts, &seen, trap_connections, took) {
        eprintln!(
            "abuse found failures; the fleet's logs are in {}",
            log_dir.display()
        );
        return Ok(ExitCode::FAILURE);
    }
    let _ = std::fs::remove_dir_all(&log_dir);
    Ok(ExitCode::SUCCESS)
}

/// The fleet's settings: tokens and key of this run, the guard on with only
/// the fixture and the proxy let through, every log line at trace level.
fn fleet_env(
    secrets: &Secrets,
    database_url: &str,
    redis_url: &str,
    queue_name: &str,
    (api_port, api_metrics_port): (u16, u16),
    fixture: SocketAddr,
    proxy: SocketAddr,
) -> Vec<(String, String)> {
    let log_level = std::env::var("ABUSE_RUST_LOG").unwrap_or_else(|_| "trace".into());
    [
        ("DATABASE_URL", database_url.to_owned()),
        ("REDIS_URL", redis_url.to_owned()),
        ("QUEUE_NAME", queue_name.to_owned()),
        ("API_HOST", "127.0.0.1".to_owned()),
        ("API_PORT", api_port.to_string()),
        ("API_TOKENS", secrets.write_token.clone()),
        ("API_READ_TOKENS", secrets.read_token.clone()),
        ("SESSION_KEY", secrets.session_key.clone()),
        ("API_METRICS_PORT", api_metrics_port.to_string()),
        ("SCHEDULER_PORT", "0".to_owned()),
        ("METRICS_PORT", "0".to_owned()),
        ("WORKER_CONCURRENCY", "2".to_owned()),
        ("ALLOW_PRIVATE_TARGETS", "false".to_owned()),
        ("ALLOWED_PRIVATE_TARGETS", format!("{fixture},{proxy}")),
        ("CLOUDWATCH_ENABLED", "false".to_owned()),
        ("DISPATCH_INTERVAL_MS", "100".to_owned()),
        ("DRAIN_TIMEOUT_SECS", "3".to_owned()),
        ("PAGE_MAX_BYTES", pages::PAGE_MAX_BYTES.to_string()),
        ("RUST_LOG", log_level),
        ("LOG_FORMAT", "json".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// The classes in order, /health checked after each. The secret sites'
/// crawls and the trickling body run in the background meanwhile.
async fn catalogue(api: &Api, targets: &Targets, secrets: &Secrets) -> anyhow::Result<()> {
    if !api.wait_ready(Duration::from_secs(60)).await {
        bail!("the api was not ready within 60 s");
    }
    let crawls = secrets::start(api, targets, secrets).await?;
    let hostile_pages = pages::start(api, targets).await?;

    if let Err(e) = bodies::run(api, targets).await {
        api.ledger
            .driver_error("class 1, hostile bodies", format!("{e:#}"));
    }
    api.check_health("after class 1, hostile bodies").await;
    // Class 3's trickling body takes the api's request timeout (30 s) to be
    // answered: started now, it is done by the end. Not before class 1,
    // whose bodies may crash the api and end it for no fault of its own.
    let slow_body =
        transport::spawn_slow_body(api.port, api.tokens.write.clone(), api.ledger.clone());
    ssrf::run(api, targets).await;
    ssrf::url_list(api, targets).await;
    api.check_health("after class 2, SSRF").await;
    transport::run(api, targets).await;
    api.check_health("after class 3, transport").await;
    starvation::run(api).await;
    api.check_health("after class 3b, connection starvation")
        .await;
    live::run(api).await;
    api.check_health("after class 4, WebSockets").await;
    if let Err(e) = routes::run(api, targets).await {
        api.ledger.driver_error("class 5, routes", format!("{e:#}"));
    }
    api.check_health("after class 5, routes").await;
    secrets::finish(api, crawls).await?;
    api.check_health("after class 6, secrets").await;
    pages::finish(api, hostile_pages).await;
    api.check_health("after class 7, hostile pages").await;
    if let Err(e) = moved_secrets::run(api, targets, secrets).await {
        api.ledger
            .driver_error("class 8, secrets and their targets", format!("{e:#}"));
    }
    api.check_health("after class 8, secrets and their targets")
        .await;

    if tokio::time::timeout(Duration::from_secs(45), slow_body)
        .await
        .is_err()
    {
        api.ledger
            .driver_error("the trickling body", "did not end within 45 s");
    }
    Ok(())
}

/// The secret sites' crawls went through the proxy, with the credentials:
/// otherwise the search looked for secrets on paths they never took.
fn proxy_used(proxy: &FixtureProxy, ledger: &Ledger) {
    use std::sync::atomic::Ordering;
    let (carried, refused) = (
        proxy.carried.load(Ordering::SeqCst),
        proxy.refused.load(Ordering::SeqCst),
    );
    if carried == 0 {
        ledger.unexpected(
            "the secret sites' proxy",
            "carried nothing: the crawls never used it",
        );
    }
    if refused > 0 {
        ledger.unexpected(
            "the secret sites' proxy",
            format!("refused {refused} request(s): wrong credentials or not the fixture"),
        );
    }
}

//! The webhook sender, run by the scheduler's leader: it leases the
//! deliveries that are due from the outbox (woken by the `NOTIFY` of the
//! transaction that recorded them, or by a poll), sends each with bounded
//! concurrency (in all, and per endpoint), and writes each attempt. A 2xx
//! delivers; anything else is retried on the schedule; after the last retry
//! the delivery is failed, and an endpoint that had no success over the
//! whole schedule is disabled and says why. A sender that dies mid-send
//! loses nothing: its leases run out and the next leader sends again, with
//! the same `webhook-id` (receivers drop a repeat).

mod send;

use std::{collections::HashMap, sync::Arc, time::Duration};

use sqlx::{PgPool, postgres::PgListener};
use tokio::{task::JoinSet, time::Instant};
use tokio_util::sync::CancellationToken;

use crate::{
    config::{CommonConfig, SchedulerConfig},
    domain::webhook::RetrySchedule,
    net::target_guard::TargetGuard,
    ops::metrics::metrics,
    store::{
        self,
        sealing::SessionKey,
        webhooks::{Finished, LeaseRequest, Leased, Next, WAKE_CHANNEL},
    },
};
use send::{Answer, Poster};

/// How often the outbox is read when no `NOTIFY` came (a retry falling due,
/// a notification missed while the listening connection was down).
const POLL: Duration = Duration::from_secs(1);
/// Beyond the request timeout, how long a lease lasts: a sender that died
/// has its deliveries sent again after this.
const LEASE_MARGIN: Duration = Duration::from_secs(10);
/// How often the backlog gauges are refreshed.
const BACKLOG_EVERY: Duration = Duration::from_secs(5);

/// What the sender needs.
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    pub concurrency: usize,
    pub per_endpoint: usize,
    pub timeout: Duration,
    pub schedule: RetrySchedule,
    pub guard: TargetGuard,
    /// Opens the endpoints' sealed secrets.
    pub key: Option<SessionKey>,
}

impl WebhookSettings {
    pub fn from_config(common: &CommonConfig, config: &SchedulerConfig) -> Self {
        WebhookSettings {
            concurrency: config.webhook_concurrency.max(1),
            per_endpoint: config.webhook_endpoint_concurrency.max(1),
            timeout: config.webhook_timeout(),
            schedule: RetrySchedule::from_secs(&config.webhook_retry_schedule_secs),
            guard: common.target_guard(),
            key: common.session_key.clone(),
        }
    }
}

/// Sends deliveries until `shutdown`; attempts in flight then get their
/// timeout to finish and be written (what does not is sent again later).
pub async fn run(
    pool: PgPool,
    settings: WebhookSettings,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let poster = Arc::new(Poster::new(settings.guard.clone(), settings.timeout)?);
    if settings.key.is_none()
        && store::webhooks::list(&pool)
            .await
            .is_ok_and(|w| !w.is_empty())
    {
        tracing::warn!(
            "SESSION_KEY is not set on this scheduler: webhook secrets cannot be opened, so no \
             message can be signed; each attempt fails saying so until it is set"
        );
    }
    let schedule = Arc::new(settings.schedule.clone());
    let mut wake = Wake::default();
    let mut in_flight = JoinSet::new();
    // Which endpoint each task sends to, and how many each has in flight.
    let mut tasks = HashMap::new();
    let mut busy: HashMap<i64, i32> = HashMap::new();
    let mut backlog_read = Instant::now() - BACKLOG_EVERY;
    // Said once per outage, not once a poll.
    let mut outbox_unreadable = false;
    loop {
        let free = settings.concurrency.saturating_sub(in_flight.len());
        if free > 0 {
            let busy_list: Vec<(i64, i32)> = busy.iter().map(|(w, n)| (*w, *n)).collect();
            let request = LeaseRequest {
                free: free as i64,
                per_endpoint: settings.per_endpoint as i32,
                busy: &busy_list,
                lease_for: settings.timeout + LEASE_MARGIN,
            };
            match store::webhooks::lease_due(&pool, &request, settings.key.as_ref()).await {
                Ok(leased) => {
                    if std::mem::take(&mut outbox_unreadable) {
                        tracing::info!("the webhook outbox is readable again");
                    }
                    for delivery in leased {
                        *busy.entry(delivery.webhook_id).or_default() += 1;
                        let webhook_id = delivery.webhook_id;
                        let task = in_flight.spawn(deliver(
                            pool.clone(),
                            poster.clone(),
                            schedule.clone(),
                            delivery,
                        ));
                        tasks.insert(task.id(), webhook_id);
                    }
                }
                Err(e) if !outbox_unreadable => {
                    outbox_unreadable = true;
                    tracing::warn!(error = %e, "cannot read the webhook outbox; retrying every second")
                }
                Err(_) => {}
            }
        }
        if backlog_read.elapsed() >= BACKLOG_EVERY {
            report_backlog(&pool).await;
            backlog_read = Instant::now();
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            Some(done) = in_flight.join_next_with_id() => settle(&mut tasks, &mut busy, done),
            _ = wake.notified(&pool) => {}
            _ = tokio::time::sleep(POLL) => {}
        }
        while let Some(done) = in_flight.try_join_next_with_id() {
            settle(&mut tasks, &mut busy, done);
        }
    }
    let finished = tokio::time::timeout(settings.timeout + Duration::from_secs(1), async {
        while in_flight.join_next().await.is_some() {}
    })
    .await;
    if finished.is_err() {
        tracing::info!(
            left = in_flight.len(),
            "webhook deliveries still in flight at shutdown are sent again when their lease ends"
        );
    }
    Ok(())
}

/// A send task ended: its endpoint has a slot more.
fn settle(
    tasks: &mut HashMap<tokio::task::Id, i64>,
    busy: &mut HashMap<i64, i32>,
    done: Result<(tokio::task::Id, ()), tokio::task::JoinError>,
) {
    let id = match done {
        Ok((id, ())) => id,
        Err(e) => {
            tracing::error!(error = %e, "a webhook send task failed; its delivery is sent again when its lease ends");
            e.id()
        }
    };
    let Some(webhook_id) = tasks.remove(&id) else {
        return;
    };
    if let Some(n) = busy.get_mut(&webhook_id) {
        *n -= 1;
        if *n <= 0 {
            busy.remove(&webhook_id);
        }
    }
}

/// One attempt of a leased delivery, written with what becomes of it.
async fn deliver(pool: PgPool, poster: Arc<Poster>, schedule: Arc<RetrySchedule>, leased: Leased) {
    let answer = poster.attempt(&leased).await;
    let next = next_step(&leased, &answer, &schedule);
    let webhook = leased.webhook_id.to_string();
    let m = metrics();
    m.webhook_attempt_duration
        .with_label_values(&[&webhook])
        .observe(f64::from(answer.attempted.latency_ms) / 1000.0);
    let (outcome, summary) = (outcome_label(&next), answer.summary());
    let ids = (
        leased.webhook_id,
        leased.delivery_id,
        leased.msg_id.as_str(),
    );
    match store::webhooks::finish(&pool, &leased, &answer.attempted, &next).await {
        Ok(Finished::Recorded { disabled }) => {
            m.webhook_deliveries
                .with_label_values(&[&webhook, outcome])
                .inc();
            match &next {
                Next::Delivered => {
                    tracing::debug!(
                        webhook_id = ids.0,
                        delivery_id = ids.1,
                        msg_id = ids.2,
                        "webhook delivered"
                    )
                }
                Next::RetryAfter(after) => {
                    tracing::info!(webhook_id = ids.0, delivery_id = ids.1, msg_id = ids.2, attempt = leased.attempt, retry_in = ?after, %summary, "webhook delivery failed; retrying")
                }
                Next::Failed { .. } => {
                    tracing::warn!(webhook_id = ids.0, delivery_id = ids.1, msg_id = ids.2, attempts = leased.attempt, %summary, "webhook delivery failed after its last retry")
                }
            }
            if disabled {
                m.webhook_endpoints_disabled.inc();
                tracing::error!(
                    webhook_id = ids.0,
                    "webhook endpoint disabled: no delivery succeeded over a whole retry schedule"
                );
            }
        }
        Ok(Finished::LeaseLost) => {
            tracing::info!(
                webhook_id = ids.0,
                delivery_id = ids.1,
                "a webhook attempt outlived its lease; another sender has the delivery"
            )
        }
        Err(e) => {
            tracing::warn!(webhook_id = ids.0, delivery_id = ids.1, error = %e, "could not write a webhook attempt; it is sent again when its lease ends")
        }
    }
}

/// Delivered on a 2xx; else retried, or failed once the schedule is spent.
fn next_step(leased: &Leased, answer: &Answer, schedule: &RetrySchedule) -> Next {
    if answer.delivered() {
        return Next::Delivered;
    }
    match schedule.retry_after(leased.attempt.max(1) as u32) {
        Some(after) => Next::RetryAfter(after),
        None => Next::Failed {
            disable_reason: format!(
                "no delivery succeeded since {}: delivery {} ({}) failed all {} attempts, \
                 the last with {}. Fix the endpoint, then enable it (PUT with \"enabled\": true): \
                 its pending deliveries then go out",
                leased
                    .scheduled_at
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                leased.delivery_id,
                leased.msg_id.as_str(),
                leased.attempt,
                answer.summary()
            ),
        },
    }
}

fn outcome_label(next: &Next) -> &'static str {
    match next {
        Next::Delivered => "delivered",
        Next::RetryAfter(_) => "retried",
        Next::Failed { .. } => "failed",
    }
}

async fn report_backlog(pool: &PgPool) {
    match store::webhooks::backlog(pool).await {
        Ok((pending, oldest_due)) => {
            let m = metrics();
            m.webhook_pending.set(pending);
            m.webhook_oldest_due_age.set(oldest_due as i64);
        }
        Err(e) => tracing::debug!(error = %e, "could not count the webhook backlog"),
    }
}

/// The `LISTEN` side of the outbox: resolves when a transaction that
/// recorded a message commits. Without a listening connection (Postgres
/// unreachable), it waits a poll and tries to listen again.
#[derive(Default)]
struct Wake {
    listener: Option<PgListener>,
}

impl Wake {
    async fn notified(&mut self, pool: &PgPool) {
        let Some(listener) = &mut self.listener else {
            match listen(pool).await {
                Ok(listener) => self.listener = Some(listener),
                Err(e) => {
                    tracing::debug!(error = %e, "cannot LISTEN for webhook messages; polling");
                    tokio::time::sleep(POLL).await;
                }
            }
            return;
        };
        if let Err(e) = listener.recv().await {
            tracing::debug!(error = %e, "the webhook LISTEN connection broke; polling");
            self.listener = None;
            tokio::time::sleep(POLL).await;
        }
    }
}

async fn listen(pool: &PgPool) -> sqlx::Result<PgListener> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(WAKE_CHANNEL).await?;
    Ok(listener)
}

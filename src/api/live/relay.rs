//! The api's side of live events: it subscribes to the fleet's channel,
//! fills in the keyword and site names of each run event (cached, so the many
//! events of one crawl cost one lookup), and hands them to its WebSocket clients.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use anyhow::Context;
use futures::StreamExt;
use sqlx::PgPool;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::{
    events::{Event, channel},
    store,
};

/// How long a looked-up name is trusted: a renamed keyword or site shows
/// under its new name within this time.
const NAMES_TTL: Duration = Duration::from_secs(60);
/// After a failed lookup, events go out with ids only for this long, rather
/// than each waiting for a Postgres that does not answer.
const NAMES_RETRY: Duration = Duration::from_secs(5);
const NAMES_LOOKUP_TIMEOUT: Duration = Duration::from_secs(1);
/// Pairs remembered at most; past it the memory starts afresh.
const NAMES_KEPT: usize = 10_000;

/// The keyword texts and site names of recent runs, so the many events of one
/// crawl cost one lookup.
pub struct Names {
    pool: PgPool,
    known: HashMap<(Option<i64>, Option<i64>, i64), KnownNames>,
}

struct KnownNames {
    until: Instant,
    keyword: Option<String>,
    site: Option<String>,
}

impl Names {
    pub fn new(pool: PgPool) -> Self {
        Self {
            pool,
            known: HashMap::new(),
        }
    }

    /// Fills in the keyword and site names of a `run.updated` event that
    /// lacks them.
    pub async fn fill(&mut self, event: &mut Event) {
        let Event::RunUpdated {
            keyword_id,
            url_list_id,
            keyword,
            site_id,
            site,
            ..
        } = event
        else {
            return;
        };
        if keyword.is_some() && site.is_some() {
            return;
        }
        let key = (*keyword_id, *url_list_id, *site_id);
        let now = Instant::now();
        if let Some(known) = self.known.get(&key).filter(|k| k.until > now) {
            keyword.clone_from(&known.keyword);
            site.clone_from(&known.site);
            return;
        }
        let looked_up = tokio::time::timeout(
            NAMES_LOOKUP_TIMEOUT,
            store::names::keyword_and_site(&self.pool, (key.0, key.1), key.2),
        )
        .await;
        let known = match looked_up {
            Ok(Ok((keyword, site))) => KnownNames {
                until: now + NAMES_TTL,
                keyword,
                site,
            },
            failed => {
                tracing::debug!(?failed, "names of an event not looked up");
                KnownNames {
                    until: now + NAMES_RETRY,
                    keyword: None,
                    site: None,
                }
            }
        };
        keyword.clone_from(&known.keyword);
        site.clone_from(&known.site);
        if self.known.len() >= NAMES_KEPT {
            self.known.clear();
        }
        self.known.insert(key, known);
    }
}

/// Forwards the fleet's events from Redis to `local`, with names filled in,
/// until `shutdown`, resubscribing after a Redis restart.
pub async fn relay(
    redis: redis::Client,
    queue_name: String,
    mut names: Names,
    local: broadcast::Sender<Event>,
    shutdown: CancellationToken,
) {
    let channel = channel(&queue_name);
    while !shutdown.is_cancelled() {
        match subscribe_and_forward(&redis, &channel, &mut names, &local, &shutdown).await {
            Ok(()) => return,
            Err(e) => {
                tracing::warn!(error = ?e, "event subscription lost; resubscribing");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    }
}

async fn subscribe_and_forward(
    client: &redis::Client,
    channel: &str,
    names: &mut Names,
    local: &broadcast::Sender<Event>,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let mut pubsub = client
        .get_async_pubsub()
        .await
        .context("connecting for events")?;
    pubsub
        .subscribe(channel)
        .await
        .context("subscribing to events")?;
    let mut messages = pubsub.on_message();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            message = messages.next() => {
                let Some(message) = message else {
                    anyhow::bail!("the event stream ended");
                };
                let payload: String = message.get_payload().context("event payload")?;
                match serde_json::from_str::<Event>(&payload) {
                    // Nobody watching: no names to look up, nobody to tell.
                    Ok(_) if local.receiver_count() == 0 => {}
                    Ok(mut event) => {
                        names.fill(&mut event).await;
                        let _ = local.send(event);
                    }
                    Err(e) => tracing::warn!(error = %e, "unreadable event dropped"),
                }
            }
        }
    }
}

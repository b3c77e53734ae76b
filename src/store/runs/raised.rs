//! The webhook events a run's end raises, recorded inside the transaction
//! that ends it: which ones is the domain's choice
//! (`WebhookEventType::raised_by`); each is built by its payload with the
//! names of its keyword and site.

use sqlx::PgConnection;

use crate::{
    domain::{
        change::ChangeSummary,
        run::{CrawlRun, SiteTransition},
        webhook::{WebhookEvent, WebhookEventType},
    },
    store::webhooks,
};

/// Records the webhook events of a run that just ended completed or failed
/// (a retried attempt is no event), inside the transaction that ended it, so
/// each exists if and only if the ending does: `run.completed` or
/// `run.failed`; `run.degraded`; `site.blocked` or `site.recovered` when the
/// run changed that; `items.new`, `items.changed`, `items.removed` with what
/// the run found.
pub(super) async fn record_ending(
    tx: &mut PgConnection,
    run: &CrawlRun,
    changes: Option<&ChangeSummary>,
    site: Option<SiteTransition>,
) -> sqlx::Result<()> {
    if WebhookEventType::raised_by(run.state, run.health.as_ref(), site, changes).is_empty() {
        return Ok(());
    }
    // Most fleets have no endpoint, or none on: then every run ends with
    // this one look at a tiny table, not a lookup per event.
    let listened = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM webhooks WHERE enabled) AS "listened!""#
    )
    .fetch_one(&mut *tx)
    .await?;
    if !listened {
        return Ok(());
    }
    record_events(tx, run, changes, site).await
}

/// [`record_ending`] once it is known that an endpoint listens: the events
/// [`WebhookEventType::raised_by`] names, each built by its payload.
pub(super) async fn record_events(
    tx: &mut PgConnection,
    run: &CrawlRun,
    changes: Option<&ChangeSummary>,
    site: Option<SiteTransition>,
) -> sqlx::Result<()> {
    let raised = WebhookEventType::raised_by(run.state, run.health.as_ref(), site, changes);
    if raised.is_empty() {
        return Ok(());
    }
    // A list run's events name its list where a keyword's name the keyword.
    let names = sqlx::query!(
        r#"SELECT COALESCE((SELECT keyword FROM keywords WHERE id = $1),
                           (SELECT name FROM url_lists WHERE id = $3)) AS "keyword!",
                  (SELECT name FROM sites WHERE id = $2) AS "name!""#,
        run.keyword_id,
        run.site_id,
        run.url_list_id
    )
    .fetch_one(&mut *tx)
    .await?;
    let (keyword, site_name) = (names.keyword.as_str(), names.name.as_str());
    let links = &webhooks::ApiLinks;
    let items = changes
        .map(|changes| WebhookEvent::items_found(run, keyword, site_name, changes, links))
        .unwrap_or_default();
    let mut events = Vec::with_capacity(raised.len());
    for event_type in raised {
        match event_type {
            WebhookEventType::RunCompleted | WebhookEventType::RunFailed => events.push(
                WebhookEvent::run_ended(event_type, run, keyword, site_name, links),
            ),
            WebhookEventType::RunDegraded => {
                events.push(WebhookEvent::run_degraded(run, keyword, site_name, links))
            }
            WebhookEventType::SiteBlocked | WebhookEventType::SiteRecovered => {
                let blocked = event_type == WebhookEventType::SiteBlocked;
                events.push(WebhookEvent::site_changed(
                    blocked, run, keyword, site_name, links,
                ));
            }
            // Raised by a repair, never by a run's end.
            WebhookEventType::SiteRepairProposed => {}
            WebhookEventType::ItemsNew
            | WebhookEventType::ItemsChanged
            | WebhookEventType::ItemsRemoved => events.extend(
                items
                    .iter()
                    .filter(|event| event.event_type == event_type)
                    .cloned(),
            ),
        }
    }
    for event in &events {
        webhooks::record(tx, event).await?;
    }
    Ok(())
}

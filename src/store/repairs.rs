//! Repairs of sites whose markup changed (`site_repairs`): one per site
//! version, claimed by the worker that saw the version's first bad run; the
//! proposal stored with its evidence and its `site.repair_proposed` event in
//! one transaction; applied (accepted, or by the site's `auto` policy) as
//! the site's next version with a re-crawl queued, in one transaction; and
//! an automatic repair undone the same way when the next run is bad again.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};
use sqlx::{PgPool, Postgres, Transaction, types::Json};

use super::{
    sealing::SessionKey,
    sites::{self, Revision},
    webhooks::{self, ApiLinks},
};
use crate::domain::{
    repair::{RepairEvidence, RepairState},
    site::{FieldSpec, SiteSpec, VersionReason},
    webhook::{Links, WebhookEvent, WebhookEventType},
};

/// A repair left `working` this long was lost with its worker: it may be
/// claimed again.
const WORKING_FOR_AT_MOST: &str = "10 minutes";

/// A repair, as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Repair {
    pub id: i64,
    pub site_id: i64,
    pub base_version: i32,
    pub run_id: Option<i64>,
    pub state: RepairState,
    pub worker_id: Option<String>,
    pub item_selector: Option<String>,
    pub fields: Option<Json<BTreeMap<String, FieldSpec>>>,
    pub evidence: Option<Json<RepairEvidence>>,
    pub verdict: Option<String>,
    pub applied_version: Option<i32>,
    pub decided_by: Option<String>,
    pub started_at: DateTime<Utc>,
    pub proposed_at: Option<DateTime<Utc>>,
    pub decided_at: Option<DateTime<Utc>>,
}

const COLUMNS: &str = "id, site_id, base_version, run_id, state, worker_id, item_selector, \
                       fields, evidence, verdict, applied_version, decided_by, started_at, \
                       proposed_at, decided_at";

/// Claims the repair of site `site_id` at `base_version` for failing run
/// `run_id`; `None` when that version's repair is done or in another
/// worker's hands (one repair per version, whatever the runs).
pub async fn claim(
    pool: &PgPool,
    site_id: i64,
    base_version: i32,
    run_id: i64,
    worker_id: &str,
) -> sqlx::Result<Option<i64>> {
    let sql = format!(
        "INSERT INTO site_repairs (site_id, base_version, run_id, state, worker_id)
         VALUES ($1, $2, $3, 'working', $4)
         ON CONFLICT (site_id, base_version) DO UPDATE
         SET run_id = EXCLUDED.run_id, worker_id = EXCLUDED.worker_id, started_at = now()
         WHERE site_repairs.state = 'working'
           AND site_repairs.started_at < now() - interval '{WORKING_FOR_AT_MOST}'
         RETURNING id"
    );
    sqlx::query_scalar(&sql)
        .bind(site_id)
        .bind(base_version)
        .bind(run_id)
        .bind(worker_id)
        .fetch_optional(pool)
        .await
}

/// The site's last good run before `run_id` (completed healthy with items;
/// of keyword `keyword_id` when given) and its first page's items' fields,
/// in page order, at most `limit`.
pub async fn good_run(
    pool: &PgPool,
    site_id: i64,
    keyword_id: Option<i64>,
    run_id: i64,
    limit: i64,
) -> sqlx::Result<Option<(i64, Vec<Map<String, Value>>)>> {
    // The completed state is written out: the predicate of the partial
    // index (crawl_runs_keyword_site_finished) this reads.
    let good: Option<i64> = sqlx::query_scalar(
        "SELECT id FROM crawl_runs
         WHERE site_id = $1 AND ($2::bigint IS NULL OR keyword_id = $2) AND id <> $3
           AND state = 'completed' AND health = 'healthy' AND items_found > 0
         ORDER BY finished_at DESC
         LIMIT 1",
    )
    .bind(site_id)
    .bind(keyword_id)
    .bind(run_id)
    .fetch_optional(pool)
    .await?;
    let Some(good) = good else {
        return Ok(None);
    };
    let items: Vec<Json<Map<String, Value>>> = sqlx::query_scalar(
        "SELECT fields FROM crawl_results WHERE run_id = $1 AND page = 1
         ORDER BY position LIMIT $2",
    )
    .bind(good)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    Ok(Some((good, items.into_iter().map(|Json(i)| i).collect())))
}

/// The page a failed attempt of run `run_id` ended on (its URL and HTML),
/// the last attempt's first.
pub async fn failing_page(pool: &PgPool, run_id: i64) -> sqlx::Result<Option<(String, String)>> {
    sqlx::query_as(
        "SELECT page_url, html FROM attempt_evidence
         WHERE run_id = $1 AND html IS NOT NULL AND page_url IS NOT NULL
         ORDER BY attempt DESC LIMIT 1",
    )
    .bind(run_id)
    .fetch_optional(pool)
    .await
}

/// A verified proposal, to store.
#[derive(Debug, Clone)]
pub struct NewProposal {
    pub item_selector: String,
    pub fields: BTreeMap<String, FieldSpec>,
    pub evidence: RepairEvidence,
}

/// Stores repair `id`'s proposal, and its `site.repair_proposed` event for
/// the endpoints that want it, in one transaction.
pub async fn propose(pool: &PgPool, id: i64, proposal: &NewProposal) -> sqlx::Result<Repair> {
    let mut tx = pool.begin().await?;
    let sql = format!(
        "UPDATE site_repairs
         SET state = 'proposed', item_selector = $2, fields = $3, evidence = $4, proposed_at = now()
         WHERE id = $1
         RETURNING {COLUMNS}"
    );
    let repair: Repair = sqlx::query_as(&sql)
        .bind(id)
        .bind(&proposal.item_selector)
        .bind(Json(&proposal.fields))
        .bind(Json(&proposal.evidence))
        .fetch_one(&mut *tx)
        .await?;
    record_event(&mut tx, &repair).await?;
    tx.commit().await?;
    Ok(repair)
}

/// Repair `id` found nothing that passed verification, for `verdict`.
pub async fn none_found(pool: &PgPool, id: i64, verdict: &str) -> sqlx::Result<()> {
    sqlx::query("UPDATE site_repairs SET state = 'none_found', verdict = $2 WHERE id = $1")
        .bind(id)
        .bind(verdict)
        .execute(pool)
        .await?;
    Ok(())
}

/// Site `site_id`'s repairs, newest first (of failing run `run_id` only,
/// when given), at most `limit`.
pub async fn list(
    pool: &PgPool,
    site_id: i64,
    run_id: Option<i64>,
    limit: i64,
) -> sqlx::Result<Vec<Repair>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM site_repairs
         WHERE site_id = $1 AND ($2::bigint IS NULL OR run_id = $2)
         ORDER BY id DESC LIMIT $3"
    );
    sqlx::query_as(&sql)
        .bind(site_id)
        .bind(run_id)
        .bind(limit)
        .fetch_all(pool)
        .await
}

/// Repair `id` of site `site_id`.
pub async fn get(pool: &PgPool, site_id: i64, id: i64) -> sqlx::Result<Option<Repair>> {
    let sql = format!("SELECT {COLUMNS} FROM site_repairs WHERE site_id = $1 AND id = $2");
    sqlx::query_as(&sql)
        .bind(site_id)
        .bind(id)
        .fetch_optional(pool)
        .await
}

/// What applying a proposal did.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// The site is at `version`; `run_id` re-crawls the failing run's
    /// keyword (none when it has none, or a run of it is active already).
    Done { version: i32, run_id: Option<i64> },
    /// It is no longer open (decided already).
    NotOpen(RepairState),
    /// The site changed since the failing run: the proposal is of a version
    /// that is not the site's any more.
    SiteMoved { now: i32 },
    /// No such repair (or site).
    Gone,
}

/// Who applies a proposal, and how.
#[derive(Debug, Clone)]
pub struct Decision {
    /// A token's digest prefix; `auto` for the site's policy.
    pub decided_by: Option<String>,
    /// `Applied` (the policy) or `Accepted` (a person).
    pub state: RepairState,
    /// The re-crawl's attempts when the site sets none.
    pub max_attempts: i32,
}

/// Applies repair `id`'s proposal: `spec` (the site read with it, made by
/// `domain::repair::repaired`) becomes the site's next version (`repaired`),
/// the repair is marked decided, and the failing run's keyword is queued
/// again on the site; all in one transaction, only while the repair is open
/// and the site still at the version the repair was made for.
pub async fn apply(
    pool: &PgPool,
    key: Option<&SessionKey>,
    id: i64,
    spec: &SiteSpec,
    decision: &Decision,
) -> sqlx::Result<Applied> {
    let mut tx = pool.begin().await?;
    let Some((repair, now)) = lock(&mut tx, id).await? else {
        return Ok(Applied::Gone);
    };
    if !repair.state.is_open() {
        return Ok(Applied::NotOpen(repair.state));
    }
    if now != repair.base_version {
        return Ok(Applied::SiteMoved { now });
    }
    let revision = Revision::new(VersionReason::Repaired, decision.decided_by.clone());
    let Some(site) = sites::update_in(&mut tx, repair.site_id, spec, key, &revision).await? else {
        return Ok(Applied::Gone);
    };
    sqlx::query(
        "UPDATE site_repairs
         SET state = $2, applied_version = $3, decided_by = $4, decided_at = now()
         WHERE id = $1",
    )
    .bind(id)
    .bind(decision.state)
    .bind(site.version)
    .bind(decision.decided_by.as_deref())
    .execute(&mut *tx)
    .await?;
    let run_id = match repair.run_id {
        Some(run_id) => recrawl(&mut tx, run_id, decision.max_attempts).await?,
        None => None,
    };
    tx.commit().await?;
    Ok(Applied::Done {
        version: site.version,
        run_id,
    })
}

/// Rejects repair `id`: it stays with its evidence, and is not applied.
pub async fn reject(pool: &PgPool, id: i64, decided_by: Option<&str>) -> sqlx::Result<Applied> {
    let mut tx = pool.begin().await?;
    let Some((repair, now)) = lock(&mut tx, id).await? else {
        return Ok(Applied::Gone);
    };
    if !repair.state.is_open() {
        return Ok(Applied::NotOpen(repair.state));
    }
    sqlx::query(
        "UPDATE site_repairs SET state = 'rejected', decided_by = $2, decided_at = now()
         WHERE id = $1",
    )
    .bind(id)
    .bind(decided_by)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Applied::Done {
        version: now,
        run_id: None,
    })
}

/// The automatic repair that made site `site_id`'s `version`, if that is
/// still the site's version and the repair still stands.
pub async fn applied_at(pool: &PgPool, site_id: i64, version: i32) -> sqlx::Result<Option<Repair>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM site_repairs r
         WHERE site_id = $1 AND applied_version = $2 AND state = 'applied'
           AND (SELECT version FROM sites WHERE id = $1) = $2"
    );
    sqlx::query_as(&sql)
        .bind(site_id)
        .bind(version)
        .fetch_optional(pool)
        .await
}

/// Undoes automatic repair `id`: `spec` (the site as its base version read
/// it) becomes the site's next version (`rolled_back`, restored from the
/// base version) and the repair is marked rolled back with `why`; only
/// while the site is still at the version the repair made. Returns the
/// version the site is at, `None` when nothing was undone.
pub async fn roll_back(
    pool: &PgPool,
    key: Option<&SessionKey>,
    id: i64,
    spec: &SiteSpec,
    why: &str,
) -> sqlx::Result<Option<i32>> {
    let mut tx = pool.begin().await?;
    let Some((repair, now)) = lock(&mut tx, id).await? else {
        return Ok(None);
    };
    if repair.state != RepairState::Applied || repair.applied_version != Some(now) {
        return Ok(None);
    }
    let revision = Revision {
        reason: VersionReason::RolledBack,
        restored_from: Some(repair.base_version),
        changed_by: Some("auto".to_owned()),
    };
    let Some(site) = sites::update_in(&mut tx, repair.site_id, spec, key, &revision).await? else {
        return Ok(None);
    };
    sqlx::query(
        "UPDATE site_repairs SET state = 'rolled_back', verdict = $2, decided_at = now()
         WHERE id = $1",
    )
    .bind(id)
    .bind(why)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Some(site.version))
}

/// Whether an automatic repair of the site was rolled back lately: then
/// `auto` only suggests, so a repair that failed once is not applied again
/// and again.
pub async fn rolled_back_lately(pool: &PgPool, site_id: i64) -> sqlx::Result<bool> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM site_repairs
                        WHERE site_id = $1 AND state = 'rolled_back'
                          AND decided_at > now() - interval '1 day')",
    )
    .bind(site_id)
    .fetch_one(pool)
    .await
}

/// Repair `id` locked for a decision, with the version its site is at now.
async fn lock(tx: &mut Transaction<'_, Postgres>, id: i64) -> sqlx::Result<Option<(Repair, i32)>> {
    let sql = format!("SELECT {COLUMNS} FROM site_repairs WHERE id = $1 FOR UPDATE");
    let Some(repair): Option<Repair> = sqlx::query_as(&sql)
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?
    else {
        return Ok(None);
    };
    let now: Option<i32> = sqlx::query_scalar("SELECT version FROM sites WHERE id = $1 FOR UPDATE")
        .bind(repair.site_id)
        .fetch_optional(&mut **tx)
        .await?;
    Ok(now.map(|now| (repair, now)))
}

/// Queues run `run_id`'s keyword again on its site (a URL list's run is
/// not queued: its list's schedule or a person does that); `None` when a
/// run of the pair is active already or the site is disabled.
async fn recrawl(
    tx: &mut Transaction<'_, Postgres>,
    run_id: i64,
    max_attempts: i32,
) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar(
        "INSERT INTO crawl_runs (keyword_id, site_id, state, trigger, priority, max_attempts)
         SELECT k.id, s.id, 'queued', 'manual', k.priority, COALESCE(s.max_attempts, $2)
         FROM crawl_runs r
         JOIN keywords k ON k.id = r.keyword_id
         JOIN keyword_sites ks ON ks.keyword_id = k.id AND ks.site_id = r.site_id
         JOIN sites s ON s.id = r.site_id
         WHERE r.id = $1 AND s.enabled
         -- The one unique index a new run can break: one active run a pair.
         ON CONFLICT DO NOTHING
         RETURNING id",
    )
    .bind(run_id)
    .bind(max_attempts)
    .fetch_optional(&mut **tx)
    .await
}

/// Records `site.repair_proposed` for `repair` in the caller's transaction.
async fn record_event(tx: &mut Transaction<'_, Postgres>, repair: &Repair) -> sqlx::Result<()> {
    let site: Option<String> = sqlx::query_scalar("SELECT name FROM sites WHERE id = $1")
        .bind(repair.site_id)
        .fetch_optional(&mut **tx)
        .await?;
    let keyword_id: Option<i64> = match repair.run_id {
        Some(run_id) => sqlx::query_scalar("SELECT keyword_id FROM crawl_runs WHERE id = $1")
            .bind(run_id)
            .fetch_optional(&mut **tx)
            .await?
            .flatten(),
        None => None,
    };
    let event = repair_event(repair, site.as_deref().unwrap_or_default(), keyword_id);
    webhooks::record(tx, &event).await?;
    Ok(())
}

/// The `site.repair_proposed` event of `repair`.
fn repair_event(repair: &Repair, site: &str, keyword_id: Option<i64>) -> WebhookEvent {
    let links = &ApiLinks;
    let evidence = repair.evidence.as_ref().map(|Json(e)| e);
    WebhookEvent {
        event_type: WebhookEventType::SiteRepairProposed,
        site_id: Some(repair.site_id),
        keyword_id,
        data: json!({
            "repair_id": repair.id,
            "site_id": repair.site_id,
            "site": site,
            "run_id": repair.run_id,
            "base_version": repair.base_version,
            "item_selector": repair.item_selector,
            "verified": evidence.map(RepairEvidence::all_passed),
            "changes": evidence.map(|e| &e.fields),
            "links": {
                "site": links.site(repair.site_id),
                "repairs": format!("{}/repairs", links.site(repair.site_id)),
                "run": repair.run_id.map(|id| links.run(id)),
            },
        }),
    }
}

//! The health of a site's proxies, shared by the fleet: every worker records
//! the pages and refusals it saw through a member, and every worker reads
//! which members are retired before it chooses one. Kept in Postgres, beside
//! the runs it decides about: one atomic upsert per page, the back-off
//! computed in the statement (two workers refused at once retire a member
//! once), rows gone with their site, and the API reads it with the site.

use std::{collections::HashMap, time::Duration};

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool, types::Json};

use crate::domain::site::{MASK, MAX_BACKOFF, ProxyPoolInput, ProxyUrl};

/// Longest last error kept, in characters.
const MAX_ERROR_CHARS: usize = 500;

/// One member's health for one site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyHealth {
    /// The member's address, `scheme://host:port`: no credentials.
    pub proxy: String,
    pub pages: i64,
    pub refusals: i64,
    /// Retirements in a row, since the last page through it.
    pub consecutive: i32,
    /// Set while the member is retired.
    pub retired_until: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
}

impl ProxyHealth {
    pub fn is_retired(&self, now: DateTime<Utc>) -> bool {
        self.retired_until.is_some_and(|until| until > now)
    }
}

/// A page read through `proxy`: counted, and its retirements in a row forgotten.
pub async fn record_page(pool: &PgPool, site_id: i64, proxy: &ProxyUrl) -> sqlx::Result<()> {
    sqlx::query!(
        r#"INSERT INTO proxy_health (site_id, proxy, pages) VALUES ($1, $2, 1)
           ON CONFLICT (site_id, proxy) DO UPDATE
           SET pages = proxy_health.pages + 1, consecutive = 0, retired_until = NULL,
               updated_at = now()"#,
        site_id,
        proxy.address()
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// A refusal through `proxy` (429/403, the blocked selector, a failed
/// connection): counted, and the member retired, unless it already is, for
/// the back-off of its next retirement in a row: `first` (the domain's
/// `FIRST_BACKOFF` unless PROXY_FIRST_BACKOFF_SECS says otherwise), doubled
/// each time, at most `MAX_BACKOFF`. Returns when it returns. `error` must
/// hold no secret (it is shown): the caller masks it.
pub async fn record_refusal(
    pool: &PgPool,
    site_id: i64,
    proxy: &ProxyUrl,
    error: &str,
    first: Duration,
) -> sqlx::Result<DateTime<Utc>> {
    let error: String = error.chars().take(MAX_ERROR_CHARS).collect();
    let first = first.as_secs_f64();
    let max = MAX_BACKOFF.as_secs_f64();
    sqlx::query_scalar!(
        r#"INSERT INTO proxy_health AS h
               (site_id, proxy, refusals, consecutive, retired_until, last_error)
           VALUES ($1, $2, 1, 1, now() + make_interval(secs => $4), $3)
           ON CONFLICT (site_id, proxy) DO UPDATE
           SET refusals = h.refusals + 1, last_error = EXCLUDED.last_error, updated_at = now(),
               consecutive = CASE WHEN h.retired_until > now() THEN h.consecutive
                                  ELSE h.consecutive + 1 END,
               retired_until = CASE WHEN h.retired_until > now() THEN h.retired_until
                                    ELSE now() + make_interval(secs =>
                                         least($5, $4 * power(2, least(h.consecutive, 16))))
                               END
           RETURNING retired_until AS "retired_until!""#,
        site_id,
        proxy.address(),
        error,
        first,
        max
    )
    .fetch_one(pool)
    .await
}

/// Every member of the site that has a record, by address.
pub async fn for_site(pool: &PgPool, site_id: i64) -> sqlx::Result<Vec<ProxyHealth>> {
    sqlx::query_as!(
        ProxyHealth,
        r#"SELECT proxy, pages, refusals, consecutive, retired_until, last_error
           FROM proxy_health WHERE site_id = $1 ORDER BY proxy"#,
        site_id
    )
    .fetch_all(pool)
    .await
}

/// Until when the site's `proxy` is retired; None while it is active.
pub async fn retired_until(
    pool: &PgPool,
    site_id: i64,
    proxy: &ProxyUrl,
) -> sqlx::Result<Option<DateTime<Utc>>> {
    sqlx::query_scalar!(
        r#"SELECT retired_until AS "retired_until!" FROM proxy_health
           WHERE site_id = $1 AND proxy = $2 AND retired_until > now()"#,
        site_id,
        proxy.address()
    )
    .fetch_optional(pool)
    .await
}

/// The sites every proxy of which (its one proxy, or every member of its
/// pool) is retired now, each with when the first returns: those sites are
/// paused, their runs waiting between pages until then. Site `only`, or all.
pub async fn paused(
    tx: &mut PgConnection,
    only: Option<i64>,
) -> sqlx::Result<HashMap<i64, DateTime<Utc>>> {
    type Row = (
        i64,
        Option<String>,
        Option<Json<ProxyPoolInput>>,
        String,
        DateTime<Utc>,
    );
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT s.id, s.proxy, s.proxy_pool, h.proxy, h.retired_until
         FROM sites s JOIN proxy_health h ON h.site_id = s.id
         WHERE h.retired_until > now() AND ($1::bigint IS NULL OR s.id = $1)
         ORDER BY s.id",
    )
    .bind(only)
    .fetch_all(tx)
    .await?;
    // Per site: its members' addresses, and until when each retired one is.
    type Retired = (Vec<String>, HashMap<String, DateTime<Utc>>);
    let mut retired: HashMap<i64, Retired> = HashMap::new();
    for (site_id, proxy, pool, address, until) in rows {
        let (_, seen) = retired.entry(site_id).or_insert_with(|| {
            // The columns show members masked: read for their addresses.
            let shown = proxy.into_iter().chain(
                pool.into_iter()
                    .flat_map(|Json(p)| p.members.into_iter().map(|m| m.url)),
            );
            let members = shown
                .filter_map(|url| ProxyUrl::parse(&url.replace(MASK, "x")).ok())
                .map(|p| p.address())
                .collect();
            (members, HashMap::new())
        });
        seen.insert(address, until);
    }
    Ok(retired
        .into_iter()
        .filter_map(|(site_id, (members, seen))| {
            let first_back = members
                .iter()
                .map(|m| seen.get(m).copied())
                .collect::<Option<Vec<_>>>()?
                .into_iter()
                .min()?;
            Some((site_id, first_back))
        })
        .collect())
}

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgPool, types::Json};

use crate::domain::site::{CssSelector, FieldSpec, RenderMode, SearchUrlTemplate, SiteSpec};

/// A stored site, as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Site {
    pub id: i64,
    pub name: String,
    pub search_url: String,
    pub item_selector: String,
    pub fields: BTreeMap<String, FieldSpec>,
    pub wait_for: Option<String>,
    pub max_pages: i32,
    pub render: String,
    pub stuck_timeout_secs: Option<i32>,
    pub max_attempts: Option<i32>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Site {
    /// The site as the domain rules see it (it was checked when stored).
    pub fn spec(&self) -> Result<SiteSpec, crate::domain::FieldError> {
        Ok(SiteSpec {
            name: self.name.clone(),
            search_url: SearchUrlTemplate::parse(&self.search_url)?,
            item_selector: CssSelector::parse(&self.item_selector, "item_selector")?,
            fields: self.fields.clone(),
            wait_for: self
                .wait_for
                .as_deref()
                .map(|s| CssSelector::parse(s, "wait_for"))
                .transpose()?,
            max_pages: self.max_pages,
            render: RenderMode::parse(&self.render)?,
            stuck_timeout_secs: self.stuck_timeout_secs,
            max_attempts: self.max_attempts,
        })
    }
}

pub async fn create(pool: &PgPool, spec: &SiteSpec) -> sqlx::Result<Site> {
    sqlx::query_as!(
        SiteRow,
        r#"INSERT INTO sites (name, search_url, item_selector, fields, wait_for, max_pages, render,
                              stuck_timeout_secs, max_attempts)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
           RETURNING id, name, search_url, item_selector, fields AS "fields: Json<BTreeMap<String, FieldSpec>>",
                     wait_for, max_pages, render, stuck_timeout_secs, max_attempts, created_at, updated_at"#,
        spec.name,
        spec.search_url.as_str(),
        spec.item_selector.as_str(),
        Json(&spec.fields) as _,
        spec.wait_for.as_ref().map(|s| s.as_str()),
        spec.max_pages,
        spec.render.as_str(),
        spec.stuck_timeout_secs,
        spec.max_attempts,
    )
    .fetch_one(pool)
    .await
    .map(Site::from)
}

pub async fn update(pool: &PgPool, id: i64, spec: &SiteSpec) -> sqlx::Result<Option<Site>> {
    sqlx::query_as!(
        SiteRow,
        r#"UPDATE sites SET name = $2, search_url = $3, item_selector = $4, fields = $5, wait_for = $6,
                  max_pages = $7, render = $8, stuck_timeout_secs = $9, max_attempts = $10, updated_at = now()
           WHERE id = $1
           RETURNING id, name, search_url, item_selector, fields AS "fields: Json<BTreeMap<String, FieldSpec>>",
                     wait_for, max_pages, render, stuck_timeout_secs, max_attempts, created_at, updated_at"#,
        id,
        spec.name,
        spec.search_url.as_str(),
        spec.item_selector.as_str(),
        Json(&spec.fields) as _,
        spec.wait_for.as_ref().map(|s| s.as_str()),
        spec.max_pages,
        spec.render.as_str(),
        spec.stuck_timeout_secs,
        spec.max_attempts,
    )
    .fetch_optional(pool)
    .await
    .map(|row| row.map(Site::from))
}

pub async fn get(pool: &PgPool, id: i64) -> sqlx::Result<Option<Site>> {
    sqlx::query_as!(
        SiteRow,
        r#"SELECT id, name, search_url, item_selector, fields AS "fields: Json<BTreeMap<String, FieldSpec>>",
                  wait_for, max_pages, render, stuck_timeout_secs, max_attempts, created_at, updated_at
           FROM sites WHERE id = $1"#,
        id
    )
    .fetch_optional(pool)
    .await
    .map(|row| row.map(Site::from))
}

pub async fn list(pool: &PgPool) -> sqlx::Result<Vec<Site>> {
    sqlx::query_as!(
        SiteRow,
        r#"SELECT id, name, search_url, item_selector, fields AS "fields: Json<BTreeMap<String, FieldSpec>>",
                  wait_for, max_pages, render, stuck_timeout_secs, max_attempts, created_at, updated_at
           FROM sites ORDER BY id"#
    )
    .fetch_all(pool)
    .await
    .map(|rows| rows.into_iter().map(Site::from).collect())
}

/// Deletes a site with its runs and results. Refused (`Ok(None)` is "not found")
/// while a run of the site is active, so no worker writes into a deleted site.
pub async fn delete(pool: &PgPool, id: i64) -> sqlx::Result<DeleteOutcome> {
    let mut tx = pool.begin().await?;
    let found = sqlx::query_scalar!("SELECT id FROM sites WHERE id = $1 FOR UPDATE", id)
        .fetch_optional(&mut *tx)
        .await?;
    if found.is_none() {
        return Ok(DeleteOutcome::NotFound);
    }
    let active = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM crawl_runs
           WHERE site_id = $1 AND state IN ('queued', 'running', 'url_call', 'call_done')"#,
        id
    )
    .fetch_one(&mut *tx)
    .await?;
    if active > 0 {
        return Ok(DeleteOutcome::HasActiveRuns(active));
    }
    sqlx::query!("DELETE FROM sites WHERE id = $1", id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(DeleteOutcome::Deleted)
}

/// What a delete did.
#[derive(Debug, PartialEq, Eq)]
pub enum DeleteOutcome {
    Deleted,
    NotFound,
    HasActiveRuns(i64),
}

/// The ids among `ids` that name no site.
pub async fn missing(executor: impl sqlx::PgExecutor<'_>, ids: &[i64]) -> sqlx::Result<Vec<i64>> {
    sqlx::query_scalar!(
        r#"SELECT id AS "id!" FROM UNNEST($1::bigint[]) AS wanted(id)
           WHERE NOT EXISTS (SELECT 1 FROM sites WHERE sites.id = wanted.id)
           ORDER BY id"#,
        ids
    )
    .fetch_all(executor)
    .await
}

/// A `sites` row as sqlx reads it (the field map is JSONB).
struct SiteRow {
    id: i64,
    name: String,
    search_url: String,
    item_selector: String,
    fields: Json<BTreeMap<String, FieldSpec>>,
    wait_for: Option<String>,
    max_pages: i32,
    render: String,
    stuck_timeout_secs: Option<i32>,
    max_attempts: Option<i32>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<SiteRow> for Site {
    fn from(row: SiteRow) -> Self {
        Site {
            id: row.id,
            name: row.name,
            search_url: row.search_url,
            item_selector: row.item_selector,
            fields: row.fields.0,
            wait_for: row.wait_for,
            max_pages: row.max_pages,
            render: row.render,
            stuck_timeout_secs: row.stuck_timeout_secs,
            max_attempts: row.max_attempts,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

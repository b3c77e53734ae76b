//! The `sites` row: one struct whose fields are the columns a spec is stored
//! in, written by the INSERT and the UPDATE and read back by the SELECT, all
//! three built from the one list `site_row!` declares, so a new column is one
//! field here and its line in `SiteRow::of` and `SiteRow::spec`.
//!
//! These statements are written at run time (from that list), not checked by
//! `sqlx::query!` at compile time: a column name cannot drift from its field,
//! and a type that does not fit its column fails every test that stores a site.

use std::collections::BTreeMap;

use serde::de::{DeserializeOwned, IntoDeserializer};
use sqlx::types::Json;

use super::{LoadError, secrets::Secrets};
use crate::domain::{
    action::Step,
    paging::Paging,
    site::{
        BrowserResources, DetailSpec, Expectations, Extraction, FieldSpec, HtmlItems, Identity,
        JsonInput, MASK, Politeness, PoolMember, ProxyPool, ProxyPoolInput, ProxyUrl, ResourceKind,
        SchemaType, SessionPolicy, SiteSpec, TokenPaging,
    },
};

/// Declares the row struct and its column names, in one list.
macro_rules! site_row {
    ($(#[$attr:meta])* struct $row:ident { $($(#[$doc:meta])* $column:ident: $ty:ty,)* }) => {
        $(#[$attr])*
        #[derive(Debug, sqlx::FromRow)]
        pub(super) struct $row {
            $($(#[$doc])* pub(super) $column: $ty,)*
        }

        impl $row {
            /// Its columns, in the order of its fields.
            const COLUMNS: &[&str] = &[$(stringify!($column)),*];

            /// Binds every field, in the order of `COLUMNS`.
            fn bind_to<'q>(
                self,
                query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
            ) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
                query$(.bind(self.$column))*
            }
        }
    };
}

site_row! {
    /// The columns of a site that hold its spec, besides its sealed secrets
    /// (maps are JSONB).
    struct SiteRow {
        name: String,
        search_url: String,
        render: String,
        item_selector: Option<String>,
        structured_items: Option<String>,
        fields: Json<BTreeMap<String, FieldSpec>>,
        item_key: Option<String>,
        wait_for: Option<String>,
        blocked_selector: Option<String>,
        json: Option<Json<JsonInput>>,
        max_pages: i32,
        paging: Json<Paging>,
        actions: Json<Vec<Step>>,
        stuck_timeout_secs: Option<i32>,
        max_attempts: Option<i32>,
        max_requests_per_sec: Option<f64>,
        max_concurrent_runs: i32,
        stop_on_seen: bool,
        expect_items: bool,
        expect_min_items: Option<i32>,
        expect_required_fields: Vec<String>,
        expect_max_empty_runs: Option<i32>,
        enabled: bool,
        respect_robots: bool,
        keep_session: bool,
        exclusive_session: bool,
        user_agent: Option<String>,
        /// The names of its headers (their values are secrets).
        header_names: Vec<String>,
        /// Credentials masked (a proxy with credentials is sealed in full).
        proxy: Option<String>,
        /// The proxy pool as responses show it: members with credentials
        /// masked (each is sealed in full).
        proxy_pool: Option<Json<ProxyPoolInput>>,
        /// Detail pages, as the rules accepted them.
        detail: Option<Json<DetailSpec>>,
        repair: String,
        /// The kinds its browser pages download (`ResourceKind` names).
        browser_resources: Vec<String>,
    }
}

/// The columns a version does not keep: where the site's secrets go (the
/// header values and proxy credentials are sealed apart), so a restored
/// version keeps today's.
const UNVERSIONED: &[&str] = &["header_names", "proxy"];

/// The columns a version records (its snapshot shows every change, masked)
/// but reads as today's: a pool's members' credentials are sealed with
/// today's secrets only, so a version read or restored keeps today's pool.
const RECORDED_ONLY: &[&str] = &["proxy_pool"];

impl SiteRow {
    /// The row that stores `spec`.
    pub(super) fn of(spec: &SiteSpec) -> SiteRow {
        let [item_selector, wait_for, blocked_selector] =
            spec.extraction.selectors().map(|s| s.map(str::to_owned));
        SiteRow {
            name: spec.name.clone(),
            search_url: spec.search_url.as_str().to_owned(),
            render: spec.render.as_str().to_owned(),
            item_selector,
            structured_items: spec
                .extraction
                .structured_items()
                .map(|t| SchemaType::as_str(t).to_owned()),
            fields: Json(spec.extraction.fields().clone()),
            item_key: spec.item_key.clone(),
            wait_for,
            blocked_selector,
            json: spec.extraction.json_input().map(Json),
            max_pages: spec.max_pages,
            paging: Json(spec.paging.clone()),
            actions: Json(spec.actions.clone()),
            stuck_timeout_secs: spec.stuck_timeout_secs,
            max_attempts: spec.max_attempts,
            max_requests_per_sec: spec.politeness.max_requests_per_sec,
            max_concurrent_runs: spec.politeness.max_concurrent_runs,
            stop_on_seen: spec.stop_on_seen,
            expect_items: spec.expect_items,
            expect_min_items: spec.expect.min_items,
            expect_required_fields: spec.expect.required_fields.clone(),
            expect_max_empty_runs: spec.expect.max_empty_runs,
            enabled: spec.enabled,
            respect_robots: spec.respect_robots,
            keep_session: spec.session.keep,
            exclusive_session: spec.session.exclusive,
            user_agent: spec.identity.user_agent.clone(),
            header_names: spec.identity.headers.keys().cloned().collect(),
            proxy: spec.identity.proxy.as_ref().map(ProxyUrl::masked),
            proxy_pool: spec.identity.pool.as_ref().map(|p| Json(p.masked())),
            detail: spec.detail.clone().map(Json),
            repair: spec.repair.as_str().to_owned(),
            browser_resources: spec
                .browser_resources
                .allowed()
                .into_iter()
                .map(|kind| kind.as_str().to_owned())
                .collect(),
        }
    }

    /// The spec as the rules accepted it when it was stored (no rule is
    /// checked again), with its opened `secrets`.
    pub(super) fn spec(self, secrets: Secrets) -> Result<SiteSpec, LoadError> {
        let fields = self.fields.0;
        let extraction = match self.json {
            Some(Json(json)) => Extraction::Json {
                items: stored("json", json.items)?,
                fields,
                paging: match (json.next_token, json.token_param) {
                    (Some(next_token), Some(token_param)) => Some(TokenPaging {
                        next_token: stored("json", next_token)?,
                        token_param,
                    }),
                    _ => None,
                },
            },
            None => Extraction::Html {
                items: match (self.structured_items, self.item_selector) {
                    (Some(item_type), _) => {
                        HtmlItems::Structured(stored("structured_items", item_type)?)
                    }
                    (None, Some(selector)) => {
                        HtmlItems::Selector(stored("item_selector", selector)?)
                    }
                    (None, None) => {
                        return Err(column_error(
                            "item_selector",
                            std::io::Error::other("missing on a site that reads HTML"),
                        ));
                    }
                },
                fields,
                wait_for: self.wait_for.map(|s| stored("wait_for", s)).transpose()?,
                blocked_selector: self
                    .blocked_selector
                    .map(|s| stored("blocked_selector", s))
                    .transpose()?,
            },
        };
        // A proxy with credentials is sealed; one without is in the clear.
        let proxy = secrets
            .proxy
            .or(self.proxy)
            .map(|proxy| ProxyUrl::parse(&proxy))
            .transpose()
            .map_err(|e| column_error("proxy", e))?;
        let pool = self
            .proxy_pool
            .map(|Json(pool)| stored_pool(pool, &secrets.pool))
            .transpose()?;
        Ok(SiteSpec {
            name: self.name,
            search_url: stored("search_url", self.search_url)?,
            render: stored("render", self.render)?,
            extraction,
            item_key: self.item_key,
            max_pages: self.max_pages,
            paging: self.paging.0,
            actions: self.actions.0,
            stuck_timeout_secs: self.stuck_timeout_secs,
            max_attempts: self.max_attempts,
            politeness: Politeness {
                max_requests_per_sec: self.max_requests_per_sec,
                max_concurrent_runs: self.max_concurrent_runs,
            },
            stop_on_seen: self.stop_on_seen,
            expect_items: self.expect_items,
            expect: Expectations {
                min_items: self.expect_min_items,
                required_fields: self.expect_required_fields,
                max_empty_runs: self.expect_max_empty_runs,
            },
            enabled: self.enabled,
            respect_robots: self.respect_robots,
            session: SessionPolicy {
                keep: self.keep_session,
                exclusive: self.exclusive_session,
            },
            identity: Identity {
                user_agent: self.user_agent,
                headers: secrets.headers,
                proxy,
                pool,
            },
            detail: self.detail.map(|Json(detail)| detail),
            repair: stored("repair", self.repair)?,
            browser_resources: BrowserResources::allowing(
                self.browser_resources
                    .into_iter()
                    .map(|kind| stored::<ResourceKind>("browser_resources", kind))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        })
    }

    /// `INSERT` of a new site: `$1`, `$2`... are the columns in order.
    pub(super) fn insert(
        self,
    ) -> sqlx::query::Query<'static, sqlx::Postgres, sqlx::postgres::PgArguments> {
        static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
            let placeholders: Vec<String> = (1..=SiteRow::COLUMNS.len())
                .map(|n| format!("${n}"))
                .collect();
            format!(
                "INSERT INTO sites ({}) VALUES ({}) RETURNING id, created_at, updated_at",
                SiteRow::COLUMNS.join(", "),
                placeholders.join(", ")
            )
        });
        self.bind_to(sqlx::query(&SQL))
    }

    /// `UPDATE` of site `id` (`$1`): every column, as `insert` writes them.
    pub(super) fn update(
        self,
        id: i64,
    ) -> sqlx::query::Query<'static, sqlx::Postgres, sqlx::postgres::PgArguments> {
        static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
            let assignments: Vec<String> = SiteRow::COLUMNS
                .iter()
                .enumerate()
                .map(|(i, column)| format!("{column} = ${}", i + 2))
                .collect();
            format!(
                "UPDATE sites SET {}, updated_at = now() WHERE id = $1
                 RETURNING id, created_at, updated_at,
                           (SELECT saved_at FROM site_sessions WHERE site_id = $1) AS session_saved_at",
                assignments.join(", ")
            )
        });
        self.bind_to(sqlx::query(&SQL).bind(id))
    }

    /// The versioned columns of the `sites` row `alias` as one JSON object,
    /// key by column (`versions`).
    pub(super) fn snapshot_of(alias: &str) -> String {
        let pairs: Vec<String> = SiteRow::COLUMNS
            .iter()
            .filter(|column| !UNVERSIONED.contains(column))
            .map(|column| format!("'{column}', {alias}.{column}"))
            .collect();
        format!("jsonb_build_object({})", pairs.join(", "))
    }

    /// The columns as a SELECT of a version lists them: a versioned column
    /// from the record `version` populated from `snapshot`, unless the
    /// snapshot lacks it (a column added after it was taken); the others
    /// from the site's row `site`.
    pub(super) fn versioned_select_list(version: &str, site: &str, snapshot: &str) -> String {
        SiteRow::COLUMNS
            .iter()
            .map(|column| match UNVERSIONED.contains(column) || RECORDED_ONLY.contains(column) {
                true => format!("{site}.{column}"),
                false => format!(
                    "CASE WHEN {snapshot} ? '{column}' THEN {version}.{column} ELSE {site}.{column} END AS {column}"
                ),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The columns as a SELECT lists them, each prefixed by `alias`.
    pub(super) fn select_list(alias: &str) -> String {
        SiteRow::COLUMNS
            .iter()
            .map(|column| format!("{alias}.{column}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A pool as its column shows it, each member with credentials taken whole
/// from the sealed `secrets` at its address.
fn stored_pool(pool: ProxyPoolInput, secrets: &[String]) -> Result<ProxyPool, LoadError> {
    let sealed: Vec<ProxyUrl> = secrets
        .iter()
        .map(|url| ProxyUrl::parse(url))
        .collect::<Result<_, _>>()
        .map_err(|e| column_error("proxy_pool", e))?;
    let mut members = Vec::with_capacity(pool.members.len());
    for member in pool.members {
        // The masked form does not parse as a proxy: read for its address.
        let shown = ProxyUrl::parse(&member.url.replace(MASK, "x"))
            .map_err(|e| column_error("proxy_pool", e))?;
        let proxy = match shown.credentials() {
            None => shown,
            Some(_) => sealed
                .iter()
                .find(|p| p.address() == shown.address())
                .cloned()
                .ok_or_else(|| {
                    column_error(
                        "proxy_pool",
                        std::io::Error::other(format!(
                            "no sealed credentials for {}",
                            shown.address()
                        )),
                    )
                })?,
        };
        members.push(PoolMember {
            proxy,
            weight: member.weight.unwrap_or(1),
        });
    }
    Ok(ProxyPool::stored(
        members,
        pool.rotation.unwrap_or_default(),
    ))
}

/// A value the rules accepted when it was stored, read back as its type the
/// way serde reads the JSONB columns: without checking the rules again.
fn stored<T: DeserializeOwned>(column: &str, value: String) -> Result<T, LoadError> {
    T::deserialize(IntoDeserializer::<serde::de::value::Error>::into_deserializer(value))
        .map_err(|e| column_error(column, e))
}

fn column_error(column: &str, error: impl std::error::Error + Send + Sync + 'static) -> LoadError {
    LoadError::Database(sqlx::Error::ColumnDecode {
        index: column.to_owned(),
        source: Box::new(error),
    })
}

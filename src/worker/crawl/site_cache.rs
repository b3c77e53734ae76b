//! The sites this worker crawls, each read and decoded once per version: a
//! claim names the version (`updated_at`) of its run's site, so an edited
//! site is read again by the next crawl of it, and an unchanged one costs
//! neither a query nor a decode (its secrets opened once).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::{
    domain::site::Site,
    store::{self, sealing::SessionKey, sites::LoadError},
};

/// Sites by id, as last read; cheap to share.
#[derive(Default)]
pub struct SiteCache {
    sites: Mutex<HashMap<i64, Arc<Site>>>,
}

impl SiteCache {
    /// Site `site_id` as of `version`: from the cache when it holds that
    /// version, else read (and kept); `None` when it no longer exists.
    pub async fn get(
        &self,
        pool: &PgPool,
        site_id: i64,
        version: DateTime<Utc>,
        key: Option<&SessionKey>,
    ) -> Result<Option<Arc<Site>>, LoadError> {
        if let Some(site) = self.cached(site_id, version) {
            return Ok(Some(site));
        }
        let Some(site) = store::sites::get(pool, site_id, key).await? else {
            self.sites.lock().expect("site cache lock").remove(&site_id);
            return Ok(None);
        };
        let site = Arc::new(site);
        let mut sites = self.sites.lock().expect("site cache lock");
        // Two crawls may read it at once: the newer version stays.
        match sites.get(&site_id) {
            Some(kept) if kept.updated_at > site.updated_at => {}
            _ => {
                sites.insert(site_id, site.clone());
            }
        }
        Ok(Some(site))
    }

    fn cached(&self, site_id: i64, version: DateTime<Utc>) -> Option<Arc<Site>> {
        self.sites
            .lock()
            .expect("site cache lock")
            .get(&site_id)
            .filter(|site| site.updated_at == version)
            .cloned()
    }
}

//! The worker's part of `crawlfleet smoke`: its browser started and closed
//! through the worker's own launch code, and a page served by the command
//! itself on 127.0.0.1 crawled through the worker's real fetch and extract
//! path (the one "test this site" uses: nothing is written to Postgres).
//! The crawl's guard lets through that one socket and nothing else.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use anyhow::Context;
use apalis_redis::ConnectionManager;
use serde_json::json;
use sqlx::PgPool;

use super::{
    browser::processes,
    context::{browser_pool, crawl_context, profile_root_of},
    preview, worker_id,
};
use crate::{
    config::{CommonConfig, WorkerConfig},
    domain::{preview::PreviewRequest, site::RenderMode},
    net::target_guard::{AllowedTarget, TargetGuard},
};

/// The items the built-in page holds, in page order.
pub const EXPECTED_TITLES: [&str; 3] = ["Smoke lamp", "Smoke kettle", "Smoke chair"];

/// The page a search on the built-in site answers.
fn search_page() -> String {
    let items: String = EXPECTED_TITLES
        .iter()
        .enumerate()
        .map(|(n, title)| {
            format!(
                r#"<li class="product"><a class="title" href="/item/{n}">{title}</a> <span class="price">{n}9.50</span></li>"#
            )
        })
        .collect();
    format!(
        "<!doctype html><html><head><title>crawlfleet smoke</title></head>\
         <body><ul class=\"results\">{items}</ul></body></html>"
    )
}

/// The built-in site, served on 127.0.0.1 on a port of its own until dropped.
pub struct BuiltInSite {
    addr: SocketAddr,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for BuiltInSite {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl BuiltInSite {
    pub async fn serve() -> anyhow::Result<BuiltInSite> {
        let listener = tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
            .await
            .context("listening on 127.0.0.1 for the built-in page")?;
        let addr = listener.local_addr()?;
        let page = search_page();
        let router = axum::Router::new()
            .route(
                "/robots.txt",
                axum::routing::get(|| async { "User-agent: *\nAllow: /\n" }),
            )
            .route(
                "/search",
                axum::routing::get(move || async move { axum::response::Html(page) }),
            );
        let server = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router).await {
                tracing::warn!(error = %e, "the built-in page stopped serving");
            }
        });
        Ok(BuiltInSite { addr, server })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The guard of the smoke's crawls: this site's socket, nothing else
    /// private (not loopback in general), whatever the worker's settings.
    pub fn guard(&self) -> TargetGuard {
        TargetGuard::new(false, &[AllowedTarget::Socket(self.addr)])
    }

    /// Crawls the built-in page in `render` mode as a worker with these
    /// settings would, and checks the items it extracted. What it found, in
    /// a few words.
    pub async fn crawl(
        &self,
        common: &CommonConfig,
        config: &WorkerConfig,
        stores: (PgPool, ConnectionManager),
        render: RenderMode,
        within: Duration,
    ) -> anyhow::Result<String> {
        let site = json!({
            "name": "crawlfleet-smoke",
            "search_url": format!("http://{}/search?q={{keyword}}", self.addr),
            "render": render.as_str(),
            "item_selector": "li.product",
            "fields": {"title": {"selector": "a.title"}, "price": {"selector": ".price"}},
            "max_pages": 1,
        });
        let request = PreviewRequest {
            site: serde_json::from_value(site).context("the built-in site")?,
            site_id: None,
            keyword: "smoke".to_owned(),
            pages: 1,
            deadline: chrono::Utc::now()
                + chrono::TimeDelta::from_std(within).context("the crawl's time")?,
        };
        let spec = request
            .site
            .clone()
            .parse()
            .map_err(|e| anyhow::anyhow!("the built-in site does not parse: {e}"))?;
        let (id, root) = smoke_place();
        let ctx = crawl_context(common, config, stores, id, root.clone(), self.guard())?;
        let outcome = preview::crawl(&ctx, &request, &spec).await;
        ctx.browsers.close_all().await;
        no_chrome_under(&root)?;
        if let Some(refusal) = outcome.refusal {
            anyhow::bail!("the crawl stopped: {}: {}", refusal.kind, refusal.message);
        }
        let titles: Vec<&str> = outcome
            .items
            .iter()
            .filter_map(|item| item.fields["title"].as_str())
            .collect();
        anyhow::ensure!(
            titles == EXPECTED_TITLES,
            "extracted titles {titles:?}, expected {EXPECTED_TITLES:?}"
        );
        Ok(format!(
            "{} items from http://{}/search in {} ms",
            titles.len(),
            self.addr,
            outcome.crawl_ms
        ))
    }
}

/// Starts the worker's browser as a crawl would (its launch code, flags and
/// DevTools pipe, or a connection to the remote browser of
/// `BROWSER_BACKEND=devtools`; a context opened and given back) and closes
/// it again,
/// leaving no process behind.
pub async fn start_and_close_browser(
    common: &CommonConfig,
    config: &WorkerConfig,
) -> anyhow::Result<String> {
    let (_, root) = smoke_place();
    // A remote browser is named by its host and port alone (its URL is a secret).
    let (doing, done) = match config.remote_browser()? {
        Some(remote) => {
            let at = format!("the remote browser at {}", remote.url.host_port());
            (
                format!("reaching {at}"),
                format!("{at} reached, a context opened and closed"),
            )
        }
        None => (
            format!("starting {}", config.chrome_path),
            format!("{} started and closed", config.chrome_path),
        ),
    };
    let pool = browser_pool(config, root.clone(), common.target_guard())?;
    let opened = async {
        let lease = pool.lease(None).await?;
        pool.give_back(lease, true).await;
        anyhow::Ok(())
    }
    .await;
    pool.close_all().await;
    opened.context(doing)?;
    no_chrome_under(&root)?;
    Ok(done)
}

/// A worker id and profile folder of the smoke's own, named as a worker's.
fn smoke_place() -> (String, PathBuf) {
    let id = worker_id();
    let root = profile_root_of(&id);
    (id, root)
}

fn no_chrome_under(root: &std::path::Path) -> anyhow::Result<()> {
    let left = processes::pids_under(root);
    anyhow::ensure!(
        left.is_empty(),
        "browser processes left running after closing: {left:?}"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_smoke_guard_lets_through_its_site_and_no_other_loopback_port() {
        let site = BuiltInSite::serve().await.unwrap();
        let guard = site.guard();
        let own: url::Url = format!("http://{}/search", site.addr()).parse().unwrap();
        assert!(guard.check(&own).await.is_ok());
        let other = format!("http://127.0.0.1:{}/", site.addr().port() ^ 1);
        assert!(guard.check(&other.parse().unwrap()).await.is_err());
        assert!(
            guard
                .check(&"http://localhost/".parse().unwrap())
                .await
                .is_err()
        );
    }
}

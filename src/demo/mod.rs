//! `--demo`: serves the bundled demo shop on loopback and, when no site exists
//! yet, registers it with a keyword and queues a first crawl, so a newcomer
//! sees results within a minute or two of `scripts/up`. The shop (`site`) is
//! also the fixture website of the tests and benchmarks. Imports `domain`
//! and `store`; no room imports it (only `app`, tests and benches).

pub mod site;

use std::collections::BTreeMap;

use sqlx::PgPool;

use site::DemoSite;

use crate::{
    config::Config,
    domain::{
        keyword::KeywordInput,
        run::Trigger,
        site::{FieldInput, SiteInput},
    },
    store,
};

pub async fn start(config: &Config, pool: &PgPool) -> anyhow::Result<DemoSite> {
    anyhow::ensure!(
        config.common.allow_private_targets,
        "--demo crawls a shop on 127.0.0.1, which the SSRF guard refuses: set ALLOW_PRIVATE_TARGETS=true"
    );
    let site = DemoSite::start(config.demo_port).await?;
    tracing::info!(url = %site.base_url(), "demo shop serving");
    store::migrate(pool).await?;
    if !store::sites::list(pool, config.common.session_key.as_ref())
        .await?
        .is_empty()
    {
        return Ok(site);
    }
    let field = |selector: &str, attr: Option<&str>| FieldInput {
        selector: Some(selector.to_owned()),
        attr: attr.map(str::to_owned),
        ..FieldInput::default()
    };
    let spec = SiteInput {
        name: "demo-shop".into(),
        search_url: format!("{}/js-search?q={{keyword}}&page={{page}}", site.base_url()),
        item_selector: Some("li.product".into()),
        fields: BTreeMap::from([
            ("title".to_owned(), field("a.title", None)),
            ("link".to_owned(), field("a.title", Some("href"))),
            ("price".to_owned(), field(".price", None)),
            ("image".to_owned(), field("img.thumb", Some("src"))),
        ]),
        wait_for: Some("#ready".into()),
        max_pages: Some(3),
        render: Some("browser".into()),
        ..SiteInput::default()
    }
    .parse()?;
    let demo_site = store::sites::create(pool, &spec, config.common.session_key.as_ref()).await?;
    let keyword = KeywordInput {
        keyword: "laptop".into(),
        site_ids: vec![demo_site.id],
        schedule: "0 */10 * * * *".into(),
        timezone: "UTC".into(),
        jitter_secs: 0,
        enabled: true,
        priority: 0,
    }
    .parse(chrono::TimeDelta::seconds(
        config.api.min_schedule_interval_secs.into(),
    ))?;
    let keyword = store::keywords::create(pool, &keyword).await?;
    store::runs::queue_for_keyword(
        pool,
        keyword.id,
        Trigger::Manual,
        None,
        config.common.max_attempts as i32,
    )
    .await?;
    tracing::info!(
        site_id = demo_site.id,
        keyword_id = keyword.id,
        "demo site and keyword registered; first crawl queued"
    );
    Ok(site)
}

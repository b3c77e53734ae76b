//! The shop as a crawlfleet site: when no site exists yet, the shop's
//! JavaScript search is registered with the keyword `laptop` (every ten
//! minutes) and a first crawl is queued, so a newcomer sees results within a
//! minute or two of `scripts/up`. Written to the store directly, as the api
//! would: the same parsing of the site and keyword, one queued run.

use std::collections::BTreeMap;

use sqlx::PgPool;

use crawlfleet::{
    config::Config,
    domain::{
        keyword::KeywordInput,
        run::Trigger,
        site::{FieldInput, SiteInput, VersionReason},
    },
    store,
};

/// Registers the shop at `base_url` (its site, keyword and a first crawl)
/// unless the fleet has a site already; migrates first (a worker alone
/// does not).
pub async fn register_once(config: &Config, pool: &PgPool, base_url: &str) -> anyhow::Result<()> {
    store::migrate(pool).await?;
    if !store::sites::list(pool, config.common.session_key.as_ref())
        .await?
        .is_empty()
    {
        return Ok(());
    }
    let field = |selector: &str, attr: Option<&str>| FieldInput {
        selector: Some(selector.to_owned()),
        attr: attr.map(str::to_owned),
        ..FieldInput::default()
    };
    let spec = SiteInput {
        name: "demo-shop".into(),
        search_url: format!("{base_url}/js-search?q={{keyword}}&page={{page}}"),
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
    let revision = store::sites::Revision::new(VersionReason::Created, None);
    let key = config.common.session_key.as_ref();
    let demo_site = store::sites::create(pool, &spec, key, &revision).await?;
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
    Ok(())
}

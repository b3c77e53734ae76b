//! A repair in the console, in real headless Chromium: the run that went
//! bad shows the repair a worker proposed (selectors before and after, each
//! verification's counts, the items side by side), and Accept makes the
//! site's next version and queues the re-crawl.

use crate::{
    repairs::{PRODUCTS, crawled, newest_version, repair_in, shop_site},
    support::{ChangingSite, ConsoleBrowser, Look, ON_DEMAND, Roles, TestApp},
};

const WRITE_TOKEN: &str = "console-repairs-token";

#[tokio::test]
async fn an_operator_sees_a_proposed_repair_beside_the_bad_run_and_accepts_it() {
    let app = TestApp::spawn_with_console(Roles::fleet(), |config| {
        config.api.auth_disabled = false;
        config.api.api_tokens = vec![WRITE_TOKEN.into()];
    })
    .await;
    let shop = ChangingSite::start(Look::Products(PRODUCTS)).await;
    let site = shop_site(&app, &shop, "suggest").await;
    let lamp = app.create_keyword("lamp", &[site], ON_DEMAND).await;
    crawled(&app, lamp).await;
    shop.show(Look::Redesigned(PRODUCTS));
    let bad = crawled(&app, lamp).await;
    let repair = repair_in(&app, site, "proposed").await;

    let browser = ConsoleBrowser::open(&app.base).await;
    browser.sign_in(WRITE_TOKEN).await;
    browser.go(&format!("#/runs/{}", bad["id"])).await;
    let shown = browser
        .wait_for_text("#run-repair", "verified, waiting for a decision")
        .await;
    assert!(
        shown.contains("li.product"),
        "the old item selector: {shown}"
    );
    assert!(
        shown.contains(&format!("{PRODUCTS} of the {PRODUCTS} good items")),
        "the failing page's check: {shown}"
    );
    assert!(shown.contains("Lamp 1"), "the items side by side: {shown}");

    browser.click("#run-repair [data-repair='accept']").await;
    browser.wait_for_text("#run-repair", "accepted").await;
    let version = newest_version(&app, site).await;
    assert_eq!(version["reason"], "repaired", "{version}");
    let (_, repairs) = app.get(&format!("/api/sites/{site}/repairs")).await;
    assert_eq!(repairs[0]["id"], repair["id"]);
    assert_eq!(repairs[0]["state"], "accepted", "{repairs}");
    let by = repairs[0]["decided_by"].as_str().unwrap_or_default();
    assert!(
        by.starts_with("token:"),
        "decided by the signed-in token: {repairs}"
    );

    // The site's page lists it, and its form keeps the policy.
    browser.go(&format!("#/sites/{site}")).await;
    browser.wait_for_text("#site-repairs", "accepted").await;
    let policy = browser
        .client
        .execute(
            "return document.querySelector('#site-repair').value",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(policy, "suggest");
    browser.close().await;
    app.stop().await;
}

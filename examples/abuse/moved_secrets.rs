//! Class 8: secrets and their targets. A client holding a write token tries
//! to send a site's stored secrets somewhere else by sending them back
//! masked (`***`) with another search URL or proxy, on an update and on a
//! preview; a read token reads webhooks for their URLs (a Slack URL is its
//! key) and their endpoints' answers; anyone scrapes /metrics on the API's
//! port, and many scrape the metrics port at once. Any of them getting
//! through is a breach: the run fails.

use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{StreamExt, stream};
use reqwest::Method;
use serde_json::{Value, json};

use crate::{
    Targets,
    client::{Api, Token},
    ledger::{Answer, Expect},
    secrets::Secrets,
};

pub async fn run(api: &Api, targets: &Targets, secrets: &Secrets) -> anyhow::Result<()> {
    masked_secrets_elsewhere(api, targets, secrets).await?;
    webhooks_to_a_reader(api, targets).await?;
    metrics_where_they_must_not_be(api).await;
    Ok(())
}

/// A hostile request that must be refused naming `field`; taken, it is a breach.
async fn must_refuse(api: &Api, what: &str, method: Method, path: &str, body: &Value, field: &str) {
    let answer = api
        .json(
            method,
            path,
            Token::Write,
            body,
            what,
            Expect::invalid(field),
        )
        .await;
    if let Some(answer) = answer
        && (200..300).contains(&answer.status)
    {
        api.ledger.breach(
            what,
            format!(
                "{}: the stored secret went to the new target",
                answer.status
            ),
        );
    }
}

async fn masked_secrets_elsewhere(
    api: &Api,
    targets: &Targets,
    secrets: &Secrets,
) -> anyhow::Result<()> {
    let fixture = &targets.fixture;
    let proxy_port = targets.proxy_port;
    let fixture_authority = fixture.trim_start_matches("http://");
    let body = json!({
        "name": "moved-secrets", "render": "http",
        "search_url": format!("{fixture}/search?q={{keyword}}"),
        "item_selector": "li.product", "fields": {"title": {"selector": "a.title"}},
        "headers": {"Authorization": format!("Bearer {}", secrets.header_bearer), "X-Api-Key": secrets.api_key},
        "proxy": format!("http://{}:{}@127.0.0.1:{proxy_port}", secrets.proxy_user, secrets.proxy_password),
    });
    let id = api
        .create_site(&body, "a site whose secrets a client moves")
        .await
        .context("creating the site of class 8")?;
    let path = format!("/api/sites/{id}");
    let mut shown = api
        .call(
            "the site as shown",
            api.request(Method::GET, &path, Token::Write),
            Expect::Status(&[200]),
        )
        .await
        .and_then(|a| a.json())
        .context("reading the site of class 8")?;
    for key in ["id", "created_at", "updated_at", "session_saved_at"] {
        shown.as_object_mut().context("a site object")?.remove(key);
    }
    let with = |changes: Value| {
        let mut edited = shown.clone();
        for (k, v) in changes.as_object().expect("an object") {
            edited[k] = v.clone();
        }
        edited
    };
    // Other origins the guard lets through (the proxy's port, the fixture by
    // another name), another proxy, and a new proxy reading plain http.
    let cases = [
        (
            "masked headers to another origin",
            with(
                json!({"search_url": format!("http://127.0.0.1:{proxy_port}/search?q={{keyword}}")}),
            ),
            "headers.Authorization",
        ),
        (
            "masked headers to the same address by another name",
            with(
                json!({"search_url": format!("http://localhost:{}/search?q={{keyword}}", fixture_authority.rsplit(':').next().unwrap_or_default())}),
            ),
            "headers.Authorization",
        ),
        (
            "masked proxy credentials to another proxy",
            with(json!({"proxy": format!("http://***:***@{fixture_authority}")})),
            "proxy",
        ),
        (
            "masked headers through a new proxy over plain http",
            with(json!({"proxy": format!("http://{fixture_authority}")})),
            "headers.Authorization",
        ),
    ];
    for (what, edited, field) in &cases {
        must_refuse(
            api,
            &format!("PUT {what}"),
            Method::PUT,
            &path,
            edited,
            field,
        )
        .await;
        let preview = json!({"site": edited, "keyword": "lamp", "site_id": id});
        let site_field = format!("site.{field}");
        must_refuse(
            api,
            &format!("preview {what}"),
            Method::POST,
            "/api/sites/preview",
            &preview,
            &site_field,
        )
        .await;
    }
    // Not hostile: the same origin and proxy keep the masked secrets.
    let same = with(json!({"search_url": format!("{fixture}/search?q={{keyword}}&edited=1")}));
    api.json(
        Method::PUT,
        &path,
        Token::Write,
        &same,
        "masked secrets, same targets",
        Expect::Status(&[200]),
    )
    .await;
    api.call(
        "the site of class 8, deleted",
        api.request(Method::DELETE, &path, Token::Write),
        Expect::Status(&[204]),
    )
    .await;
    Ok(())
}

/// How long the scheduler takes to make a webhook's first attempt (it polls
/// every second): 20 s is ten times that on a loaded machine.
const ATTEMPT_LIMIT: Duration = Duration::from_secs(20);

async fn webhooks_to_a_reader(api: &Api, targets: &Targets) -> anyhow::Result<()> {
    let key = format!("hookkey{}", uuid::Uuid::new_v4().simple());
    let url = format!("{}/hooks/{key}", targets.fixture);
    let body = json!({"url": url, "events": ["run.failed"], "description": "class 8"});
    let id = api
        .json(
            Method::POST,
            "/api/webhooks",
            Token::Write,
            &body,
            "a webhook with a secret URL",
            Expect::Status(&[201]),
        )
        .await
        .and_then(|a| a.json()?["id"].as_i64())
        .context("creating the webhook of class 8")?;
    api.json(
        Method::POST,
        &format!("/api/webhooks/{id}/test"),
        Token::Write,
        &json!({}),
        "a test message",
        Expect::Status(&[202]),
    )
    .await;
    let deliveries = format!("/api/webhooks/{id}/deliveries");
    let started = Instant::now();
    let attempted = loop {
        let page = api
            .call(
                "the webhook's deliveries",
                api.request(Method::GET, &deliveries, Token::Write),
                Expect::Status(&[200]),
            )
            .await
            .and_then(|a| a.json());
        let attempted = page.as_ref().is_some_and(|p| {
            p["items"][0]["attempt_log"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        });
        if attempted || started.elapsed() > ATTEMPT_LIMIT {
            break attempted;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    if !attempted {
        api.ledger.unexpected(
            "the webhook of class 8",
            "no attempt was made: the answers were not checked",
        );
    }
    let masked = format!("{}/***", targets.fixture);
    for path in [
        "/api/webhooks".to_owned(),
        format!("/api/webhooks/{id}"),
        deliveries,
    ] {
        let what = format!("a webhook read with the read token ({path})");
        let Some(answer) = api
            .call(
                &what,
                api.request(Method::GET, &path, Token::Read),
                Expect::Status(&[200]),
            )
            .await
        else {
            continue;
        };
        read_shows_no_webhook_secret(api, &what, &answer, &key, &masked);
    }
    api.call(
        "the webhook of class 8, deleted",
        api.request(Method::DELETE, &format!("/api/webhooks/{id}"), Token::Write),
        Expect::Status(&[204]),
    )
    .await;
    Ok(())
}

fn read_shows_no_webhook_secret(api: &Api, what: &str, answer: &Answer, key: &str, masked: &str) {
    if String::from_utf8_lossy(&answer.body).contains(key) {
        api.ledger
            .breach(what, "the webhook's URL, its key included");
    }
    let Some(page) = answer.json() else { return };
    let items = match page["items"].as_array() {
        Some(items) => items.clone(),
        None => vec![page],
    };
    for item in &items {
        if let Some(url) = item["url"].as_str()
            && url != masked
        {
            api.ledger
                .breach(what, format!("url {url}, expected {masked}"));
        }
        for attempt in item["attempt_log"].as_array().into_iter().flatten() {
            if !attempt["response_excerpt"].is_null() {
                api.ledger
                    .breach(what, "the endpoint's answer (response_excerpt)");
            }
        }
    }
}

const REFRESHES: &str = "crawlfleet_metrics_gauge_refreshes_total";
/// The fleet's API_METRICS_REFRESH_SECS (the default).
const REFRESH: Duration = Duration::from_secs(5);

async fn metrics_where_they_must_not_be(api: &Api) {
    for token in [Token::None, Token::Wrong, Token::Read, Token::Write] {
        let what = "/metrics on the API's port";
        let answer = api
            .call(
                what,
                api.request(Method::GET, "/metrics", token),
                Expect::Status(&[404]),
            )
            .await;
        if let Some(answer) = answer
            && (answer.status == 200
                || String::from_utf8_lossy(&answer.body).contains("crawlfleet_"))
        {
            api.ledger
                .breach(what, format!("{} with the metrics", answer.status));
        }
    }
    // Many scrapers at once: Postgres is read once a period, not per scrape.
    let url = format!("{}/metrics", api.metrics_base);
    let refreshes = |answer: &Option<Answer>| {
        let text = String::from_utf8_lossy(&answer.as_ref()?.body).into_owned();
        text.lines().find_map(|l| {
            l.strip_prefix(&format!("{REFRESHES} "))?
                .trim()
                .parse::<f64>()
                .ok()
        })
    };
    let scrape = || {
        api.call(
            "a scrape of the metrics port",
            api.get_url(&url),
            Expect::Status(&[200]),
        )
    };
    let Some(before) = refreshes(&scrape().await) else {
        api.ledger
            .unexpected("the metrics port", format!("no {REFRESHES} at {url}"));
        return;
    };
    let started = Instant::now();
    let answers: Vec<Option<Answer>> = stream::iter(0..200)
        .map(|_| scrape())
        .buffer_unordered(20)
        .collect()
        .await;
    let elapsed = started.elapsed();
    let after = answers.iter().filter_map(refreshes).fold(before, f64::max);
    let allowed = 1.0 + (elapsed.as_secs_f64() / REFRESH.as_secs_f64()).ceil();
    if after - before > allowed {
        api.ledger.breach(
            "200 scrapes of the metrics port",
            format!(
                "{} Postgres reads in {elapsed:?}, at most {allowed} allowed",
                after - before
            ),
        );
    }
}

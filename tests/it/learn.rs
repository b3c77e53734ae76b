//! `POST /api/sites/learn`: a worker loads a page through the preview's lane
//! (guard, robots, pace, identity, render mode) and proposes selectors that
//! give back the examples, or the page's repeated structure without them;
//! the api only checks and relays.

use axum::{
    Router,
    response::{Html, Redirect},
    routing::get,
};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{Roles, TestApp};

/// The shop's products: (title, price).
pub(crate) const PRODUCTS: &[(&str, &str)] = &[
    ("Brass Desk Lamp", "$49.00"),
    ("Oak Side Table", "$129.50"),
    ("Linen Armchair", "$310.00"),
    ("Wool Floor Rug", "$89.99"),
    ("Glass Vase", "$19.25"),
    ("Steel Bookshelf", "$215.00"),
];

fn listing() -> String {
    PRODUCTS
        .iter()
        .enumerate()
        .map(|(n, (title, price))| {
            format!(
                r#"<li class="product"><a class="title" href="/p/{n}">{title}</a><span class="price">{price}</span><em>In stock</em></li>"#
            )
        })
        .collect()
}

fn page(body: &str) -> Html<String> {
    Html(format!(
        r#"<!doctype html><html><head><title>Shop</title></head><body>
<header><nav><a href="/">Home</a> <a href="/about">About us</a></nav></header>
<main>{body}</main><footer><p>Shop Ltd.</p></footer></body></html>"#
    ))
}

/// A shop on a loopback port: `/shop` as served, `/shop-js` built by a
/// script after load, `/away` redirecting to a target the guard refuses.
pub(crate) async fn shop() -> (String, tokio::task::JoinHandle<()>) {
    let app = Router::new()
        .route(
            "/shop",
            get(|| async { page(&format!(r#"<ul class="results">{}</ul>"#, listing())) }),
        )
        .route(
            "/shop-js",
            get(|| async {
                let list = serde_json::to_string(&listing()).unwrap();
                page(&format!(
                    r#"<ul class="results"></ul><script>
setTimeout(() => {{ document.querySelector('ul.results').innerHTML = {list}; }}, 300);
</script>"#
                ))
            }),
        )
        .route(
            "/big",
            get(|| async {
                let many: String = (0..3000)
                    .map(|n| format!(r#"<li class="product"><a class="title" href="/p/{n}">Item {n}</a><span class="price">${n}.00</span></li>"#))
                    .collect();
                page(&format!(r#"<ul class="results">{many}</ul>"#))
            }),
        )
        .route(
            "/away",
            get(|| async { Redirect::temporary("http://localhost:1/") }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, task)
}

fn worker_only() -> Roles {
    Roles {
        scheduler: false,
        worker: true,
    }
}

async fn learn(app: &TestApp, body: Value) -> (StatusCode, Value) {
    app.post("/api/sites/learn", body).await
}

/// The top proposal reads every product with its title and price.
fn reads_every_product(answer: &Value) {
    let top = &answer["proposals"][0];
    let items = top["items"].as_array().expect("items");
    assert_eq!(items.len(), PRODUCTS.len(), "{answer}");
    for (item, (title, price)) in items.iter().zip(PRODUCTS) {
        assert_eq!(item["title"], *title, "{answer}");
        assert_eq!(item["price"], *price, "{answer}");
    }
    assert_eq!(top["items_found"], PRODUCTS.len());
    assert_eq!(top["examples_reproduced"], top["examples_given"]);
    assert!(top["confidence"].as_f64().unwrap() > 0.5, "{answer}");
    assert!(top["fields"]["title"]["selector"].is_string(), "{answer}");
}

#[tokio::test]
async fn over_http_examples_give_selectors_for_every_item_and_none_give_the_repeated_structure() {
    let (base, fixture) = shop().await;
    let app = TestApp::spawn_without_browsers(worker_only(), |_| {}).await;
    let examples = json!({
        "title": ["Brass Desk Lamp", "Linen Armchair"],
        "price": ["$49.00", "$310.00"],
    });
    let (status, answer) = learn(
        &app,
        json!({"url": format!("{base}/shop"), "render": "http", "examples": examples}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    reads_every_product(&answer);
    assert_eq!(answer["proposals"][0]["item_selector"], "li.product");
    assert!(answer["final_url"].as_str().unwrap().ends_with("/shop"));

    // The same page as a site searches it.
    let (status, answer) = learn(
        &app,
        json!({"search_url": format!("{base}/shop?q={{keyword}}"), "keyword": "lamp",
               "render": "http", "examples": examples}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    reads_every_product(&answer);

    // No examples: the page's main repeated structure.
    let (status, answer) = learn(
        &app,
        json!({"url": format!("{base}/shop"), "render": "http"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let top = &answer["proposals"][0];
    assert_eq!(top["items_found"], PRODUCTS.len(), "{answer}");
    assert_eq!(top["item_selector"], "li.product", "{answer}");
    let first = top["items"][0].as_object().unwrap();
    assert!(
        first.values().any(|v| v == "$49.00")
            && first
                .values()
                .any(|v| v.as_str().is_some_and(|link| link.ends_with("/p/0"))),
        "the first product's price and link among its fields: {answer}"
    );
    let proposals = answer["proposals"].as_array().unwrap();
    for (at, proposal) in proposals.iter().enumerate() {
        let (selector, fields) = (&proposal["item_selector"], &proposal["fields"]);
        assert!(
            !proposals[..at]
                .iter()
                .any(|p| &p["item_selector"] == selector && &p["fields"] == fields),
            "no proposal twice: {answer}"
        );
    }

    // Examples that are not on the page, and examples out of bounds.
    let (status, answer) = learn(
        &app,
        json!({"url": format!("{base}/shop"), "render": "http",
               "examples": {"title": ["Brass Desk Lamp"], "price": ["$12,345.00"]}}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert_eq!(answer["error"]["field"], "examples.price", "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not on the page"),
        "{answer}"
    );
    let long = "x".repeat(301);
    for (body, field) in [
        (
            json!({"url": format!("{base}/shop"), "examples": {"title": ["Lamp", long]}}),
            "examples.title[1]",
        ),
        (
            json!({"url": format!("{base}/shop"), "examples": {"title": ["a", "b", "c", "d"]}}),
            "examples.title",
        ),
        (
            json!({"url": format!("{base}/shop"), "render": "json"}),
            "render",
        ),
        (json!({"url": "ftp://example.test/"}), "url"),
        (json!({"examples": {}}), "url"),
        (
            json!({"search_url": format!("{base}/shop?q={{keyword}}")}),
            "keyword",
        ),
    ] {
        let (status, answer) = learn(&app, body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
        assert_eq!(answer["error"]["field"], field, "{answer}");
    }
    app.stop().await;
    fixture.abort();
}

#[tokio::test]
async fn in_a_browser_the_page_a_script_builds_is_learned_from() {
    let (base, fixture) = shop().await;
    let app = TestApp::spawn_with(worker_only(), |_| {}).await;
    let (status, answer) = learn(
        &app,
        json!({
            "url": format!("{base}/shop-js"),
            "render": "browser",
            "wait_for": "li.product",
            "examples": {"title": ["Oak Side Table", "Glass Vase"], "price": ["$129.50", "$19.25"]},
        }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    reads_every_product(&answer);
    app.stop().await;
    fixture.abort();
}

#[tokio::test]
async fn a_refused_target_names_the_url_and_tokens_are_required() {
    let (base, fixture) = shop().await;
    let allowed = base.trim_start_matches("http://").to_owned();
    let app = TestApp::spawn_without_browsers(worker_only(), |config| {
        config.common.allow_private_targets = false;
        config.common.allowed_private_targets = vec![allowed.parse().unwrap()];
        config.api.auth_disabled = false;
        config.api.api_tokens = vec!["learn-writer".into()];
        config.api.api_read_tokens = vec!["learn-reader".into()];
    })
    .await;
    let body = json!({"url": format!("{base}/shop"), "render": "http",
                      "examples": {"title": ["Brass Desk Lamp"]}});
    for (token, status) in [
        (None, StatusCode::UNAUTHORIZED),
        (Some("learn-reader"), StatusCode::FORBIDDEN),
    ] {
        let mut request = app.http.post(format!("{}/api/sites/learn", app.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let answer = request.json(&body).send().await.unwrap();
        assert_eq!(answer.status(), status);
    }

    // Refused at the api: a loopback port the guard does not allow.
    let (status, answer) = learn(
        &app,
        json!({"url": "http://127.0.0.1:1/shop", "render": "http"}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert_eq!(answer["error"]["field"], "url", "{answer}");
    let (status, answer) = learn(
        &app,
        json!({"search_url": "http://127.0.0.1:1/?q={keyword}", "keyword": "lamp", "render": "http"}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert_eq!(answer["error"]["field"], "search_url", "{answer}");

    // Refused on the worker: the page redirects to a refused target.
    let (status, answer) = learn(
        &app,
        json!({"url": format!("{base}/away"), "render": "http", "examples": {"title": ["Brass Desk Lamp"]}}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert_eq!(answer["error"]["field"], "url", "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("target_refused"),
        "{answer}"
    );

    // The allowed page is learned from with the write token.
    let (status, answer) = learn(&app, body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["proposals"][0]["items_found"], PRODUCTS.len());
    app.stop().await;
    fixture.abort();
}

#[tokio::test]
async fn learning_past_its_budget_is_refused_naming_the_examples() {
    let (base, fixture) = shop().await;
    let app = TestApp::spawn_without_browsers(worker_only(), |config| {
        config.worker.learn_budget_ms = 1;
    })
    .await;
    let (status, answer) = learn(
        &app,
        json!({"url": format!("{base}/big"), "render": "http",
               "examples": {"title": ["Item 7", "Item 2900"], "price": ["$7.00", "$2900.00"]}}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert_eq!(answer["error"]["field"], "examples", "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("LEARN_BUDGET_MS"),
        "{answer}"
    );
    app.stop().await;
    fixture.abort();
}

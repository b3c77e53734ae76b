//! `/ws` with real clients: a crawl's events across processes, filters, 200
//! clients, slow and silent clients, size limits and shutdown.

use std::time::{Duration, Instant};

use crawlfleet::{
    api::MAX_CLIENT_MESSAGE_BYTES,
    events::{Event, EventPublisher, QueueStats},
    queue,
    store::stats::QueueCounts,
};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::{
    ApiProcess, READER, Read, Scrape, Socket, WRITER, next_json, next_of_type, next_read,
    run_event, send_text, socket, subscribe, with_tokens,
};
use crate::support::{ON_DEMAND, RoleProcess, Roles, TestApp, browser_slots};

async fn publisher(app: &TestApp) -> EventPublisher {
    let redis = queue::connect(&app.config.common.redis_url).await.unwrap();
    EventPublisher::new(redis, &app.config.common.queue_name)
}

/// Reads until the server ends the connection; panics if it is still open
/// after `limit` without a frame.
async fn until_ended(ws: &mut Socket, limit: Duration) -> String {
    loop {
        match next_read(ws, limit).await {
            Read::Json(_) => {}
            Read::Ended(how) => return how,
            Read::TimedOut => panic!("the connection is still open"),
        }
    }
}

#[tokio::test]
async fn a_crawl_on_a_worker_process_streams_its_states_in_order_to_subscribers() {
    let _slots = browser_slots(1).await;
    let app = TestApp::spawn_with(Roles::scheduler_only(), with_tokens).await;
    let worker = RoleProcess::worker(&app.config);
    let worker_metrics = worker.listening_on("health and metrics listening").await;
    let api_metrics = format!("{}/metrics", app.metrics_base);
    let dispatched_before = Scrape::of(&api_metrics)
        .await
        .count("crawlfleet_dispatched_total", &[]);
    let mut body = app.site_body("shop", "/search");
    body["max_pages"] = json!(5);
    let site = app.create_site(body).await;
    let ids = [
        app.create_keyword("watched", &[site], ON_DEMAND).await,
        app.create_keyword("ignored", &[site], ON_DEMAND).await,
    ];
    let mut watching = socket(&app.base, READER).await;
    subscribe(&mut watching, json!({"keyword_id": ids[0]})).await;
    let mut elsewhere = socket(&app.base, READER).await;
    subscribe(&mut elsewhere, json!({"keyword_id": ids[1]})).await;

    app.crawl(ids[0]).await;
    let (mut states, mut stored) = (Vec::new(), 0);
    // Each state follows the last within seconds (the first page opens Chrome):
    // 60 s for each is ten times that and more.
    while states.last().map(String::as_str) != Some("completed") {
        let event = next_json(&mut watching, Duration::from_secs(60))
            .await
            .expect("events until completion");
        match event["type"].as_str().unwrap() {
            "run.updated" => {
                assert_eq!(event["keyword_id"], ids[0]);
                // Named by the api that fans it out, though the worker sent ids.
                assert_eq!(event["keyword"], "watched", "{event}");
                assert_eq!(event["site"], "shop", "{event}");
                states.push(event["state"].as_str().unwrap().to_owned());
            }
            "result.stored" => stored += event["count"].as_u64().unwrap(),
            "queue.stats" => {}
            other => panic!("unexpected event {other}: {event}"),
        }
    }
    let mut expected = vec!["queued", "running"];
    for _ in 0..4 {
        expected.extend(["url_call", "call_done"]);
    }
    expected.push("completed");
    assert_eq!(states, expected, "states arrive in order");
    assert_eq!(stored, 15);
    // The other subscriber saw nothing of it. Anything misrouted would have come
    // with the watcher's events; a slow machine only makes this check weaker.
    while let Some(event) = next_json(&mut elsewhere, Duration::from_millis(500)).await {
        assert_eq!(event["type"], "queue.stats", "filtered out: {event}");
    }

    // The worker process's own /metrics moved with the crawl.
    let scrape = Scrape::of(&format!("http://{worker_metrics}/metrics")).await;
    let site_id = site.to_string();
    assert_eq!(
        scrape.value(
            "crawlfleet_runs_finished_total",
            &[("state", "completed"), ("site", &site_id)]
        ),
        Some(1.0)
    );
    assert_eq!(
        scrape.value(
            "crawlfleet_page_fetch_duration_seconds",
            &[("site", &site_id)]
        ),
        Some(4.0)
    );
    assert_eq!(
        scrape.value("crawlfleet_browser_sessions_open", &[]),
        Some(1.0),
        "the crawl's browser context, wiped, waits for the next crawl"
    );
    // And the api's (this process's registry, which the in-process
    // scheduler shares): the crawl's request by route, and its dispatch.
    let scrape = Scrape::of(&api_metrics).await;
    assert!(
        scrape.count(
            "crawlfleet_http_requests_total",
            &[
                ("method", "POST"),
                ("route", "/api/keywords/:id/crawl"),
                ("status", "202")
            ]
        ) >= 1.0
    );
    assert!(
        scrape.count(
            "crawlfleet_http_request_duration_seconds",
            &[("route", "/api/keywords/:id/crawl")]
        ) >= 1.0
    );
    assert!(scrape.count("crawlfleet_dispatched_total", &[]) > dispatched_before);
    assert_eq!(worker.terminate(Duration::from_secs(30)).await, 0);
    app.stop().await;
}

#[tokio::test]
async fn subscriptions_filter_by_site_run_and_keyword() {
    let app = TestApp::spawn().await;
    // (filter, what it should see of the events below)
    let cases = [
        (json!({}), vec!["run 1", "run 2", "run 3", "result 3"]),
        (json!({"site_id": 2}), vec!["run 2", "run 3", "result 3"]),
        (json!({"run_id": 3}), vec!["run 3", "result 3"]),
        (json!({"keyword_id": 1}), vec!["run 1", "run 2"]),
        (json!({"keyword_id": 1, "site_id": 2}), vec!["run 2"]),
    ];
    let mut clients = Vec::new();
    for (filter, _) in &cases {
        let mut ws = socket(&app.base, "unused").await;
        subscribe(&mut ws, filter.clone()).await;
        clients.push(ws);
    }
    let publisher = publisher(&app).await;
    // (run, keyword, site)
    for (run, keyword, site) in [(1, 1, 1), (2, 1, 2), (3, 2, 2)] {
        publisher
            .publish(&run_event(run, keyword, site, None))
            .await;
    }
    publisher
        .publish(&Event::ResultStored {
            run_id: 3,
            keyword_id: Some(2),
            url_list_id: None,
            site_id: 2,
            page: 1,
            count: 5,
        })
        .await;
    // Queue stats concern no run: every filter lets them through. Published
    // last on the same channel, this one arrives after everything above.
    let last = QueueStats {
        counts: QueueCounts {
            queued: 424_242,
            ..QueueCounts::default()
        },
        ..QueueStats::default()
    };
    publisher.publish(&Event::QueueStats(last)).await;

    for ((filter, expected), ws) in cases.iter().zip(&mut clients) {
        let mut seen = Vec::new();
        loop {
            let frame = next_json(ws, Duration::from_secs(10))
                .await
                .expect("frames until the last one");
            match frame["type"].as_str().unwrap() {
                "run.updated" => seen.push(format!("run {}", frame["id"])),
                "result.stored" => seen.push(format!("result {}", frame["run_id"])),
                "queue.stats" if frame["queued"] == 424_242 => break,
                "queue.stats" => {}
                other => panic!("unexpected {other}: {frame}"),
            }
        }
        assert_eq!(&seen, expected, "filter {filter}");
    }
    app.stop().await;
}

#[tokio::test]
async fn a_malformed_subscription_is_answered_with_the_field_at_fault_and_the_connection_stays_usable()
 {
    let app = TestApp::spawn().await;
    let mut ws = socket(&app.base, "unused").await;
    subscribe(&mut ws, json!({"site_id": 2})).await;
    for (sent, field) in [
        (
            r#"{"subscribe": {"site_id": "two"}}"#,
            json!("subscribe.site_id"),
        ),
        (
            r#"{"subscribe": {"sitee_id": 2}}"#,
            json!("subscribe.sitee_id"),
        ),
        (r#"{"subscribe": [2]}"#, json!("subscribe")),
        (r#"{"filter": {"site_id": 2}}"#, json!("filter")),
        ("subscribe me to site 2", Value::Null),
    ] {
        send_text(&mut ws, sent.to_owned()).await;
        let error = next_of_type(&mut ws, "error", Duration::from_secs(10)).await;
        assert_eq!(error["field"], field, "{sent}: {error}");
        let message = error["message"].as_str().unwrap();
        assert!(message.contains(r#"expected {"subscribe""#), "{message}");
    }
    ws.send(Message::Binary(vec![1, 2, 3].into()))
        .await
        .unwrap();
    let error = next_of_type(&mut ws, "error", Duration::from_secs(10)).await;
    assert!(
        error["message"].as_str().unwrap().contains("JSON text"),
        "{error}"
    );

    // Still served, with the last good filter: site 2's event arrives, site 1's does not.
    let publisher = publisher(&app).await;
    publisher.publish(&run_event(5, 1, 1, None)).await;
    publisher.publish(&run_event(6, 1, 2, None)).await;
    let event = next_of_type(&mut ws, "run.updated", Duration::from_secs(10)).await;
    assert_eq!(event["id"], 6, "{event}");
    subscribe(&mut ws, json!({"run_id": 5})).await;
    app.stop().await;
}

#[tokio::test]
async fn a_client_message_over_the_size_limit_closes_the_connection_with_1009() {
    let app = TestApp::spawn().await;
    let mut ws = socket(&app.base, "unused").await;
    // At the limit: read (and answered: it is no subscription).
    send_text(&mut ws, "x".repeat(MAX_CLIENT_MESSAGE_BYTES)).await;
    next_of_type(&mut ws, "error", Duration::from_secs(10)).await;
    // Past it: closed, saying why.
    let padding = "x".repeat(MAX_CLIENT_MESSAGE_BYTES);
    send_text(
        &mut ws,
        json!({"subscribe": {}, "padding": padding}).to_string(),
    )
    .await;
    let how = until_ended(&mut ws, Duration::from_secs(10)).await;
    assert!(how.starts_with("close Some((1009,"), "{how}");
    app.stop().await;
}

#[tokio::test]
async fn two_hundred_clients_all_receive_an_event() {
    let app = TestApp::spawn().await;
    let mut clients = Vec::new();
    for _ in 0..200 {
        let mut ws = socket(&app.base, "unused").await;
        subscribe(&mut ws, json!({"run_id": 42})).await;
        clients.push(ws);
    }
    publisher(&app)
        .await
        .publish(&run_event(42, 1, 1, None))
        .await;
    // 200 copies of one small frame: well under a second; 20 s is ample.
    let received = futures::future::join_all(clients.iter_mut().map(|ws| async move {
        loop {
            let frame = next_json(ws, Duration::from_secs(20)).await?;
            if frame["type"] == "run.updated" {
                return Some(frame);
            }
        }
    }))
    .await;
    let got = received
        .iter()
        .filter(|f| f.as_ref().is_some_and(|f| f["id"] == 42))
        .count();
    assert_eq!(got, 200);
    app.stop().await;
}

#[tokio::test]
async fn a_client_that_never_reads_does_not_hold_up_others_and_is_told_or_dropped() {
    // A reader takes each frame within milliseconds of its send: the 2 s send
    // timeout that drops the stuck client is a thousand times a reader's pace.
    let app = TestApp::spawn_with(Roles::default(), |c| c.api.ws_send_timeout_secs = 2).await;
    let mut stuck = socket(&app.base, "unused").await;
    subscribe(&mut stuck, json!({})).await;
    let mut readers = Vec::new();
    for _ in 0..3 {
        let mut ws = socket(&app.base, "unused").await;
        subscribe(&mut ws, json!({})).await;
        readers.push(ws);
    }
    let publisher = publisher(&app).await;
    let padding = "x".repeat(8 * 1024);
    let total = 3000;
    // Every reader reads on its own task, as real clients would.
    let readers_done: Vec<_> = readers
        .into_iter()
        .map(|mut ws| {
            tokio::spawn(async move {
                let mut seen = 0;
                while seen < total {
                    match next_json(&mut ws, Duration::from_secs(30)).await {
                        Some(frame) if frame["type"] == "run.updated" => seen += 1,
                        Some(frame) if frame["type"] == "lagged" => {
                            seen += frame["missed"].as_u64().unwrap() as usize
                        }
                        Some(_) => {}
                        None => break,
                    }
                }
                seen
            })
        })
        .collect();
    let started = Instant::now();
    for id in 0..total {
        publisher
            .publish(&run_event(id as i64, 1, 1, Some(padding.clone())))
            .await;
    }
    let counts: Vec<usize> = futures::future::join_all(readers_done)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    eprintln!(
        "{total} events of 8 KB to 3 readers and 1 stuck client in {:?}",
        started.elapsed()
    );
    assert!(
        counts.iter().all(|n| *n >= total),
        "readers were held up: {counts:?}"
    );

    // The stuck client, reading at last, finds it was told it lagged, or
    // that the server ended its connection. A read that merely times out
    // proves neither.
    let mut frames = 0;
    let verdict = loop {
        match next_read(&mut stuck, Duration::from_secs(30)).await {
            Read::Json(frame) if frame["type"] == "lagged" => {
                break format!("told it lagged by {}", frame["missed"]);
            }
            Read::Json(_) => frames += 1,
            Read::Ended(how) => break format!("dropped ({how})"),
            Read::TimedOut => {
                panic!(
                    "after {frames} frames the stuck client was neither told it lagged nor dropped"
                )
            }
        }
    };
    assert!(
        frames < total,
        "all {frames} frames reached the stuck client"
    );
    eprintln!("the stuck client read {frames} frames, then was {verdict}");
    app.stop().await;
}

#[tokio::test]
async fn pings_keep_a_reading_client_and_a_silent_one_is_dropped() {
    let app = TestApp::spawn_with(Roles::default(), |c| c.api.ws_ping_interval_secs = 1).await;
    // Never reads, so never answers a ping.
    let mut silent = socket(&app.base, "unused").await;
    let mut reader = socket(&app.base, "unused").await;
    // The reader reads for six intervals; its client library answers each ping.
    let started = Instant::now();
    let mut pings = 0;
    while started.elapsed() < Duration::from_secs(6) {
        match tokio::time::timeout(Duration::from_millis(200), reader.next()).await {
            Err(_) => {}
            Ok(Some(Ok(Message::Ping(_)))) => pings += 1,
            Ok(Some(Ok(_))) => {}
            Ok(ended) => panic!("the reading client was dropped: {ended:?}"),
        }
    }
    // Five or six are due; three are required. A late ping tick fires as soon
    // as it can (tokio's default), and the reader's pong goes out within
    // milliseconds, where 2 s of silence would drop it.
    assert!(pings >= 3, "{pings} pings in 6 s at one a second");
    // Still served after six intervals.
    subscribe(&mut reader, json!({"run_id": 7})).await;

    // The silent one was dropped after two unanswered intervals: reading now
    // gives what was sent before (pings), then the end of the connection.
    // That was ~3 s in; we are 6 s in.
    let how = until_ended(&mut silent, Duration::from_secs(10)).await;
    eprintln!("silent client: {how}");
    app.stop().await;
}

#[tokio::test]
async fn an_api_process_sent_sigterm_closes_every_websocket_with_going_away() {
    let app = TestApp::spawn_with(Roles::default(), with_tokens).await;
    let api = ApiProcess::spawn(&app.config, &[]).await;
    let mut idle = Vec::new();
    for _ in 0..3 {
        let mut ws = socket(&api.base, WRITER).await;
        subscribe(&mut ws, json!({"run_id": 1})).await;
        idle.push(ws);
    }
    // A client that is sent far more than it has read: the server's writes
    // to it wait for room when the signal comes, so its close frame takes a
    // while, and the process must wait for it rather than exit.
    let mut busy = socket(&api.base, WRITER).await;
    subscribe(&mut busy, json!({})).await;
    let publisher = publisher(&app).await;
    let padding = "x".repeat(64 * 1024);
    for id in 2..402 {
        publisher
            .publish(&run_event(id, 1, 1, Some(padding.clone())))
            .await;
    }
    // Time for the events to pile up. If they have not, the close frames go out
    // sooner: a slow machine only weakens this test, never fails it.
    tokio::time::sleep(Duration::from_secs(1)).await;

    api.process.signal(libc::SIGTERM);
    // Reading only a moment later: a process that did not wait is gone by then.
    // It waits up to 2 s: a read or two makes room for the busy client's close
    // frame within milliseconds.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut clients = idle;
    clients.push(busy);
    for ws in &mut clients {
        let how = until_ended(ws, Duration::from_secs(10)).await;
        assert!(
            how.starts_with(r#"close Some((1001, "server shutting down"))"#),
            "{how}"
        );
    }
    let mut process = api.process;
    // Its close frames are out: it exits within a second or so.
    let status = tokio::time::timeout(Duration::from_secs(15), process.child.wait())
        .await
        .expect("the api exits")
        .unwrap();
    assert_eq!(status.code(), Some(0));
    app.stop().await;
}

//! A remote browser as the worker's (`BROWSER_BACKEND=devtools`): a
//! Chromium of the test's own, driven over its DevTools WebSocket. Killed
//! mid-crawl, it is reconnected to once it is back and the run retried to
//! completion, nothing stored twice; `BROWSER_DEVTOOLS_SLOTS` bounds the
//! contexts it holds at once; its URL (a secret) reaches no log. The tests
//! every backend must pass are run with both (`on_each_backend!`, in
//! crawl, faults, isolation, sessions and ssrf).

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{
    Backend, RemoteChrome, RoleProcess, Roles, TestApp, browser_slots, on_each_backend,
};

// A run here is a few pages of 1-1.5 s each, plus a retry's 2-3 s backoff
// and a Chromium's start: about 10 s. 90 s is nine times that.
const LIMIT: Duration = Duration::from_secs(90);

#[tokio::test]
async fn a_remote_browser_killed_mid_crawl_is_reconnected_and_the_run_retried_to_completion() {
    let mut remote = RemoteChrome::start().await;
    let port = remote.port();
    // Named by /json/version, with a token in the query: it outlives the
    // restart on the same port, and the token must reach no failure reason.
    let url = format!("{}/?token=devtools-secret-7331", remote.http_url());
    let app = TestApp::spawn_on(&Backend::DevTools(url), Roles::fleet(), |c| {
        c.worker.worker_concurrency = 1;
    })
    .await;
    // Page 1 is stored and page 2 is loading when the browser goes.
    let run = app
        .slow_crawl_on_its_second_page("slow-remote", LIMIT)
        .await;
    remote.kill();
    drop(remote);
    let remote = RemoteChrome::start_on(port).await;

    let done = app.wait_until_completed(run, LIMIT).await;
    assert_eq!(
        done["attempts"][0]["error_kind"], "browser_crashed",
        "{done}"
    );
    assert!(done["attempt"].as_i64().unwrap() >= 2, "{done}");
    for attempt in done["attempts"].as_array().unwrap() {
        let reason = attempt["reason"].as_str().unwrap_or_default();
        assert!(!reason.contains("devtools-secret-7331"), "{reason}");
    }
    assert_eq!(done["pages_crawled"], 3, "{done}");
    assert_eq!(done["items_found"], 15, "{done}");
    // Every item once: the page stored before the kill was replaced, not
    // stored again.
    let results = app.results_of_run(run).await;
    let links: BTreeSet<&str> = results
        .iter()
        .map(|r| r["fields"]["link"].as_str().unwrap())
        .collect();
    assert_eq!((results.len(), links.len()), (15, 15), "{results:?}");
    for page in 1..=3 {
        let on_page = results.iter().filter(|r| r["page"] == page).count();
        assert_eq!(on_page, 5, "page {page}");
    }
    // The restarted browser served the retry, and the worker still uses it.
    let fine = app
        .one_page_site("fine-remote", "/static?q={keyword}", json!({}))
        .await;
    app.crawl_to_completion("desk", fine, LIMIT).await;
    assert!(
        remote.contexts().await >= 1,
        "the worker's context is in it"
    );
    app.stop().await;
    drop(remote);
}

#[tokio::test]
async fn a_remote_browser_of_one_slot_never_holds_more_than_one_context() {
    let remote = RemoteChrome::start().await;
    let app = TestApp::spawn_on(&remote.backend(), Roles::fleet(), |c| {
        c.worker.worker_concurrency = 3;
        c.worker.browser_devtools_slots = Some(1);
    })
    .await;
    let slow = app
        .one_page_site(
            "slow-slot",
            "/slow?ms=1000&q={keyword}",
            json!({"render": "browser"}),
        )
        .await;
    let runs = app.queue_crawls(slow, "chair ", 3).await;
    let mut most = 0;
    let started = Instant::now();
    loop {
        most = most.max(remote.contexts().await);
        let mut ended = 0;
        for run in &runs {
            let (_, run) = app.get(&format!("/api/runs/{run}")).await;
            assert_ne!(run["state"], "failed", "{run}");
            ended += (run["state"] == "completed") as usize;
        }
        if ended == runs.len() {
            break;
        }
        assert!(started.elapsed() < LIMIT, "the three runs did not end");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(most, 1, "contexts open at once in the remote browser");
    let (_, queue) = app.get("/api/jobs/queue").await;
    assert_eq!(
        queue["workers"][0]["concurrency"], 1,
        "the worker announces the browser slots it has: {queue}"
    );
    app.stop().await;
    // The worker let the browser go: the contexts it opened went with it.
    crate::support::eventually(LIMIT, "no context left", || async {
        (remote.contexts().await == 0).then_some(())
    })
    .await;
    drop(remote);
}

on_each_backend!(a_page_near_the_size_bound_is_read_whole_over_either_transport);
/// A page just under the size bound (20 MiB) whose HTML the crawl reads
/// whole (the structured data needs it) comes over a remote browser's
/// WebSocket, in one message, as over the local Chrome's pipe; the
/// connection, which every slot shares, stays up.
async fn a_page_near_the_size_bound_is_read_whole_over_either_transport(backend: Backend) {
    let app = TestApp::spawn_on(&backend, Roles::fleet(), |c| {
        c.worker.worker_concurrency = 1;
    })
    .await;
    let mut body = app.site_body("padded-remote", "/");
    body["search_url"] = json!(format!(
        "{}/hostile/padded?bytes=18000000&q={{keyword}}",
        app.site.base_url()
    ));
    body["fields"]["brand"] = json!({"structured": "Product.brand"});
    // Reading it takes seconds alone, and ten times that on a machine busy
    // with other tests: a stuck timeout and a limit with room for that.
    body["stuck_timeout_secs"] = json!(180);
    let site = app.create_site(body).await;
    let run = app
        .crawl_to_completion("lamp", site, Duration::from_secs(300))
        .await;
    assert_eq!(run["items_found"], 3, "{run}");
    assert_eq!(run["attempt"], 1, "{run}");
    app.stop().await;
}

/// A remote browser's processes are not this machine's to look into: a
/// relay tells its connections by their source address, the endpoint's.
/// Another address (here 127.0.0.2, loopback too) is closed on without a
/// word, while the browser's own address is served.
#[tokio::test]
async fn a_remote_browsers_relay_serves_the_browsers_address_alone() {
    let remote = RemoteChrome::start().await;
    let app = TestApp::spawn_on(&remote.backend(), Roles::fleet(), |c| {
        c.worker.worker_concurrency = 1;
    })
    .await;
    let slow = app
        .one_page_site(
            "slow-relayed",
            "/slow?ms=4000&q={keyword}",
            json!({"render": "browser", "stuck_timeout_secs": 60}),
        )
        .await;
    let run = app.crawl_once("lamp", slow).await;
    // While the page loads, the browser holds its connection to the relay.
    let relays = crate::support::eventually(LIMIT, "the browser connected to a relay", || async {
        let relays = remote.connected_to();
        (app.site.hits("/slow") >= 1 && !relays.is_empty()).then_some(relays)
    })
    .await;
    for relay in relays {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        let mut stranger = socket.connect(relay).await.unwrap();
        stranger.write_all(&[5, 1, 0]).await.unwrap();
        let mut answer = [0u8; 2];
        let read = tokio::time::timeout(Duration::from_secs(10), stranger.read(&mut answer))
            .await
            .expect("the relay closes the connection");
        assert!(
            matches!(read, Ok(0) | Err(_)),
            "{relay} answered 127.0.0.2: {answer:?}"
        );
        // The control: from the browser's address, a SOCKS5 answer.
        let mut alike = tokio::net::TcpStream::connect(relay).await.unwrap();
        alike.write_all(&[5, 1, 0]).await.unwrap();
        let mut answer = [0u8; 2];
        alike.read_exact(&mut answer).await.unwrap();
        assert_eq!(answer, [5, 0], "{relay} is a relay");
    }
    app.wait_until_completed(run, LIMIT).await;
    app.stop().await;
    drop(remote);
}

/// The URL names the remote browser and may carry its token: no line of a
/// worker's log at trace level shows it, nor the browser's WebSocket path
/// (whoever has it can drive the browser).
#[tokio::test]
async fn the_remote_browsers_url_never_reaches_a_workers_log_even_at_trace_level() {
    let _slots = browser_slots(1).await;
    let remote = RemoteChrome::start().await;
    let url = format!("{}?token=devtools-secret-9157", remote.websocket_url());
    let app = TestApp::spawn_on(&Backend::DevTools(url), Roles::scheduler_only(), |_| {}).await;
    let site = app
        .one_page_site(
            "traced-remote",
            "/static?q={keyword}",
            json!({"render": "browser"}),
        )
        .await;
    let worker = RoleProcess::spawn("worker", &app.config, &[("RUST_LOG", "trace".into())]);
    app.crawl_to_completion("lamp", site, LIMIT).await;
    let log_path = worker.log.clone();
    assert_eq!(worker.terminate(Duration::from_secs(30)).await, 0);
    let log = std::fs::read_to_string(&log_path).unwrap();
    // The control: the log is a trace, and it names where the browser is.
    assert!(log.contains("TRACE"), "{}", log_path.display());
    assert!(
        log.contains(&format!("127.0.0.1:{}", remote.port())),
        "{}",
        log_path.display()
    );
    let browser_id = remote
        .websocket_url()
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    for secret in ["devtools-secret-9157", browser_id.as_str()] {
        assert!(
            !log.contains(secret),
            "{secret} in the log {}",
            log_path.display()
        );
    }
    app.stop().await;
    drop(remote);
}

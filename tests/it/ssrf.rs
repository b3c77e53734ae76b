//! The SSRF guard with ALLOW_PRIVATE_TARGETS off: metadata, private, loopback
//! and names resolving to loopback are refused when a site is stored, before a
//! crawl's first request, and after a redirect; a refused target is never
//! connected to, not even by Chrome following a redirect or loading an image.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use serde_json::{Value, json};

use crate::support::{
    Backend, RoleProcess, Roles, TestApp, TestProxy, browser_slots, on_each_backend,
};

// A refused target fails at once; an allowed one is one page, the worker
// process's and Chrome's start included for the first runs: seconds. 60 s is
// over ten times that, for a loaded machine.
const LIMIT: Duration = Duration::from_secs(60);

/// A port that counts every connection made to it: nothing may reach it.
struct Trap {
    port: u16,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Trap {
    async fn start() -> Trap {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn({
            let connections = connections.clone();
            async move {
                while listener.accept().await.is_ok() {
                    connections.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        Trap {
            port,
            connections,
            task,
        }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for Trap {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn site_at(name: &str, search_url: &str, render: &str) -> Value {
    json!({
        "name": name, "render": render, "search_url": search_url,
        "item_selector": "li.product", "fields": {"title": {"selector": "a.title"}},
    })
}

#[tokio::test]
async fn sites_pointing_at_private_or_metadata_targets_are_refused_with_422() {
    let app =
        TestApp::spawn_with(Roles::default(), |c| c.common.allow_private_targets = false).await;
    for (url, why) in [
        (
            "http://169.254.169.254/latest/meta-data/?q={keyword}",
            "metadata",
        ),
        ("http://10.0.0.1/search?q={keyword}", "private"),
        ("http://[::1]:8080/search?q={keyword}", "loopback"),
        ("http://localhost:8080/search?q={keyword}", "loopback"),
    ] {
        let (status, body) = app
            .post("/api/sites", site_at("private", url, "http"))
            .await;
        assert_eq!(status, 422, "{url}: {body}");
        assert_eq!(body["error"]["field"], "search_url", "{url}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(why), "{url}: {message}");
    }
    // Ranges that are not globally reachable beyond the usual private ones,
    // and IPv4 in IPv6 clothing.
    for (url, why) in [
        ("http://192.0.0.1/?q={keyword}", "192.0.0.0/29"),
        ("http://198.18.0.1/?q={keyword}", "benchmarking"),
        ("http://[::ffff:0:127.0.0.1]/?q={keyword}", "SIIT"),
        ("http://2130706433:8080/?q={keyword}", "loopback"),
    ] {
        let (status, body) = app
            .post("/api/sites", site_at("special", url, "http"))
            .await;
        assert_eq!(status, 422, "{url}: {body}");
        assert_eq!(body["error"]["field"], "search_url", "{url}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(why), "{url}: {message}");
    }
    // A refusal names the rule, never what an internal name resolved to.
    let (_, body) = app
        .post(
            "/api/sites",
            site_at("named", "http://localhost:8080/?q={keyword}", "http"),
        )
        .await;
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        !message.contains("127.0.0.1") && !message.contains("::1"),
        "{message}"
    );
    // Proxies are judged like targets, IP literals in every notation included.
    for proxy in [
        "http://169.254.169.254:80",
        "http://u:p@[::1]:8080",
        "http://[::ffff:127.0.0.1]:8080",
        "socks5://[fd00:ec2::254]:1080",
        "http://0x7f000001:3128",
    ] {
        let mut proxied = site_at("proxied", "https://shop.example/?q={keyword}", "http");
        proxied["proxy"] = json!(proxy);
        let (status, body) = app.post("/api/sites", proxied).await;
        assert_eq!(status, 422, "{proxy}: {body}");
        assert_eq!(body["error"]["field"], "proxy", "{proxy}");
    }
    let (_, sites) = app.get("/api/sites").await;
    assert_eq!(sites["items"], json!([]), "nothing was stored");
    app.stop().await;
}

on_each_backend!(a_worker_refuses_private_targets_directly_and_after_a_redirect);
async fn a_worker_refuses_private_targets_directly_and_after_a_redirect(backend: Backend) {
    let _slots = browser_slots(1).await;
    // The api stores what the test asks for; the worker alone guards, allowing
    // only the fixture itself.
    let app = TestApp::spawn_on(&backend, Roles::scheduler_only(), |_| {}).await;
    let trap = Trap::start().await;
    // Behind a proxy the guard still judges every target before the proxy is asked.
    let proxy = TestProxy::start(None).await;
    let proxied = proxy.url("http", None);
    // A proxy the guard does not allow, named so a literal check would miss
    // it: every mode must refuse to connect to it.
    let forbidden = TestProxy::start(None).await;
    let forbidden_proxy = format!("http://u:p@[::ffff:127.0.0.1]:{}", forbidden.port);
    let base = app.site.base_url();
    let redirect = |to: &str| format!("{base}/redirect?to={}&q={{keyword}}", urlencode(to));
    let cases = [
        (
            "metadata-redirect",
            redirect("http://169.254.169.254/latest/meta-data/"),
            "http",
        ),
        (
            "loopback-redirect",
            redirect(&format!("http://localhost:{}/", trap.port)),
            "http",
        ),
        (
            "ipv6-redirect",
            redirect(&format!("http://[::1]:{}/", trap.port)),
            "json",
        ),
        (
            "private-direct",
            "http://10.0.0.1/search?q={keyword}".to_owned(),
            "http",
        ),
        (
            "browser-direct",
            format!("http://localhost:{}/?q={{keyword}}", trap.port),
            "browser",
        ),
        (
            "browser-redirect",
            redirect(&format!("http://localhost:{}/", trap.port)),
            "browser",
        ),
        (
            "browser-redirect-proxied",
            redirect(&format!("http://localhost:{}/", trap.port)),
            "browser",
        ),
        (
            "http-forbidden-proxy",
            format!("{base}/search?q={{keyword}}"),
            "http",
        ),
        (
            "browser-forbidden-proxy",
            format!("{base}/search?q={{keyword}}"),
            "browser",
        ),
    ];
    let mut sites = Vec::new();
    for (name, url, render) in &cases {
        let mut body = site_at(name, url, render);
        if name.ends_with("-proxied") {
            body["proxy"] = json!(proxied);
        }
        if name.ends_with("-forbidden-proxy") {
            body["proxy"] = json!(forbidden_proxy);
        }
        if *render == "json" {
            body = json!({"name": name, "render": "json", "search_url": url,
                          "json": {"items": "/items"}, "fields": {"title": {"pointer": "/title"}}});
        }
        sites.push(app.create_site(body).await);
    }
    let allowed = format!("{},127.0.0.1:{}", app.site.addr(), proxy.port);
    let worker = RoleProcess::spawn(
        "worker",
        &app.config,
        &[
            ("ALLOW_PRIVATE_TARGETS", "false".to_owned()),
            ("ALLOWED_PRIVATE_TARGETS", allowed),
        ],
    );
    for ((name, _, _), site) in cases.iter().zip(&sites) {
        let run = app.crawl_to_end(name, *site, LIMIT).await;
        assert_eq!(run["state"], "failed", "{name}: {run}");
        assert_eq!(run["attempt"], 1, "{name}: a refused target is not retried");
        let error = run["error"].as_str().unwrap();
        assert!(error.starts_with("target refused"), "{name}: {error}");
        assert_eq!(run["error_kind"], "target_refused", "{name}: {run}");
    }
    // The allowed fixture itself is crawled as usual, in both modes; the
    // image a page pulls in from a refused target is not.
    let image = urlencode(&format!("http://127.0.0.1:{}/pixel.png", trap.port));
    let embedding = format!("{base}/embed?src={image}&q={{keyword}}");
    for (name, url, render) in [
        ("fine", format!("{base}/search?q={{keyword}}"), "http"),
        ("fine-browser", embedding.clone(), "browser"),
        ("fine-browser-proxied", embedding, "browser"),
    ] {
        let mut body = site_at(name, &url, render);
        if name.ends_with("-proxied") {
            body["proxy"] = json!(proxied);
        }
        let fine = app.create_site(body).await;
        let run = app.crawl_to_end("allowed", fine, LIMIT).await;
        assert_eq!(run["state"], "completed", "{name}: {run}");
        assert!(run["items_found"].as_i64().unwrap() > 0, "{name}: {run}");
    }
    assert_eq!(trap.connections(), 0, "a refused target was connected to");
    let asked = forbidden.log(|log| log.asked.clone());
    assert!(asked.is_empty(), "a forbidden proxy was used: {asked:?}");
    let asked = proxy.log(|log| log.asked.clone());
    let fixture = format!("CONNECT {}", app.site.addr());
    assert!(asked.contains(&fixture), "{asked:?}");
    let trap_port = format!(":{}", trap.port);
    assert!(
        !asked.iter().any(|a| a.contains(&trap_port)),
        "the proxy was asked for a refused target: {asked:?}"
    );
    assert_eq!(worker.terminate(Duration::from_secs(30)).await, 0);
    app.stop().await;
}

fn urlencode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

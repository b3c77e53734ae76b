//! Class 2: SSRF through the API. A site whose search_url or proxy names
//! the host itself or an internal address, in any notation, must get a 422
//! naming that field. Every loopback probe uses the port of a trap: a
//! listener that only counts connections, and must count none at the end.
//!
//! Non-loopback addresses appear only in bodies the API must refuse at
//! validation, on a fleet with ALLOW_PRIVATE_TARGETS=false; a site the API
//! accepts anyway is deleted at once and never crawled, so nothing ever
//! connects to them. Only IPv4 literals, bracketed IPv6 literals and
//! `localhost` (in /etc/hosts) are used: no probe makes the fleet ask a DNS
//! server.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use reqwest::Method;
use serde_json::json;
use tokio::{net::TcpListener, task::JoinHandle};

use crate::{
    Targets,
    bodies::{create_list, judge_upload, valid_site},
    client::{Api, Token},
    ledger::Expect,
};

/// A loopback listener that counts connections and drops them.
pub struct Trap {
    pub port: u16,
    connections: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Trap {
    pub async fn start() -> anyhow::Result<Trap> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                drop(socket);
            }
        });
        Ok(Trap {
            port,
            connections,
            task,
        })
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for Trap {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Hosts that reach this machine: written with the trap's port.
const LOOPBACK: &[&str] = &[
    "127.0.0.1",
    "127.1",
    "2130706433",
    "0x7f000001",
    "0177.0.0.1",
    "127.000.000.001",
    "0",
    "0.0.0.0",
    "localhost",
    "[::1]",
    "[0:0:0:0:0:0:0:1]",
    "[::]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[::ffff:0:127.0.0.1]",
    "[::127.0.0.1]",
    "[64:ff9b::7f00:1]",
    "[64:ff9b::127.0.0.1]",
    "[2002:7f00:1::]",
];

/// Internal addresses elsewhere: refused at validation, never connected to.
const INTERNAL: &[&str] = &[
    "169.254.169.254",
    "169.254.170.2",
    "[fd00:ec2::254]",
    "[::ffff:169.254.169.254]",
    "10.0.0.1",
    "172.16.0.1",
    "192.168.0.1",
    "192.0.0.1",
    "198.18.0.1",
    "100.64.0.1",
    "[fc00::1]",
    "[fe80::1]",
    "224.0.0.1",
    "240.0.0.1",
];

pub async fn run(api: &Api, targets: &Targets) {
    let trap = targets.trap_port;
    let hosts = LOOPBACK
        .iter()
        .map(|h| format!("{h}:{trap}"))
        .chain(INTERNAL.iter().map(|h| (*h).to_owned()));
    for host in hosts {
        let url = format!("http://{host}/search?q={{keyword}}");
        let body = {
            let mut body = valid_site(targets);
            body["search_url"] = json!(url);
            body
        };
        post(api, &format!("search_url {url}"), &body, "search_url").await;
        for scheme in proxy_schemes(&host) {
            let proxy = format!("{scheme}://{host}");
            let mut body = valid_site(targets);
            body["proxy"] = json!(proxy);
            post(api, &format!("proxy {proxy}"), &body, "proxy").await;
        }
    }
    // Credentials do not make a loopback proxy acceptable.
    let with_credentials = ["127.0.0.1", "localhost"]
        .iter()
        .map(|h| format!("http://u:p@{h}:{trap}"))
        .chain([format!("http://u:p@[::1]:{trap}")]);
    for proxy in with_credentials {
        let mut body = valid_site(targets);
        body["proxy"] = json!(proxy);
        post(api, &format!("proxy {proxy}"), &body, "proxy").await;
    }
}

/// The same targets as URLs of a list: every line must be reported refused
/// and none stored.
pub async fn url_list(api: &Api, targets: &Targets) {
    let Some(site) = api
        .create_site(&valid_site(targets), "set-up site of a URL list")
        .await
    else {
        return;
    };
    let list = create_list(api, site, "internal targets").await;
    if let Some(list) = list {
        let trap = targets.trap_port;
        let urls: Vec<String> = LOOPBACK
            .iter()
            .map(|h| format!("http://{h}:{trap}/product"))
            .chain(
                INTERNAL
                    .iter()
                    .map(|h| format!("http://{h}/latest/meta-data")),
            )
            .collect();
        let what = format!("a URL list of {} internal targets", urls.len());
        let answer = api
            .bytes(
                Method::PUT,
                &format!("/api/url-lists/{list}/urls"),
                Token::Write,
                Some("text/plain"),
                urls.join("\n").into_bytes(),
                &what,
                Expect::Status(&[200]),
            )
            .await;
        judge_upload(api, &what, answer, urls.len());
    }
    api.call(
        "clean-up of the URL list's site",
        api.request(Method::DELETE, &format!("/api/sites/{site}"), Token::Write),
        Expect::Status(&[204]),
    )
    .await;
}

/// The proxy schemes a host is tried with. `http://` hosts are normalised
/// by the URL parser, so the API sees an IP address; `socks5://` hosts are
/// kept as written (the guard reads them as an address all the same), so
/// only plain forms are tried there.
fn proxy_schemes(host: &str) -> Vec<&'static str> {
    if host.starts_with("127.0.0.1:") || host.starts_with("localhost:") || host.starts_with('[') {
        vec!["http", "socks5"]
    } else {
        vec!["http"]
    }
}

/// A site the API takes is reported by the ledger as accepted and deleted
/// at once: it has no keyword, so it was never crawled.
async fn post(api: &Api, what: &str, body: &serde_json::Value, field: &str) {
    let answer = api
        .json(
            Method::POST,
            "/api/sites",
            Token::Write,
            body,
            what,
            Expect::invalid(field),
        )
        .await;
    let created = answer
        .filter(|a| a.status == 201)
        .and_then(|a| a.json()?["id"].as_i64());
    if let Some(id) = created {
        api.call(
            "clean-up of an accepted SSRF target",
            api.request(Method::DELETE, &format!("/api/sites/{id}"), Token::Write),
            Expect::Status(&[204]),
        )
        .await;
    }
}

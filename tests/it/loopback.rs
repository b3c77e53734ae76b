//! What a worker runs beside its crawls stays on loopback: the browser's
//! relay listens on 127.0.0.1 only, Chrome listens on no port at all (it is
//! driven over a pipe), and Chrome opens no connection of its own (component
//! updates, sign-in, sync, the default search engine): every connection it
//! asks for goes through the worker's relay and is counted there.

use std::{collections::HashSet, net::IpAddr, time::Duration};

use serde_json::json;

use crate::{
    live::Scrape,
    support::{RoleProcess, Roles, TestApp, browser_slots, descendants},
};

/// The local addresses of the TCP sockets `pids` listen on, read from
/// /proc: each process's socket inodes, matched in the kernel's tables.
fn listening_addresses(pids: &[i32]) -> Vec<(IpAddr, u16)> {
    let mut inodes = HashSet::new();
    for pid in pids {
        for fd in std::fs::read_dir(format!("/proc/{pid}/fd"))
            .into_iter()
            .flatten()
            .flatten()
        {
            if let Ok(link) = std::fs::read_link(fd.path()) {
                let link = link.to_string_lossy().into_owned();
                if let Some(inode) = link
                    .strip_prefix("socket:[")
                    .and_then(|l| l.strip_suffix(']'))
                {
                    inodes.insert(inode.to_owned());
                }
            }
        }
    }
    let mut found = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // local_address rem_address st ... inode (10th field)
            const LISTEN: &str = "0A";
            if fields.len() < 10 || fields[3] != LISTEN || !inodes.contains(fields[9]) {
                continue;
            }
            found.push(parse_proc_address(fields[1]));
        }
    }
    found
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6), as /proc
/// writes them: each 32-bit word in host (little-endian) order.
fn parse_proc_address(text: &str) -> (IpAddr, u16) {
    let (ip, port) = text.split_once(':').unwrap();
    let port = u16::from_str_radix(port, 16).unwrap();
    let words: Vec<u32> = (0..ip.len() / 8)
        .map(|i| {
            u32::from_str_radix(&ip[i * 8..i * 8 + 8], 16)
                .unwrap()
                .swap_bytes()
        })
        .collect();
    let ip = match words.as_slice() {
        [v4] => IpAddr::from(v4.to_be_bytes()),
        _ => {
            let mut bytes = [0u8; 16];
            for (i, word) in words.iter().enumerate() {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word.to_be_bytes());
            }
            IpAddr::from(bytes)
        }
    };
    (ip, port)
}

#[tokio::test]
async fn a_worker_listens_on_loopback_only_and_chrome_connects_nowhere_of_its_own() {
    let _slots = browser_slots(1).await;
    let app = TestApp::spawn_with(Roles::scheduler_only(), |_| {}).await;
    let site = app
        .one_page_site(
            "one-page",
            "/static?q={keyword}",
            json!({"render": "browser"}),
        )
        .await;
    // As in production: the guard closed, so every connection Chrome opens
    // goes through the relay (the fixture let through).
    let worker = RoleProcess::spawn(
        "worker",
        &app.config,
        &[
            ("ALLOW_PRIVATE_TARGETS", "false".to_owned()),
            ("ALLOWED_PRIVATE_TARGETS", app.site.addr().to_string()),
            ("RUST_LOG", "info,crawlfleet::worker=debug".to_owned()),
        ],
    );
    let metrics = worker.listening_on("health and metrics listening").await;
    // One page, Chrome's start included: seconds; 90 s is over ten times that.
    app.crawl_to_completion("one page", site, Duration::from_secs(90))
        .await;

    // Chrome is up: everything the worker runs listens on loopback, and
    // Chrome's own processes on nothing (no remote-debugging port).
    let chrome = descendants(worker.pid());
    assert!(!chrome.is_empty(), "the worker runs a Chrome");
    assert_eq!(
        listening_addresses(&chrome),
        vec![],
        "Chrome listens on no port"
    );
    let listening = listening_addresses(&[worker.pid()]);
    assert!(
        listening.iter().any(|(_, port)| *port == metrics.port()),
        "the scan found the worker's own port: {listening:?}"
    );
    assert!(
        listening.len() >= 2,
        "the worker's port and its browser's relay: {listening:?}"
    );
    for (ip, port) in &listening {
        assert!(ip.is_loopback(), "listening on {ip}:{port}, not loopback");
    }

    // Chrome's background work starts with the browser: the account listing
    // and the updater's check within a second of its start, the search
    // engine preconnect 5 s after it (Chromium's delay), all before this wait
    // ends. A machine loaded enough to delay them more could let one slip
    // past the count (a miss), never fail the test wrongly.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let scrape = Scrape::of(&format!("http://{metrics}/metrics")).await;
    let connections = |outcome| {
        scrape.count(
            "crawlfleet_browser_connections_total",
            &[("outcome", outcome)],
        )
    };
    let opened = connections("opened");
    println!(
        "a crawl of one page: Chrome opened {opened} connection(s); {} request(s) of its own services sunk",
        connections("sunk")
    );
    assert!(opened >= 1.0, "the page itself went through the relay");
    for outcome in ["refused", "unresolvable", "failed"] {
        assert_eq!(
            connections(outcome),
            0.0,
            "Chrome asked for a connection of its own ({outcome}); see {}",
            worker.log.display()
        );
    }
    // Every connection opened was the fixture's (the only target allowed):
    // the page, its favicon, and the sockets Chrome opens to the same host
    // ahead of need, which it holds to six per host.
    assert!(opened <= 6.0, "{opened} connections for one page");
    assert_eq!(worker.terminate(Duration::from_secs(30)).await, 0);
    app.stop().await;
}

//! Class 9: the browser, looked at as a local attacker would once the secret
//! sites were crawled in it. Chrome runs the open web's code: every Chrome
//! process's environment joins the places the secrets search reads, and
//! every relay Chrome's connections go through (127.0.0.1, where any process
//! may connect) is asked to carry a connection for this driver, which is not
//! Chrome: a relay that answers is a hostile request accepted.

use std::time::Duration;

use crawlfleet::worker::browser::processes::descendants;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::ledger::Ledger;

/// What Chrome's processes hold that the secrets search must read: each
/// process's environment, by place.
pub async fn run(worker_pid: Option<u32>, ledger: &Ledger) -> Vec<(String, Vec<u8>)> {
    let chrome: Vec<i32> = worker_pid
        .map(|pid| descendants(pid as i32))
        .unwrap_or_default()
        .into_iter()
        .filter(|pid| cmdline(*pid).contains("--user-data-dir="))
        .collect();
    if chrome.is_empty() {
        ledger.unexpected(
            "class 9, the browser",
            "the worker runs no Chrome to look at",
        );
        return Vec::new();
    }
    let relays: Vec<String> = chrome
        .iter()
        .flat_map(|pid| {
            cmdline(*pid)
                .split_whitespace()
                .filter_map(|arg| arg.strip_prefix("--proxy-server=socks5://"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    if relays.is_empty() {
        ledger.unexpected(
            "class 9, the browser",
            "Chrome names no relay: its connections would pass no guard",
        );
    }
    for relay in relays {
        ledger.tried();
        let what = format!("a SOCKS5 greeting to Chrome's relay {relay} from another process");
        match stranger_answered(&relay).await {
            Ok(None) => {}
            Ok(Some(answer)) => ledger.accepted(&what, format!("answered {answer:?}")),
            Err(e) => ledger.driver_error(&what, e),
        }
    }
    chrome
        .iter()
        .filter_map(|pid| {
            let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            Some((format!("Chrome process {pid}'s environment"), environ))
        })
        .collect()
}

/// What a relay answers a SOCKS5 greeting with; `None` when it closes the
/// connection without a word.
async fn stranger_answered(relay: &str) -> anyhow::Result<Option<Vec<u8>>> {
    let mut stream = TcpStream::connect(relay).await?;
    stream.write_all(&[5, 1, 0]).await?;
    let mut answer = [0u8; 2];
    match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut answer)).await {
        Ok(Ok(0)) | Ok(Err(_)) => Ok(None),
        Ok(Ok(n)) => Ok(Some(answer[..n].to_vec())),
        Err(_) => anyhow::bail!("neither answered nor closed within 10 s"),
    }
}

fn cmdline(pid: i32) -> String {
    String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default())
        .replace('\0', " ")
}

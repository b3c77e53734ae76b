//! Class 3b: connection starvation. One hostile client holds more
//! connections than the api serves in all (MAX_CONNECTIONS and its probe
//! overflow): most kept alive, each asking for /health every second and
//! coming back at once when closed, the rest half-sent heads. Meanwhile an
//! operator's request with the write token, each on a new connection from
//! the same address, must be answered 200 every time. Anything else (a 503,
//! a 429, a close, a timeout) is a failure of the run: the api let a client
//! without a token starve one with.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    task::JoinSet,
};
use tokio_util::sync::CancellationToken;

use crate::{
    client::Api,
    raw::{first_response_complete, status_of},
};

/// Kept-alive connections asking for /health every second: past the
/// default MAX_CONNECTIONS (512) and its probe overflow (64).
const PINGERS: usize = 600;
/// Connections that send half a head and stall.
const HALF_HEADS: usize = 100;
/// The operator's tries, as many as the report that found the flaw.
const TRIES: usize = 8;
/// How long one try may take.
const TRY_LIMIT: Duration = Duration::from_secs(5);

pub async fn run(api: &Api) {
    let open_files = crawlfleet::net::http_server::raise_open_files_limit() as usize;
    let wanted = PINGERS + HALF_HEADS + 256;
    if open_files < wanted {
        api.ledger.driver_error(
            "class 3b, connection starvation",
            format!("the open-file limit ({open_files}) is below {wanted}: raise ulimit -n"),
        );
        return;
    }
    let stop = CancellationToken::new();
    let connected = Arc::new(AtomicUsize::new(0));
    let mut hostile = JoinSet::new();
    for _ in 0..PINGERS {
        hostile.spawn(pinger(api.port, stop.clone(), connected.clone()));
    }
    for _ in 0..HALF_HEADS {
        hostile.spawn(half_head(api.port, stop.clone()));
    }
    // Every pinger connected once (a few seconds at most), then a second
    // for them all to be in their rhythm.
    for _ in 0..100 {
        if connected.load(Ordering::Relaxed) >= PINGERS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    for i in 1..=TRIES {
        operator_request(api, i, connected.load(Ordering::Relaxed)).await;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    stop.cancel();
    while hostile.join_next().await.is_some() {}
}

/// A kept-alive connection asking for /health every second; when the server
/// closes it, it connects again (a hostile client does not give up).
async fn pinger(port: u16, stop: CancellationToken, connected: Arc<AtomicUsize>) {
    let mut first = true;
    while !stop.is_cancelled() {
        let connect = TcpStream::connect(("127.0.0.1", port));
        if let Ok(Ok(mut socket)) = tokio::time::timeout(Duration::from_secs(2), connect).await {
            if std::mem::take(&mut first) {
                connected.fetch_add(1, Ordering::Relaxed);
            }
            while ping(&mut socket).await {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
}

/// One `GET /health` on a kept-alive connection; whether it is still open.
async fn ping(socket: &mut TcpStream) -> bool {
    if socket
        .write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .is_err()
    {
        return false;
    }
    let reply = read_reply(socket, Duration::from_secs(5)).await;
    let closing = String::from_utf8_lossy(&reply)
        .to_ascii_lowercase()
        .contains("connection: close");
    first_response_complete(&reply) && !closing
}

/// Half a request head, then nothing until the class ends.
async fn half_head(port: u16, stop: CancellationToken) {
    let connect = TcpStream::connect(("127.0.0.1", port));
    if let Ok(Ok(mut socket)) = tokio::time::timeout(Duration::from_secs(2), connect).await {
        let _ = socket
            .write_all(b"GET /api/sites HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            .await;
        stop.cancelled().await;
    }
}

/// Reads one response (or what came before a close or `limit`).
async fn read_reply(socket: &mut TcpStream, limit: Duration) -> Vec<u8> {
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    let _ = tokio::time::timeout(limit, async {
        while !first_response_complete(&reply) {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => reply.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    reply
}

/// The operator's request with the write token, on a new connection: 200,
/// or the run fails.
async fn operator_request(api: &Api, i: usize, hostile: usize) {
    let what = format!(
        "starvation: GET /api/jobs/queue [write token], try {i} of {TRIES}, \
         while one client holds {hostile}+ connections"
    );
    api.ledger.tried();
    let request = format!(
        "GET /api/jobs/queue HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\
         Connection: close\r\n\r\n",
        api.tokens.write
    );
    let exchange = async {
        let mut socket = TcpStream::connect(("127.0.0.1", api.port)).await.ok()?;
        socket.write_all(request.as_bytes()).await.ok()?;
        Some(read_reply(&mut socket, TRY_LIMIT).await)
    };
    match tokio::time::timeout(TRY_LIMIT, exchange).await {
        Ok(Some(reply)) => {
            api.ledger.received(&what, &reply);
            match status_of(&reply) {
                Some(200) => {}
                Some(status) => api.ledger.starved(&what, format!("answered {status}")),
                None => api.ledger.starved(&what, "closed without an answer"),
            }
        }
        Ok(None) => api.ledger.starved(&what, "could not connect or send"),
        Err(_) => api
            .ledger
            .starved(&what, format!("no answer within {}s", TRY_LIMIT.as_secs())),
    }
}

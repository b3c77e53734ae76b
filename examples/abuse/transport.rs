//! Class 3: transport abuse on raw TCP sockets, below any HTTP client's
//! manners: slowloris, a huge header, a 10 GB Content-Length with no body, a
//! trickling body, request smuggling shapes, HTTP/1.0, absolute-form request
//! lines, unknown methods, NUL and very long paths. The api must answer each
//! request that is due an answer with a 4xx (or what HTTP prescribes), and
//! keep answering /health.

use std::time::{Duration, Instant};

use futures::future::join_all;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    task::JoinHandle,
};

use crate::{
    Targets,
    client::Api,
    ledger::{Answer, Expect, Ledger},
    raw::{first_response_complete, probe, status_of},
};

/// Half-sent request heads held open at once.
const SLOWLORIS_CONNECTIONS: usize = 300;
/// How long a trickling body may keep its connection before the server is
/// expected to have answered it (its request timeout is 30 s).
const SLOW_BODY_LIMIT: Duration = Duration::from_secs(40);

pub async fn run(api: &Api, targets: &Targets) {
    slowloris(api).await;
    huge_heads(api).await;
    huge_content_length(api).await;
    smuggling(api).await;
    odd_request_lines(api, targets.trap_port).await;
}

/// Hundreds of connections that send half a request head and stall: the
/// api must keep answering others.
async fn slowloris(api: &Api) {
    let port = api.port;
    let opened = join_all((0..SLOWLORIS_CONNECTIONS).map(|i| async move {
        let head = format!("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow-{i}: ");
        let open = async {
            let mut socket = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
            socket.write_all(head.as_bytes()).await.ok()?;
            Some(socket)
        };
        tokio::time::timeout(Duration::from_secs(5), open)
            .await
            .ok()
            .flatten()
    }))
    .await;
    for _ in 0..SLOWLORIS_CONNECTIONS {
        api.ledger.tried();
    }
    let held = opened.iter().flatten().count();
    if held < SLOWLORIS_CONNECTIONS {
        api.ledger.unexpected(
            "raw: slowloris",
            format!("only {held} of {SLOWLORIS_CONNECTIONS} connections opened"),
        );
    }
    api.check_health(&format!("with {held} slowloris connections open"))
        .await;
    drop(opened);
}

async fn huge_heads(api: &Api) {
    let write = &api.tokens.write;
    let big = "a".repeat(100 * 1024);
    let cases = [
        (
            "a 100 KB header on /health",
            format!("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\nConnection: close\r\n\r\n"),
        ),
        (
            "a 100 KB header on /api/jobs/queue",
            format!(
                "GET /api/jobs/queue HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {write}\r\nX-Big: {big}\r\nConnection: close\r\n\r\n"
            ),
        ),
        (
            "1,000 headers",
            format!(
                "GET /health HTTP/1.1\r\nHost: x\r\n{}Connection: close\r\n\r\n",
                (0..1000)
                    .map(|i| format!("X-{i}: v\r\n"))
                    .collect::<String>()
            ),
        ),
        (
            "a 1 MB request head",
            format!(
                "GET /health HTTP/1.1\r\nHost: x\r\n{}Connection: close\r\n\r\n",
                (0..20)
                    .map(|i| format!("X-{i}: {}\r\n", "b".repeat(50_000)))
                    .collect::<String>()
            ),
        ),
    ];
    for (what, request) in cases {
        probe(
            api,
            what,
            request.as_bytes(),
            Expect::Status(&[431, 400]),
            false,
        )
        .await;
    }
}

/// 10 GB announced, nothing sent: the limit must answer 413 at once, not
/// wait for a body that never comes.
async fn huge_content_length(api: &Api) {
    let request = format!(
        "POST /api/sites HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 10737418240\r\n\r\n",
        api.tokens.write
    );
    let what = "Content-Length 10 GB and no body";
    if let Some(after) = probe(api, what, request.as_bytes(), Expect::Status(&[413]), false).await
        && after > Duration::from_secs(2)
    {
        api.ledger.unexpected(
            &format!("raw: {what}"),
            format!("answered only after {:.1}s", after.as_secs_f64()),
        );
    }
}

/// A body trickling a byte every 250 ms: the server must end it (its
/// request timeout answers 408) rather than hold the connection forever.
/// Runs in the background while the other classes go on.
pub fn spawn_slow_body(port: u16, token: String, ledger: Ledger) -> JoinHandle<()> {
    tokio::spawn(async move {
        let what = "raw: a body trickling a byte every 250 ms";
        ledger.tried();
        let connect = TcpStream::connect(("127.0.0.1", port));
        let Ok(Ok(mut socket)) = tokio::time::timeout(Duration::from_secs(5), connect).await else {
            ledger.dropped(what, "could not connect");
            return;
        };
        let head = format!(
            "POST /api/sites HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
        );
        if socket.write_all(head.as_bytes()).await.is_err() {
            ledger.dropped(what, "closed before the head was sent");
            return;
        }
        let started = Instant::now();
        let mut reply = Vec::new();
        let mut buf = [0u8; 4096];
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        while started.elapsed() < SLOW_BODY_LIMIT {
            tokio::select! {
                read = socket.read(&mut buf) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        reply.extend_from_slice(&buf[..n]);
                        if first_response_complete(&reply) { break; }
                    }
                },
                _ = tick.tick() => {
                    if socket.write_all(b" ").await.is_err() { break; }
                }
            }
        }
        ledger.received(what, &reply);
        match status_of(&reply) {
            Some(status) => {
                let answer = Answer {
                    status,
                    body: reply,
                };
                ledger.judge(what, &answer, &Expect::Status(&[408, 400, 413]));
            }
            None if started.elapsed() >= SLOW_BODY_LIMIT => ledger.dropped(
                what,
                format!("still open after {}s", SLOW_BODY_LIMIT.as_secs()),
            ),
            None => ledger.dropped(what, "closed without an answer"),
        }
    })
}

/// Ambiguous framing and broken chunks: 400 (RFC 9112 §6.3), never a
/// smuggled second request answered, never a 5xx but the 501 HTTP gives
/// a transfer coding it does not know.
async fn smuggling(api: &Api) {
    let auth = format!("Authorization: Bearer {}\r\n", api.tokens.write);
    let smuggled = "GET /api/sites HTTP/1.1\r\nHost: x\r\n\r\n";
    let cases: Vec<(&str, String, &'static [u16])> = vec![
        (
            "Content-Length and Transfer-Encoding (CL.TE)",
            format!(
                "POST /api/sites HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n{smuggled}"
            ),
            &[400, 422],
        ),
        (
            "Transfer-Encoding and a short Content-Length (TE.CL)",
            format!(
                "POST /api/sites HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n{:x}\r\n{smuggled}\r\n0\r\n\r\n",
                smuggled.len()
            ),
            &[400, 422],
        ),
        (
            "two different Content-Lengths",
            format!(
                "POST /api/sites HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\n{{}}{smuggled}"
            ),
            &[400],
        ),
        (
            "Content-Length: -1",
            format!(
                "POST /api/sites HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: -1\r\n\r\n{{}}"
            ),
            &[400],
        ),
        (
            "Transfer-Encoding: chunked, identity",
            format!(
                "POST /api/sites HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nTransfer-Encoding: chunked, identity\r\n\r\n2\r\n{{}}\r\n0\r\n\r\n"
            ),
            &[400, 501],
        ),
        (
            "Transfer-Encoding: xchunked",
            format!(
                "POST /api/sites HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nTransfer-Encoding: xchunked\r\n\r\n2\r\n{{}}\r\n0\r\n\r\n"
            ),
            &[400, 501],
        ),
        (
            "a chunk size that is not hex",
            format!(
                "POST /api/sites HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{{}}\r\n0\r\n\r\n"
            ),
            &[400],
        ),
        (
            "a chunk size past 64 bits",
            format!(
                "POST /api/sites HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffffff\r\n{{}}\r\n0\r\n\r\n"
            ),
            &[400, 413],
        ),
        (
            "a folded header line",
            format!("GET /api/sites HTTP/1.1\r\nHost: x\r\n{auth}X-Folded: a\r\n b\r\n\r\n"),
            &[400],
        ),
        (
            "a space before the colon",
            format!(
                "GET /api/sites HTTP/1.1\r\nHost: x\r\n{auth}Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n"
            ),
            &[400],
        ),
    ];
    let probes = cases.iter().map(|(what, request, expected)| {
        probe(
            api,
            what,
            request.as_bytes(),
            Expect::Status(expected),
            true,
        )
    });
    join_all(probes).await;
}

async fn odd_request_lines(api: &Api, trap: u16) {
    let port = api.port;
    let write = &api.tokens.write;
    let read = &api.tokens.read;
    let long_path = format!("/api/sites/{}", "a".repeat(8 * 1024));
    let huge_path = format!("/api/sites/{}", "a".repeat(70 * 1024));
    let close = "Connection: close\r\n";
    let cases: Vec<(&str, String, Expect)> = vec![
        (
            "HTTP/1.0",
            "GET /health HTTP/1.0\r\n\r\n".into(),
            Expect::Status(&[200]),
        ),
        (
            "HTTP/1.0 with a read token",
            format!("GET /api/jobs/queue HTTP/1.0\r\nAuthorization: Bearer {read}\r\n\r\n"),
            Expect::Status(&[200]),
        ),
        (
            "HTTP/1.1 without Host",
            format!("GET /health HTTP/1.1\r\n{close}\r\n"),
            Expect::Status(&[200, 400]),
        ),
        (
            "HTTP/0.9",
            "GET /health\r\n\r\n".into(),
            Expect::Status(&[400, 505]),
        ),
        (
            "HTTP/3.0",
            format!("GET /health HTTP/3.0\r\nHost: x\r\n{close}\r\n"),
            Expect::Status(&[400, 505]),
        ),
        (
            "absolute form",
            format!(
                "GET http://127.0.0.1:{port}/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{close}\r\n"
            ),
            Expect::Status(&[200]),
        ),
        (
            "absolute form naming the trap",
            format!(
                "GET http://localhost:{trap}/api/jobs/queue HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {read}\r\n{close}\r\n"
            ),
            Expect::NotServerError,
        ),
        (
            "CONNECT to the trap",
            format!(
                "CONNECT 127.0.0.1:{trap} HTTP/1.1\r\nHost: 127.0.0.1:{trap}\r\nAuthorization: Bearer {write}\r\n{close}\r\n"
            ),
            Expect::Status(&[400, 404, 405, 501]),
        ),
        (
            "an unknown method",
            format!("BREW /health HTTP/1.1\r\nHost: x\r\n{close}\r\n"),
            Expect::Status(&[400, 405, 501]),
        ),
        (
            "an unknown method with a write token",
            format!(
                "PURGE /api/sites HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {write}\r\n{close}\r\n"
            ),
            Expect::Status(&[400, 405, 501]),
        ),
        (
            "a 1,000-letter method",
            format!(
                "{} /health HTTP/1.1\r\nHost: x\r\n{close}\r\n",
                "M".repeat(1000)
            ),
            Expect::Status(&[400, 405, 501]),
        ),
        (
            "%00 as an id",
            format!(
                "GET /api/sites/%00 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {read}\r\n{close}\r\n"
            ),
            Expect::Status(&[400, 404]),
        ),
        (
            "%00 in a path",
            format!("GET /he%00alth HTTP/1.1\r\nHost: x\r\n{close}\r\n"),
            Expect::Status(&[400, 404]),
        ),
        (
            "a raw NUL in the path",
            format!("GET /health\0 HTTP/1.1\r\nHost: x\r\n{close}\r\n"),
            Expect::Status(&[400, 404]),
        ),
        (
            "an 8 KB path",
            format!(
                "GET {long_path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {read}\r\n{close}\r\n"
            ),
            Expect::Status(&[400, 404, 414]),
        ),
        (
            "a 70 KB path",
            format!(
                "GET {huge_path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {read}\r\n{close}\r\n"
            ),
            Expect::Status(&[400, 414, 431]),
        ),
        (
            "a path without a slash",
            format!("GET health HTTP/1.1\r\nHost: x\r\n{close}\r\n"),
            Expect::Status(&[400, 404]),
        ),
        (
            "an asterisk target",
            format!("OPTIONS * HTTP/1.1\r\nHost: x\r\n{close}\r\n"),
            Expect::Status(&[200, 204, 400, 404, 405]),
        ),
    ];
    for (what, request, expect) in cases {
        probe(api, what, request.as_bytes(), expect, false).await;
    }
}

//! Requests written byte by byte on raw TCP sockets, for what no HTTP or
//! WebSocket client library would send: half heads, lying lengths, broken
//! framing, protocol-breaking frames.

use std::time::{Duration, Instant};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::{
    client::Api,
    ledger::{Answer, Expect},
};

/// What came back on a raw socket.
enum Reply {
    /// Bytes starting with a status line.
    Answered {
        status: u16,
        bytes: Vec<u8>,
        after: Duration,
    },
    /// The server closed the connection without a status line.
    Closed(Vec<u8>),
    TimedOut,
    Failed(std::io::Error),
}

/// Writes `request` and reads the reply: until the first response is
/// complete, or with `all` until the server closes or `limit` passes (to see
/// whether a smuggled second request was answered too).
async fn exchange(port: u16, request: &[u8], limit: Duration, all: bool) -> Reply {
    let started = Instant::now();
    let connected = tokio::time::timeout(limit, TcpStream::connect(("127.0.0.1", port))).await;
    let mut socket = match connected {
        Ok(Ok(socket)) => socket,
        Ok(Err(e)) => return Reply::Failed(e),
        Err(_) => return Reply::TimedOut,
    };
    // The server may answer (and close) before it has read everything: a
    // failed write is no failure as long as an answer can be read.
    let _ = tokio::time::timeout(limit, socket.write_all(request)).await;
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let left = limit.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, socket.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => {
                bytes.extend_from_slice(&buf[..n]);
                if !all && first_response_complete(&bytes) {
                    break;
                }
            }
            Err(_) if bytes.is_empty() => return Reply::TimedOut,
            Err(_) => break,
        }
    }
    match status_of(&bytes) {
        Some(status) => Reply::Answered {
            status,
            bytes,
            after: started.elapsed(),
        },
        None => Reply::Closed(bytes),
    }
}

/// The status of the response `bytes` start with.
pub fn status_of(bytes: &[u8]) -> Option<u16> {
    let line = bytes.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    if !line.starts_with("HTTP/") {
        return None;
    }
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Whether `bytes` holds a whole response: its head and the body its
/// Content-Length announces (chunked bodies: up to the last chunk).
pub fn first_response_complete(bytes: &[u8]) -> bool {
    let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
    let body = &bytes[end + 4..];
    if let Some(length) = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
    {
        return body.len() >= length;
    }
    if head.contains("transfer-encoding: chunked") {
        return body.ends_with(b"0\r\n\r\n");
    }
    false
}

/// How many responses `bytes` holds (a second one answers a smuggled request).
fn responses_in(bytes: &[u8]) -> usize {
    bytes
        .windows(9)
        .filter(|w| w.starts_with(b"HTTP/1.") && w[8] == b' ')
        .count()
}

/// One raw request, due an answer: counted, its reply judged, a missing
/// answer recorded. With `all`, reads until the server closes (or 5 s), to
/// see whether a smuggled second request was answered too. Returns how long
/// the answer took.
pub async fn probe(
    api: &Api,
    what: &str,
    request: &[u8],
    expect: Expect,
    all: bool,
) -> Option<Duration> {
    let ledger = &api.ledger;
    ledger.tried();
    let what = format!("raw: {what}");
    match exchange(api.port, request, Duration::from_secs(5), all).await {
        Reply::Answered {
            status,
            bytes,
            after,
        } => {
            ledger.received(&what, &bytes);
            let body = bytes
                .splitn(2, |b| *b == b'\n')
                .nth(1)
                .unwrap_or_default()
                .to_vec();
            ledger.judge(&what, &Answer { status, body }, &expect);
            if responses_in(&bytes) > 1 {
                ledger.unexpected(&what, "a second, smuggled request was answered too");
            }
            return Some(after);
        }
        Reply::Closed(bytes) => {
            ledger.received(&what, &bytes);
            ledger.dropped(&what, "closed without an answer");
        }
        Reply::TimedOut => ledger.dropped(&what, "no answer within 5 s"),
        Reply::Failed(e) => {
            ledger.dropped(&what, format!("could not connect: {e}"));
            api.wait_ready(Duration::from_secs(20)).await;
        }
    }
    None
}

/// A WebSocket handshake by hand, for frames no client library sends.
pub async fn ws_upgrade(api: &Api) -> Option<TcpStream> {
    let handshake = async {
        let mut socket = TcpStream::connect(("127.0.0.1", api.port)).await.ok()?;
        let request = format!(
            "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
            api.tokens.read
        );
        socket.write_all(request.as_bytes()).await.ok()?;
        // Byte by byte: what follows the head is the server's first frame.
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
            socket.read_exact(&mut byte).await.ok()?;
            head.push(byte[0]);
        }
        head.starts_with(b"HTTP/1.1 101").then_some(socket)
    };
    tokio::time::timeout(Duration::from_secs(3), handshake)
        .await
        .ok()
        .flatten()
}

/// A client frame: FIN, `opcode`, masked with the all-zero key (so the
/// payload goes as it is).
pub fn masked_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![0x80 | opcode];
    match payload.len() {
        n if n < 126 => frame.push(0x80 | n as u8),
        n if n <= u16::MAX as usize => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    frame.extend_from_slice(&[0, 0, 0, 0]);
    frame.extend_from_slice(payload);
    frame
}

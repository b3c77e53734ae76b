//! A forward proxy on loopback that demands credentials and reaches the
//! fixture site only: the way out of the secret-carrying sites, so their
//! proxy user name and password travel the whole path a real one would
//! (api, store, worker, Chrome's relay) and the secrets search can look for
//! them everywhere. It speaks `CONNECT` (Chrome, through the worker's relay)
//! and absolute-form requests (the worker's HTTP client).

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use base64::Engine as _;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    task::JoinHandle,
};

/// Largest request head read from a client.
const MAX_HEAD: usize = 16 * 1024;

pub struct FixtureProxy {
    pub addr: SocketAddr,
    /// Requests carried to the fixture, and requests refused.
    pub carried: Arc<AtomicUsize>,
    pub refused: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl FixtureProxy {
    pub async fn start(fixture: SocketAddr, user: &str, password: &str) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        let expected = Arc::new(format!("basic {}", token.to_ascii_lowercase()));
        let (carried, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let counters = (carried.clone(), refused.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (expected, counters) = (expected.clone(), counters.clone());
                tokio::spawn(async move {
                    // Bounded: a stalled client or tunnel is dropped.
                    let served = serve(client, fixture, &expected, &counters);
                    let _ = tokio::time::timeout(Duration::from_secs(60), served).await;
                });
            }
        });
        Ok(FixtureProxy {
            addr,
            carried,
            refused,
            task,
        })
    }
}

impl Drop for FixtureProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// (carried, refused)
type Counters = (Arc<AtomicUsize>, Arc<AtomicUsize>);

async fn serve(
    mut client: TcpStream,
    fixture: SocketAddr,
    expected: &str,
    (carried, refused): &Counters,
) -> anyhow::Result<()> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    // Byte by byte: what follows the head belongs to the tunnel.
    while !head.ends_with(b"\r\n\r\n") {
        anyhow::ensure!(head.len() < MAX_HEAD, "request head too large");
        client.read_exact(&mut byte).await?;
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default().to_owned();
    let authorized = lines.any(|line| {
        let lower = line.to_ascii_lowercase();
        lower.strip_prefix("proxy-authorization:").map(str::trim) == Some(expected)
    });
    if !authorized {
        refused.fetch_add(1, Ordering::SeqCst);
        client
            .write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .await?;
        anyhow::bail!("no or wrong credentials");
    }
    let mut parts = request_line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let fixture_authority = fixture.to_string();
    let reaches_fixture = if method == "CONNECT" {
        target == fixture_authority
    } else {
        let prefix = format!("http://{fixture_authority}/");
        target.starts_with(&prefix) || target == format!("http://{fixture_authority}")
    };
    if !reaches_fixture {
        refused.fetch_add(1, Ordering::SeqCst);
        client
            .write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .await?;
        anyhow::bail!("{method} {target} is not the fixture");
    }
    let mut server = TcpStream::connect(fixture).await?;
    carried.fetch_add(1, Ordering::SeqCst);
    if method == "CONNECT" {
        client
            .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .await?;
    } else {
        // The fixture's server takes absolute-form request lines as they are.
        server.write_all(head.as_bytes()).await?;
    }
    tokio::io::copy_bidirectional(&mut client, &mut server).await?;
    Ok(())
}

//! A browser session's way out: a SOCKS5 server on 127.0.0.1 that Chrome sends
//! every connection through, and that serves the worker's own Chrome alone
//! (Chrome cannot authenticate to a SOCKS5 proxy, so a connection is accepted
//! only when its client socket is open in one of Chrome's processes: see
//! `relay_peer`). It serves two purposes Chrome cannot serve itself:
//!
//! - The SSRF guard on every connection Chrome opens (redirects, frames,
//!   images, scripts), not only on the page crawlfleet asks for: each target
//!   is resolved here, refused when the guard says so, and otherwise reached
//!   at the very addresses that were checked (no second lookup to rebind).
//! - A proxy with credentials (Chrome would ask a user for them): connections
//!   go through it with HTTP `CONNECT` and `Proxy-Authorization: Basic`, or
//!   SOCKS5 username/password. Through an HTTP proxy every connection is a
//!   `CONNECT` tunnel, plain-http targets included.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::{Arc, Mutex},
};

use anyhow::{Context, bail};
use base64::Engine as _;
use tokio::{
    io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader},
    net::{TcpListener, TcpStream},
    task::JoinHandle,
};

use super::{launch::OWN_SERVICES_HOST, relay_peer::ChromePeers};
use crate::{
    domain::site::ProxyUrl,
    net::target_guard::{Refused, TargetGuard},
};

/// How relayed connections leave: straight to the target, or through a proxy.
#[derive(Debug, Clone)]
pub enum Egress {
    Direct,
    Proxy(ProxyUrl),
}

/// The relay of one browser session; stops when dropped.
pub struct SocksRelay {
    addr: SocketAddr,
    task: JoinHandle<()>,
    refused: Arc<Mutex<Option<Refused>>>,
}

impl SocksRelay {
    /// A relay on `bind` for the Chrome `peers` names, leaving by `egress`.
    pub async fn start(
        bind: IpAddr,
        egress: Egress,
        guard: TargetGuard,
        peers: Arc<ChromePeers>,
    ) -> anyhow::Result<Self> {
        let listener = TcpListener::bind((bind, 0))
            .await
            .context("binding the browser's SOCKS5 relay")?;
        let addr = listener.local_addr()?;
        let refused = Arc::new(Mutex::new(None));
        let task = tokio::spawn({
            let refused = refused.clone();
            async move {
                loop {
                    let Ok((client, peer)) = listener.accept().await else {
                        return;
                    };
                    let (egress, guard, refused) = (egress.clone(), guard.clone(), refused.clone());
                    let peers = peers.clone();
                    tokio::spawn(async move {
                        let is_chrome =
                            tokio::task::spawn_blocking(move || peers.is_chrome(peer, addr)).await;
                        if !matches!(is_chrome, Ok(true)) {
                            // Closed without a word: whoever it is learns nothing.
                            tracing::warn!(%peer, "a relay connection not from the worker's Chrome was closed");
                            crate::ops::metrics::metrics()
                                .browser_connections
                                .with_label_values(&["stranger"])
                                .inc();
                            return;
                        }
                        if let Err(e) = relay(client, &egress, &guard, &refused).await {
                            tracing::debug!(error = %e, ?egress, "relayed connection failed");
                        }
                    });
                }
            }
        });
        Ok(Self {
            addr,
            task,
            refused,
        })
    }

    /// What Chrome's `--proxy-server` names.
    pub fn proxy_server(&self) -> String {
        format!("socks5://{}", self.addr)
    }

    /// The last target the guard refused since the previous call.
    pub fn take_refused(&self) -> Option<Refused> {
        self.refused.lock().expect("relay lock").take()
    }
}

impl Drop for SocksRelay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Where a client asked to go.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    host: String,
    port: u16,
}

impl Target {
    /// `host:port`, IPv6 hosts bracketed.
    fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// SOCKS5 reply codes (RFC 1928).
const GENERAL_FAILURE: u8 = 1;
const NOT_ALLOWED: u8 = 2;
const HOST_UNREACHABLE: u8 = 4;

async fn relay(
    mut client: TcpStream,
    egress: &Egress,
    guard: &TargetGuard,
    refused: &Mutex<Option<Refused>>,
) -> anyhow::Result<()> {
    let target = socks5_accept(&mut client).await?;
    if target.host == OWN_SERVICES_HOST {
        // Chrome's own services, pointed here: nothing is looked up or opened.
        tracing::debug!(target = %target.authority(), outcome = "sunk", "browser connection");
        crate::ops::metrics::metrics()
            .browser_connections
            .with_label_values(&["sunk"])
            .inc();
        let _ = client
            .write_all(&[5, HOST_UNREACHABLE, 0, 1, 0, 0, 0, 0, 0, 0])
            .await;
        return Ok(());
    }
    let opening = open(egress, guard, &target).await;
    let outcome = match &opening {
        Ok(_) => "opened",
        Err(Opening::Refused(_)) => "refused",
        Err(Opening::Unresolvable(_)) => "unresolvable",
        Err(Opening::Failed(_)) => "failed",
    };
    // Hosts and ports only: what a page loads is no secret of the site's.
    tracing::debug!(target = %target.authority(), outcome, "browser connection");
    crate::ops::metrics::metrics()
        .browser_connections
        .with_label_values(&[outcome])
        .inc();
    let opened = match opening {
        Ok(server) => Ok(server),
        Err(Opening::Refused(why)) => {
            tracing::warn!(target = %target.authority(), reason = %why, "browser connection refused by the SSRF guard");
            crate::ops::metrics::metrics().refused_targets.inc();
            *refused.lock().expect("relay lock") = Some(why.clone());
            Err((NOT_ALLOWED, anyhow::Error::new(why)))
        }
        Err(Opening::Unresolvable(why)) => Err((HOST_UNREACHABLE, anyhow::Error::new(why))),
        Err(Opening::Failed(e)) => Err((GENERAL_FAILURE, e)),
    };
    let mut server = match opened {
        Ok(server) => server,
        Err((code, e)) => {
            let _ = client.write_all(&[5, code, 0, 1, 0, 0, 0, 0, 0, 0]).await;
            return Err(e);
        }
    };
    client.write_all(&[5, 0, 0, 1, 0, 0, 0, 0, 0, 0]).await?;
    tokio::io::copy_bidirectional(&mut client, &mut server).await?;
    Ok(())
}

enum Opening {
    Refused(Refused),
    Unresolvable(Refused),
    Failed(anyhow::Error),
}

/// Opens a connection to `target` the way `egress` says, once the guard let
/// it through, to the very addresses the guard judged. Through a proxy the
/// target's name is resolved here for the guard only, as in http mode (the
/// proxy resolves it again), and the proxy itself is judged like a target.
async fn open(egress: &Egress, guard: &TargetGuard, target: &Target) -> Result<TcpStream, Opening> {
    let judged = |refused: Refused| match refused.may_pass_later() {
        true => Opening::Unresolvable(refused),
        false => Opening::Refused(refused),
    };
    let checked = if guard.is_open() && matches!(egress, Egress::Proxy(_)) {
        Vec::new()
    } else {
        guard
            .addresses(&target.host, target.port)
            .await
            .map_err(judged)?
    };
    let proxy = match egress {
        Egress::Direct => {
            return TcpStream::connect(checked.as_slice())
                .await
                .with_context(|| format!("connecting to {}", target.authority()))
                .map_err(Opening::Failed);
        }
        Egress::Proxy(proxy) => proxy,
    };
    let addresses = guard
        .addresses(proxy.host(), proxy.port())
        .await
        .map_err(judged)?;
    let server = TcpStream::connect(addresses.as_slice())
        .await
        .context("connecting to the proxy")
        .map_err(Opening::Failed)?;
    let tunnel = match proxy.scheme() {
        "http" => http_connect(server, proxy, target).await,
        _ => socks5_connect(server, proxy, target).await,
    };
    tunnel.map_err(Opening::Failed)
}

/// The server side of a SOCKS5 handshake (no authentication) up to CONNECT.
async fn socks5_accept(client: &mut TcpStream) -> anyhow::Result<Target> {
    let mut head = [0u8; 2];
    client.read_exact(&mut head).await?;
    if head[0] != 5 {
        bail!("not SOCKS5");
    }
    let mut methods = vec![0u8; head[1] as usize];
    client.read_exact(&mut methods).await?;
    if !methods.contains(&0) {
        client.write_all(&[5, 0xff]).await?;
        bail!("the client offers no unauthenticated method");
    }
    client.write_all(&[5, 0]).await?;
    let mut request = [0u8; 4];
    client.read_exact(&mut request).await?;
    if request[1] != 1 {
        client.write_all(&[5, 7, 0, 1, 0, 0, 0, 0, 0, 0]).await?;
        bail!("only CONNECT is relayed");
    }
    read_address(client, request[3]).await
}

async fn read_address(stream: &mut (impl AsyncRead + Unpin), kind: u8) -> anyhow::Result<Target> {
    let host = match kind {
        1 => {
            let mut ip = [0u8; 4];
            stream.read_exact(&mut ip).await?;
            Ipv4Addr::from(ip).to_string()
        }
        3 => {
            let len = stream.read_u8().await? as usize;
            let mut name = vec![0u8; len];
            stream.read_exact(&mut name).await?;
            String::from_utf8(name).context("a host name that is not UTF-8")?
        }
        4 => {
            let mut ip = [0u8; 16];
            stream.read_exact(&mut ip).await?;
            Ipv6Addr::from(ip).to_string()
        }
        other => bail!("unknown SOCKS5 address type {other}"),
    };
    let port = stream.read_u16().await?;
    Ok(Target { host, port })
}

/// A tunnel through an HTTP proxy (`server`): `CONNECT` with the credentials.
async fn http_connect(
    mut server: TcpStream,
    upstream: &ProxyUrl,
    target: &Target,
) -> anyhow::Result<TcpStream> {
    let authority = target.authority();
    let mut request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if let Some((user, password)) = upstream.credentials() {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        request.push_str(&format!("Proxy-Authorization: Basic {token}\r\n"));
    }
    request.push_str("\r\n");
    server.write_all(request.as_bytes()).await?;
    // Read the answer's head byte by byte: what follows it belongs to the tunnel.
    let mut reader = BufReader::with_capacity(1, &mut server);
    let mut status = String::new();
    reader.read_line(&mut status).await?;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
    }
    let code = status.split_whitespace().nth(1).unwrap_or("");
    if code != "200" {
        bail!("the proxy refused CONNECT {authority}: {}", status.trim());
    }
    Ok(server)
}

/// A connection through a SOCKS5 proxy (`server`), with username/password when given.
async fn socks5_connect(
    mut server: TcpStream,
    upstream: &ProxyUrl,
    target: &Target,
) -> anyhow::Result<TcpStream> {
    let credentials = upstream.credentials();
    let method = if credentials.is_some() { 2 } else { 0 };
    server.write_all(&[5, 1, method]).await?;
    let mut chosen = [0u8; 2];
    server.read_exact(&mut chosen).await?;
    if chosen != [5, method] {
        bail!("the SOCKS5 proxy refused the authentication method");
    }
    if let Some((user, password)) = credentials {
        let mut auth = vec![1, user.len() as u8];
        auth.extend_from_slice(user.as_bytes());
        auth.push(password.len() as u8);
        auth.extend_from_slice(password.as_bytes());
        server.write_all(&auth).await?;
        let mut answer = [0u8; 2];
        server.read_exact(&mut answer).await?;
        if answer[1] != 0 {
            bail!("the SOCKS5 proxy refused the credentials");
        }
    }
    let mut request = vec![5, 1, 0, 3, target.host.len() as u8];
    request.extend_from_slice(target.host.as_bytes());
    request.extend_from_slice(&target.port.to_be_bytes());
    server.write_all(&request).await?;
    let mut reply = [0u8; 4];
    server.read_exact(&mut reply).await?;
    if reply[1] != 0 {
        bail!(
            "the SOCKS5 proxy refused CONNECT {} (code {})",
            target.authority(),
            reply[1]
        );
    }
    read_address(&mut server, reply[3]).await?;
    Ok(server)
}

//! A forward proxy for tests on 127.0.0.1: HTTP (CONNECT tunnels and
//! absolute-form requests) and SOCKS5 on one port, optionally demanding
//! credentials. It logs what it was asked for and the local address of every
//! connection it opens, so a test can tell that a request reached the fixture
//! through it. It can be told to misbehave (`answer_429`, `close_connections`)
//! as a banned exit does.

use std::{
    collections::HashSet,
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU8, Ordering},
    },
};

use base64::Engine as _;
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::{TcpListener, TcpStream},
    task::JoinHandle,
};

/// What the proxy was asked for and did.
#[derive(Default)]
pub struct ProxyLog {
    /// "CONNECT host:port", "GET http://host:port/path", "SOCKS host:port".
    pub asked: Vec<String>,
    /// Requests refused for missing or wrong credentials.
    pub refused: usize,
    /// Local addresses of the proxy's connections to targets.
    pub outbound: HashSet<SocketAddr>,
    /// Connections answered 429 or closed while misbehaving.
    pub turned_away: usize,
    /// Where every connection goes, whatever host it names (set by
    /// [`TestProxy::mapping_to`]): host names a page uses reach a fixture
    /// on 127.0.0.1 without a lookup.
    mapped_to: Option<SocketAddr>,
}

/// How the proxy answers.
const FORWARD: u8 = 0;
const ANSWER_429: u8 = 1;
const CLOSE: u8 = 2;

/// The proxy, listening on 127.0.0.1 until dropped.
pub struct TestProxy {
    pub port: u16,
    log: Arc<Mutex<ProxyLog>>,
    behaviour: Arc<AtomicU8>,
    task: JoinHandle<()>,
}

impl TestProxy {
    /// Listens on a port of its own; with `credentials`, refuses whoever
    /// does not give them.
    pub async fn start(credentials: Option<(&str, &str)>) -> TestProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let log = Arc::new(Mutex::new(ProxyLog::default()));
        let credentials = credentials.map(|(u, p)| (u.to_owned(), p.to_owned()));
        let behaviour = Arc::new(AtomicU8::new(FORWARD));
        let task = tokio::spawn({
            let (log, behaviour) = (log.clone(), behaviour.clone());
            async move {
                loop {
                    let Ok((client, _)) = listener.accept().await else {
                        return;
                    };
                    let (log, credentials) = (log.clone(), credentials.clone());
                    let behaviour = behaviour.load(Ordering::SeqCst);
                    tokio::spawn(async move {
                        let _ = match behaviour {
                            FORWARD => serve(client, &log, credentials.as_ref()).await,
                            _ => misbehave(client, &log, behaviour).await,
                        };
                    });
                }
            }
        });
        TestProxy {
            port,
            log,
            behaviour,
            task,
        }
    }

    /// A proxy that takes every connection, whatever host it names, to
    /// `fixture` (a tracker's host name a page loads from reaches the
    /// fixture, which serves it by path): names mapped to loopback.
    pub async fn mapping_to(fixture: SocketAddr) -> TestProxy {
        let proxy = TestProxy::start(None).await;
        proxy.log.lock().unwrap().mapped_to = Some(fixture);
        proxy
    }

    /// From now on, answers every request 429 Too Many Requests, as a
    /// banned exit does.
    pub fn answer_429(&self) {
        self.behaviour.store(ANSWER_429, Ordering::SeqCst);
    }

    /// From now on, closes every connection unanswered.
    pub fn close_connections(&self) {
        self.behaviour.store(CLOSE, Ordering::SeqCst);
    }

    /// From now on, forwards again.
    pub fn forward(&self) {
        self.behaviour.store(FORWARD, Ordering::SeqCst);
    }

    /// Requests it forwarded (each logged as asked).
    pub fn forwarded(&self) -> usize {
        self.log(|log| log.asked.len())
    }

    /// Connections it turned away misbehaving.
    pub fn turned_away(&self) -> usize {
        self.log(|log| log.turned_away)
    }

    /// `scheme://[user:password@]127.0.0.1:port`.
    pub fn url(&self, scheme: &str, credentials: Option<(&str, &str)>) -> String {
        match credentials {
            Some((user, password)) => {
                format!("{scheme}://{user}:{password}@127.0.0.1:{}", self.port)
            }
            None => format!("{scheme}://127.0.0.1:{}", self.port),
        }
    }

    /// Reads the log (`read` runs under its lock).
    pub fn log<T>(&self, read: impl FnOnce(&ProxyLog) -> T) -> T {
        read(&self.log.lock().unwrap())
    }
}

impl Drop for TestProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A banned exit: a 429 to whatever was asked, or the connection closed.
async fn misbehave(
    mut client: TcpStream,
    log: &Mutex<ProxyLog>,
    behaviour: u8,
) -> anyhow::Result<()> {
    log.lock().unwrap().turned_away += 1;
    if behaviour == ANSWER_429 {
        let mut head = [0u8; 1024];
        let _ = client.read(&mut head).await?;
        client
            .write_all(
                b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            )
            .await?;
    }
    Ok(())
}

async fn connect(target: &str, log: &Mutex<ProxyLog>) -> std::io::Result<TcpStream> {
    let mapped_to = log.lock().unwrap().mapped_to;
    let stream = match mapped_to {
        Some(fixture) => TcpStream::connect(fixture).await?,
        None => TcpStream::connect(target).await?,
    };
    log.lock().unwrap().outbound.insert(stream.local_addr()?);
    Ok(stream)
}

async fn serve(
    mut client: TcpStream,
    log: &Mutex<ProxyLog>,
    credentials: Option<&(String, String)>,
) -> anyhow::Result<()> {
    let mut first = [0u8; 1];
    client.peek(&mut first).await?;
    if first[0] == 5 {
        return socks5(client, log, credentials).await;
    }
    let mut reader = BufReader::new(&mut client);
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let end = line == "\r\n";
        head.push(line);
        if end {
            break;
        }
    }
    let buffered = reader.buffer().to_vec();
    let request_line = head[0].trim().to_owned();
    let mut parts = request_line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let authorized = credentials.is_none_or(|(user, password)| {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        head.iter().any(|h| {
            h.to_ascii_lowercase().starts_with("proxy-authorization:")
                && h.trim().ends_with(&format!("Basic {token}"))
        })
    });
    if !authorized {
        log.lock().unwrap().refused += 1;
        client
            .write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .await?;
        return Ok(());
    }
    log.lock().unwrap().asked.push(format!("{method} {target}"));
    if method == "CONNECT" {
        let mut server = connect(target, log).await?;
        client
            .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .await?;
        server.write_all(&buffered).await?;
        tokio::io::copy_bidirectional(&mut client, &mut server).await?;
        return Ok(());
    }
    // Absolute form: one request per connection, sent on in origin form.
    let url = url::Url::parse(target)?;
    let authority = format!(
        "{}:{}",
        url.host_str().unwrap_or(""),
        url.port_or_known_default().unwrap_or(80)
    );
    let mut server = connect(&authority, log).await?;
    let path = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    };
    let mut forwarded = format!("{method} {path} HTTP/1.1\r\n");
    for header in &head[1..head.len() - 1] {
        let lower = header.to_ascii_lowercase();
        if !(lower.starts_with("proxy-") || lower.starts_with("connection:")) {
            forwarded.push_str(header);
        }
    }
    forwarded.push_str("Connection: close\r\n\r\n");
    server.write_all(forwarded.as_bytes()).await?;
    server.write_all(&buffered).await?;
    tokio::io::copy_bidirectional(&mut client, &mut server).await?;
    Ok(())
}

async fn socks5(
    mut client: TcpStream,
    log: &Mutex<ProxyLog>,
    credentials: Option<&(String, String)>,
) -> anyhow::Result<()> {
    let mut head = [0u8; 2];
    client.read_exact(&mut head).await?;
    let mut methods = vec![0u8; head[1] as usize];
    client.read_exact(&mut methods).await?;
    let wanted = if credentials.is_some() { 2 } else { 0 };
    if !methods.contains(&wanted) {
        log.lock().unwrap().refused += 1;
        client.write_all(&[5, 0xff]).await?;
        return Ok(());
    }
    client.write_all(&[5, wanted]).await?;
    if let Some((user, password)) = credentials {
        let mut version_and_len = [0u8; 2];
        client.read_exact(&mut version_and_len).await?;
        let mut given_user = vec![0u8; version_and_len[1] as usize];
        client.read_exact(&mut given_user).await?;
        let password_len = client.read_u8().await? as usize;
        let mut given_password = vec![0u8; password_len];
        client.read_exact(&mut given_password).await?;
        if given_user != user.as_bytes() || given_password != password.as_bytes() {
            log.lock().unwrap().refused += 1;
            client.write_all(&[1, 1]).await?;
            return Ok(());
        }
        client.write_all(&[1, 0]).await?;
    }
    let mut request = [0u8; 4];
    client.read_exact(&mut request).await?;
    let host = match request[3] {
        1 => {
            let mut ip = [0u8; 4];
            client.read_exact(&mut ip).await?;
            std::net::Ipv4Addr::from(ip).to_string()
        }
        3 => {
            let len = client.read_u8().await? as usize;
            let mut name = vec![0u8; len];
            client.read_exact(&mut name).await?;
            String::from_utf8(name)?
        }
        _ => anyhow::bail!("address type not supported by the test proxy"),
    };
    let port = client.read_u16().await?;
    let target = format!("{host}:{port}");
    log.lock().unwrap().asked.push(format!("SOCKS {target}"));
    let mut server = connect(&target, log).await?;
    client.write_all(&[5, 0, 0, 1, 0, 0, 0, 0, 0, 0]).await?;
    tokio::io::copy_bidirectional(&mut client, &mut server).await?;
    Ok(())
}

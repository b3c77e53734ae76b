//! Outages caused for real, without touching what other tests share: a
//! Postgres connection that can be cut, a Redis server a test can stop.

use std::{
    process::Stdio,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use super::eventually;

/// A TCP proxy in front of Postgres that can cut every connection and refuse
/// new ones for a while: a database outage, for real, without stopping the
/// server other tests share.
pub struct CuttableProxy {
    port: u16,
    up: Arc<AtomicBool>,
    cut: tokio::sync::watch::Sender<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl CuttableProxy {
    /// Listens on a port of its own and relays every connection to `target`
    /// (host, port).
    pub async fn start(target: (String, u16)) -> CuttableProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let up = Arc::new(AtomicBool::new(true));
        let (cut, cuts) = tokio::sync::watch::channel(0u64);
        let task = tokio::spawn({
            let up = up.clone();
            async move {
                loop {
                    let Ok((mut client, _)) = listener.accept().await else {
                        return;
                    };
                    if !up.load(Ordering::SeqCst) {
                        continue; // dropped: connection refused in effect
                    }
                    let target = target.clone();
                    let mut cuts = cuts.clone();
                    tokio::spawn(async move {
                        let Ok(mut server) = tokio::net::TcpStream::connect(target).await else {
                            return;
                        };
                        cuts.borrow_and_update();
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                            _ = cuts.changed() => {}
                        }
                    });
                }
            }
        });
        CuttableProxy {
            port,
            up,
            cut,
            task,
        }
    }

    /// `url` with its host and port replaced by the proxy's.
    pub fn route(&self, url: &str) -> String {
        let mut url: url::Url = url.parse().unwrap();
        url.set_host(Some("127.0.0.1")).unwrap();
        url.set_port(Some(self.port)).unwrap();
        url.to_string()
    }

    /// Cuts every open connection and refuses new ones until [`Self::restore`].
    pub fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        self.cut.send_modify(|n| *n += 1);
    }

    /// Accepts and relays new connections again.
    pub fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

impl Drop for CuttableProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A Redis server of a test's own, for tests that stop it.
pub struct OwnRedis {
    child: tokio::process::Child,
    port: u16,
}

impl OwnRedis {
    /// A new server on a free port, listening when this returns.
    pub async fn start() -> OwnRedis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Self::start_on(port).await
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// A new server on `port` (a stopped one's, to bring it back), empty and
    /// keeping nothing on disk.
    pub async fn start_on(port: u16) -> OwnRedis {
        let child = tokio::process::Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("redis-server installed");
        let redis = OwnRedis { child, port };
        // redis-server listens within milliseconds of starting.
        eventually(Duration::from_secs(10), "own redis listens", || async {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .ok()
                .map(|_| ())
        })
        .await;
        redis
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// SIGKILL and reap: Redis goes away as in a crash.
    pub async fn stop(mut self) {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
    }
}

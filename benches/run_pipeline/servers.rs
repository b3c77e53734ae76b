//! What the pipeline bench runs against, each its own so that its figures
//! are its own: a Postgres cluster with `pg_stat_statements` preloaded (the
//! shared server has it not, and a `CREATE EXTENSION` needs the preload), a
//! Redis server, and the page server the crawls fetch from.

use std::{
    path::PathBuf,
    process::Stdio,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use axum::{Router, extract::Query, response::Html, routing::get};
use sqlx::Connection;

use crate::support::{eventually, free_port};

/// A Postgres cluster of the bench's own, with production's settings
/// (fsync and synchronous commit on, the defaults of initdb) plus
/// `pg_stat_statements`, so the statements the fleet sends can be counted.
pub struct OwnPostgres {
    pub port: u16,
    pub postmaster: i32,
    dir: PathBuf,
    child: tokio::process::Child,
}

/// Where Debian keeps the server's programs (the newest installed version).
fn postgres_bin(program: &str) -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL server programs installed")
        .flatten()
        .map(|e| e.path().join("bin").join(program))
        .filter(|p| p.exists())
        .collect();
    versions.sort();
    versions.pop().expect("a PostgreSQL server version")
}

/// A Postgres program run as the `postgres` user (it refuses root).
fn as_postgres(program: &str) -> tokio::process::Command {
    // SAFETY: getpwnam with a NUL-terminated name; the entry is read at once.
    let (uid, gid) = unsafe {
        let entry = libc::getpwnam(c"postgres".as_ptr());
        assert!(!entry.is_null(), "a postgres user (PostgreSQL installed)");
        ((*entry).pw_uid, (*entry).pw_gid)
    };
    let mut cmd = tokio::process::Command::new(postgres_bin(program));
    cmd.uid(uid).gid(gid);
    cmd
}

impl OwnPostgres {
    pub async fn start() -> OwnPostgres {
        let dir = std::env::temp_dir().join(format!(
            "cf-bench-pipeline-pg-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let status = std::process::Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(status.success());
        let data = dir.join("data");
        let init = as_postgres("initdb")
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "--auth=trust"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await
            .unwrap();
        assert!(init.success(), "initdb");
        let port = free_port().expect("a free port");
        let child = as_postgres("postgres")
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!("unix_socket_directories={}", dir.display()))
            .args(["-c", "max_connections=200"])
            .args(["-c", "shared_preload_libraries=pg_stat_statements"])
            .args(["-c", "pg_stat_statements.track=top"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let postmaster = child.id().expect("started") as i32;
        eventually(Duration::from_secs(30), "own Postgres listens", || async {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .ok()
                .map(|_| ())
        })
        .await;
        let server = OwnPostgres {
            port,
            postmaster,
            dir,
            child,
        };
        // Accepting connections comes a moment after listening.
        eventually(Duration::from_secs(30), "own Postgres answers", || async {
            let mut conn = sqlx::PgConnection::connect(&server.url("postgres"))
                .await
                .ok()?;
            sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                .execute(&mut conn)
                .await
                .ok()
                .map(|_| ())
        })
        .await;
        server
    }

    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        // SIGINT: Postgres' fast shutdown (its backends go with it).
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.postmaster, libc::SIGINT) };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The page every crawl fetches: a small results page of three items, which
/// name the keyword (each keyword's items are its own, as on a real site).
fn results_page(keyword: &str) -> String {
    let mut page = String::from(
        "<!doctype html><html><head><title>results</title></head><body><ul class=\"results\">",
    );
    for i in 1..=3 {
        page.push_str(&format!(
            "<li class=\"product\"><a class=\"title\" href=\"/p/{keyword}/{i}\">{keyword} item {i}</a>\
             <span class=\"price\">${i}.00</span></li>"
        ));
    }
    page.push_str("</ul></body></html>");
    page
}

/// A loopback HTTP server (axum) on a thread and a single-threaded runtime
/// of its own, so its CPU time is that thread's.
pub struct PageServer {
    pub port: u16,
    pub requests: Arc<AtomicU64>,
    /// The server thread's Linux thread id (its CPU time is read from /proc).
    pub tid: i32,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PageServer {
    pub fn start() -> PageServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(AtomicU64::new(0));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let counter = requests.clone();
        let thread = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tid_tx.send(unsafe { libc::gettid() }).unwrap();
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let app = Router::new().route(
                    "/search",
                    get(
                        move |Query(q): Query<std::collections::HashMap<String, String>>| {
                            counter.fetch_add(1, Ordering::Relaxed);
                            let keyword = q.get("q").cloned().unwrap_or_default();
                            async move { Html(results_page(&keyword)) }
                        },
                    ),
                );
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await
                    .unwrap();
            });
        });
        PageServer {
            port,
            requests,
            tid: tid_rx.recv().unwrap(),
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A Redis server of the bench's own: its command counts and CPU are the
/// fleet's alone.
pub struct BenchRedis {
    pub port: u16,
    pub pid: i32,
    child: tokio::process::Child,
}

impl BenchRedis {
    pub async fn start() -> BenchRedis {
        let port = free_port().expect("a free port");
        let child = tokio::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("redis-server installed");
        let pid = child.id().expect("started") as i32;
        eventually(Duration::from_secs(10), "own Redis listens", || async {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .ok()
                .map(|_| ())
        })
        .await;
        BenchRedis { port, pid, child }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for BenchRedis {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

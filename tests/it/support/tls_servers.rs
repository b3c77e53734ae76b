//! Postgres and Redis that speak TLS only, with certificates of a CA the test
//! makes: what RDS and ElastiCache are to crawlfleet, on loopback. Each test
//! gets servers of its own in a folder of its own, gone when dropped.

use std::{
    net::{IpAddr, Ipv4Addr},
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};

use super::{eventually, free_port};

/// A certificate authority of the test's own.
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

/// A server's certificate and key, in PEM.
pub struct ServerCert {
    pub cert: String,
    pub key: String,
}

impl TestCa {
    pub fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        TestCa {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// The CA's certificate, as a bundle a client trusts.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// A certificate for `localhost` and 127.0.0.1, signed by this CA.
    pub fn server_cert(&self) -> ServerCert {
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        ServerCert {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }
}

/// A folder of the test's own, readable by the `postgres` user.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cf-tls-{name}-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `text` to `dir/name`, readable by its owner alone.
fn private_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// Postgres that accepts TLS connections only (`hostssl` lines, no `host`),
/// with a password for its user.
pub struct TlsPostgres {
    pub port: u16,
    dir: PathBuf,
    child: tokio::process::Child,
}

/// The user crawlfleet connects as.
pub const PG_USER: &str = "crawlfleet";

/// Where Debian keeps the server's programs (any installed version).
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

/// Runs a Postgres program as the `postgres` user (it refuses root), as a
/// child of the test itself, so killing the child kills the server.
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

impl TlsPostgres {
    /// A new server with `cert`, its user's password `password`.
    pub async fn start(cert: &ServerCert, password: &str) -> TlsPostgres {
        let dir = scratch("postgres");
        let data = dir.join("data");
        let pwfile = private_file(&dir, "pwfile", password);
        let key = private_file(&dir, "server.key", &cert.key);
        let crt = private_file(&dir, "server.crt", &cert.cert);
        let status = std::process::Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(status.success());
        let init = as_postgres("initdb")
            .arg("-D")
            .arg(&data)
            .args(["-U", PG_USER, "--auth=scram-sha-256"])
            .arg(format!("--pwfile={}", pwfile.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await
            .unwrap();
        assert!(init.success(), "initdb");
        // TLS only: a connection without it finds no line to match.
        std::fs::write(
            data.join("pg_hba.conf"),
            "hostssl all all 127.0.0.1/32 scram-sha-256\nhostssl all all ::1/128 scram-sha-256\n",
        )
        .unwrap();
        let port = free_port().expect("a free port");
        let child = as_postgres("postgres")
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!("unix_socket_directories={}", dir.display()))
            .args(["-c", "ssl=on"])
            .arg("-c")
            .arg(format!("ssl_cert_file={}", crt.display()))
            .arg("-c")
            .arg(format!("ssl_key_file={}", key.display()))
            .args(["-c", "fsync=off"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        // Postgres starts in about a second; 30 s on a loaded machine.
        eventually(Duration::from_secs(30), "TLS Postgres listens", || async {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .ok()
                .map(|_| ())
        })
        .await;
        TlsPostgres { port, dir, child }
    }
}

impl Drop for TlsPostgres {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Redis that accepts TLS connections only (no plain port), with a password.
pub struct TlsRedis {
    pub port: u16,
    dir: PathBuf,
    child: tokio::process::Child,
}

impl TlsRedis {
    pub async fn start(cert: &ServerCert, ca: &TestCa, password: &str) -> TlsRedis {
        let dir = scratch("redis");
        let crt = private_file(&dir, "server.crt", &cert.cert);
        let key = private_file(&dir, "server.key", &cert.key);
        let ca_file = private_file(&dir, "ca.crt", ca.pem());
        let port = free_port().expect("a free port");
        let child = tokio::process::Command::new("redis-server")
            .args(["--port", "0", "--tls-port", &port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--tls-cert-file")
            .arg(&crt)
            .arg("--tls-key-file")
            .arg(&key)
            .arg("--tls-ca-cert-file")
            .arg(&ca_file)
            .args(["--tls-auth-clients", "no", "--requirepass", password])
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("redis-server installed");
        // redis-server listens within milliseconds; 10 s on a loaded machine.
        eventually(Duration::from_secs(10), "TLS Redis listens", || async {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .ok()
                .map(|_| ())
        })
        .await;
        TlsRedis { port, dir, child }
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A CA bundle in a file a process is given, removed when dropped.
pub struct CaFile {
    pub path: PathBuf,
    dir: PathBuf,
}

impl CaFile {
    pub fn of(ca: &TestCa) -> CaFile {
        let dir = scratch("ca");
        let path = dir.join("ca.pem");
        std::fs::write(&path, ca.pem()).unwrap();
        CaFile { path, dir }
    }
}

impl Drop for CaFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Who a fleet process logs in as on the TLS servers.
pub struct DatastoreLogin<'a> {
    pub pg_user: &'a str,
    pub pg_password: &'a str,
    pub redis_password: &'a str,
}

/// The environment that has a fleet process use `pg` and `redis` over TLS,
/// their certificates checked against `ca`, as `login`. The URLs name no
/// credentials: the parts give them, as a deployment's secrets do.
pub fn tls_fleet_env(
    pg: &TlsPostgres,
    redis: &TlsRedis,
    ca: &Path,
    login: &DatastoreLogin,
) -> Vec<(&'static str, String)> {
    vec![
        (
            "DATABASE_URL",
            format!("postgres://localhost:{}/postgres", pg.port),
        ),
        ("DATABASE_USER", login.pg_user.to_owned()),
        ("DATABASE_PASSWORD", login.pg_password.to_owned()),
        ("DATABASE_SSLMODE", "verify-full".to_owned()),
        ("DATABASE_SSLROOTCERT", ca.display().to_string()),
        ("REDIS_URL", format!("redis://localhost:{}", redis.port)),
        ("REDIS_PASSWORD", login.redis_password.to_owned()),
        ("REDIS_TLS", "true".to_owned()),
        ("REDIS_CA_CERT", ca.display().to_string()),
    ]
}

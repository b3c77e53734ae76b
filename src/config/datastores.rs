//! Where Postgres and Redis are: a whole URL (`DATABASE_URL`, `REDIS_URL`),
//! or its parts, each part given overriding the URL's. Parts let a password
//! live in one secret (`DATABASE_PASSWORD`, `REDIS_PASSWORD`) while the rest
//! is plain configuration, and TLS be asked for by name
//! (`DATABASE_SSLMODE=verify-full`, `REDIS_TLS=true`). The CA that signs a
//! server's certificate is a file (`DATABASE_SSLROOTCERT`, `REDIS_CA_CERT`) or
//! the PEM itself (`DATABASE_SSLROOTCERT_PEM`, `REDIS_CA_CERT_PEM`): a task
//! whose only way in is its environment, such as a Fargate worker given the
//! host's CA from Parameter Store.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::ValueEnum;
use url::Url;

/// How Postgres is reached over TLS (libpq's `sslmode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

use crate::store::ROOT_CERT_PEM_PARAMETER;

/// A CA given as text must be one: a typo, an empty parameter or a path given
/// in its place is a configuration error now, not a TLS failure later.
fn check_pem(name: &str, pem: &str) -> anyhow::Result<()> {
    let pem = pem.trim();
    if !(pem.starts_with("-----BEGIN CERTIFICATE-----")
        && pem.ends_with("-----END CERTIFICATE-----"))
    {
        bail!(
            "{name} is not a PEM certificate (-----BEGIN CERTIFICATE----- ... -----END CERTIFICATE-----)"
        );
    }
    Ok(())
}

/// Postgres, as given.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DatabaseSettings {
    /// Postgres connection URL: the truth and the backlog. Or give its parts
    /// (DATABASE_HOST...), which override the URL's.
    #[arg(
        id = "database-url",
        long = "database-url",
        env = "DATABASE_URL",
        hide_env_values = true
    )]
    pub url: Option<String>,

    /// Postgres host (instead of, or overriding, DATABASE_URL's).
    #[arg(long, env = "DATABASE_HOST")]
    pub database_host: Option<String>,

    /// Postgres port (default 5432).
    #[arg(long, env = "DATABASE_PORT")]
    pub database_port: Option<u16>,

    /// Database name (default crawlfleet).
    #[arg(long, env = "DATABASE_NAME")]
    pub database_name: Option<String>,

    /// Postgres user (default crawlfleet).
    #[arg(long, env = "DATABASE_USER")]
    pub database_user: Option<String>,

    /// Postgres password: kept in one secret, never in a URL typed by hand.
    #[arg(long, env = "DATABASE_PASSWORD", hide_env_values = true)]
    pub database_password: Option<String>,

    /// TLS to Postgres: disable, prefer, require, verify-ca or verify-full
    /// (the server's certificate signed by DATABASE_SSLROOTCERT and naming the host).
    #[arg(long, env = "DATABASE_SSLMODE", value_enum)]
    pub database_sslmode: Option<SslMode>,

    /// CA bundle that signs the Postgres server's certificate (RDS: the image's
    /// /usr/local/share/crawlfleet/rds-ca-bundle.pem).
    #[arg(long, env = "DATABASE_SSLROOTCERT")]
    pub database_sslrootcert: Option<PathBuf>,

    /// The same CA as PEM text, instead of a file: when both are given, this
    /// one (a task definition names the image's RDS bundle whatever the mode;
    /// with the host's datastores it adds the host's CA as text). Carried to
    /// the connection in the URL's `sslrootcert_pem` (`store::connect_options`).
    #[arg(long, env = "DATABASE_SSLROOTCERT_PEM")]
    pub database_sslrootcert_pem: Option<String>,

    /// How long a starting process waits for Postgres to answer (containers
    /// start together) before it stops with exit code 3 (default 120).
    #[arg(long, env = "DATABASE_WAIT_SECS")]
    pub database_wait_secs: Option<u64>,
}

impl DatabaseSettings {
    /// How long start-up waits for Postgres (`DATABASE_WAIT_SECS`).
    pub fn wait(&self) -> std::time::Duration {
        std::time::Duration::from_secs(
            self.database_wait_secs
                .unwrap_or(crate::store::CONNECT_WAIT.as_secs()),
        )
    }

    /// The URL sqlx connects with.
    pub fn resolve(&self) -> anyhow::Result<String> {
        let mut url = match (&self.url, &self.database_host) {
            (Some(url), _) => Url::parse(url).context("DATABASE_URL is not a URL")?,
            (None, Some(_)) => {
                Url::parse("postgres://crawlfleet@localhost:5432/crawlfleet").expect("a valid URL")
            }
            (None, None) => bail!("set DATABASE_URL, or DATABASE_HOST (and its other parts)"),
        };
        if !matches!(url.scheme(), "postgres" | "postgresql") {
            bail!("DATABASE_URL must be a postgres:// URL");
        }
        if let Some(host) = &self.database_host {
            url.set_host(Some(host))
                .with_context(|| format!("DATABASE_HOST {host:?} is not a host name"))?;
        }
        if let Some(port) = self.database_port {
            let _ = url.set_port(Some(port));
        }
        if let Some(name) = &self.database_name {
            url.set_path(name);
        }
        if let Some(user) = &self.database_user {
            let _ = url.set_username(user);
        }
        if let Some(password) = &self.database_password {
            let _ = url.set_password(Some(password));
        }
        let mut query: Vec<(String, String)> = url
            .query_pairs()
            .filter(|(k, _)| {
                !(self.database_sslmode.is_some() && k == "sslmode"
                    || (self.database_sslrootcert.is_some()
                        || self.database_sslrootcert_pem.is_some())
                        && (k == "sslrootcert" || k == ROOT_CERT_PEM_PARAMETER))
            })
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        if let Some(mode) = self.database_sslmode {
            query.push(("sslmode".into(), mode.as_str().into()));
        }
        if let Some(pem) = &self.database_sslrootcert_pem {
            check_pem("DATABASE_SSLROOTCERT_PEM", pem)?;
            query.push((ROOT_CERT_PEM_PARAMETER.into(), pem.clone()));
        } else if let Some(root) = &self.database_sslrootcert {
            if !root.is_file() {
                bail!(
                    "DATABASE_SSLROOTCERT {} is not a readable file",
                    root.display()
                );
            }
            query.push(("sslrootcert".into(), root.display().to_string()));
        }
        url.set_query(None);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        Ok(url.into())
    }
}

/// Redis, as given.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RedisSettings {
    /// Redis connection URL (`redis://:password@host:port`, `rediss://` for TLS):
    /// job transport. Or give its parts (REDIS_HOST...), which override the URL's.
    #[arg(
        id = "redis-url",
        long = "redis-url",
        env = "REDIS_URL",
        hide_env_values = true
    )]
    pub url: Option<String>,

    /// Redis host (instead of, or overriding, REDIS_URL's).
    #[arg(long, env = "REDIS_HOST")]
    pub redis_host: Option<String>,

    /// Redis port (default 6379).
    #[arg(long, env = "REDIS_PORT")]
    pub redis_port: Option<u16>,

    /// Redis ACL user (none: the default user).
    #[arg(long, env = "REDIS_USERNAME")]
    pub redis_username: Option<String>,

    /// Redis password (AUTH): kept in one secret.
    #[arg(long, env = "REDIS_PASSWORD", hide_env_values = true)]
    pub redis_password: Option<String>,

    /// TLS to Redis (`rediss://`), the server's certificate verified.
    #[arg(long, env = "REDIS_TLS")]
    pub redis_tls: Option<bool>,

    /// CA bundle that signs the Redis server's certificate (default: the
    /// system's roots).
    #[arg(long, env = "REDIS_CA_CERT")]
    pub redis_ca_cert: Option<PathBuf>,

    /// The same CA as PEM text, instead of a file: when both are given, this one.
    #[arg(long, env = "REDIS_CA_CERT_PEM")]
    pub redis_ca_cert_pem: Option<String>,
}

impl RedisSettings {
    /// The URL redis-rs connects with.
    pub fn resolve(&self) -> anyhow::Result<String> {
        let mut url = match (&self.url, &self.redis_host) {
            (Some(url), _) => Url::parse(url).context("REDIS_URL is not a URL")?,
            (None, Some(_)) => Url::parse("redis://localhost:6379").expect("a valid URL"),
            (None, None) => bail!("set REDIS_URL, or REDIS_HOST (and its other parts)"),
        };
        if !matches!(url.scheme(), "redis" | "rediss") {
            bail!("REDIS_URL must be a redis:// or rediss:// URL");
        }
        if let Some(tls) = self.redis_tls {
            let scheme = if tls { "rediss" } else { "redis" };
            // Both are "special" alike to the url crate: the change is allowed.
            url = Url::parse(&url.as_str().replacen(url.scheme(), scheme, 1))
                .expect("the same URL with another scheme");
        }
        if let Some(host) = &self.redis_host {
            url.set_host(Some(host))
                .with_context(|| format!("REDIS_HOST {host:?} is not a host name"))?;
        }
        if let Some(port) = self.redis_port {
            let _ = url.set_port(Some(port));
        }
        if let Some(user) = &self.redis_username {
            let _ = url.set_username(user);
        }
        if let Some(password) = &self.redis_password {
            let _ = url.set_password(Some(password));
        }
        if let Some(ca) = &self.redis_ca_cert
            && self.redis_ca_cert_pem.is_none()
            && !ca.is_file()
        {
            bail!("REDIS_CA_CERT {} is not a readable file", ca.display());
        }
        if let Some(pem) = &self.redis_ca_cert_pem {
            check_pem("REDIS_CA_CERT_PEM", pem)?;
        }
        Ok(url.into())
    }

    /// The CA that signs the Redis server's certificate, as PEM bytes, when one
    /// is given (else the system's roots are trusted).
    pub fn root_cert(&self) -> anyhow::Result<Option<Vec<u8>>> {
        match (&self.redis_ca_cert_pem, &self.redis_ca_cert) {
            (Some(pem), _) => Ok(Some(pem.clone().into_bytes())),
            (None, Some(ca)) => std::fs::read(ca)
                .with_context(|| format!("reading REDIS_CA_CERT {}", ca.display()))
                .map(Some),
            (None, None) => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn database(url: Option<&str>) -> DatabaseSettings {
        DatabaseSettings {
            url: url.map(str::to_owned),
            ..DatabaseSettings::default()
        }
    }

    #[test]
    fn a_database_url_is_taken_as_given_and_parts_override_it() {
        let given = "postgres://app:old@db.internal:5433/crawl?application_name=cf";
        assert_eq!(database(Some(given)).resolve().unwrap(), given);
        let mut settings = database(Some(given));
        settings.database_password = Some("n3w p@ss/word".into());
        settings.database_sslmode = Some(SslMode::VerifyFull);
        assert_eq!(
            settings.resolve().unwrap(),
            "postgres://app:n3w%20p%40ss%2Fword@db.internal:5433/crawl?application_name=cf&sslmode=verify-full"
        );
    }

    #[test]
    fn parts_alone_make_the_url_with_defaults_for_the_rest() {
        let settings = DatabaseSettings {
            database_host: Some("crawlfleet.abc.ap-northeast-2.rds.amazonaws.com".into()),
            database_password: Some("s3cret".into()),
            database_sslmode: Some(SslMode::Require),
            ..DatabaseSettings::default()
        };
        assert_eq!(
            settings.resolve().unwrap(),
            "postgres://crawlfleet:s3cret@crawlfleet.abc.ap-northeast-2.rds.amazonaws.com:5432/crawlfleet?sslmode=require"
        );
        let none = DatabaseSettings::default().resolve().unwrap_err();
        assert!(none.to_string().contains("DATABASE_HOST"), "{none}");
        let bad = database(Some("mysql://x@y/z")).resolve().unwrap_err();
        assert!(bad.to_string().contains("postgres://"), "{bad}");
        let missing_ca = DatabaseSettings {
            database_sslrootcert: Some("/nonexistent/ca.pem".into()),
            ..database(Some("postgres://a@b/c"))
        };
        assert!(
            missing_ca
                .resolve()
                .unwrap_err()
                .to_string()
                .contains("DATABASE_SSLROOTCERT")
        );
    }

    const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    #[test]
    fn a_ca_given_as_text_rides_in_the_url_and_must_be_a_certificate() {
        let settings = DatabaseSettings {
            database_sslmode: Some(SslMode::VerifyFull),
            // A file that is not there: the text wins, the file is not looked at.
            database_sslrootcert: Some("/nonexistent/rds-ca-bundle.pem".into()),
            database_sslrootcert_pem: Some(PEM.into()),
            ..database(Some("postgres://a@db.internal/c?sslrootcert=/old.pem"))
        };
        let url = Url::parse(&settings.resolve().unwrap()).unwrap();
        let query: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        assert_eq!(
            query,
            [
                ("sslmode".to_owned(), "verify-full".to_owned()),
                (ROOT_CERT_PEM_PARAMETER.to_owned(), PEM.to_owned())
            ],
            "the files the URL and DATABASE_SSLROOTCERT named give way to the text"
        );
        for bad in [
            "",
            "/etc/ssl/ca.pem",
            "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----",
        ] {
            let settings = DatabaseSettings {
                database_sslrootcert_pem: Some(bad.into()),
                ..database(Some("postgres://a@b/c"))
            };
            let error = settings.resolve().unwrap_err().to_string();
            assert!(
                error.contains("DATABASE_SSLROOTCERT_PEM"),
                "{bad:?}: {error}"
            );
        }
        let redis = RedisSettings {
            url: Some("rediss://h:6379".into()),
            redis_ca_cert: Some("/nonexistent/ca.pem".into()),
            redis_ca_cert_pem: Some(PEM.into()),
            ..RedisSettings::default()
        };
        assert_eq!(redis.root_cert().unwrap(), Some(PEM.as_bytes().to_vec()));
        let bad = RedisSettings {
            redis_ca_cert_pem: Some("ca.pem".into()),
            ..redis
        };
        assert!(
            bad.resolve()
                .unwrap_err()
                .to_string()
                .contains("REDIS_CA_CERT_PEM")
        );
        assert_eq!(RedisSettings::default().root_cert().unwrap(), None);
    }

    #[test]
    fn redis_parts_set_the_password_user_and_tls() {
        let settings = RedisSettings {
            url: Some("redis://127.0.0.1:6379".into()),
            redis_password: Some("p/w:1".into()),
            redis_tls: Some(true),
            ..RedisSettings::default()
        };
        assert_eq!(
            settings.resolve().unwrap(),
            "rediss://:p%2Fw%3A1@127.0.0.1:6379"
        );
        let settings = RedisSettings {
            redis_host: Some("master.crawlfleet.cache.amazonaws.com".into()),
            redis_username: Some("crawlfleet".into()),
            redis_password: Some("token".into()),
            redis_tls: Some(true),
            ..RedisSettings::default()
        };
        assert_eq!(
            settings.resolve().unwrap(),
            "rediss://crawlfleet:token@master.crawlfleet.cache.amazonaws.com:6379"
        );
        let plain = RedisSettings {
            url: Some("rediss://h:6380".into()),
            redis_tls: Some(false),
            ..RedisSettings::default()
        };
        assert_eq!(plain.resolve().unwrap(), "redis://h:6380");
        assert!(RedisSettings::default().resolve().is_err());
    }
}

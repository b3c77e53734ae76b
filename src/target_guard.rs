//! The SSRF guard: before any request crawlfleet makes for a site (and after
//! each redirect in http/json modes), the target is resolved and refused if
//! any of its addresses is loopback, private, link-local, unique-local,
//! multicast or a cloud metadata address, unless `ALLOW_PRIVATE_TARGETS=true`.
//! Shared by the api (a site's URL is checked when stored) and the worker.

use std::{net::SocketAddr, sync::Arc};

use url::{Host, Url};

use crate::{config::AllowedTarget, domain::target};

/// A target crawlfleet will not reach.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error(
        "{host} resolves to {ip}, {why}; set ALLOW_PRIVATE_TARGETS=true to allow private targets"
    )]
    Address {
        host: String,
        ip: std::net::IpAddr,
        why: &'static str,
    },
    #[error("{0} is not an http or https URL with a host")]
    NotHttp(String),
    #[error("{host} does not resolve: {reason}")]
    Unresolvable { host: String, reason: String },
}

#[derive(Debug, Clone)]
pub struct TargetGuard {
    allow_private: bool,
    /// Private addresses let through even so.
    allowed: Arc<[AllowedTarget]>,
}

impl TargetGuard {
    pub fn new(allow_private: bool, allowed: &[AllowedTarget]) -> Self {
        Self {
            allow_private,
            allowed: allowed.into(),
        }
    }

    pub fn from_config(config: &crate::config::Config) -> Self {
        Self::new(
            config.allow_private_targets,
            &config.allowed_private_targets,
        )
    }

    /// Whether every target is allowed (`ALLOW_PRIVATE_TARGETS=true`).
    pub fn is_open(&self) -> bool {
        self.allow_private
    }

    /// Resolves `url`'s host and refuses it if any address is forbidden.
    pub async fn check(&self, url: &Url) -> Result<(), Refused> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Refused::NotHttp(url.to_string()));
        }
        let port = url.port_or_known_default().unwrap_or(80);
        match url.host() {
            None => Err(Refused::NotHttp(url.to_string())),
            Some(Host::Ipv4(ip)) => self.judge(&ip.to_string(), [SocketAddr::new(ip.into(), port)]),
            Some(Host::Ipv6(ip)) => self.judge(&ip.to_string(), [SocketAddr::new(ip.into(), port)]),
            Some(Host::Domain(name)) => {
                self.resolve(name, port).await?;
                Ok(())
            }
        }
    }

    /// Resolves `host` and returns its addresses when every one is allowed.
    pub async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, Refused> {
        let addrs = lookup(host, port).await?;
        self.judge(host, addrs.iter().copied())?;
        Ok(addrs)
    }

    /// Like [`Self::resolve`] for a resolver that is not told the port (reqwest's):
    /// an `ALLOWED_PRIVATE_TARGETS` entry admits its address on any port here,
    /// because [`Self::check`] judged the URL with its port before the request.
    async fn resolve_without_port(&self, host: &str) -> Result<Vec<SocketAddr>, Refused> {
        let addrs = lookup(host, 0).await?;
        self.judge_with(host, addrs.iter().copied(), |allowed, addr| {
            allowed.admits_ip(addr.ip())
        })?;
        Ok(addrs)
    }

    fn judge(
        &self,
        host: &str,
        addrs: impl IntoIterator<Item = SocketAddr>,
    ) -> Result<(), Refused> {
        self.judge_with(host, addrs, AllowedTarget::admits)
    }

    fn judge_with(
        &self,
        host: &str,
        addrs: impl IntoIterator<Item = SocketAddr>,
        admits: impl Fn(&AllowedTarget, SocketAddr) -> bool,
    ) -> Result<(), Refused> {
        if self.allow_private {
            return Ok(());
        }
        for addr in addrs {
            if self.allowed.iter().any(|a| admits(a, addr)) {
                continue;
            }
            if let Some(why) = target::refusal(addr.ip()) {
                return Err(Refused::Address {
                    host: host.to_owned(),
                    ip: addr.ip(),
                    why,
                });
            }
        }
        Ok(())
    }

    /// A DNS resolver for reqwest that refuses names resolving to forbidden
    /// addresses, so the connection itself is guarded, not only the check before it.
    pub fn resolver(&self) -> Arc<GuardedResolver> {
        Arc::new(GuardedResolver {
            guard: self.clone(),
        })
    }
}

async fn lookup(host: &str, port: u16) -> Result<Vec<SocketAddr>, Refused> {
    let unresolvable = |reason: String| Refused::Unresolvable {
        host: host.to_owned(),
        reason,
    };
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| unresolvable(e.to_string()))?
        .collect();
    if addrs.is_empty() {
        return Err(unresolvable("no addresses".into()));
    }
    Ok(addrs)
}

pub struct GuardedResolver {
    guard: TargetGuard,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = self.guard.clone();
        Box::pin(async move {
            let addrs = guard
                .resolve_without_port(name.as_str())
                .await
                .map_err(|e| -> Box<dyn std::error::Error + Send + Sync> { Box::new(e) })?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn literal_and_resolved_private_targets_are_refused_unless_allowed() {
        let guard = TargetGuard::new(false, &[]);
        for url in [
            "http://169.254.169.254/latest/meta-data/",
            "http://10.0.0.1/",
            "http://[::1]:8080/",
            "http://localhost:3000/",
        ] {
            let refused = guard.check(&Url::parse(url).unwrap()).await;
            assert!(
                matches!(refused, Err(Refused::Address { .. })),
                "{url}: {refused:?}"
            );
        }
        let open = TargetGuard::new(true, &[]);
        let url = |u: &str| Url::parse(u).unwrap();
        assert!(open.check(&url("http://localhost:1/")).await.is_ok());
        let one = TargetGuard::new(false, &["127.0.0.1:8080".parse().unwrap()]);
        assert!(one.check(&url("http://127.0.0.1:8080/")).await.is_ok());
        assert!(one.check(&url("http://127.0.0.1:8081/")).await.is_err());
        // reqwest's resolver is not told the port; check() judged it already.
        let resolved = one.resolve_without_port("127.0.0.1").await.unwrap();
        assert_eq!(resolved[0].ip(), std::net::Ipv4Addr::LOCALHOST);
        assert!(guard.resolve_without_port("127.0.0.1").await.is_err());
        assert!(matches!(
            guard
                .check(&Url::parse("file:///etc/passwd").unwrap())
                .await,
            Err(Refused::NotHttp(_))
        ));
    }
}

//! The SSRF guard: the one judgement of every address crawlfleet connects to
//! for a site (targets, redirects, proxies, every connection Chrome opens,
//! and any outbound URL to come). A host is resolved here, every address it
//! has is judged by `domain::target`, and callers connect only to the
//! addresses judged, so a name cannot resolve one way for the check and
//! another way for the connection. IP literals are judged as IPs, in every
//! notation a URL allows (`127.1`, `0x7f000001`, `[::ffff:127.0.0.1]`).
//! `ALLOW_PRIVATE_TARGETS=true` lets everything through; entries of
//! `ALLOWED_PRIVATE_TARGETS` let one address (or address and port) through.

use std::{
    net::{IpAddr, SocketAddr},
    sync::Arc,
};

use url::{Host, Url};

use crate::domain::target::{self, Rule};

/// A target crawlfleet will not reach. What it says names the host as given
/// and the rule that refused it, never what an internal name resolved to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("{host} is refused: it reaches {rule}, which crawlfleet does not connect to")]
    Address { host: String, rule: Rule },
    /// The URL's scheme: only http and https URLs with a host are reached.
    #[error("a {0}: URL is not crawled: only http and https URLs with a host are")]
    NotHttp(String),
    #[error("{host} is not a valid host name")]
    InvalidHost { host: String },
    #[error("{host} does not resolve")]
    Unresolvable { host: String },
}

impl Refused {
    /// Whether the refusal may not hold later: a name that does not resolve
    /// now may resolve later; every other refusal is for good.
    pub fn may_pass_later(&self) -> bool {
        matches!(self, Refused::Unresolvable { .. })
    }
}

/// A private address let through the SSRF guard: any port, or one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllowedTarget {
    Ip(std::net::IpAddr),
    Socket(std::net::SocketAddr),
}

impl AllowedTarget {
    pub fn admits(&self, addr: std::net::SocketAddr) -> bool {
        match self {
            AllowedTarget::Ip(ip) => *ip == addr.ip(),
            AllowedTarget::Socket(socket) => *socket == addr,
        }
    }

    /// Whether the entry names `ip`, on whatever port.
    pub fn admits_ip(&self, ip: std::net::IpAddr) -> bool {
        match self {
            AllowedTarget::Ip(allowed) => *allowed == ip,
            AllowedTarget::Socket(socket) => socket.ip() == ip,
        }
    }
}

impl std::str::FromStr for AllowedTarget {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        text.parse()
            .map(AllowedTarget::Socket)
            .or_else(|_| text.trim_matches(['[', ']']).parse().map(AllowedTarget::Ip))
            .map_err(|_| format!("{text:?} is not an IP address or ip:port"))
    }
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

    /// Whether every target is allowed (`ALLOW_PRIVATE_TARGETS=true`).
    pub fn is_open(&self) -> bool {
        self.allow_private
    }

    /// Judges `url`: an http(s) URL whose host and port may be reached.
    pub async fn check(&self, url: &Url) -> Result<(), Refused> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Refused::NotHttp(url.scheme().to_owned()));
        }
        let Some(host) = url.host() else {
            return Err(Refused::NotHttp(url.scheme().to_owned()));
        };
        let port = url.port_or_known_default().unwrap_or(80);
        self.resolve_host(host.to_owned(), port).await.map(drop)
    }

    /// The addresses to connect to for `host` (a name, an IP, or a bracketed
    /// IPv6 as in a URL) on `port`, each of them judged: a connection is made
    /// to these and no others.
    pub async fn addresses(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, Refused> {
        self.resolve_host(parse_host(host)?, port).await
    }

    async fn resolve_host(
        &self,
        host: Host<String>,
        port: u16,
    ) -> Result<Vec<SocketAddr>, Refused> {
        let (shown, addrs) = match host {
            Host::Ipv4(ip) => (ip.to_string(), vec![SocketAddr::new(ip.into(), port)]),
            Host::Ipv6(ip) => (ip.to_string(), vec![SocketAddr::new(ip.into(), port)]),
            Host::Domain(name) => {
                let addrs = lookup(&name, port).await?;
                (name, addrs)
            }
        };
        self.judge(&shown, &addrs, AllowedTarget::admits)?;
        Ok(addrs)
    }

    /// Like [`Self::addresses`] for a resolver that is not told the port
    /// (reqwest's): an `ALLOWED_PRIVATE_TARGETS` entry admits its address on
    /// any port here, because [`Self::check`] judged the URL with its port
    /// before the request.
    async fn resolve_without_port(&self, host: &str) -> Result<Vec<SocketAddr>, Refused> {
        let host = parse_host(host)?;
        let shown = host.to_string();
        let addrs = match host {
            Host::Ipv4(ip) => vec![SocketAddr::new(ip.into(), 0)],
            Host::Ipv6(ip) => vec![SocketAddr::new(ip.into(), 0)],
            Host::Domain(name) => lookup(&name, 0).await?,
        };
        self.judge(&shown, &addrs, |allowed, addr| allowed.admits_ip(addr.ip()))?;
        Ok(addrs)
    }

    fn judge(
        &self,
        host: &str,
        addrs: &[SocketAddr],
        admits: impl Fn(&AllowedTarget, SocketAddr) -> bool,
    ) -> Result<(), Refused> {
        if self.allow_private {
            return Ok(());
        }
        for &addr in addrs {
            if self.allowed.iter().any(|a| admits(a, addr)) {
                continue;
            }
            if let Some(rule) = target::refusal(addr.ip()) {
                return Err(Refused::Address {
                    host: host.to_owned(),
                    rule,
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

/// A host as a URL or a SOCKS request names it: an IPv4 address in any
/// notation URLs allow, an IPv6 address with or without brackets, or a name.
fn parse_host(host: &str) -> Result<Host<String>, Refused> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(match ip {
            IpAddr::V4(ip) => Host::Ipv4(ip),
            IpAddr::V6(ip) => Host::Ipv6(ip),
        });
    }
    Host::parse(host).map_err(|_| Refused::InvalidHost {
        host: host.chars().take(100).collect(),
    })
}

async fn lookup(host: &str, port: u16) -> Result<Vec<SocketAddr>, Refused> {
    let unresolvable = || Refused::Unresolvable {
        host: host.to_owned(),
    };
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|_| unresolvable())?
        .collect();
    if addrs.is_empty() {
        return Err(unresolvable());
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

    fn url(u: &str) -> Url {
        Url::parse(u).unwrap()
    }

    fn range_of(refused: Result<(), Refused>) -> Option<&'static str> {
        match refused {
            Err(Refused::Address { rule, .. }) => Some(rule.range),
            _ => None,
        }
    }

    /// Every notation of an address a URL accepts is judged as that address.
    #[tokio::test]
    async fn ip_literals_are_judged_in_every_notation() {
        let guard = TargetGuard::new(false, &[]);
        for (target, range) in [
            ("http://127.0.0.1/", "127.0.0.0/8"),
            ("http://127.1/", "127.0.0.0/8"),
            ("http://2130706433/", "127.0.0.0/8"),
            ("http://0x7f000001/", "127.0.0.0/8"),
            ("http://0x7f.0.0.1/", "127.0.0.0/8"),
            ("http://0177.0.0.1/", "127.0.0.0/8"),
            ("http://0/", "0.0.0.0/8"),
            ("http://[::1]:8080/", "::1/128"),
            ("http://[0:0:0:0:0:0:0:1]/", "::1/128"),
            ("http://[::ffff:127.0.0.1]/", "::ffff:0:0/96"),
            ("http://[::ffff:7f00:1]/", "::ffff:0:0/96"),
            ("http://[::ffff:0:127.0.0.1]/", "::ffff:0:0:0/96"),
            ("http://[::127.0.0.1]/", "::/96"),
            ("http://[64:ff9b::127.0.0.1]/", "127.0.0.0/8"),
            ("http://[2002:7f00:1::]/", "127.0.0.0/8"),
            ("http://[fd00:ec2::254]/", "fd00:ec2::254"),
            (
                "http://169.254.169.254/latest/meta-data/",
                "169.254.169.254",
            ),
            ("http://0xa9fea9fe/", "169.254.169.254"),
            ("https://192.0.0.1/", "192.0.0.0/29"),
            ("https://198.18.0.1/", "198.18.0.0/15"),
        ] {
            assert_eq!(
                range_of(guard.check(&url(target)).await),
                Some(range),
                "{target}"
            );
        }
        for (host, range) in [
            ("[::1]", "::1/128"),
            ("::1", "::1/128"),
            ("[::ffff:127.0.0.1]", "::ffff:0:0/96"),
            ("127.1", "127.0.0.0/8"),
            ("fd00:ec2::254", "fd00:ec2::254"),
        ] {
            let judged = guard.addresses(host, 80).await.map(drop);
            assert_eq!(range_of(judged), Some(range), "{host}");
        }
    }

    #[tokio::test]
    async fn names_are_judged_by_what_they_resolve_to_and_the_refusal_names_no_address() {
        let guard = TargetGuard::new(false, &[]);
        let refused = guard
            .check(&url("http://localhost:3000/"))
            .await
            .unwrap_err();
        let message = refused.to_string();
        assert!(message.contains("loopback"), "{message}");
        assert!(
            !message.contains("127.0.0.1") && !message.contains("::1"),
            "{message}"
        );
        assert!(matches!(
            guard.addresses("not a host", 80).await,
            Err(Refused::InvalidHost { .. })
        ));
        assert!(matches!(
            guard.check(&url("file:///etc/passwd")).await,
            Err(Refused::NotHttp(_))
        ));
    }

    #[tokio::test]
    async fn private_targets_pass_when_allowed_all_or_one_by_one() {
        let open = TargetGuard::new(true, &[]);
        assert!(open.check(&url("http://localhost:1/")).await.is_ok());
        let one = TargetGuard::new(false, &["127.0.0.1:8080".parse().unwrap()]);
        assert!(one.check(&url("http://127.0.0.1:8080/")).await.is_ok());
        assert!(one.check(&url("http://127.0.0.1:8081/")).await.is_err());
        assert_eq!(
            one.addresses("[::ffff:127.0.0.1]", 8080).await.map(drop),
            Err(Refused::Address {
                host: "::ffff:127.0.0.1".into(),
                rule: target::refusal("::ffff:0:1".parse().unwrap()).unwrap(),
            }),
            "an allowed IPv4 address is not allowed in IPv6 clothing"
        );
        // reqwest's resolver is not told the port; check() judged it already.
        let resolved = one.resolve_without_port("127.0.0.1").await.unwrap();
        assert_eq!(resolved[0].ip(), std::net::Ipv4Addr::LOCALHOST);
        let closed = TargetGuard::new(false, &[]);
        assert!(closed.resolve_without_port("127.0.0.1").await.is_err());
    }
}

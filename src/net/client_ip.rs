//! Who sent a request. Behind a load balancer every connection comes from the
//! balancer; the client is in `X-Forwarded-For`, a header anyone can also
//! write. It is believed only from the proxies the operator names
//! (`TRUSTED_PROXIES`), and read from the right: each trusted hop appends the
//! address it saw, so the rightmost address no trusted proxy vouches for is the
//! client. Everything left of it may be forged.

use std::net::{IpAddr, SocketAddr};

use axum::{
    extract::{ConnectInfo, Request},
    http::HeaderMap,
};
use ipnet::IpNet;

/// The client of a request, as an extension every handler and log may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientIp(pub IpAddr);

/// The proxies whose `X-Forwarded-For` is believed.
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    pub fn new(nets: Vec<IpNet>) -> Self {
        Self(nets)
    }

    /// Whether `ip` is one of the trusted proxies.
    pub fn trusts(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client of a request that came over a connection from `peer`.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.trusts(peer) {
            return peer;
        }
        let mut client = peer;
        let hops = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .collect::<Vec<_>>();
        for hop in hops.into_iter().rev() {
            let Ok(ip) = hop.trim().parse::<IpAddr>() else {
                // Garbage no trusted proxy wrote: the last good hop stands.
                return client;
            };
            client = ip;
            if !self.trusts(ip) {
                break;
            }
        }
        client
    }

    /// Marks `req` with its [`ClientIp`] (from the connection the server
    /// recorded; a request without one is left unmarked).
    pub fn mark(&self, req: &mut Request) {
        let Some(ConnectInfo(peer)) = req.extensions().get::<ConnectInfo<SocketAddr>>() else {
            return;
        };
        let client = self.client(peer.ip(), req.headers());
        req.extensions_mut().insert(ClientIp(client));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxies(nets: &[&str]) -> TrustedProxies {
        TrustedProxies::new(nets.iter().map(|n| n.parse().unwrap()).collect())
    }

    fn forwarded(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append("x-forwarded-for", value.parse().unwrap());
        }
        headers
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_forwards() {
        let trusted = proxies(&["10.0.0.0/24"]);
        let headers = forwarded(&["1.2.3.4"]);
        assert_eq!(
            trusted.client(ip("203.0.113.9"), &headers),
            ip("203.0.113.9")
        );
        assert_eq!(
            TrustedProxies::default().client(ip("10.0.0.5"), &headers),
            ip("10.0.0.5")
        );
    }

    #[test]
    fn behind_a_trusted_proxy_the_rightmost_untrusted_hop_is_the_client() {
        let trusted = proxies(&["10.0.0.0/24", "10.0.1.0/24"]);
        // The client forged the first entry; the balancer appended the real one.
        let headers = forwarded(&["6.6.6.6, 198.51.100.7"]);
        assert_eq!(trusted.client(ip("10.0.0.5"), &headers), ip("198.51.100.7"));
        // Two trusted hops, split over two headers.
        let headers = forwarded(&["6.6.6.6, 198.51.100.7", "10.0.1.9"]);
        assert_eq!(trusted.client(ip("10.0.0.5"), &headers), ip("198.51.100.7"));
    }

    #[test]
    fn a_trusted_peer_without_or_with_garbage_forwarding_is_itself_or_the_last_good_hop() {
        let trusted = proxies(&["10.0.0.0/24"]);
        assert_eq!(
            trusted.client(ip("10.0.0.5"), &HeaderMap::new()),
            ip("10.0.0.5")
        );
        let headers = forwarded(&["198.51.100.7, not-an-ip"]);
        assert_eq!(trusted.client(ip("10.0.0.5"), &headers), ip("10.0.0.5"));
        let headers = forwarded(&["not-an-ip, 198.51.100.7"]);
        assert_eq!(trusted.client(ip("10.0.0.5"), &headers), ip("198.51.100.7"));
    }

    #[test]
    fn ipv4_mapped_ipv6_peers_match_ipv4_networks() {
        let trusted = proxies(&["127.0.0.0/8"]);
        let headers = forwarded(&["198.51.100.7"]);
        assert_eq!(
            trusted.client(ip("::ffff:127.0.0.1"), &headers),
            ip("198.51.100.7")
        );
    }
}

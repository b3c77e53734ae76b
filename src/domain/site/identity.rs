//! How crawlfleet presents itself to a site: user agent, extra headers and an
//! optional proxy, the same in every render mode.

use std::collections::BTreeMap;

use url::Url;

use super::ProxyPool;
use crate::domain::{FieldError, text};

/// Headers a site may not set: the HTTP client owns them, or another setting does.
const RESERVED_HEADERS: &[(&str, &str)] = &[
    ("host", "is set from the URL"),
    ("content-length", "is set by the HTTP client"),
    ("transfer-encoding", "is set by the HTTP client"),
    ("connection", "is set by the HTTP client"),
    ("user-agent", "use user_agent"),
    ("cookie", "use keep_session to keep cookies"),
    ("proxy-authorization", "give credentials in proxy"),
];
const MAX_HEADERS: usize = 50;
const MAX_HEADER_NAME_CHARS: usize = 256;
const MAX_HEADER_VALUE_CHARS: usize = 4096;
const MAX_USER_AGENT_CHARS: usize = 512;
const MAX_PROXY_CHARS: usize = 2048;

/// Who the crawler says it is, and the way out. Header values and proxy
/// credentials are secrets (an `Authorization`, an API key): never shown,
/// printed or logged; see [`Identity::secrets`].
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// None: the mode's default (Chrome's own, without "Headless"; `crawlfleet/x.y` over HTTP).
    pub user_agent: Option<String>,
    /// Sent with every request, in name order.
    pub headers: BTreeMap<String, String>,
    pub proxy: Option<ProxyUrl>,
    /// Instead of `proxy`: several, weighted, one chosen by its rotation.
    pub pool: Option<ProxyPool>,
}

impl Identity {
    pub fn parse(
        user_agent: Option<String>,
        headers: Option<BTreeMap<String, String>>,
        proxy: Option<String>,
    ) -> Result<Self, FieldError> {
        let user_agent = user_agent
            .map(|ua| text::non_empty(&ua, "user_agent", MAX_USER_AGENT_CHARS).map(str::to_owned))
            .transpose()?;
        let headers = headers.unwrap_or_default();
        if headers.len() > MAX_HEADERS {
            return Err(FieldError::new(
                "headers",
                format!("at most {MAX_HEADERS} headers"),
            ));
        }
        let mut checked = BTreeMap::new();
        for (name, value) in headers {
            // The name is checked before it is part of any field path.
            text::non_empty(&name, "headers", MAX_HEADER_NAME_CHARS)
                .map_err(|e| FieldError::new("headers", format!("a header name {}", e.message)))?;
            let field = format!("headers.{name}");
            text::check(&value, &field, MAX_HEADER_VALUE_CHARS)?;
            let lower = name.to_ascii_lowercase();
            if let Some((_, why)) = RESERVED_HEADERS.iter().find(|(h, _)| *h == lower) {
                return Err(FieldError::new(field, format!("may not be set: {why}")));
            }
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(FieldError::new(field, "is not a valid header name"));
            }
            if http::HeaderValue::from_str(&value).is_err() {
                return Err(FieldError::new(field, "value must be visible ASCII"));
            }
            if value == MASK {
                return Err(FieldError::new(
                    field,
                    "the value is the mask a response shows; send the real one",
                ));
            }
            checked.insert(name, value);
        }
        Ok(Identity {
            user_agent,
            headers: checked,
            proxy: proxy.map(|p| ProxyUrl::parse(&p)).transpose()?,
            pool: None,
        })
    }
}

impl Identity {
    /// Whether the identity holds anything secret: header values, or a
    /// proxy's (or a pool member's) credentials.
    pub fn has_secrets(&self) -> bool {
        !self.headers.is_empty() || self.proxies().any(|p| p.credentials().is_some())
    }

    /// Every proxy pages may go out through: the pool's members, or the proxy.
    pub fn proxies(&self) -> impl Iterator<Item = &ProxyUrl> {
        self.proxy.iter().chain(
            self.pool
                .iter()
                .flat_map(|pool| pool.members().iter().map(|m| &m.proxy)),
        )
    }

    /// The pool pages go out through: the site's pool, or its one proxy as
    /// a pool of one; None: straight out.
    pub fn egress(&self) -> Option<ProxyPool> {
        self.pool
            .clone()
            .or_else(|| self.proxy.clone().map(ProxyPool::single))
    }

    /// The headers as responses show them: names, and [`MASK`] for values.
    pub fn masked_headers(&self) -> BTreeMap<String, String> {
        self.headers
            .keys()
            .map(|name| (name.clone(), MASK.to_owned()))
            .collect()
    }
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("user_agent", &self.user_agent)
            .field("headers", &self.masked_headers())
            .field("proxy", &self.proxy)
            .field("pool", &self.pool)
            .finish()
    }
}

/// A proxy: `http://` or `socks5://` (`socks5h://`: the proxy resolves names),
/// with optional credentials. Its credentials are never shown or logged.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyUrl(Url);

/// What a response shows in place of a secret: a header's value, a proxy's
/// user name and password.
pub const MASK: &str = "***";

impl ProxyUrl {
    pub fn parse(proxy: &str) -> Result<Self, FieldError> {
        let field = "proxy";
        let proxy = text::non_empty(proxy, field, MAX_PROXY_CHARS)?;
        let url = Url::parse(proxy)
            .map_err(|e| FieldError::new(field, format!("is not a valid URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "socks5" | "socks5h") {
            return Err(FieldError::new(
                field,
                "must be an http://, socks5:// or socks5h:// URL",
            ));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(FieldError::new(field, "must name a host"));
        }
        if url.port_or_known_default().is_none() {
            return Err(FieldError::new(field, "must name a port (host:port)"));
        }
        if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
            return Err(FieldError::new(
                field,
                "must be scheme://[user:password@]host:port",
            ));
        }
        if url.password() == Some(MASK) || url.username() == MASK {
            return Err(FieldError::new(
                field,
                "the credentials are the mask a response shows; send the real ones",
            ));
        }
        Ok(Self(url))
    }

    pub fn url(&self) -> &Url {
        &self.0
    }

    pub fn scheme(&self) -> &str {
        self.0.scheme()
    }

    /// The host as the URL writes it (an IPv6 address in brackets).
    pub fn host(&self) -> &str {
        self.0.host_str().expect("checked when accepted")
    }

    /// The proxy's URL (credentials included) with its host and port
    /// replaced by `addr`: how a client reaches the proxy at an address the
    /// SSRF guard judged, instead of resolving its name again.
    pub fn at(&self, addr: std::net::SocketAddr) -> Url {
        let mut url = self.0.clone();
        url.set_ip_host(addr.ip())
            .expect("an http or socks URL has a host");
        url.set_port(Some(addr.port()))
            .expect("an http or socks URL has a port");
        url
    }

    pub fn port(&self) -> u16 {
        self.0
            .port_or_known_default()
            .expect("checked when accepted")
    }

    /// Where the proxy is, without credentials: `scheme://host:port`. Two
    /// proxies at one address are the same party.
    pub fn address(&self) -> String {
        format!("{}://{}:{}", self.scheme(), self.host(), self.port())
    }

    /// User name and password, percent-decoded.
    pub fn credentials(&self) -> Option<(String, String)> {
        if self.0.username().is_empty() {
            return None;
        }
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        };
        Some((
            decode(self.0.username()),
            decode(self.0.password().unwrap_or("")),
        ))
    }

    /// The URL as stored (with its password): for the store and the HTTP client only.
    pub fn expose(&self) -> &str {
        self.0.as_str()
    }

    /// The URL with its user name and password each replaced by [`MASK`]:
    /// what responses and logs show.
    pub fn masked(&self) -> String {
        let mut url = self.0.clone();
        if !url.username().is_empty() || url.password().is_some() {
            let _ = url.set_username(MASK);
            let _ = url.set_password(Some(MASK));
        }
        url.to_string()
    }

    /// Whether `sent` is this proxy as a response showed it (credentials
    /// masked), with or without the trailing slash URLs are written with.
    pub fn is_masked_form(&self, sent: &str) -> bool {
        let sent = sent.trim();
        Url::parse(sent).is_ok_and(|sent| sent.as_str() == self.masked())
    }
}

impl std::fmt::Debug for ProxyUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.masked())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_shows_neither_user_nor_password_anywhere() {
        let proxy = ProxyUrl::parse("http://crawler:s%40cret@proxy.example:3128").unwrap();
        assert_eq!(proxy.masked(), "http://***:***@proxy.example:3128/");
        assert_eq!(format!("{proxy:?}"), proxy.masked());
        assert_eq!(
            proxy.credentials(),
            Some(("crawler".into(), "s@cret".into()))
        );
        assert!(proxy.is_masked_form("http://***:***@proxy.example:3128/"));
        assert!(proxy.is_masked_form("http://***:***@proxy.example:3128"));
        assert!(!proxy.is_masked_form("http://***:***@other.example:3128/"));
        let plain = ProxyUrl::parse("socks5://10.0.0.1:1080").unwrap();
        assert_eq!(plain.masked(), "socks5://10.0.0.1:1080");
        assert!(ProxyUrl::parse("http://***:***@proxy.example:3128").is_err());
    }

    #[test]
    fn proxies_must_be_http_or_socks_with_a_port() {
        assert!(ProxyUrl::parse("socks5://10.0.0.1:1080").is_ok());
        assert!(ProxyUrl::parse("http://proxy.example").is_ok(), "port 80");
        assert!(ProxyUrl::parse("socks5://proxy.example").is_err());
        assert!(ProxyUrl::parse("ftp://proxy.example:21").is_err());
        assert!(ProxyUrl::parse("http://proxy.example:3128/path").is_err());
    }

    #[test]
    fn reserved_or_malformed_headers_name_the_header() {
        let headers =
            |name: &str, value: &str| Some(BTreeMap::from([(name.to_owned(), value.to_owned())]));
        let err = Identity::parse(None, headers("Cookie", "a=b"), None).unwrap_err();
        assert_eq!(err.field, "headers.Cookie");
        let err = Identity::parse(None, headers("X Bad", "v"), None).unwrap_err();
        assert_eq!(err.field, "headers.X Bad");
        let err = Identity::parse(None, headers("X-Ok", "line\nbreak"), None).unwrap_err();
        assert_eq!(err.field, "headers.X-Ok");
        assert!(
            Identity::parse(
                Some("ua/1".into()),
                headers("Accept-Language", "ko-KR"),
                None
            )
            .is_ok()
        );
    }
}

//! Pages over plain HTTP (reqwest, rustls): the site's user agent, headers,
//! proxy and kept cookies; redirects followed one at a time, each target
//! checked by the SSRF guard before it is requested; bodies bounded.

use std::{collections::HashMap, sync::Arc, time::Duration};

use reqwest::{Proxy, StatusCode, header};
use url::Url;

use super::parse_retry_after;
use crate::domain::failure::FailureKind;
use crate::{
    domain::bounds::{Bound, CrawlBounds},
    domain::site::{Identity, ProxyUrl},
    net::target_guard::{Refused, TargetGuard},
    ops::metrics::metrics,
    worker::{error::CrawlError, limiter::SitePace, session::SessionCookies},
};

/// What crawlfleet calls itself over HTTP when a site sets no user agent.
const DEFAULT_USER_AGENT: &str = concat!("crawlfleet/", env!("CARGO_PKG_VERSION"));
const MAX_REDIRECTS: usize = 10;

/// One crawl's HTTP client.
pub struct HttpClient {
    client: reqwest::Client,
    /// What a client through another pool member needs; boxed: inline it
    /// would make every `PageSource` as large.
    routing: Box<Routing>,
    guard: TargetGuard,
    /// The site sets its own Accept header, which then wins over the mode's.
    site_accept: bool,
    /// Taken before each redirect hop (the page's first request takes it
    /// before it is fetched).
    pace: SitePace,
    /// The answer that failed the attempt, kept as its evidence (only a
    /// failure pays for the copy).
    pub failed_answer: Option<Box<(Url, String)>>,
    /// Where the last page fetched was served from (after redirects); boxed:
    /// a `Url` inline would make every `PageSource` as large.
    pub last_url: Option<Box<Url>>,
    /// A bigger body fails the attempt as `page_too_large` (`PAGE_MAX_BYTES`):
    /// a results page this size is a mistake or an attack.
    max_body_bytes: usize,
    /// The proxy requests go out through now, if the site has any.
    proxy: Option<ProxyUrl>,
}

/// The same identity through another pool member: what its client is made of.
struct Routing {
    identity: Identity,
    stuck_timeout: Duration,
    cookies: Arc<SessionCookies>,
    /// A client per pool member routed through so far, by address.
    routed: HashMap<String, reqwest::Client>,
}

/// The way out of a page that is not chosen by a crawl's rotation (a
/// preview, a learning, a robots.txt, a crawl's client before its first
/// page): the site's proxy, or any member of its pool by weight.
pub fn first_way_out(identity: &Identity) -> Option<ProxyUrl> {
    identity.egress().and_then(|pool| {
        pool.pick(|_| false, rand::random::<f64>())
            .map(|member| member.proxy.clone())
    })
}

/// A page as the server sent it.
pub struct Answer {
    pub status: u16,
    /// Where the page was served from (after redirects).
    pub url: Url,
    pub retry_after: Option<Duration>,
    content_type: Option<String>,
    pub body: Vec<u8>,
}

impl HttpClient {
    pub async fn new(
        identity: &Identity,
        guard: TargetGuard,
        stuck_timeout: Duration,
        cookies: Arc<SessionCookies>,
        pace: SitePace,
    ) -> Result<Self, CrawlError> {
        let proxy = first_way_out(identity);
        let client = build(
            identified_client(identity, proxy.as_ref(), &guard, stuck_timeout)
                .await?
                .cookie_provider(cookies.clone()),
        )?;
        let routed = proxy
            .iter()
            .map(|p| (p.address(), client.clone()))
            .collect();
        Ok(Self {
            client,
            routing: Box::new(Routing {
                identity: identity.clone(),
                stuck_timeout,
                cookies,
                routed,
            }),
            guard,
            site_accept: identity
                .headers
                .keys()
                .any(|name| name.eq_ignore_ascii_case("accept")),
            pace,
            failed_answer: None,
            last_url: None,
            max_body_bytes: CrawlBounds::default().page_bytes,
            proxy,
        })
    }

    /// From now on, requests go out through `proxy` (a member of the
    /// site's pool), with the same identity and cookies.
    pub async fn route_through(&mut self, proxy: &ProxyUrl) -> Result<(), CrawlError> {
        if self.proxy.as_ref() == Some(proxy) {
            return Ok(());
        }
        let address = proxy.address();
        let routing = &mut self.routing;
        let client = match routing.routed.get(&address) {
            Some(client) => client.clone(),
            None => {
                let builder = identified_client(
                    &routing.identity,
                    Some(proxy),
                    &self.guard,
                    routing.stuck_timeout,
                )
                .await?;
                let client = build(builder.cookie_provider(routing.cookies.clone()))?;
                routing.routed.insert(address, client.clone());
                client
            }
        };
        self.client = client;
        self.proxy = Some(proxy.clone());
        Ok(())
    }

    /// The same client, refusing a body over `bytes`.
    pub fn with_max_page_bytes(self, bytes: usize) -> Self {
        HttpClient {
            max_body_bytes: bytes,
            ..self
        }
    }

    /// GETs `url`, following redirects; every target passes the guard first,
    /// and every hop after the first waits for the site's pace.
    pub async fn get(&self, url: &Url, accept: &str) -> Result<Answer, CrawlError> {
        let mut url = url.clone();
        for hop in 0..=MAX_REDIRECTS {
            if hop > 0 {
                self.pace.wait().await?;
            }
            self.guard.check(&url).await?;
            let mut request = self.client.get(url.clone());
            if !self.site_accept {
                request = request.header(header::ACCEPT, accept);
            }
            let response = request.send().await.map_err(|e| request_failed(e, &url))?;
            let location = response
                .headers()
                .get(header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .and_then(|l| url.join(l).ok());
            match location {
                Some(next) if response.status().is_redirection() => url = next,
                _ => return read(response, url, self.max_body_bytes).await,
            }
        }
        Err(CrawlError::failed(
            FailureKind::Network,
            format!("more than {MAX_REDIRECTS} redirects from {url}"),
        ))
    }
}

/// A client that presents `identity` (user agent, extra headers), goes out
/// through `proxy` (the site's, or a member of its pool) and connects only
/// where the guard allows, within `timeout` per request; redirects are not
/// followed (each hop is the caller's, past the guard).
pub(super) async fn identified_client(
    identity: &Identity,
    proxy: Option<&ProxyUrl>,
    guard: &TargetGuard,
    timeout: Duration,
) -> Result<reqwest::ClientBuilder, CrawlError> {
    let mut headers = header::HeaderMap::new();
    for (name, value) in &identity.headers {
        let (Ok(name), Ok(value)) = (
            header::HeaderName::from_bytes(name.as_bytes()),
            header::HeaderValue::from_str(value),
        ) else {
            return Err(CrawlError::failed(
                FailureKind::Misconfigured,
                format!("header {name} is invalid"),
            ));
        };
        headers.insert(name, value);
    }
    let mut builder = reqwest::Client::builder()
        .user_agent(identity.user_agent.as_deref().unwrap_or(DEFAULT_USER_AGENT))
        .default_headers(headers)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .dns_resolver(guard.resolver());
    if let Some(proxy) = proxy {
        // The proxy is reached at an address the guard judged, never at
        // one reqwest would look up (or take as a literal) by itself.
        let judged = guard.addresses(proxy.host(), proxy.port()).await?;
        let reached = Proxy::all(proxy.at(judged[0]).as_str()).map_err(|e| {
            CrawlError::failed(FailureKind::Misconfigured, format!("proxy {proxy:?}: {e}"))
        })?;
        builder = builder.proxy(reached);
    } else {
        // Only a site's own proxy: none from the environment.
        builder = builder.no_proxy();
    }
    Ok(builder)
}

pub(super) fn build(builder: reqwest::ClientBuilder) -> Result<reqwest::Client, CrawlError> {
    builder.build().map_err(|e| {
        CrawlError::failed(
            FailureKind::Misconfigured,
            format!("building the HTTP client: {e}"),
        )
    })
}

async fn read(
    mut response: reqwest::Response,
    url: Url,
    max_body_bytes: usize,
) -> Result<Answer, CrawlError> {
    let status = response.status();
    let headers = response.headers();
    let retry_after = (status == StatusCode::TOO_MANY_REQUESTS
        || status == StatusCode::SERVICE_UNAVAILABLE)
        .then(|| headers.get(header::RETRY_AFTER))
        .flatten()
        .and_then(|v| v.to_str().ok())
        .and_then(parse_retry_after);
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| request_failed(e, &url))?
    {
        if body.len() + chunk.len() > max_body_bytes {
            metrics().count_bound(Bound::PageBytes, 1);
            return Err(CrawlError::failed(
                FailureKind::PageTooLarge,
                format!(
                    "the page at {url} is larger than the {max_body_bytes} bytes a page may have"
                ),
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Answer {
        status: status.as_u16(),
        url,
        retry_after,
        content_type,
        body,
    })
}

fn request_failed(e: reqwest::Error, url: &Url) -> CrawlError {
    // The guarded resolver refused the name while connecting.
    let mut source: Option<&dyn std::error::Error> = Some(&e);
    while let Some(err) = source {
        if let Some(refused) = err.downcast_ref::<Refused>() {
            return refused.clone().into();
        }
        source = err.source();
    }
    if e.is_timeout() {
        CrawlError::failed(
            FailureKind::Stuck,
            format!("stuck: no answer in time at {url}"),
        )
    } else {
        CrawlError::failed(FailureKind::Network, format!("requesting {url}: {e}"))
    }
}

impl HttpClient {
    /// Passes `judged` on, keeping `answer` as the attempt's evidence when it
    /// is the error that fails the attempt.
    pub fn keep_if_failed<T>(
        &mut self,
        answer: &Answer,
        judged: Result<T, CrawlError>,
    ) -> Result<T, CrawlError> {
        if judged.is_err() {
            self.failed_answer = Some(Box::new((answer.url.clone(), answer.text())));
        }
        judged
    }
}

impl Answer {
    /// The body as text: the charset the server names, else the one the page
    /// declares in a `<meta>`, else UTF-8 (a byte-order mark wins over all).
    pub fn text(&self) -> String {
        let declared = self
            .content_type
            .as_deref()
            .and_then(charset_param)
            .or_else(|| meta_charset(&self.body));
        let encoding = declared
            .and_then(|label| encoding_rs::Encoding::for_label(label.as_bytes()))
            .unwrap_or(encoding_rs::UTF_8);
        encoding.decode(&self.body).0.into_owned()
    }
}

fn charset_param(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|param| {
        let (key, value) = param.split_once('=')?;
        key.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| value.trim().trim_matches('"').to_owned())
    })
}

/// `<meta charset="x">` or `<meta http-equiv="Content-Type" content="...; charset=x">`
/// in the first 1024 bytes, as browsers look for it.
fn meta_charset(body: &[u8]) -> Option<String> {
    let head = String::from_utf8_lossy(&body[..body.len().min(1024)]).to_ascii_lowercase();
    let at = head.find("charset=")? + "charset=".len();
    let label: String = head[at..]
        .trim_start_matches(['"', '\''])
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        .collect();
    (!label.is_empty()).then_some(label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn korean_pages_decode_from_their_declared_charset() {
        let (bytes, _, _) = encoding_rs::EUC_KR.encode("<p>노트북</p>");
        let answer = |content_type: Option<&str>, body: Vec<u8>| Answer {
            status: 200,
            url: Url::parse("http://s.example/").unwrap(),
            retry_after: None,
            content_type: content_type.map(str::to_owned),
            body,
        };
        let by_header = answer(Some("text/html; charset=EUC-KR"), bytes.to_vec());
        assert_eq!(by_header.text(), "<p>노트북</p>");
        let mut meta = b"<html><head><meta charset=\"euc-kr\"></head>".to_vec();
        meta.extend_from_slice(&bytes);
        assert!(
            answer(Some("text/html"), meta)
                .text()
                .ends_with("<p>노트북</p>")
        );
        assert_eq!(
            answer(None, "plain ü".as_bytes().to_vec()).text(),
            "plain ü"
        );
    }
}

//! Kept site sessions: the cookies and local storage a run ends with, sealed
//! with SESSION_KEY (AES-256-GCM, the site id as associated data) and stored in
//! Postgres, so the next run of the site, on any worker, starts where it left
//! off (logged in, consent accepted). Browser runs keep cookies and local
//! storage; http/json runs keep cookies.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sqlx::PgPool;
use url::Url;

use crate::{
    store::sealing::{self, Sealed, SessionKey},
    store::{self, runs::Fence},
    worker::browser::BrowserSession,
};

/// One cookie, in a form both Chrome and the HTTP client can take back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeptCookie {
    pub name: String,
    pub value: String,
    /// The host (host-only cookie) or the domain without its leading dot.
    pub domain: String,
    pub host_only: bool,
    pub path: String,
    /// Unix seconds; none: ends with the browser session (kept anyway: the
    /// next run continues the same visit).
    pub expires: Option<i64>,
    pub secure: bool,
    pub http_only: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_site: Option<String>,
}

/// What a site's session holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KeptSession {
    pub cookies: Vec<KeptCookie>,
    /// Origin -> key -> value.
    #[serde(default)]
    pub local_storage: BTreeMap<String, BTreeMap<String, String>>,
}

impl KeptSession {
    /// Sealed for `site_id`, bound to it (kept sessions were sealed so before
    /// the sealing module existed: the site id's bytes alone).
    pub fn seal(&self, key: &SessionKey, site_id: i64) -> Sealed {
        let plain = serde_json::to_vec(self).expect("a session serializes");
        sealing::seal(key, &store::sessions::bound_to(site_id), &plain)
    }

    /// Opens a sealed session; fails when the key or the site is not the one
    /// it was sealed with, or it was tampered with.
    pub fn open(sealed: &Sealed, key: &SessionKey, site_id: i64) -> anyhow::Result<Self> {
        let plain = sealing::open(sealed, key, &store::sessions::bound_to(site_id))
            .context("opening the kept session")?;
        serde_json::from_slice(&plain).context("reading the kept session")
    }

    // ---- Chrome ------------------------------------------------------------

    /// The cookies as Chrome takes them (every domain, http-only included).
    pub fn cookies_for_chrome(&self) -> Vec<Value> {
        self.cookies
            .iter()
            .map(|c| {
                let mut param = json!({
                    "name": c.name, "value": c.value, "path": c.path,
                    "secure": c.secure, "httpOnly": c.http_only,
                });
                if c.host_only {
                    // A url (and no domain) makes a host-only cookie.
                    let scheme = if c.secure { "https" } else { "http" };
                    param["url"] = json!(format!("{scheme}://{}{}", c.domain, c.path));
                } else {
                    param["domain"] = json!(format!(".{}", c.domain));
                }
                if let Some(expires) = c.expires {
                    param["expires"] = json!(expires);
                }
                if let Some(same_site) = &c.same_site {
                    param["sameSite"] = json!(same_site);
                }
                param
            })
            .collect()
    }

    /// A script that fills local storage before the first page's own scripts
    /// run; Chrome runs it on every new document until it is removed.
    pub fn local_storage_script(&self) -> Option<String> {
        if self.local_storage.is_empty() {
            return None;
        }
        let stored = serde_json::to_string(&self.local_storage).expect("strings serialize");
        Some(format!(
            "(() => {{ try {{ const kept = {stored}; const items = kept[location.origin]; \
             if (items) for (const [k, v] of Object.entries(items)) localStorage.setItem(k, v); \
             }} catch (e) {{}} }})();"
        ))
    }

    /// The session Chrome holds now: every cookie, and the local storage of
    /// the page it shows.
    pub async fn from_browser(session: &BrowserSession) -> anyhow::Result<Self> {
        let cookies = session
            .cookies()
            .await?
            .iter()
            .filter_map(cookie_from_cdp)
            .collect();
        let storage = session
            .evaluate(
                "(() => { try { return [location.origin, Object.fromEntries(Object.entries(localStorage))]; } \
                 catch (e) { return null; } })()",
            )
            .await
            .context("reading local storage")?;
        let mut local_storage = BTreeMap::new();
        if let Some([Value::String(origin), items]) = storage.as_array().map(Vec::as_slice)
            && let Ok(items) = serde_json::from_value::<BTreeMap<String, String>>(items.clone())
            && !items.is_empty()
            && origin.starts_with("http")
        {
            local_storage.insert(origin.clone(), items);
        }
        Ok(KeptSession {
            cookies,
            local_storage,
        })
    }

    // ---- HTTP client -------------------------------------------------------

    /// A cookie store for the HTTP client, holding these cookies.
    pub fn cookie_store(&self) -> Arc<SessionCookies> {
        let mut store = cookie_store::CookieStore::default();
        for c in &self.cookies {
            let mut raw = cookie::Cookie::build((c.name.clone(), c.value.clone()))
                .path(c.path.clone())
                .secure(c.secure)
                .http_only(c.http_only);
            if !c.host_only {
                raw = raw.domain(c.domain.clone());
            }
            if let Some(at) = c
                .expires
                .and_then(|t| cookie::time::OffsetDateTime::from_unix_timestamp(t).ok())
            {
                raw = raw.expires(at);
            }
            let scheme = if c.secure { "https" } else { "http" };
            if let Ok(url) = Url::parse(&format!("{scheme}://{}{}", c.domain, c.path)) {
                let _ = store.insert_raw(&raw.build(), &url);
            }
        }
        Arc::new(SessionCookies(Mutex::new(store)))
    }
}

fn cookie_from_cdp(c: &Value) -> Option<KeptCookie> {
    let domain = c["domain"].as_str()?;
    let expires = c["expires"].as_f64().filter(|e| *e > 0.0).map(|e| e as i64);
    Some(KeptCookie {
        name: c["name"].as_str()?.to_owned(),
        value: c["value"].as_str()?.to_owned(),
        host_only: !domain.starts_with('.'),
        domain: domain.trim_start_matches('.').to_owned(),
        path: c["path"].as_str().unwrap_or("/").to_owned(),
        expires,
        secure: c["secure"].as_bool().unwrap_or(false),
        http_only: c["httpOnly"].as_bool().unwrap_or(false),
        same_site: c["sameSite"].as_str().map(str::to_owned),
    })
}

/// The HTTP client's cookies for one crawl, readable afterwards.
pub struct SessionCookies(Mutex<cookie_store::CookieStore>);

impl SessionCookies {
    pub fn empty() -> Arc<Self> {
        KeptSession::default().cookie_store()
    }

    /// The session the client holds now (cookies only: no local storage over HTTP).
    pub fn session(&self) -> KeptSession {
        let store = self.0.lock().expect("cookie lock");
        let cookies = store
            .iter_unexpired()
            .filter_map(|c| {
                let (domain, host_only) = match &c.domain {
                    cookie_store::CookieDomain::HostOnly(host) => (host.clone(), true),
                    cookie_store::CookieDomain::Suffix(domain) => (domain.clone(), false),
                    _ => return None,
                };
                let expires = match c.expires {
                    cookie_store::CookieExpiration::AtUtc(at) => Some(at.unix_timestamp()),
                    cookie_store::CookieExpiration::SessionEnd => None,
                };
                Some(KeptCookie {
                    name: c.name().to_owned(),
                    value: c.value().to_owned(),
                    domain,
                    host_only,
                    path: String::from(&c.path),
                    expires,
                    secure: c.secure().unwrap_or(false),
                    http_only: c.http_only().unwrap_or(false),
                    same_site: c.same_site().map(|s| s.to_string()),
                })
            })
            .collect();
        KeptSession {
            cookies,
            local_storage: BTreeMap::new(),
        }
    }
}

impl reqwest::cookie::CookieStore for SessionCookies {
    fn set_cookies(&self, headers: &mut dyn Iterator<Item = &http::HeaderValue>, url: &Url) {
        let cookies = headers
            .filter_map(|v| v.to_str().ok())
            .filter_map(|v| cookie::Cookie::parse(v.to_owned()).ok());
        self.0
            .lock()
            .expect("cookie lock")
            .store_response_cookies(cookies, url);
    }

    fn cookies(&self, url: &Url) -> Option<http::HeaderValue> {
        let store = self.0.lock().expect("cookie lock");
        let header = store
            .get_request_values(url)
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join("; ");
        (!header.is_empty())
            .then(|| http::HeaderValue::from_str(&header).ok())
            .flatten()
    }
}

/// The site's kept session, opened; `None` when it has none yet.
pub async fn load(
    pool: &PgPool,
    key: &SessionKey,
    site_id: i64,
) -> anyhow::Result<Option<KeptSession>> {
    match store::sessions::load(pool, site_id).await? {
        Some(sealed) => Ok(Some(KeptSession::open(&sealed, key, site_id)?)),
        None => Ok(None),
    }
}

/// Seals and keeps the session an attempt ended with; `false` when the
/// attempt was superseded meanwhile and the session is not kept.
pub async fn save(
    pool: &PgPool,
    key: &SessionKey,
    site_id: i64,
    fence: &Fence,
    session: &KeptSession,
) -> anyhow::Result<bool> {
    store::sessions::save(pool, site_id, fence, &session.seal(key, site_id))
        .await
        .context("keeping the site's session")
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::cookie::CookieStore as _;

    fn key(byte: u8) -> SessionKey {
        SessionKey::from_bytes([byte; 32])
    }

    #[test]
    fn a_sealed_session_opens_only_with_its_key_and_site() {
        let session = KeptSession {
            cookies: vec![],
            local_storage: BTreeMap::from([(
                "http://s.example".into(),
                BTreeMap::from([("consent".into(), "yes".into())]),
            )]),
        };
        let sealed = session.seal(&key(1), 7);
        assert!(!String::from_utf8_lossy(&sealed.sealed).contains("consent"));
        assert_eq!(KeptSession::open(&sealed, &key(1), 7).unwrap(), session);
        assert!(
            KeptSession::open(&sealed, &key(2), 7).is_err(),
            "another key"
        );
        assert!(
            KeptSession::open(&sealed, &key(1), 8).is_err(),
            "another site"
        );
    }

    #[test]
    fn cookies_go_through_the_http_client_store_and_back() {
        let jar = SessionCookies::empty();
        let url = Url::parse("http://127.0.0.1:8080/search?q=a").unwrap();
        let set = [
            http::HeaderValue::from_static("visitor=abc; Path=/; HttpOnly"),
            http::HeaderValue::from_static("theme=dark; Path=/; Max-Age=3600"),
        ];
        jar.set_cookies(&mut set.iter(), &url);
        let kept = jar.session();
        assert_eq!(kept.cookies.len(), 2);
        let visitor = kept.cookies.iter().find(|c| c.name == "visitor").unwrap();
        assert!(visitor.host_only && visitor.http_only && visitor.expires.is_none());
        assert_eq!(visitor.domain, "127.0.0.1");

        let again = kept.cookie_store();
        let header = again.cookies(&url).unwrap();
        let header = header.to_str().unwrap();
        assert!(
            header.contains("visitor=abc") && header.contains("theme=dark"),
            "{header}"
        );
        assert!(
            again
                .cookies(&Url::parse("http://127.0.0.2/").unwrap())
                .is_none()
        );
    }
}

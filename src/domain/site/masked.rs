//! Secrets a client sends back in the masked form a response showed them
//! (`***`): the stored value is kept only while it would go where it went
//! before. Header values go to the origin of the search URL (and, over plain
//! http, through the proxy); proxy credentials go to the proxy. Pointing the
//! site elsewhere with a mask would hand the stored secret to the new target,
//! so the client must send the value again.

use std::collections::BTreeMap;

use url::Url;

use super::{Identity, MASK, ProxyPoolInput, ProxyUrl, SearchUrlTemplate};
use crate::domain::FieldError;

/// Puts the stored secrets back where a client sent the masked form, as long
/// as their target is unchanged: a header whose value is [`MASK`] gets the
/// stored value of that header while `search_url` keeps the stored search
/// URL's origin (and, for a plain-http origin, no new proxy would read it); a
/// proxy with masked credentials gets the stored credentials while it is the
/// stored proxy's address, and so does a pool member while it is the
/// address of a stored member (or of the stored proxy). Otherwise the error
/// names the field whose value must be sent again. A mask with nothing
/// stored under it is left for [`Identity::parse`] to refuse.
pub fn restore_masked(
    headers: &mut Option<BTreeMap<String, String>>,
    proxy: &mut Option<String>,
    pool: &mut Option<ProxyPoolInput>,
    search_url: &SearchUrlTemplate,
    stored: &Identity,
    stored_search_url: &SearchUrlTemplate,
) -> Result<(), FieldError> {
    restore_proxy(proxy, stored)?;
    restore_pool(pool, stored)?;
    // The proxies as they will be (their credentials back, or refused
    // above): the headers' rule asks whether one is another party.
    let mut new_proxies: Vec<ProxyUrl> = proxy
        .as_deref()
        .map(ProxyUrl::parse)
        .transpose()?
        .into_iter()
        .collect();
    for member in pool.iter().flat_map(|p| &p.members) {
        // A member that does not parse is refused by the pool's own rules.
        if let Ok(member) = ProxyUrl::parse(&member.url) {
            new_proxies.push(member);
        }
    }
    let masked: Vec<&String> = headers
        .iter()
        .flatten()
        .filter(|(name, value)| *value == MASK && stored.headers.contains_key(*name))
        .map(|(name, _)| name)
        .collect();
    let Some(first) = masked.first() else {
        return Ok(());
    };
    if let Some(why) = headers_moved(search_url, &new_proxies, stored, stored_search_url) {
        return Err(FieldError::new(
            format!("headers.{first}"),
            format!("is masked; send the value again, because {why}"),
        ));
    }
    for (name, value) in headers.iter_mut().flatten() {
        if value == MASK
            && let Some(kept) = stored.headers.get(name)
        {
            value.clone_from(kept);
        }
    }
    Ok(())
}

/// Why stored header values may not follow the site as sent, if they may not.
fn headers_moved(
    search_url: &SearchUrlTemplate,
    proxies: &[ProxyUrl],
    stored: &Identity,
    stored_search_url: &SearchUrlTemplate,
) -> Option<String> {
    let (Some(now), Some(before)) = (search_url.origin(), stored_search_url.origin()) else {
        return Some(
            "search_url's host depends on the keyword or page, so it is not known where the \
             header would go"
                .into(),
        );
    };
    if now != before {
        return Some(format!(
            "search_url now points to another origin ({} instead of {})",
            now.ascii_serialization(),
            before.ascii_serialization()
        ));
    }
    // Over https a proxy only relays the encrypted stream; over http it reads
    // every header, so a new proxy is a new reader.
    let plain = search_url.sample_url().scheme() == "http";
    let stored_proxies: Vec<String> = stored.proxies().map(ProxyUrl::address).collect();
    let address = proxies
        .iter()
        .map(ProxyUrl::address)
        .find(|address| !stored_proxies.contains(address))?;
    plain.then(|| {
        format!(
            "search_url is plain http and the proxy is now another one ({address}), which \
             would read the header"
        )
    })
}

/// Pool members sent with masked credentials get the stored ones back if a
/// stored member (or the stored proxy) is at their address, scheme, host
/// and port alike.
fn restore_pool(pool: &mut Option<ProxyPoolInput>, stored: &Identity) -> Result<(), FieldError> {
    let Some(pool) = pool.as_mut() else {
        return Ok(());
    };
    for (i, member) in pool.members.iter_mut().enumerate() {
        let masks_credentials = Url::parse(member.url.trim())
            .is_ok_and(|url| url.username() == MASK || url.password() == Some(MASK));
        if !masks_credentials {
            continue;
        }
        let kept = stored
            .proxies()
            .filter(|p| p.credentials().is_some())
            .find(|p| p.is_masked_form(&member.url));
        if let Some(kept) = kept {
            member.url = kept.expose().to_owned();
            continue;
        }
        if stored.proxies().all(|p| p.credentials().is_none()) {
            // Nothing to restore: ProxyUrl::parse refuses the mask itself.
            continue;
        }
        return Err(FieldError::new(
            format!("proxy_pool.members[{i}].url"),
            "its user name and password are masked; send them again, because no stored \
             proxy is at this address",
        ));
    }
    Ok(())
}

/// A proxy sent with masked credentials gets the stored ones back if it is
/// the stored proxy, scheme, host and port alike.
fn restore_proxy(proxy: &mut Option<String>, stored: &Identity) -> Result<(), FieldError> {
    let Some(sent) = proxy.as_mut() else {
        return Ok(());
    };
    let masks_credentials = Url::parse(sent.trim())
        .is_ok_and(|url| url.username() == MASK || url.password() == Some(MASK));
    let Some(kept) = stored.proxy.as_ref().filter(|p| p.credentials().is_some()) else {
        // Nothing to restore: ProxyUrl::parse refuses the mask itself.
        return Ok(());
    };
    if !masks_credentials {
        return Ok(());
    }
    if kept.is_masked_form(sent) {
        *sent = kept.expose().to_owned();
        return Ok(());
    }
    let now = ProxyUrl::parse(&sent.replace(MASK, "x")).map(|p| p.address());
    Err(FieldError::new(
        "proxy",
        match now {
            Ok(now) => format!(
                "its user name and password are masked; send them again, because the proxy \
                 is now another one ({now} instead of {})",
                kept.address()
            ),
            Err(_) => "its user name and password are masked; send them again with the new \
                       proxy"
                .to_owned(),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored() -> (Identity, SearchUrlTemplate) {
        let identity = Identity::parse(
            None,
            Some(BTreeMap::from([
                ("Authorization".into(), "Bearer k".into()),
                ("X-Api-Key".into(), "key-1".into()),
            ])),
            Some("http://u:p@proxy.example:3128".into()),
        )
        .unwrap();
        let url = SearchUrlTemplate::parse("https://shop.example/s?q={keyword}").unwrap();
        (identity, url)
    }

    fn masked_headers(extra: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
        let mut headers = stored().0.masked_headers();
        for (name, value) in extra {
            headers.insert((*name).into(), (*value).into());
        }
        Some(headers)
    }

    fn restore(
        headers: &mut Option<BTreeMap<String, String>>,
        proxy: &mut Option<String>,
        search_url: &str,
    ) -> Result<(), FieldError> {
        let (identity, stored_url) = stored();
        let search_url = SearchUrlTemplate::parse(search_url).unwrap();
        restore_masked(
            headers,
            proxy,
            &mut None,
            &search_url,
            &identity,
            &stored_url,
        )
    }

    #[test]
    fn masks_sent_back_to_the_same_targets_keep_what_is_stored_and_nothing_else() {
        let mut headers = masked_headers(&[("X-New", MASK)]);
        let mut proxy = Some("http://***:***@proxy.example:3128".into());
        let other_path = "https://SHOP.example:443/other?keyword={keyword}&p={page}";
        restore(&mut headers, &mut proxy, other_path).unwrap();
        let headers_now = headers.clone().unwrap();
        assert_eq!(headers_now["Authorization"], "Bearer k");
        assert_eq!(headers_now["X-Api-Key"], "key-1");
        assert_eq!(proxy.as_deref(), Some("http://u:p@proxy.example:3128/"));
        // A mask with nothing stored under it is refused, naming the header.
        let err = Identity::parse(None, headers, proxy).unwrap_err();
        assert_eq!(err.field, "headers.X-New");
    }

    #[test]
    fn masked_headers_do_not_follow_a_search_url_to_another_origin() {
        for elsewhere in [
            "https://sink.example/s?q={keyword}",
            "http://shop.example/s?q={keyword}",
            "https://shop.example:8443/s?q={keyword}",
            "https://{keyword}.shop.example/s",
        ] {
            let mut headers = masked_headers(&[]);
            let mut proxy = None;
            let err = restore(&mut headers, &mut proxy, elsewhere).unwrap_err();
            assert_eq!(err.field, "headers.Authorization", "{elsewhere}");
            assert!(err.message.contains("send the value again"), "{err}");
            assert_eq!(headers.unwrap()["Authorization"], MASK, "nothing restored");
        }
        let mut headers = masked_headers(&[]);
        let err =
            restore(&mut headers, &mut None, "https://sink.example/?q={keyword}").unwrap_err();
        assert_eq!(
            err.message,
            "is masked; send the value again, because search_url now points to another \
             origin (https://sink.example instead of https://shop.example)"
        );
        // Sent again in full, the values go wherever the site now points.
        let mut headers = Some(BTreeMap::from([(
            "Authorization".into(),
            "Bearer new".into(),
        )]));
        restore(&mut headers, &mut None, "https://sink.example/?q={keyword}").unwrap();
        assert_eq!(headers.unwrap()["Authorization"], "Bearer new");
    }

    #[test]
    fn masked_proxy_credentials_do_not_follow_the_proxy_to_another_host() {
        for elsewhere in [
            "http://***:***@sink.example:3128",
            "http://***:***@proxy.example:8080",
            "socks5://***:***@proxy.example:3128",
        ] {
            let mut proxy = Some(elsewhere.to_owned());
            let err =
                restore(&mut None, &mut proxy, "https://shop.example/?q={keyword}").unwrap_err();
            assert_eq!(err.field, "proxy", "{elsewhere}");
            assert!(err.message.contains("send them again"), "{err}");
            assert!(!err.message.contains(":p@"), "{err}");
            assert_eq!(proxy.as_deref(), Some(elsewhere), "nothing restored");
        }
    }

    #[test]
    fn masked_pool_members_keep_the_credentials_stored_at_their_address_only() {
        let (mut identity, url) = stored();
        identity.proxy = None;
        identity.pool = Some(
            ProxyPoolInput {
                members: vec![
                    super::super::PoolMemberInput {
                        url: "http://u1:p1@a.example:1".into(),
                        weight: Some(2),
                    },
                    super::super::PoolMemberInput {
                        url: "http://b.example:2".into(),
                        weight: None,
                    },
                ],
                rotation: None,
            }
            .parse()
            .unwrap(),
        );
        let mut sent = identity.pool.as_ref().map(|p| p.masked());
        restore_masked(&mut None, &mut None, &mut sent, &url, &identity, &url).unwrap();
        let sent = sent.unwrap();
        assert_eq!(sent.members[0].url, "http://u1:p1@a.example:1/");
        assert_eq!(sent.members[1].url, "http://b.example:2/");
        let mut moved = Some(ProxyPoolInput {
            members: vec![super::super::PoolMemberInput {
                url: "http://***:***@sink.example:1".into(),
                weight: None,
            }],
            rotation: None,
        });
        let err =
            restore_masked(&mut None, &mut None, &mut moved, &url, &identity, &url).unwrap_err();
        assert_eq!(err.field, "proxy_pool.members[0].url");
        assert!(!err.message.contains("p1"), "{err}");
    }

    #[test]
    fn over_plain_http_masked_headers_do_not_go_through_a_new_proxy() {
        let (identity, _) = stored();
        let plain = SearchUrlTemplate::parse("http://shop.example/s?q={keyword}").unwrap();
        let tls = SearchUrlTemplate::parse("https://shop.example/s?q={keyword}").unwrap();
        let new_proxy = || Some("http://sink.example:3128".to_owned());
        let err = restore_masked(
            &mut masked_headers(&[]),
            &mut new_proxy(),
            &mut None,
            &plain,
            &identity,
            &plain,
        )
        .unwrap_err();
        assert_eq!(err.field, "headers.Authorization");
        // The same proxy, or none, or https (a proxy relays it sealed): kept.
        for (proxy, url) in [
            (Some("http://***:***@proxy.example:3128".to_owned()), &plain),
            (None, &plain),
            (new_proxy(), &tls),
        ] {
            let mut headers = masked_headers(&[]);
            restore_masked(
                &mut headers,
                &mut proxy.clone(),
                &mut None,
                url,
                &identity,
                url,
            )
            .unwrap_or_else(|e| panic!("{proxy:?} {url:?}: {e}"));
            assert_eq!(headers.unwrap()["X-Api-Key"], "key-1");
        }
    }
}

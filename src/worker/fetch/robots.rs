//! An origin's robots.txt over plain HTTP, whatever the site's render mode:
//! the site's user agent, headers and proxy (as its http mode sends them),
//! the guard on every hop, a short timeout and a size cap. Nothing here fails
//! a crawl: a file that cannot be had says why, and allows everything.

use std::time::Duration;

use reqwest::header;
use url::Url;

use super::http::{build, first_way_out, identified_client};
use crate::{
    domain::{
        robots::{MAX_ROBOTS_BYTES, RobotsFile},
        site::Identity,
    },
    net::target_guard::TargetGuard,
};

/// How long asking for a robots.txt may take in all, redirects included.
pub const ROBOTS_TIMEOUT: Duration = Duration::from_secs(10);
/// Redirects followed (RFC 9309 asks for at least five).
const MAX_REDIRECTS: usize = 5;

/// Asks for the robots.txt at `robots_url` as the site's identity, within
/// [`ROBOTS_TIMEOUT`]. Not paced: one request per origin per cache TTL.
pub async fn fetch_robots(
    robots_url: &Url,
    identity: &Identity,
    guard: &TargetGuard,
) -> RobotsFile {
    match tokio::time::timeout(ROBOTS_TIMEOUT, ask(robots_url, identity, guard)).await {
        Ok(Ok(file)) => file,
        Ok(Err(why)) => RobotsFile::Unreadable { why },
        Err(_) => RobotsFile::Unreadable {
            why: format!("no answer within {}s", ROBOTS_TIMEOUT.as_secs()),
        },
    }
}

async fn ask(
    robots_url: &Url,
    identity: &Identity,
    guard: &TargetGuard,
) -> Result<RobotsFile, String> {
    let client = identified_client(
        identity,
        first_way_out(identity).as_ref(),
        guard,
        ROBOTS_TIMEOUT,
    )
    .await
    .and_then(build)
    .map_err(|e| e.to_string())?;
    let mut url = robots_url.clone();
    for _ in 0..=MAX_REDIRECTS {
        guard.check(&url).await.map_err(|e| e.to_string())?;
        let mut response = client
            .get(url.clone())
            .header(header::ACCEPT, "text/plain,*/*;q=0.5")
            .send()
            .await
            .map_err(|e| format!("requesting {url}: {e}"))?;
        let status = response.status();
        if status.is_redirection() {
            let next = response
                .headers()
                .get(header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .and_then(|l| url.join(l).ok());
            if let Some(next) = next {
                url = next;
                continue;
            }
        }
        if !status.is_success() {
            return Ok(RobotsFile::answered(status.as_u16(), Vec::new()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| format!("reading {url}: {e}"))?
        {
            let room = MAX_ROBOTS_BYTES - body.len();
            if chunk.len() >= room {
                body.extend_from_slice(&chunk[..room]);
                cut_to_whole_lines(&mut body);
                break;
            }
            body.extend_from_slice(&chunk);
        }
        return Ok(RobotsFile::answered(status.as_u16(), body));
    }
    Err(format!(
        "more than {MAX_REDIRECTS} redirects from {robots_url}"
    ))
}

/// A file cut at the size cap keeps its whole lines only: half a rule
/// (`Disallow: /a` of `Disallow: /admin`) would say something else.
fn cut_to_whole_lines(body: &mut Vec<u8>) {
    if let Some(end) = body.iter().rposition(|&b| b == b'\n') {
        body.truncate(end + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_cut_at_the_cap_keeps_whole_lines() {
        let mut body = b"Disallow: /private\nDisallow: /adm".to_vec();
        cut_to_whole_lines(&mut body);
        assert_eq!(body, b"Disallow: /private\n");
        let mut one_line = b"Disallow: /x".to_vec();
        cut_to_whole_lines(&mut one_line);
        assert_eq!(one_line, b"Disallow: /x");
    }
}

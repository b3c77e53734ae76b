//! A pool of proxies a site's pages go out through: each member weighted,
//! one chosen by weight among those not retired, and a rule for how often the
//! choice is made again. A member that draws refusals is retired for a
//! back-off that doubles with each retirement in a row and ends by itself.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::identity::{MASK, ProxyUrl};
use crate::domain::{FieldError, text_enum::text_enum};

/// The most members a pool may have.
pub const MAX_POOL_MEMBERS: usize = 64;
/// The heaviest weight a member may have (the lightest is 1).
pub const MAX_WEIGHT: u32 = 1000;
/// A first retirement lasts this long; each one in a row doubles it.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(30);
/// No retirement lasts longer.
pub const MAX_BACKOFF: Duration = Duration::from_secs(15 * 60);

text_enum! {
    /// When a pool's member is chosen again.
    #[derive(Default)]
    pub enum Rotation as "proxy rotation" {
        /// Once per run: every page of a run through the same member.
        #[default]
        PerRun = "per_run",
        /// For every page.
        PerPage = "per_page",
        /// Once per kept session: the member stays while the session does.
        Sticky = "sticky",
    }
}

/// A pool as a request sends it (and a response shows it, credentials masked).
#[derive(Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ProxyPool)]
pub struct ProxyPoolInput {
    /// 1 to 64 proxies, each at an address of its own.
    pub members: Vec<PoolMemberInput>,
    /// When a member is chosen again: `per_run` (default), `per_page` or
    /// `sticky` (the same member while the site's kept session lasts). In
    /// browser mode a run keeps the member it started with: `per_page` is
    /// chosen once per run there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotation: Option<Rotation>,
}

impl ProxyPoolInput {
    /// Whether a member is sent with its credentials in the masked form a
    /// response showed them.
    pub fn masks(&self) -> bool {
        self.members.iter().any(|m| m.url.contains(MASK))
    }

    /// Checks every rule; field errors name the member (`proxy_pool.members[1].url`).
    pub fn parse(self) -> Result<ProxyPool, FieldError> {
        ProxyPool::parse(self.members, self.rotation.unwrap_or_default())
    }
}

impl std::fmt::Debug for ProxyPoolInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyPoolInput")
            .field("members", &self.members)
            .field("rotation", &self.rotation)
            .finish()
    }
}

/// A member as a request sends it.
#[derive(Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ProxyPoolMember)]
pub struct PoolMemberInput {
    /// `http://`, `socks5://` or `socks5h://` proxy, credentials allowed
    /// (masked in responses; sent back masked, they keep the stored ones
    /// for the same address only).
    pub url: String,
    /// 1 to 1000 (default 1); a member with weight 2 carries twice the pages of one with 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
}

impl std::fmt::Debug for PoolMemberInput {
    // Never the credentials, even of a URL that did not parse.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let url = match url::Url::parse(&self.url) {
            Ok(mut url) if !url.username().is_empty() || url.password().is_some() => {
                let _ = url.set_username(MASK);
                let _ = url.set_password(Some(MASK));
                url.to_string()
            }
            Ok(url) => url.to_string(),
            Err(_) => MASK.to_owned(),
        };
        f.debug_struct("PoolMemberInput")
            .field("url", &url)
            .field("weight", &self.weight)
            .finish()
    }
}

/// One proxy of a pool and its share of the pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolMember {
    pub proxy: ProxyUrl,
    pub weight: u32,
}

/// The proxies a site's pages go out through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyPool {
    members: Vec<PoolMember>,
    rotation: Rotation,
}

impl ProxyPool {
    /// A pool as sent: every field error names the member (`proxy_pool.members[1].url`).
    pub fn parse(members: Vec<PoolMemberInput>, rotation: Rotation) -> Result<Self, FieldError> {
        if members.is_empty() {
            return Err(FieldError::new(
                "proxy_pool.members",
                "needs at least one member",
            ));
        }
        if members.len() > MAX_POOL_MEMBERS {
            return Err(FieldError::new(
                "proxy_pool.members",
                format!("at most {MAX_POOL_MEMBERS} members"),
            ));
        }
        let mut accepted: Vec<PoolMember> = Vec::with_capacity(members.len());
        for (i, member) in members.into_iter().enumerate() {
            let field = format!("proxy_pool.members[{i}].url");
            let proxy = ProxyUrl::parse(&member.url)
                .map_err(|e| FieldError::new(field.clone(), e.message))?;
            let weight = member.weight.unwrap_or(1);
            if !(1..=MAX_WEIGHT).contains(&weight) {
                return Err(FieldError::new(
                    format!("proxy_pool.members[{i}].weight"),
                    format!("must be 1 to {MAX_WEIGHT}"),
                ));
            }
            // Health is kept per address: two members at one address would share it.
            if accepted
                .iter()
                .any(|m| m.proxy.address() == proxy.address())
            {
                return Err(FieldError::new(field, "is already in the pool"));
            }
            accepted.push(PoolMember { proxy, weight });
        }
        Ok(Self {
            members: accepted,
            rotation,
        })
    }

    /// A pool as it was stored: its rules were checked when it was accepted.
    pub fn stored(members: Vec<PoolMember>, rotation: Rotation) -> Self {
        Self { members, rotation }
    }

    /// The pool as a response shows it (and as its row keeps it): each
    /// member's user name and password masked.
    pub fn masked(&self) -> ProxyPoolInput {
        ProxyPoolInput {
            members: self
                .members
                .iter()
                .map(|m| PoolMemberInput {
                    url: m.proxy.masked(),
                    weight: Some(m.weight),
                })
                .collect(),
            rotation: Some(self.rotation),
        }
    }

    /// The member at `address` (`ProxyUrl::address`), if any.
    pub fn member_at(&self, address: &str) -> Option<&PoolMember> {
        self.members.iter().find(|m| m.proxy.address() == address)
    }

    /// Today's single `proxy`: a pool of one, chosen once per run.
    pub fn single(proxy: ProxyUrl) -> Self {
        Self {
            members: vec![PoolMember { proxy, weight: 1 }],
            rotation: Rotation::PerRun,
        }
    }

    pub fn members(&self) -> &[PoolMember] {
        &self.members
    }

    pub fn rotation(&self) -> Rotation {
        self.rotation
    }

    /// The member `roll` (in `[0, 1)`) lands on, by weight, among those
    /// `retired` does not rule out; None when every member is retired.
    pub fn pick(&self, retired: impl Fn(&ProxyUrl) -> bool, roll: f64) -> Option<&PoolMember> {
        let open: Vec<&PoolMember> = self.members.iter().filter(|m| !retired(&m.proxy)).collect();
        let total: u64 = open.iter().map(|m| u64::from(m.weight)).sum();
        if total == 0 {
            return None;
        }
        // Truncation is the point: a roll in [0, 1) becomes a slot in [0, total).
        let mut slot = ((roll.clamp(0.0, 1.0) * total as f64) as u64).min(total - 1);
        for member in &open {
            let weight = u64::from(member.weight);
            if slot < weight {
                return Some(member);
            }
            slot -= weight;
        }
        open.last().copied()
    }
}

/// How long the `consecutive`-th retirement in a row lasts (the first is 1):
/// [`FIRST_BACKOFF`], doubled each time, at most [`MAX_BACKOFF`].
pub fn backoff(consecutive: u32) -> Duration {
    let doublings = consecutive.saturating_sub(1).min(16);
    FIRST_BACKOFF
        .saturating_mul(1u32 << doublings)
        .min(MAX_BACKOFF)
}

/// A member as metrics and health show it: `host:port`, no scheme or credentials.
pub fn metric_label(proxy: &ProxyUrl) -> String {
    format!("{}:{}", proxy.host(), proxy.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(url: &str, weight: Option<u32>) -> PoolMemberInput {
        PoolMemberInput {
            url: url.into(),
            weight,
        }
    }

    fn pool(weights: &[u32]) -> ProxyPool {
        let members = weights
            .iter()
            .enumerate()
            .map(|(i, w)| member(&format!("http://10.0.0.{i}:3128"), Some(*w)))
            .collect();
        ProxyPool::parse(members, Rotation::PerPage).unwrap()
    }

    #[test]
    fn bad_members_are_named_by_their_place() {
        let err = ProxyPool::parse(vec![], Rotation::PerRun).unwrap_err();
        assert_eq!(err.field, "proxy_pool.members");
        let err = ProxyPool::parse(
            vec![
                member("http://a.example:1", None),
                member("ftp://b.example:2", None),
            ],
            Rotation::PerRun,
        )
        .unwrap_err();
        assert_eq!(err.field, "proxy_pool.members[1].url");
        for weight in [0, MAX_WEIGHT + 1] {
            let err = ProxyPool::parse(
                vec![member("http://a.example:1", Some(weight))],
                Rotation::PerRun,
            )
            .unwrap_err();
            assert_eq!(err.field, "proxy_pool.members[0].weight", "{weight}");
        }
        let err = ProxyPool::parse(
            vec![
                member("http://u:p@a.example:1", None),
                member("http://a.example:1", None),
            ],
            Rotation::PerRun,
        )
        .unwrap_err();
        assert_eq!(err.field, "proxy_pool.members[1].url");
        let many = (0..=MAX_POOL_MEMBERS)
            .map(|i| member(&format!("http://10.0.{}.{}:1", i / 200, i % 200), None))
            .collect();
        let err = ProxyPool::parse(many, Rotation::PerRun).unwrap_err();
        assert_eq!(err.field, "proxy_pool.members");
        assert_eq!(
            "sticky".parse::<Rotation>().unwrap(),
            Rotation::Sticky,
            "rotation by name"
        );
    }

    #[test]
    fn a_roll_lands_by_weight_and_skips_the_retired() {
        let pool = pool(&[1, 3]);
        let host = |roll| pool.pick(|_| false, roll).unwrap().proxy.host().to_owned();
        assert_eq!(host(0.0), "10.0.0.0");
        assert_eq!(host(0.24), "10.0.0.0");
        assert_eq!(host(0.25), "10.0.0.1");
        assert_eq!(host(0.999), "10.0.0.1");
        let first_retired = |p: &ProxyUrl| p.host() == "10.0.0.0";
        assert_eq!(
            pool.pick(first_retired, 0.0).unwrap().proxy.host(),
            "10.0.0.1"
        );
        assert!(pool.pick(|_| true, 0.5).is_none(), "all retired");
        // Spread over even rolls: the shares follow the weights.
        let pool = self::pool(&[1, 2, 5]);
        let mut counts = [0usize; 3];
        for i in 0..800 {
            let m = pool.pick(|_| false, f64::from(i) / 800.0).unwrap();
            let at = pool.members().iter().position(|x| x == m).unwrap();
            counts[at] += 1;
        }
        assert_eq!(counts, [100, 200, 500]);
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        assert_eq!(backoff(1), Duration::from_secs(30));
        assert_eq!(backoff(2), Duration::from_secs(60));
        assert_eq!(backoff(3), Duration::from_secs(120));
        assert_eq!(backoff(10), MAX_BACKOFF);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
        assert_eq!(backoff(0), FIRST_BACKOFF);
    }

    #[test]
    fn a_single_proxy_is_a_pool_of_one_and_labels_hide_credentials() {
        let proxy = ProxyUrl::parse("http://user:secret@proxy.example:3128").unwrap();
        let pool = ProxyPool::single(proxy.clone());
        assert_eq!(pool.members().len(), 1);
        assert_eq!(pool.rotation(), Rotation::PerRun);
        assert_eq!(metric_label(&proxy), "proxy.example:3128");
        let shown = pool.masked();
        assert_eq!(shown.members[0].url, "http://***:***@proxy.example:3128/");
        let sent = PoolMemberInput {
            url: "http://user:secret@proxy.example:3128".into(),
            weight: None,
        };
        assert!(!format!("{sent:?}").contains("secret"), "{sent:?}");
    }
}

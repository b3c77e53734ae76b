//! What one client may hold of an HTTP server (every process's): its
//! connections, its requests in flight, how long its idle connections stay
//! open, and the connection slots kept for requests with a valid token.

/// Per-client bounds of every process's HTTP server (with `MAX_CONNECTIONS`
/// and `HTTP_HEADER_TIMEOUT_SECS`).
#[derive(Debug, Clone, clap::Args)]
pub struct ClientLimits {
    /// A kept-alive connection that starts no next request within this many
    /// seconds of its last response is closed (so is a new one that sends
    /// nothing). Connections from TRUSTED_PROXIES are left to the balancer,
    /// which closes its own (HTTP_HEADER_TIMEOUT_SECS still bounds them).
    #[arg(long, env = "HTTP_IDLE_TIMEOUT_SECS", default_value_t = 5)]
    pub http_idle_timeout_secs: u64,

    /// Connections one client address may hold (default: MAX_CONNECTIONS / 8,
    /// at least 4). At the cap, a new connection takes the place of the
    /// client's connection idle the longest; with all of them busy, it gets a
    /// reserved slot, where requests without a valid token get 429.
    /// Connections from TRUSTED_PROXIES are not counted (the balancer carries
    /// many clients).
    #[arg(long, env = "MAX_CONNECTIONS_PER_CLIENT")]
    pub max_connections_per_client: Option<usize>,

    /// Requests one client may have in flight at once (behind TRUSTED_PROXIES,
    /// the client it forwards); those with a valid token and those without
    /// are counted apart. Past it: 429 with Retry-After.
    #[arg(long, env = "MAX_REQUESTS_PER_CLIENT", default_value_t = 64)]
    pub max_requests_per_client: usize,

    /// Of MAX_CONNECTIONS, the connections kept for requests with a valid API
    /// token (default: MAX_CONNECTIONS / 8, at least 1), so clients without
    /// one cannot take every slot.
    #[arg(long, env = "RESERVED_CONNECTIONS")]
    pub reserved_connections: Option<usize>,
}

impl Default for ClientLimits {
    /// The defaults of the flags.
    fn default() -> Self {
        ClientLimits {
            http_idle_timeout_secs: 5,
            max_connections_per_client: None,
            max_requests_per_client: 64,
            reserved_connections: None,
        }
    }
}

impl ClientLimits {
    /// Connections per client, with `max_connections` in all.
    pub fn connections_per_client(&self, max_connections: usize) -> usize {
        self.max_connections_per_client
            .unwrap_or((max_connections / 8).max(4))
            .max(1)
    }

    /// Reserved connections, with `max_connections` in all.
    pub fn reserved(&self, max_connections: usize) -> usize {
        self.reserved_connections
            .unwrap_or((max_connections / 8).max(1))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        limits: ClientLimits,
    }

    #[test]
    fn the_default_is_what_the_flags_default_to() {
        let parsed = Flags::try_parse_from(["x"]).unwrap().limits;
        let default = ClientLimits::default();
        assert_eq!(format!("{parsed:?}"), format!("{default:?}"));
        assert_eq!(default.connections_per_client(512), 64);
        assert_eq!(default.reserved(512), 64);
        assert_eq!(default.connections_per_client(20), 4);
    }
}

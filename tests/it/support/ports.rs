//! Ports for processes that must keep theirs across a restart (a client
//! reconnects to the same address): shared by the tests and the examples.

/// Lowest port a fixed-port process is given.
const FIXED_PORTS_FROM: u16 = 10_000;

/// A free port on loopback, for a process that is told its port (and given
/// the same one when it is restarted). It is taken from below the kernel's
/// ephemeral range: a port from that range (what binding port 0 gives) can be
/// the local end of any outbound connection meanwhile, the process's own to
/// Postgres included, and then it cannot bind it ("Address already in use").
pub fn free_port() -> std::io::Result<u16> {
    let ephemeral_from = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    let span = ephemeral_from.saturating_sub(FIXED_PORTS_FROM).max(1);
    // A random start: two runs side by side seldom try the same ports.
    let start = rand::random::<u16>() % span;
    (0..span)
        .map(|i| FIXED_PORTS_FROM + (start + i) % span)
        .find(|&port| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok())
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::AddrInUse))
}

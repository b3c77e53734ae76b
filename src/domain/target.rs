//! Which addresses a crawl may never reach unless private targets are allowed:
//! the host itself, the private network, and the cloud's metadata endpoints
//! (DESIGN.md, "Safety"). Rules only; resolving names is `target_guard`'s.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is refused, or `None` when a crawl may reach it.
pub fn refusal(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => refusal_v4(v4),
        IpAddr::V6(v6) => refusal_v6(v6),
    }
}

fn refusal_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, _, _] = ip.octets();
    if ip == Ipv4Addr::new(169, 254, 169, 254) || ip == Ipv4Addr::new(169, 254, 170, 2) {
        return Some("a cloud metadata address");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    if ip.is_private() {
        return Some("private");
    }
    if ip.is_link_local() {
        return Some("link-local");
    }
    if ip.is_multicast() {
        return Some("multicast");
    }
    if ip.is_broadcast() {
        return Some("broadcast");
    }
    if a == 0 {
        // 0.0.0.0/8 reaches the host itself on Linux.
        return Some("\"this network\" (0.0.0.0/8)");
    }
    if a == 100 && (64..128).contains(&b) {
        return Some("shared address space (100.64.0.0/10)");
    }
    if a >= 240 {
        return Some("reserved");
    }
    None
}

fn refusal_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = embedded_ipv4(ip) {
        return refusal_v4(v4);
    }
    let segments = ip.segments();
    if ip == Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x254) {
        return Some("a cloud metadata address");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if segments[0] & 0xfe00 == 0xfc00 {
        return Some("unique-local");
    }
    if segments[0] & 0xffc0 == 0xfe80 {
        return Some("link-local");
    }
    if ip.is_multicast() {
        return Some("multicast");
    }
    None
}

/// The IPv4 address an IPv6 address reaches, for the forms that carry one:
/// mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d, deprecated but still
/// routed by some stacks), NAT64 (64:ff9b::a.b.c.d) and 6to4 (2002:aabb:ccdd::).
fn embedded_ipv4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let v4 = |hi: u16, lo: u16| Some(Ipv4Addr::from(((hi as u32) << 16) | lo as u32));
    if let Some(mapped) = ip.to_ipv4_mapped() {
        return Some(mapped);
    }
    match s {
        // :: and ::1 are IPv6's own unspecified and loopback addresses.
        [0, 0, 0, 0, 0, 0, hi, lo] if hi != 0 => v4(hi, lo),
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => v4(hi, lo),
        [0x2002, hi, lo, ..] => v4(hi, lo),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(ip: &str) -> Option<&'static str> {
        refusal(ip.parse().unwrap())
    }

    #[test]
    fn the_host_the_private_network_and_metadata_are_refused() {
        for (ip, why) in [
            ("169.254.169.254", "a cloud metadata address"),
            ("169.254.170.2", "a cloud metadata address"),
            ("fd00:ec2::254", "a cloud metadata address"),
            ("127.0.0.1", "loopback"),
            ("127.8.9.10", "loopback"),
            ("::1", "loopback"),
            ("10.0.0.1", "private"),
            ("172.16.5.4", "private"),
            ("192.168.1.1", "private"),
            ("169.254.1.1", "link-local"),
            ("fe80::1", "link-local"),
            ("fc00::1", "unique-local"),
            ("224.0.0.1", "multicast"),
            ("ff02::1", "multicast"),
            ("0.0.0.0", "\"this network\" (0.0.0.0/8)"),
            ("::", "unspecified"),
        ] {
            assert_eq!(refused(ip), Some(why), "{ip}");
        }
    }

    #[test]
    fn ipv4_in_ipv6_clothing_is_judged_as_ipv4() {
        assert_eq!(refused("::ffff:127.0.0.1"), Some("loopback"));
        assert_eq!(
            refused("::ffff:169.254.169.254"),
            Some("a cloud metadata address")
        );
        assert_eq!(refused("64:ff9b::a00:1"), Some("private"));
        assert_eq!(refused("::127.0.0.1"), Some("loopback"));
        assert_eq!(refused("::10.1.2.3"), Some("private"));
        assert_eq!(
            refused("2002:a9fe:a9fe::1"),
            Some("a cloud metadata address")
        );
        assert_eq!(refused("2002:7f00:1::"), Some("loopback"));
        assert_eq!(refused("2002:5db8:d822::1"), None);
        assert_eq!(refused("::1"), Some("loopback"));
        assert_eq!(refused("::"), Some("unspecified"));
        assert_eq!(refused("::ffff:93.184.216.34"), None);
    }

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:2800:220:1:248:1893:25c8:1946",
            "172.32.0.1",
        ] {
            assert_eq!(refused(ip), None, "{ip}");
        }
    }
}

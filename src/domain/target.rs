//! Which addresses crawlfleet never connects to, unless private targets are
//! allowed: every entry of the IANA IPv4 and IPv6 Special-Purpose Address
//! Registries that is not globally reachable, the cloud metadata addresses,
//! and multicast. Rules only; resolving names is `target_guard`'s.
//!
//! Registries as of 2026-11:
//! <https://www.iana.org/assignments/iana-ipv4-special-registry/>,
//! <https://www.iana.org/assignments/iana-ipv6-special-registry/>.

use std::{
    fmt,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
};

/// The rule that refuses an address: what a refusal names (never the address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub name: &'static str,
    pub range: &'static str,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.range)
    }
}

/// What a range of the tables says about the addresses in it.
#[derive(Debug, Clone, Copy)]
enum Verdict {
    Refused(Rule),
    /// Globally reachable: an exception inside a refused block.
    Reachable,
    /// Reaches the IPv4 address it carries, which is judged instead: NAT64
    /// (the last 32 bits) or 6to4 (bits 16 to 48).
    CarriesIpv4 {
        shift: u32,
    },
}

struct Range<T> {
    net: T,
    prefix: u32,
    verdict: Verdict,
}

const fn refused<T>(net: T, prefix: u32, name: &'static str, range: &'static str) -> Range<T> {
    Range {
        net,
        prefix,
        verdict: Verdict::Refused(Rule { name, range }),
    }
}

const fn reachable<T>(net: T, prefix: u32) -> Range<T> {
    Range {
        net,
        prefix,
        verdict: Verdict::Reachable,
    }
}

const fn v4(a: u8, b: u8, c: u8, d: u8) -> u32 {
    u32::from_be_bytes([a, b, c, d])
}

const fn v6(segments: [u16; 8]) -> u128 {
    let mut value = 0u128;
    let mut i = 0;
    while i < 8 {
        value = (value << 16) | segments[i] as u128;
        i += 1;
    }
    value
}

/// The most specific range containing an address decides (longest prefix).
#[rustfmt::skip]
const IPV4: &[Range<u32>] = &[
    refused(v4(0, 0, 0, 0), 8, "\"this network\"", "0.0.0.0/8"),
    refused(v4(10, 0, 0, 0), 8, "private-use", "10.0.0.0/8"),
    refused(v4(100, 64, 0, 0), 10, "shared address space", "100.64.0.0/10"),
    refused(v4(127, 0, 0, 0), 8, "loopback", "127.0.0.0/8"),
    refused(v4(169, 254, 0, 0), 16, "link-local", "169.254.0.0/16"),
    refused(v4(169, 254, 169, 254), 32, "cloud metadata", "169.254.169.254"),
    refused(v4(169, 254, 170, 2), 32, "cloud metadata (ECS task)", "169.254.170.2"),
    refused(v4(172, 16, 0, 0), 12, "private-use", "172.16.0.0/12"),
    refused(v4(192, 0, 0, 0), 24, "IETF protocol assignments", "192.0.0.0/24"),
    refused(v4(192, 0, 0, 0), 29, "IPv4 service continuity prefix", "192.0.0.0/29"),
    refused(v4(192, 0, 0, 8), 32, "IPv4 dummy address", "192.0.0.8/32"),
    reachable(v4(192, 0, 0, 9), 32),  // Port Control Protocol anycast
    reachable(v4(192, 0, 0, 10), 32), // TURN anycast
    refused(v4(192, 0, 0, 170), 31, "NAT64/DNS64 discovery", "192.0.0.170/31"),
    refused(v4(192, 0, 2, 0), 24, "documentation (TEST-NET-1)", "192.0.2.0/24"),
    refused(v4(192, 88, 99, 0), 24, "deprecated 6to4 relay anycast", "192.88.99.0/24"),
    refused(v4(192, 168, 0, 0), 16, "private-use", "192.168.0.0/16"),
    refused(v4(198, 18, 0, 0), 15, "benchmarking", "198.18.0.0/15"),
    refused(v4(198, 51, 100, 0), 24, "documentation (TEST-NET-2)", "198.51.100.0/24"),
    refused(v4(203, 0, 113, 0), 24, "documentation (TEST-NET-3)", "203.0.113.0/24"),
    refused(v4(224, 0, 0, 0), 4, "multicast", "224.0.0.0/4"),
    refused(v4(240, 0, 0, 0), 4, "reserved", "240.0.0.0/4"),
    refused(v4(255, 255, 255, 255), 32, "limited broadcast", "255.255.255.255/32"),
];

#[rustfmt::skip]
const IPV6: &[Range<u128>] = &[
    refused(v6([0, 0, 0, 0, 0, 0, 0, 0]), 128, "unspecified", "::/128"),
    refused(v6([0, 0, 0, 0, 0, 0, 0, 1]), 128, "loopback", "::1/128"),
    refused(v6([0, 0, 0, 0, 0, 0, 0, 0]), 96, "IPv4-compatible (deprecated)", "::/96"),
    refused(v6([0, 0, 0, 0, 0, 0xffff, 0, 0]), 96, "IPv4-mapped", "::ffff:0:0/96"),
    refused(v6([0, 0, 0, 0, 0xffff, 0, 0, 0]), 96, "IPv4-translated (SIIT)", "::ffff:0:0:0/96"),
    Range { net: v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0]), prefix: 96, verdict: Verdict::CarriesIpv4 { shift: 0 } },
    refused(v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0]), 48, "local-use IPv4/IPv6 translation", "64:ff9b:1::/48"),
    refused(v6([0x100, 0, 0, 0, 0, 0, 0, 0]), 64, "discard-only", "100::/64"),
    refused(v6([0x100, 0, 0, 1, 0, 0, 0, 0]), 64, "dummy IPv6 prefix", "100:0:0:1::/64"),
    refused(v6([0x2001, 0, 0, 0, 0, 0, 0, 0]), 23, "IETF protocol assignments", "2001::/23"),
    refused(v6([0x2001, 0, 0, 0, 0, 0, 0, 0]), 32, "Teredo", "2001::/32"),
    reachable(v6([0x2001, 1, 0, 0, 0, 0, 0, 1]), 128), // Port Control Protocol anycast
    reachable(v6([0x2001, 1, 0, 0, 0, 0, 0, 2]), 128), // TURN anycast
    reachable(v6([0x2001, 1, 0, 0, 0, 0, 0, 3]), 128), // DNS-SD service registration anycast
    refused(v6([0x2001, 2, 0, 0, 0, 0, 0, 0]), 48, "benchmarking", "2001:2::/48"),
    reachable(v6([0x2001, 3, 0, 0, 0, 0, 0, 0]), 32),  // AMT
    reachable(v6([0x2001, 4, 0x112, 0, 0, 0, 0, 0]), 48), // AS112-v6
    refused(v6([0x2001, 0x10, 0, 0, 0, 0, 0, 0]), 28, "deprecated ORCHID", "2001:10::/28"),
    reachable(v6([0x2001, 0x20, 0, 0, 0, 0, 0, 0]), 28), // ORCHIDv2
    reachable(v6([0x2001, 0x30, 0, 0, 0, 0, 0, 0]), 28), // drone remote ID
    refused(v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0]), 32, "documentation", "2001:db8::/32"),
    Range { net: v6([0x2002, 0, 0, 0, 0, 0, 0, 0]), prefix: 16, verdict: Verdict::CarriesIpv4 { shift: 80 } },
    refused(v6([0x3fff, 0, 0, 0, 0, 0, 0, 0]), 20, "documentation", "3fff::/20"),
    refused(v6([0x5f00, 0, 0, 0, 0, 0, 0, 0]), 16, "segment routing (SRv6) SIDs", "5f00::/16"),
    refused(v6([0xfc00, 0, 0, 0, 0, 0, 0, 0]), 7, "unique-local", "fc00::/7"),
    refused(v6([0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254]), 128, "cloud metadata", "fd00:ec2::254"),
    refused(v6([0xfe80, 0, 0, 0, 0, 0, 0, 0]), 10, "link-local", "fe80::/10"),
    refused(v6([0xfec0, 0, 0, 0, 0, 0, 0, 0]), 10, "deprecated site-local", "fec0::/10"),
    refused(v6([0xff00, 0, 0, 0, 0, 0, 0, 0]), 8, "multicast", "ff00::/8"),
];

/// The most specific range of `table` holding `address` (`bits` wide).
fn verdict<T>(table: &[Range<T>], address: T, bits: u32) -> Option<Verdict>
where
    T: Copy + PartialEq + std::ops::Shr<u32, Output = T>,
{
    table
        .iter()
        .filter(|r| r.prefix == 0 || address >> (bits - r.prefix) == r.net >> (bits - r.prefix))
        .max_by_key(|r| r.prefix)
        .map(|r| r.verdict)
}

/// The rule refusing `ip`, or `None` when a crawl may reach it.
pub fn refusal(ip: IpAddr) -> Option<Rule> {
    match ip {
        IpAddr::V4(v4) => refusal_v4(v4),
        IpAddr::V6(v6) => refusal_v6(v6),
    }
}

fn refusal_v4(ip: Ipv4Addr) -> Option<Rule> {
    match verdict(IPV4, u32::from(ip), 32)? {
        Verdict::Refused(rule) => Some(rule),
        Verdict::Reachable | Verdict::CarriesIpv4 { .. } => None,
    }
}

fn refusal_v6(ip: Ipv6Addr) -> Option<Rule> {
    let bits = u128::from(ip);
    match verdict(IPV6, bits, 128)? {
        Verdict::Refused(rule) => Some(rule),
        Verdict::Reachable => None,
        Verdict::CarriesIpv4 { shift } => refusal_v4(Ipv4Addr::from((bits >> shift) as u32)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(ip: &str) -> Option<&'static str> {
        refusal(ip.parse().unwrap()).map(|rule| rule.range)
    }

    /// Each entry of the registries that is not globally reachable, by an
    /// address inside it, and the exceptions inside them that are.
    #[test]
    fn every_special_purpose_entry_is_judged_as_the_registry_says() {
        for (ip, range) in [
            ("0.0.0.0", Some("0.0.0.0/8")),
            ("0.1.2.3", Some("0.0.0.0/8")),
            ("10.20.30.40", Some("10.0.0.0/8")),
            ("100.64.0.1", Some("100.64.0.0/10")),
            ("100.127.255.254", Some("100.64.0.0/10")),
            ("127.0.0.1", Some("127.0.0.0/8")),
            ("127.8.9.10", Some("127.0.0.0/8")),
            ("169.254.1.1", Some("169.254.0.0/16")),
            ("169.254.169.254", Some("169.254.169.254")),
            ("169.254.170.2", Some("169.254.170.2")),
            ("172.16.5.4", Some("172.16.0.0/12")),
            ("172.31.255.255", Some("172.16.0.0/12")),
            ("192.0.0.1", Some("192.0.0.0/29")),
            ("192.0.0.8", Some("192.0.0.8/32")),
            ("192.0.0.9", None),
            ("192.0.0.10", None),
            ("192.0.0.11", Some("192.0.0.0/24")),
            ("192.0.0.170", Some("192.0.0.170/31")),
            ("192.0.0.171", Some("192.0.0.170/31")),
            ("192.0.0.192", Some("192.0.0.0/24")),
            ("192.0.2.1", Some("192.0.2.0/24")),
            ("192.88.99.1", Some("192.88.99.0/24")),
            ("192.168.1.1", Some("192.168.0.0/16")),
            ("198.18.0.1", Some("198.18.0.0/15")),
            ("198.19.255.1", Some("198.18.0.0/15")),
            ("198.51.100.7", Some("198.51.100.0/24")),
            ("203.0.113.7", Some("203.0.113.0/24")),
            ("224.0.0.1", Some("224.0.0.0/4")),
            ("239.255.255.250", Some("224.0.0.0/4")),
            ("240.0.0.1", Some("240.0.0.0/4")),
            ("255.255.255.255", Some("255.255.255.255/32")),
            ("::", Some("::/128")),
            ("::1", Some("::1/128")),
            ("::2", Some("::/96")),
            ("::ffff:93.184.216.34", Some("::ffff:0:0/96")),
            ("::ffff:0:127.0.0.1", Some("::ffff:0:0:0/96")),
            ("64:ff9b:1::1", Some("64:ff9b:1::/48")),
            ("100::1", Some("100::/64")),
            ("100:0:0:1::1", Some("100:0:0:1::/64")),
            ("2001::1", Some("2001::/32")),
            ("2001:1::1", None),
            ("2001:1::2", None),
            ("2001:1::3", None),
            ("2001:1::4", Some("2001::/23")),
            ("2001:2::1", Some("2001:2::/48")),
            ("2001:3::1", None),
            ("2001:4:112::1", None),
            ("2001:10::1", Some("2001:10::/28")),
            ("2001:20::1", None),
            ("2001:30::1", None),
            ("2001:100::1", Some("2001::/23")),
            ("2001:db8::1", Some("2001:db8::/32")),
            ("3fff::1", Some("3fff::/20")),
            ("5f00::1", Some("5f00::/16")),
            ("fc00::1", Some("fc00::/7")),
            ("fd12:3456::1", Some("fc00::/7")),
            ("fd00:ec2::254", Some("fd00:ec2::254")),
            ("fe80::1", Some("fe80::/10")),
            ("fec0::1", Some("fec0::/10")),
            ("ff02::1", Some("ff00::/8")),
        ] {
            assert_eq!(refused(ip), range, "{ip}");
        }
    }

    /// NAT64 and 6to4 addresses reach the IPv4 address they carry: judged as it.
    #[test]
    fn addresses_carrying_ipv4_are_judged_as_the_ipv4_they_reach() {
        for (ip, range) in [
            ("64:ff9b::a00:1", Some("10.0.0.0/8")),
            ("64:ff9b::7f00:1", Some("127.0.0.0/8")),
            ("64:ff9b::a9fe:a9fe", Some("169.254.169.254")),
            ("64:ff9b::5db8:d822", None),
            ("2002:a9fe:a9fe::1", Some("169.254.169.254")),
            ("2002:7f00:1::", Some("127.0.0.0/8")),
            ("2002:c000:0201::1", Some("192.0.2.0/24")),
            ("2002:5db8:d822::1", None),
        ] {
            assert_eq!(refused(ip), range, "{ip}");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "192.0.1.1",
            "198.20.0.1",
            "223.255.255.255",
            "2606:2800:220:1:248:1893:25c8:1946",
            "2a00:1450:4001::1",
        ] {
            assert_eq!(refused(ip), None, "{ip}");
        }
    }

    #[test]
    fn a_rule_reads_as_its_name_and_range() {
        let rule = refusal("127.0.0.1".parse().unwrap()).unwrap();
        assert_eq!(rule.to_string(), "loopback (127.0.0.0/8)");
    }
}

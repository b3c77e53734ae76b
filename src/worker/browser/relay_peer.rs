//! Who is on the other end of a relay connection. The relays listen on
//! 127.0.0.1, where any process of the machine can connect, and they add a
//! site's proxy credentials and let through what the guard allows: they must
//! serve the worker's own Chrome and nothing else. Chrome cannot authenticate
//! to a SOCKS5 proxy (it has no username/password support for SOCKS), so the
//! relay identifies its client by the socket itself: the kernel's table of
//! TCP sockets (`/proc/net/tcp`) gives the inode of the client's end, and
//! that socket must be open in one of the Chrome processes running under the
//! worker's profile root (its network service).

use std::{
    collections::HashSet,
    fs,
    net::{IpAddr, SocketAddr},
    path::{Path, PathBuf},
    sync::{Mutex, RwLock},
};

use super::processes;

/// Whom a relay accepts connections from: Chrome's processes under one
/// profile root, or a remote browser's addresses.
pub enum ChromePeers {
    Local {
        profile_root: PathBuf,
        /// Chrome's pids last seen: the network service stays the same
        /// process for a browser's life, so the /proc scan for them is
        /// rarely repeated.
        known: Mutex<HashSet<i32>>,
    },
    /// A remote browser's processes are not in this machine's /proc: its
    /// connections are told by their source address alone, the endpoint's
    /// (resolved when the pool starts, and again at each connection to it:
    /// a browser that comes back elsewhere is served where it is). Anything
    /// else at that address can connect too: see "A remote browser" in
    /// docs/design.md.
    Remote { addresses: RwLock<Vec<IpAddr>> },
}

impl ChromePeers {
    pub fn under(profile_root: &Path) -> Self {
        Self::Local {
            profile_root: profile_root.to_owned(),
            known: Mutex::new(HashSet::new()),
        }
    }

    /// The remote browser at `addresses`.
    pub fn remote(addresses: Vec<IpAddr>) -> Self {
        Self::Remote {
            addresses: RwLock::new(addresses),
        }
    }

    /// The remote browser is at `addresses` now (it was resolved again).
    pub fn moved_to(&self, addresses: Vec<IpAddr>) {
        if let Self::Remote { addresses: known } = self {
            *known.write().expect("peers lock") = addresses;
        }
    }

    /// Whether the client end `peer` of a connection to `local` (the relay's
    /// address) is a socket of this worker's Chrome. Blocking: reads /proc.
    pub fn is_chrome(&self, peer: SocketAddr, local: SocketAddr) -> bool {
        match self {
            Self::Local {
                profile_root,
                known,
            } => is_local_chrome(profile_root, known, peer, local),
            Self::Remote { addresses } => addresses
                .read()
                .expect("peers lock")
                .contains(&unmapped(peer.ip())),
        }
    }
}

/// An IPv4 address written as IPv6 (`::ffff:a.b.c.d`), as IPv4.
fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn is_local_chrome(
    profile_root: &Path,
    known: &Mutex<HashSet<i32>>,
    peer: SocketAddr,
    local: SocketAddr,
) -> bool {
    {
        let Some(inode) = socket_inode(peer, local) else {
            return false;
        };
        let seen: Vec<i32> = known.lock().expect("peers lock").iter().copied().collect();
        if seen.iter().any(|pid| holds_socket(*pid, inode)) {
            return true;
        }
        let chrome = processes::pids_under(profile_root);
        let found = chrome.iter().any(|pid| holds_socket(*pid, inode));
        *known.lock().expect("peers lock") = chrome.into_iter().collect();
        found
    }
}

/// The inode of the TCP socket whose own address is `peer` and whose remote
/// address is `local`, as the kernel lists it.
fn socket_inode(peer: SocketAddr, local: SocketAddr) -> Option<u64> {
    let table = match peer.ip() {
        IpAddr::V4(_) => "/proc/net/tcp",
        IpAddr::V6(_) => "/proc/net/tcp6",
    };
    let listing = fs::read_to_string(table).ok()?;
    let (own, remote) = (proc_address(peer), proc_address(local));
    listing.lines().skip(1).find_map(|line| {
        let mut columns = line.split_whitespace();
        let (_, own_column, remote_column) = (columns.next()?, columns.next()?, columns.next()?);
        if !own_column.eq_ignore_ascii_case(&own) || !remote_column.eq_ignore_ascii_case(&remote) {
            return None;
        }
        // st, tx:rx, tr:when, retrnsmt, uid, timeout, inode
        columns.nth(6)?.parse().ok()
    })
}

/// An address as /proc/net/tcp writes it: the address's bytes as the host's
/// 32-bit words in hex, a colon, the port in hex.
fn proc_address(address: SocketAddr) -> String {
    let words: Vec<String> = match address.ip() {
        IpAddr::V4(ip) => vec![format!("{:08X}", u32::from_ne_bytes(ip.octets()))],
        IpAddr::V6(ip) => ip
            .octets()
            .chunks(4)
            .map(|word| {
                format!(
                    "{:08X}",
                    u32::from_ne_bytes(word.try_into().expect("4 bytes"))
                )
            })
            .collect(),
    };
    format!("{}:{:04X}", words.concat(), address.port())
}

/// Whether process `pid` has the socket `inode` open.
fn holds_socket(pid: i32, inode: u64) -> bool {
    let wanted = format!("socket:[{inode}]");
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        fs::read_link(fd.path()).is_ok_and(|target| target.as_os_str() == wanted.as_str())
    })
}

#[cfg(test)]
mod tests {
    use std::net::{TcpListener, TcpStream};

    use super::*;

    /// A remote browser's connections are told by their source address: the
    /// endpoint's, IPv4 written as IPv6 included; any other is a stranger,
    /// another loopback address too.
    #[test]
    fn a_remote_browser_is_served_only_from_its_own_address() {
        let peers = ChromePeers::remote(vec!["127.0.0.1".parse().unwrap()]);
        let relay: SocketAddr = "127.0.0.1:1080".parse().unwrap();
        for (peer, served) in [
            ("127.0.0.1:40000", true),
            ("[::ffff:127.0.0.1]:40000", true),
            ("127.0.0.2:40000", false),
            ("[::1]:40000", false),
            ("10.0.0.7:40000", false),
        ] {
            let peer: SocketAddr = peer.parse().unwrap();
            assert_eq!(peers.is_chrome(peer, relay), served, "{peer}");
        }
        // Found elsewhere when connected to again: served there alone.
        peers.moved_to(vec!["127.0.0.2".parse().unwrap()]);
        let (old, new): (SocketAddr, SocketAddr) = (
            "127.0.0.1:40000".parse().unwrap(),
            "127.0.0.2:40000".parse().unwrap(),
        );
        assert!(!peers.is_chrome(old, relay) && peers.is_chrome(new, relay));
    }

    #[test]
    fn addresses_are_written_as_the_kernel_writes_them() {
        let address: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        if cfg!(target_endian = "little") {
            assert_eq!(proc_address(address), "0100007F:1F90");
        }
    }

    /// The client end of a loopback connection is found in the kernel's
    /// table, and it is open in this process, not in a Chrome.
    #[test]
    fn a_connection_is_traced_to_the_process_holding_it() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        let client = TcpStream::connect(local).unwrap();
        let (_server_end, peer) = listener.accept().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        let inode = socket_inode(peer, local).expect("the socket is listed");
        assert!(holds_socket(std::process::id() as i32, inode));
        let root = std::env::temp_dir().join(format!("crawlfleet-peers-{}", std::process::id()));
        assert!(
            !ChromePeers::under(&root).is_chrome(peer, local),
            "no Chrome runs under {}",
            root.display()
        );
    }
}

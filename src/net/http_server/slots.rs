//! Connection slots: the open ones, the ones kept for requests with a valid
//! token, and each client's share (by the connection's address; a trusted
//! proxy's connections are nobody's: the balancer carries many clients).
//!
//! A slot is never held by a connection that serves nothing when another
//! needs it: as nginx drops idle keep-alive connections when it runs short,
//! a client at its cap gives up its own connection that has served nothing
//! the longest (idle, or a head never finished), and with every slot of a
//! kind taken the oldest such connection of that kind is given up. Only
//! connections serving requests hold on, so a client past its cap with all
//! of them busy, or a server whose open slots all serve, sends a connection
//! to the reserved slots, where only requests with a token are served.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Arc, Mutex},
};

use super::activity::Activity;

/// How many slots of each kind.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    pub open: usize,
    pub reserved: usize,
    pub per_client: usize,
}

/// The kind of slot a connection holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotKind {
    /// Anyone's requests.
    Open,
    /// Requests with a valid token (and the probes).
    Reserved,
}

/// A connection admitted to a slot.
pub struct Admitted {
    pub kind: SlotKind,
    /// Its client held its share, every connection of it serving: its
    /// requests without a token are refused for that (429).
    pub client_over_cap: bool,
    /// Connections given up to make room (closed by their tasks).
    pub replaced: usize,
    pub slot: Slot,
}

struct Member {
    kind: SlotKind,
    client: Option<IpAddr>,
    activity: Arc<Activity>,
}

#[derive(Default)]
struct Held {
    next_id: u64,
    members: HashMap<u64, Member>,
    open: usize,
    reserved: usize,
    per_client: HashMap<IpAddr, usize>,
}

impl Held {
    fn count(&self, kind: SlotKind) -> usize {
        match kind {
            SlotKind::Open => self.open,
            SlotKind::Reserved => self.reserved,
        }
    }

    fn remove(&mut self, id: u64) -> Option<Member> {
        let member = self.members.remove(&id)?;
        match member.kind {
            SlotKind::Open => self.open -= 1,
            SlotKind::Reserved => self.reserved -= 1,
        }
        if let Some(client) = member.client
            && let Some(count) = self.per_client.get_mut(&client)
        {
            *count -= 1;
            if *count == 0 {
                self.per_client.remove(&client);
            }
        }
        Some(member)
    }

    /// Gives up the connection that has served nothing the longest among
    /// those `which` picks (never a trusted proxy's: the balancer would
    /// reuse it); whether there was one.
    fn give_up_oldest(&mut self, which: impl Fn(&Member) -> bool) -> bool {
        let oldest = self
            .members
            .iter()
            .filter(|(_, m)| m.client.is_some() && which(m) && m.activity.serves_nothing())
            .min_by_key(|(_, m)| m.activity.idle_since())
            .map(|(id, _)| *id);
        match oldest.and_then(|id| self.remove(id)) {
            Some(member) => {
                member.activity.replace();
                true
            }
            None => false,
        }
    }
}

/// Every connection's slot.
pub struct ConnectionSlots {
    caps: Caps,
    held: Mutex<Held>,
}

impl ConnectionSlots {
    pub fn new(caps: Caps) -> Arc<Self> {
        Arc::new(ConnectionSlots {
            caps: Caps {
                open: caps.open.max(1),
                reserved: caps.reserved,
                per_client: caps.per_client.max(1),
            },
            held: Mutex::new(Held::default()),
        })
    }

    /// A slot for `activity`, a new connection of `client` (`None`: a trusted
    /// proxy's), giving up connections that serve nothing if need be; `None`
    /// when every slot it may have serves a request.
    pub fn admit(
        self: &Arc<Self>,
        client: Option<IpAddr>,
        activity: &Arc<Activity>,
    ) -> Option<Admitted> {
        let mut held = self.held.lock().expect("not poisoned");
        let mut replaced = 0;
        let mut client_over_cap = false;
        if let Some(ip) = client
            && held.per_client.get(&ip).copied().unwrap_or(0) >= self.caps.per_client
        {
            if held.give_up_oldest(|m| m.client == Some(ip)) {
                replaced += 1;
            } else {
                client_over_cap = true;
            }
        }
        let mut room = |held: &mut Held, kind: SlotKind, cap: usize| {
            if held.count(kind) < cap {
                return true;
            }
            let given_up = held.give_up_oldest(|m| m.kind == kind);
            replaced += given_up as usize;
            given_up
        };
        let kind = if !client_over_cap && room(&mut held, SlotKind::Open, self.caps.open) {
            SlotKind::Open
        } else if room(&mut held, SlotKind::Reserved, self.caps.reserved) {
            SlotKind::Reserved
        } else {
            return None;
        };
        let id = held.next_id;
        held.next_id += 1;
        match kind {
            SlotKind::Open => held.open += 1,
            SlotKind::Reserved => held.reserved += 1,
        }
        if let Some(ip) = client {
            *held.per_client.entry(ip).or_insert(0) += 1;
        }
        held.members.insert(
            id,
            Member {
                kind,
                client,
                activity: activity.clone(),
            },
        );
        Some(Admitted {
            kind,
            client_over_cap,
            replaced,
            slot: Slot {
                slots: self.clone(),
                id,
            },
        })
    }

    /// Connections held: open, reserved, and `client`'s (tests).
    #[cfg(test)]
    fn counts(&self, client: IpAddr) -> (usize, usize, usize) {
        let held = self.held.lock().expect("not poisoned");
        let of_client = held.per_client.get(&client).copied().unwrap_or(0);
        (held.open, held.reserved, of_client)
    }
}

/// A connection's slot, given back when dropped (unless given up before).
pub struct Slot {
    slots: Arc<ConnectionSlots>,
    id: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.slots.held.lock().expect("not poisoned");
        held.remove(self.id);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn caps(open: usize, reserved: usize, per_client: usize) -> Arc<ConnectionSlots> {
        ConnectionSlots::new(Caps {
            open,
            reserved,
            per_client,
        })
    }

    async fn was_replaced(activity: &Activity) -> bool {
        tokio::time::timeout(Duration::from_millis(100), activity.replaced())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn a_client_at_its_cap_gives_up_its_longest_idle_connection_never_a_busy_one() {
        let slots = caps(10, 2, 2);
        let client = ip("192.0.2.1");
        let (a, b, c, d) = (
            Activity::new(),
            Activity::new(),
            Activity::new(),
            Activity::new(),
        );
        let first = slots.admit(Some(client), &a).unwrap();
        let _second = slots.admit(Some(client), &b).unwrap();
        assert_eq!(first.kind, SlotKind::Open);
        // `a` serves a request; `b`, serving nothing, is the one given up.
        let _serving_a = a.begin();
        let third = slots.admit(Some(client), &c).unwrap();
        assert_eq!((third.kind, third.replaced), (SlotKind::Open, 1));
        assert!(was_replaced(&b).await && !was_replaced(&a).await);
        assert_eq!(slots.counts(client), (2, 0, 2));
        // Both serve: the next one is over the cap, on a reserved slot.
        let _serving_c = c.begin();
        let fourth = slots.admit(Some(client), &d).unwrap();
        assert!(fourth.client_over_cap);
        assert_eq!(fourth.kind, SlotKind::Reserved);
        // Another client has a share of its own.
        let other = slots
            .admit(Some(ip("192.0.2.2")), &Activity::new())
            .unwrap();
        assert_eq!((other.kind, other.client_over_cap), (SlotKind::Open, false));
        drop(fourth);
        assert_eq!(slots.counts(client), (3, 0, 2));
    }

    #[tokio::test]
    async fn full_open_slots_give_up_the_oldest_idle_one_and_then_the_reserved_take_the_rest() {
        let slots = caps(2, 1, 100);
        let proxy_idle = Activity::new();
        let _proxy = slots.admit(None, &proxy_idle).unwrap();
        let (idle, busy) = (Activity::new(), Activity::new());
        let _idle = slots.admit(Some(ip("192.0.2.1")), &idle).unwrap();
        // The open slots are full: the oldest connection serving nothing
        // goes, never a trusted proxy's.
        let newcomer = slots.admit(Some(ip("192.0.2.2")), &busy).unwrap();
        assert_eq!((newcomer.kind, newcomer.replaced), (SlotKind::Open, 1));
        assert!(was_replaced(&idle).await && !was_replaced(&proxy_idle).await);
        // Every open slot serves (or is the balancer's): a reserved one.
        let _serving = busy.begin();
        let first_reserved = Activity::new();
        let reserved = slots.admit(Some(ip("192.0.2.3")), &first_reserved).unwrap();
        assert_eq!(reserved.kind, SlotKind::Reserved);
        // Full, its one serving nothing: given up for the next.
        let second_reserved = Activity::new();
        let next = slots
            .admit(Some(ip("192.0.2.4")), &second_reserved)
            .unwrap();
        assert_eq!((next.kind, next.replaced), (SlotKind::Reserved, 1));
        assert!(was_replaced(&first_reserved).await);
        // All serving: no slot.
        let _serving_reserved = second_reserved.begin();
        assert!(
            slots
                .admit(Some(ip("192.0.2.5")), &Activity::new())
                .is_none()
        );
    }
}

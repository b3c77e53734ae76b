//! Every client's requests in flight, under a cap: keyed by the client the
//! api derives (behind a trusted proxy, the one it forwards), with and
//! without a valid credential counted apart, so a client's requests without
//! a token never use up the share of its requests with one.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Arc, Mutex},
};

/// Requests in flight, by client and by whether they carry a valid token.
pub struct ClientRequests {
    cap: usize,
    in_flight: Mutex<HashMap<(IpAddr, bool), usize>>,
}

impl ClientRequests {
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(ClientRequests {
            cap: cap.max(1),
            in_flight: Mutex::new(HashMap::new()),
        })
    }

    /// A request of `client` in flight, or `None` at its cap.
    pub fn take(self: &Arc<Self>, client: IpAddr, authenticated: bool) -> Option<ClientRequest> {
        let key = (client, authenticated);
        let mut in_flight = self.in_flight.lock().expect("not poisoned");
        let count = in_flight.entry(key).or_insert(0);
        if *count >= self.cap {
            return None;
        }
        *count += 1;
        Some(ClientRequest {
            table: self.clone(),
            key,
        })
    }
}

/// A request counted against its client's cap until its response is written.
pub struct ClientRequest {
    table: Arc<ClientRequests>,
    key: (IpAddr, bool),
}

impl Drop for ClientRequest {
    fn drop(&mut self) {
        let mut in_flight = self.table.in_flight.lock().expect("not poisoned");
        if let Some(count) = in_flight.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                in_flight.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_per_client_and_token_until_dropped() {
        let client: IpAddr = "192.0.2.1".parse().unwrap();
        let requests = ClientRequests::new(2);
        let held = [
            requests.take(client, false).unwrap(),
            requests.take(client, false).unwrap(),
        ];
        assert!(requests.take(client, false).is_none(), "at the cap");
        assert!(
            requests.take(client, true).is_some(),
            "requests with a token have their own share"
        );
        assert!(requests.take("192.0.2.2".parse().unwrap(), false).is_some());
        drop(held);
        assert!(requests.take(client, false).is_some());
    }
}

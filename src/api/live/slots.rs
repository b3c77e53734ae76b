//! How many WebSocket clients this api process serves at once: in all
//! (`MAX_WS_CLIENTS`), and per token (`MAX_WS_CLIENTS_PER_TOKEN`), so neither
//! a flood nor one token can take every slot. A client past either cap gets a
//! 503 before the upgrade.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::api::auth::TokenKey;

/// Which cap was full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    All,
    Token,
}

impl Full {
    pub fn as_str(self) -> &'static str {
        match self {
            Full::All => "all",
            Full::Token => "token",
        }
    }
}

/// Clients connected now, per token.
type PerToken = Arc<Mutex<HashMap<TokenKey, usize>>>;

#[derive(Clone)]
pub struct LiveSlots {
    all: Arc<Semaphore>,
    per_token: usize,
    held: PerToken,
}

/// One client's slot, given back when dropped (the connection ended).
pub struct LiveSlot {
    _all: OwnedSemaphorePermit,
    token: Option<(TokenKey, PerToken)>,
}

impl LiveSlots {
    pub fn new(all: usize, per_token: usize) -> Self {
        Self {
            all: Arc::new(Semaphore::new(all.max(1))),
            per_token: per_token.max(1),
            held: Arc::default(),
        }
    }

    /// A slot for a client of `token` (`None`: auth is disabled, and only the
    /// cap on all clients applies).
    pub fn take(&self, token: Option<TokenKey>) -> Result<LiveSlot, Full> {
        let all = self
            .all
            .clone()
            .try_acquire_owned()
            .map_err(|_| Full::All)?;
        let Some(key) = token else {
            return Ok(LiveSlot {
                _all: all,
                token: None,
            });
        };
        let mut held = self.held.lock().expect("live slots lock");
        let count = held.entry(key).or_insert(0);
        if *count >= self.per_token {
            return Err(Full::Token);
        }
        *count += 1;
        Ok(LiveSlot {
            _all: all,
            token: Some((key, self.held.clone())),
        })
    }
}

impl Drop for LiveSlot {
    fn drop(&mut self) {
        let Some((key, held)) = self.token.take() else {
            return;
        };
        let mut held = held.lock().expect("live slots lock");
        if let Some(count) = held.get_mut(&key) {
            *count -= 1;
            if *count == 0 {
                held.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_token_has_its_share_and_all_share_the_total() {
        let slots = LiveSlots::new(3, 2);
        let (a, b) = (TokenKey::of("a"), TokenKey::of("b"));
        let a1 = slots.take(Some(a)).unwrap();
        let _a2 = slots.take(Some(a)).unwrap();
        assert_eq!(slots.take(Some(a)).err(), Some(Full::Token));
        let _b1 = slots.take(Some(b)).unwrap();
        assert_eq!(slots.take(Some(b)).err(), Some(Full::All));
        assert_eq!(slots.take(None).err(), Some(Full::All));
        drop(a1);
        assert!(
            slots.take(Some(a)).is_ok(),
            "a slot comes back when its client goes"
        );
    }
}

//! What crawlfleet keeps in Postgres but may not keep in the clear — kept
//! site sessions, and a site's secrets (header values, proxy credentials) —
//! is sealed with `SESSION_KEY` (AES-256-GCM). Each sealed value is bound to
//! the row it belongs to (the associated data), so a value copied to another
//! row, or another kind of row, does not open.
//!
//! The key rotates without a moment where stored values do not open: the new
//! key becomes `SESSION_KEY` and the old one `SESSION_KEY_PREVIOUS`; values
//! open with either, new ones are sealed with the new key, and the api seals
//! every stored value again with it at start (`store::rekey`). Once that has
//! run, `SESSION_KEY_PREVIOUS` can go.

use aes_gcm::{
    Aes256Gcm, KeyInit, Nonce,
    aead::{Aead, Payload},
};

/// SESSION_KEY: the key that seals kept sessions and site secrets
/// (AES-256-GCM), and while it rotates the key it replaces, which still
/// opens; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionKey {
    current: [u8; 32],
    previous: Option<[u8; 32]>,
}

impl SessionKey {
    pub fn from_bytes(current: [u8; 32]) -> Self {
        SessionKey {
            current,
            previous: None,
        }
    }

    /// This key, still opening what `previous` sealed.
    pub fn replacing(self, previous: &SessionKey) -> Self {
        SessionKey {
            previous: Some(previous.current).filter(|p| *p != self.current),
            ..self
        }
    }

    /// Whether a previous key still opens values.
    pub fn is_rotating(&self) -> bool {
        self.previous.is_some()
    }
}

impl std::str::FromStr for SessionKey {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        use base64::Engine as _;
        let text = text.trim();
        let bytes = if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            hex::decode(text).map_err(|e| e.to_string())?
        } else {
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|_| "SESSION_KEY must be 64 hex characters or base64".to_owned())?
        };
        let key: [u8; 32] = bytes
            .try_into()
            .map_err(|b: Vec<u8>| format!("SESSION_KEY must be 32 bytes, not {}", b.len()))?;
        Ok(SessionKey::from_bytes(key))
    }
}

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKey(***)")
    }
}

/// A sealed value as stored: a random nonce and the ciphertext with its tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    pub nonce: Vec<u8>,
    pub sealed: Vec<u8>,
}

impl Sealed {
    /// Nonce and ciphertext as one value, where there is one place for it
    /// (a Redis key): the 12-byte nonce first.
    pub fn into_bytes(self) -> Vec<u8> {
        [self.nonce, self.sealed].concat()
    }

    /// What [`Sealed::into_bytes`] made; `None` when it is too short to be one.
    pub fn from_bytes(bytes: &[u8]) -> Option<Sealed> {
        let (nonce, sealed) = bytes.split_at_checked(NONCE_BYTES)?;
        Some(Sealed {
            nonce: nonce.to_vec(),
            sealed: sealed.to_vec(),
        })
    }
}

/// AES-GCM's nonce.
const NONCE_BYTES: usize = 12;

/// The key does not open the value: another key, another row, or tampered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the sealed value does not open with SESSION_KEY (the key changed, or the value was moved or altered)"
)]
pub struct NotOpened;

fn cipher(key: &[u8; 32]) -> Aes256Gcm {
    Aes256Gcm::new(key.into())
}

/// Seals `plain`, bound to `bound_to` (what it belongs to).
pub fn seal(key: &SessionKey, bound_to: &[u8], plain: &[u8]) -> Sealed {
    let nonce: [u8; NONCE_BYTES] = rand::random();
    let sealed = cipher(&key.current)
        .encrypt(
            Nonce::from_slice(&nonce),
            Payload {
                msg: plain,
                aad: bound_to,
            },
        )
        .expect("AES-GCM sealing does not fail");
    Sealed {
        nonce: nonce.to_vec(),
        sealed,
    }
}

/// Opens what [`seal`] sealed with the same key (or the one it replaces)
/// and `bound_to`.
pub fn open(sealed: &Sealed, key: &SessionKey, bound_to: &[u8]) -> Result<Vec<u8>, NotOpened> {
    open_with(sealed, &key.current, bound_to).or_else(|e| {
        key.previous
            .map_or(Err(e), |p| open_with(sealed, &p, bound_to))
    })
}

/// `sealed` sealed again with the current key when only the previous one
/// opens it; `None` when it needs nothing (or no previous key is set).
pub fn reseal(
    sealed: &Sealed,
    key: &SessionKey,
    bound_to: &[u8],
) -> Result<Option<Sealed>, NotOpened> {
    let Some(previous) = key.previous else {
        return Ok(None);
    };
    if open_with(sealed, &key.current, bound_to).is_ok() {
        return Ok(None);
    }
    let plain = open_with(sealed, &previous, bound_to)?;
    Ok(Some(seal(key, bound_to, &plain)))
}

fn open_with(sealed: &Sealed, key: &[u8; 32], bound_to: &[u8]) -> Result<Vec<u8>, NotOpened> {
    if sealed.nonce.len() != NONCE_BYTES {
        return Err(NotOpened);
    }
    cipher(key)
        .decrypt(
            Nonce::from_slice(&sealed.nonce),
            Payload {
                msg: &sealed.sealed,
                aad: bound_to,
            },
        )
        .map_err(|_| NotOpened)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> SessionKey {
        SessionKey::from_bytes([byte; 32])
    }

    #[test]
    fn a_sealed_value_opens_only_with_its_key_and_where_it_belongs() {
        let sealed = seal(&key(1), b"site 7", b"secret");
        assert_eq!(open(&sealed, &key(1), b"site 7").unwrap(), b"secret");
        assert_eq!(open(&sealed, &key(2), b"site 7"), Err(NotOpened));
        assert_eq!(open(&sealed, &key(1), b"site 8"), Err(NotOpened));
        let mut tampered = sealed.clone();
        tampered.sealed[0] ^= 1;
        assert_eq!(open(&tampered, &key(1), b"site 7"), Err(NotOpened));
        assert_ne!(seal(&key(1), b"site 7", b"secret").nonce, sealed.nonce);
    }

    #[test]
    fn while_rotating_both_keys_open_new_values_use_the_new_one_and_reseal_moves_old_ones() {
        let old = seal(&key(1), b"site 7", b"secret");
        let rotating = key(2).replacing(&key(1));
        assert!(rotating.is_rotating());
        assert_eq!(open(&old, &rotating, b"site 7").unwrap(), b"secret");
        let new = seal(&rotating, b"site 7", b"fresh");
        assert_eq!(open(&new, &key(2), b"site 7").unwrap(), b"fresh");
        assert_eq!(open(&new, &key(1), b"site 7"), Err(NotOpened));

        assert_eq!(
            reseal(&new, &rotating, b"site 7"),
            Ok(None),
            "already current"
        );
        let moved = reseal(&old, &rotating, b"site 7").unwrap().unwrap();
        assert_eq!(open(&moved, &key(2), b"site 7").unwrap(), b"secret");
        assert_eq!(
            reseal(&old, &rotating, b"site 8"),
            Err(NotOpened),
            "bound to its row"
        );
        assert_eq!(
            reseal(&old, &key(3).replacing(&key(4)), b"site 7"),
            Err(NotOpened)
        );
        assert_eq!(reseal(&old, &key(2), b"site 7"), Ok(None), "not rotating");
        assert!(!key(2).replacing(&key(2)).is_rotating());
    }
}

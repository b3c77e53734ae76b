//! An endpoint's signing secret, in the Standard Webhooks form
//! `whsec_<base64 of the key>`, and the signature of a message:
//! `v1,<base64 of HMAC-SHA256(key, "{id}.{timestamp}.{body}")>`.

use base64::{Engine as _, engine::general_purpose::STANDARD};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::super::FieldError;

/// The prefix of a secret in the Standard Webhooks form.
const PREFIX: &str = "whsec_";
/// Bytes of a generated key: 256 bits, as HMAC-SHA256's block wants at least.
const GENERATED_BYTES: usize = 32;
/// Accepted key lengths: Svix and the specification's examples use 24 to 64.
const KEY_BYTES: std::ops::RangeInclusive<usize> = 24..=64;

/// How responses show a secret (all but the creation's, or a rotation's);
/// sent back in a replacement, it keeps the stored secret.
pub const MASKED_SECRET: &str = "whsec_***";

/// The key an endpoint's messages are signed with.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret {
    key: Vec<u8>,
}

impl WebhookSecret {
    /// A new random key.
    pub fn generate() -> Self {
        let key: [u8; GENERATED_BYTES] = rand::random();
        WebhookSecret { key: key.to_vec() }
    }

    /// A secret as a client sends it: `whsec_` and the key in base64.
    pub fn parse(text: &str) -> Result<Self, FieldError> {
        let field = "secret";
        let encoded = text.trim().strip_prefix(PREFIX).ok_or_else(|| {
            FieldError::new(
                field,
                "must be whsec_ followed by the key in base64 (leave it out to have one generated)",
            )
        })?;
        let key = STANDARD
            .decode(encoded)
            .map_err(|_| FieldError::new(field, "the part after whsec_ must be base64"))?;
        if !KEY_BYTES.contains(&key.len()) {
            return Err(FieldError::new(
                field,
                format!(
                    "the key must be {} to {} bytes, not {}",
                    KEY_BYTES.start(),
                    KEY_BYTES.end(),
                    key.len()
                ),
            ));
        }
        Ok(WebhookSecret { key })
    }

    /// The secret in full, as the one response that shows it does (and the
    /// store, which seals it).
    pub fn expose(&self) -> String {
        format!("{PREFIX}{}", STANDARD.encode(&self.key))
    }

    /// The `webhook-signature` header of message `id` sent at `timestamp`
    /// (Unix seconds, the `webhook-timestamp` header) with `body`.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }
}

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(MASKED_SECRET)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks reference libraries.
    #[test]
    fn signatures_match_the_specifications_example() {
        let secret = WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(
            secret.sign(
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1614265330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
        let svix = WebhookSecret::parse("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD").unwrap();
        assert_eq!(
            svix.sign(
                "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
                1649367553,
                br#"{"email":"test@example.com","username":"test_user"}"#
            ),
            "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw="
        );
    }

    #[test]
    fn generated_secrets_are_random_and_read_back_as_themselves() {
        let a = WebhookSecret::generate();
        assert_ne!(a, WebhookSecret::generate());
        assert!(a.expose().starts_with("whsec_"));
        assert_eq!(WebhookSecret::parse(&a.expose()).unwrap(), a);
        assert_eq!(format!("{a:?}"), MASKED_SECRET);
    }

    #[test]
    fn malformed_secrets_are_refused() {
        for bad in ["", "hunter2", "whsec_", "whsec_!!!", "whsec_c2hvcnQ="] {
            assert_eq!(
                WebhookSecret::parse(bad).unwrap_err().field,
                "secret",
                "{bad}"
            );
        }
    }
}

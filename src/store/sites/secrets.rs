//! A site's secrets at rest: its header values and its proxy's credentials,
//! sealed with SESSION_KEY and bound to the site (`crate::store::sealing`); and the
//! sealing of values an earlier version stored in the clear.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sqlx::{PgPool, types::Json};

use crate::{
    domain::site::Identity,
    store::sealing::{self, Sealed, SessionKey},
};

/// A site's secrets as stored.
#[derive(Clone)]
pub(super) enum StoredSecrets {
    Sealed(Sealed),
    /// Stored before secrets were sealed, and not sealed yet (the api seals
    /// them at start when it has SESSION_KEY).
    Unsealed(Secrets),
}

impl std::fmt::Debug for StoredSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StoredSecrets::Sealed(_) => "Sealed",
            StoredSecrets::Unsealed(_) => "Unsealed",
        })
    }
}

/// What a site keeps sealed: its header values and, when it has
/// credentials, its proxy and its pool's members (one without is in the
/// clear, as shown).
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct Secrets {
    pub(super) headers: BTreeMap<String, String>,
    pub(super) proxy: Option<String>,
    /// The pool's members that have credentials, whole (sealed before pools
    /// were: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) pool: Vec<String>,
}

impl Secrets {
    pub(super) fn of(identity: &Identity) -> Self {
        Secrets {
            headers: identity.headers.clone(),
            proxy: identity
                .proxy
                .as_ref()
                .filter(|p| p.credentials().is_some())
                .map(|p| p.expose().to_owned()),
            pool: identity
                .pool
                .iter()
                .flat_map(|pool| pool.members())
                .filter(|m| m.proxy.credentials().is_some())
                .map(|m| m.proxy.expose().to_owned())
                .collect(),
        }
    }

    fn is_empty(&self) -> bool {
        self.headers.is_empty() && self.proxy.is_none() && self.pool.is_empty()
    }

    fn bound_to(id: i64) -> Vec<u8> {
        secrets_bound_to(id)
    }

    fn seal(&self, id: i64, key: &SessionKey) -> Sealed {
        let plain = serde_json::to_vec(self).expect("strings serialize");
        sealing::seal(key, &Self::bound_to(id), &plain)
    }
}

/// What the secrets of site `id` are bound to: no other site's opens.
pub(crate) fn secrets_bound_to(id: i64) -> Vec<u8> {
    format!("site {id} secrets").into_bytes()
}

/// Why a site's secrets could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    #[error("the site's header values and proxy are sealed, and SESSION_KEY is not set here")]
    NoKey,
    #[error("the site's secrets: {0}")]
    NotOpened(#[from] sealing::NotOpened),
    #[error("the site's secrets are unreadable: {0}")]
    Unreadable(#[from] serde_json::Error),
}

impl StoredSecrets {
    /// The secrets of site `site_id`, opened with `key` when sealed.
    pub(super) fn open(
        &self,
        site_id: i64,
        key: Option<&SessionKey>,
    ) -> Result<Secrets, SecretsError> {
        match self {
            StoredSecrets::Unsealed(secrets) => Ok(secrets.clone()),
            StoredSecrets::Sealed(sealed) => {
                let key = key.ok_or(SecretsError::NoKey)?;
                let plain = sealing::open(sealed, key, &Secrets::bound_to(site_id))?;
                Ok(serde_json::from_slice(&plain)?)
            }
        }
    }
}

/// Seals the identity's secrets for site `id` and clears any left unsealed.
pub(super) async fn write_secrets(
    tx: &mut sqlx::PgConnection,
    id: i64,
    identity: &Identity,
    key: Option<&SessionKey>,
) -> sqlx::Result<()> {
    let secrets = Secrets::of(identity);
    let sealed = match (secrets.is_empty(), key) {
        (true, _) => None,
        (false, Some(key)) => Some(secrets.seal(id, key)),
        (false, None) => {
            return Err(sqlx::Error::Configuration(
                "a site's header values and proxy are sealed with SESSION_KEY, which is not set"
                    .into(),
            ));
        }
    };
    sqlx::query!(
        r#"UPDATE sites SET secrets_nonce = $2, secrets_sealed = $3,
                  unsealed_headers = '{}', unsealed_proxy = NULL
           WHERE id = $1"#,
        id,
        sealed.as_ref().map(|s| s.nonce.as_slice()),
        sealed.as_ref().map(|s| s.sealed.as_slice()),
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Seals the secrets stored in the clear before they were sealed (an older
/// version); returns how many sites it sealed. Each is sealed only if it is
/// still what was read, so a site changed meanwhile is not overwritten.
pub async fn seal_unsealed(pool: &PgPool, key: &SessionKey) -> sqlx::Result<u64> {
    let rows = sqlx::query!(
        r#"SELECT id, unsealed_headers AS "headers: Json<BTreeMap<String, String>>", unsealed_proxy
           FROM sites WHERE unsealed_headers <> '{}' OR unsealed_proxy IS NOT NULL"#
    )
    .fetch_all(pool)
    .await?;
    let mut sealed_sites = 0;
    for row in rows {
        let secrets = Secrets {
            headers: row.headers.0.clone(),
            proxy: row.unsealed_proxy.clone(),
            pool: Vec::new(),
        };
        let sealed = secrets.seal(row.id, key);
        let done = sqlx::query!(
            r#"UPDATE sites SET secrets_nonce = $2, secrets_sealed = $3,
                      unsealed_headers = '{}', unsealed_proxy = NULL
               WHERE id = $1 AND unsealed_headers = $4 AND unsealed_proxy IS NOT DISTINCT FROM $5"#,
            row.id,
            sealed.nonce,
            sealed.sealed,
            Json(&row.headers.0) as _,
            row.unsealed_proxy,
        )
        .execute(pool)
        .await?;
        sealed_sites += done.rows_affected();
    }
    Ok(sealed_sites)
}

/// How many sites keep secrets in the clear (stored before they were sealed).
pub async fn count_unsealed(pool: &PgPool) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM sites WHERE unsealed_headers <> '{}' OR unsealed_proxy IS NOT NULL"#
    )
    .fetch_one(pool)
    .await
}

//! The end of a SESSION_KEY rotation: every value sealed with the previous
//! key is sealed again with the current one, so the previous key can go.
//! Each row is rewritten only if it is still the value that was read (a
//! worker saving a session meanwhile wins; its value is sealed with the
//! current key already), and one row at a time: nothing half-written.

use sqlx::{PgPool, Row};

use crate::store::sealing::{self, Sealed, SessionKey};

/// Where sealed values live: the table, its key column, the nonce and
/// ciphertext columns, and what a row's value is bound to.
struct SealedColumn {
    table: &'static str,
    id: &'static str,
    nonce: &'static str,
    sealed: &'static str,
    bound_to: fn(i64) -> Vec<u8>,
}

const SEALED_COLUMNS: [SealedColumn; 3] = [
    SealedColumn {
        table: "sites",
        id: "id",
        nonce: "secrets_nonce",
        sealed: "secrets_sealed",
        bound_to: crate::store::sites::secrets_bound_to,
    },
    SealedColumn {
        table: "site_sessions",
        id: "site_id",
        nonce: "nonce",
        sealed: "sealed",
        bound_to: crate::store::sessions::bound_to,
    },
    SealedColumn {
        table: "webhooks",
        id: "id",
        nonce: "secret_nonce",
        sealed: "secret_sealed",
        bound_to: crate::store::webhooks::secret_bound_to,
    },
];

/// What a re-sealing pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Resealed {
    /// Values sealed again with the current key.
    pub moved: u64,
    /// Values neither key opens (sealed with a third key, or altered): left
    /// as they are, and said so; they cannot be read until that key is back.
    pub unopenable: u64,
}

/// Seals again with the current key every stored value only the previous key
/// opens. Does nothing when `key` has no previous key.
pub async fn reseal_all(pool: &PgPool, key: &SessionKey) -> sqlx::Result<Resealed> {
    let mut done = Resealed::default();
    if !key.is_rotating() {
        return Ok(done);
    }
    for column in &SEALED_COLUMNS {
        let SealedColumn {
            table,
            id,
            nonce,
            sealed,
            bound_to,
        } = column;
        // Names are constants above, never input.
        let rows = sqlx::query(&format!(
            "SELECT {id} AS id, {nonce} AS nonce, {sealed} AS sealed FROM {table}
             WHERE {nonce} IS NOT NULL AND {sealed} IS NOT NULL"
        ))
        .fetch_all(pool)
        .await?;
        for row in rows {
            let row_id: i64 = row.try_get("id")?;
            let stored = Sealed {
                nonce: row.try_get("nonce")?,
                sealed: row.try_get("sealed")?,
            };
            match sealing::reseal(&stored, key, &bound_to(row_id)) {
                Ok(None) => {}
                Ok(Some(fresh)) => {
                    let updated = sqlx::query(&format!(
                        "UPDATE {table} SET {nonce} = $2, {sealed} = $3
                         WHERE {id} = $1 AND {nonce} = $4"
                    ))
                    .bind(row_id)
                    .bind(&fresh.nonce)
                    .bind(&fresh.sealed)
                    .bind(&stored.nonce)
                    .execute(pool)
                    .await?;
                    done.moved += updated.rows_affected();
                }
                Err(sealing::NotOpened) => {
                    tracing::warn!(
                        table,
                        id = row_id,
                        "a sealed value opens with neither SESSION_KEY nor SESSION_KEY_PREVIOUS; left as it is"
                    );
                    done.unopenable += 1;
                }
            }
        }
    }
    Ok(done)
}

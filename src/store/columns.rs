//! Domain enums as Postgres `TEXT` columns. Each is stored by its name
//! (`as_str`) and read back with `FromStr`, so `query!` reads
//! `state AS "state: RunState"` and binds a `RunState` (or a `&[RunState]` as
//! `text[]`, for `state = ANY($1)`) with no string in between. Text, not a
//! Postgres enum: a release that adds a variant rolls out while the previous
//! one still reads and writes the same column, and a name the reader does not
//! know is a decode error naming the column, not a corrupt value.

use std::{error::Error, str::FromStr};

use sqlx::{
    Decode, Encode, Postgres, Type,
    encode::IsNull,
    error::BoxDynError,
    postgres::{PgArgumentBuffer, PgHasArrayType, PgTypeInfo, PgValueRef},
};

use crate::domain::{
    change::Change,
    failure::FailureKind,
    item::IdentifiedBy,
    page::PagingEnd,
    page::StopReason,
    repair::RepairState,
    run::{AttemptOutcome, RunState, Trigger},
    site::{RenderMode, RunVerdict, VersionReason},
    webhook::{DeliveryState, WebhookEventType},
};

macro_rules! text_columns {
    ($($enum:ty),+ $(,)?) => {$(
        impl Type<Postgres> for $enum {
            fn type_info() -> PgTypeInfo {
                <&str as Type<Postgres>>::type_info()
            }

            fn compatible(ty: &PgTypeInfo) -> bool {
                <&str as Type<Postgres>>::compatible(ty)
            }
        }

        impl PgHasArrayType for $enum {
            fn array_type_info() -> PgTypeInfo {
                <&str as PgHasArrayType>::array_type_info()
            }
        }

        impl Encode<'_, Postgres> for $enum {
            fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
                <&str as Encode<Postgres>>::encode(self.as_str(), buf)
            }
        }

        impl<'r> Decode<'r, Postgres> for $enum {
            fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
                let name = <&str as Decode<Postgres>>::decode(value)?;
                Ok(name.parse::<$enum>()?)
            }
        }
    )+};
}

text_columns!(
    AttemptOutcome,
    Change,
    DeliveryState,
    FailureKind,
    IdentifiedBy,
    PagingEnd,
    RenderMode,
    RepairState,
    RunState,
    RunVerdict,
    StopReason,
    Trigger,
    VersionReason,
    WebhookEventType,
);

/// A text column read as the type it stands for.
pub(in crate::store) fn decode<T>(column: &str, value: &str) -> sqlx::Result<T>
where
    T: FromStr,
    T::Err: Error + Send + Sync + 'static,
{
    value.parse().map_err(|e| sqlx::Error::ColumnDecode {
        index: column.to_owned(),
        source: Box::new(e),
    })
}

/// A nullable text column read as the type it stands for.
pub(in crate::store) fn decode_optional<T>(
    column: &str,
    value: Option<&str>,
) -> sqlx::Result<Option<T>>
where
    T: FromStr,
    T::Err: Error + Send + Sync + 'static,
{
    value.map(|value| decode(column, value)).transpose()
}

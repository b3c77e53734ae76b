//! The SQL of a paged listing, written with only the filters a request
//! gives. One static query with `($1 IS NULL OR col = $1)` for every filter
//! has no good generic plan (Postgres cannot know which filters are off, so
//! it plans a sequential scan), and Postgres then plans it again on every
//! call. Written this way, each combination of filters is a query of its
//! own, prepared once per connection, whose cached plan fits it.

use sqlx::{Encode, Postgres, QueryBuilder, Type};

/// Largest page a listing reads (the api's largest `limit`).
pub const MAX_LIMIT: i64 = 1000;

/// A listing's query being written: `SELECT … FROM …`, then its filters.
pub(super) struct Listing<'args> {
    sql: QueryBuilder<'args, Postgres>,
    filtered: bool,
}

impl<'args> Listing<'args> {
    /// A listing of what `select_from` (a `SELECT … FROM …` without
    /// `WHERE`) reads.
    pub(super) fn new(select_from: &str) -> Self {
        Listing {
            sql: QueryBuilder::new(select_from),
            filtered: false,
        }
    }

    /// Adds the condition `{before}$n{after}`, `value` bound as `$n`, when a
    /// value is given; nothing when it is not.
    pub(super) fn filter<T>(&mut self, before: &str, value: Option<T>, after: &str) -> &mut Self
    where
        T: 'args + Encode<'args, Postgres> + Type<Postgres>,
    {
        if let Some(value) = value {
            self.sql
                .push(if self.filtered { " AND " } else { " WHERE " });
            self.sql.push(before).push_bind(value).push(after);
            self.filtered = true;
        }
        self
    }

    /// The query, ordered by `order_by` and limited to `limit` rows. The
    /// limit is written as a number, not bound: the plan Postgres caches for
    /// a bound LIMIT assumes a tenth of the table, and prefers a scan and a
    /// sort to walking an index for a page of rows. Checked (1 to
    /// [`MAX_LIMIT`]) so that few distinct queries come of it.
    pub(super) fn page(
        mut self,
        order_by: &str,
        limit: i64,
    ) -> sqlx::Result<QueryBuilder<'args, Postgres>> {
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(sqlx::Error::InvalidArgument(format!(
                "a listing's limit is between 1 and {MAX_LIMIT}, not {limit}"
            )));
        }
        self.sql
            .push(" ORDER BY ")
            .push(order_by)
            .push(" LIMIT ")
            .push(limit);
        Ok(self.sql)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sql(listing: Listing<'_>, limit: i64) -> String {
        listing.page("id DESC", limit).unwrap().sql().to_owned()
    }

    #[test]
    fn a_listing_without_filters_has_no_where_clause() {
        let listing = Listing::new("SELECT id, state FROM crawl_runs");
        assert_eq!(
            sql(listing, 100),
            "SELECT id, state FROM crawl_runs ORDER BY id DESC LIMIT 100"
        );
    }

    #[test]
    fn only_the_filters_given_are_written_each_value_bound() {
        let mut listing = Listing::new("SELECT a, b FROM t");
        listing
            .filter("a = ", None::<i64>, "")
            .filter("b = ", Some(2_i64), "")
            .filter("c = ", None::<&str>, "")
            .filter("f(", Some("x"), ") > 0");
        assert_eq!(
            sql(listing, 7),
            "SELECT a, b FROM t WHERE b = $1 AND f($2) > 0 ORDER BY id DESC LIMIT 7"
        );
    }

    #[test]
    fn a_limit_outside_one_to_the_maximum_is_refused() {
        for limit in [0, -1, MAX_LIMIT + 1] {
            let refused = Listing::new("SELECT 1").page("id", limit);
            assert!(
                matches!(refused, Err(sqlx::Error::InvalidArgument(_))),
                "{limit}"
            );
        }
        for limit in [1, MAX_LIMIT] {
            assert!(
                Listing::new("SELECT 1").page("id", limit).is_ok(),
                "{limit}"
            );
        }
    }
}

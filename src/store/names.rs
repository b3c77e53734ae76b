//! What ids stand for, in words: the keyword and site names live events show.

use sqlx::PgPool;

/// The text of a keyword (for a URL list's run: the list's name) and the
/// name of a site; `None` for an id that no longer exists (deleted since the
/// event was published).
pub async fn keyword_and_site(
    pool: &PgPool,
    (keyword_id, url_list_id): (Option<i64>, Option<i64>),
    site_id: i64,
) -> sqlx::Result<(Option<String>, Option<String>)> {
    let row = sqlx::query!(
        r#"SELECT COALESCE((SELECT keyword FROM keywords WHERE id = $1),
                           (SELECT name FROM url_lists WHERE id = $3)) AS keyword,
                  (SELECT name FROM sites WHERE id = $2) AS site"#,
        keyword_id,
        site_id,
        url_list_id
    )
    .fetch_one(pool)
    .await?;
    Ok((row.keyword, row.site))
}

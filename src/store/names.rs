//! What ids stand for, in words: the keyword and site names live events show.

use sqlx::PgPool;

/// The text of a keyword and the name of a site; `None` for an id that no
/// longer exists (deleted since the event was published).
pub async fn keyword_and_site(
    pool: &PgPool,
    keyword_id: i64,
    site_id: i64,
) -> sqlx::Result<(Option<String>, Option<String>)> {
    let row = sqlx::query!(
        r#"SELECT (SELECT keyword FROM keywords WHERE id = $1) AS keyword,
                  (SELECT name FROM sites WHERE id = $2) AS site"#,
        keyword_id,
        site_id
    )
    .fetch_one(pool)
    .await?;
    Ok((row.keyword, row.site))
}

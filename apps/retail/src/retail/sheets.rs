//! Product sheets: the facts `fichas` writes from, and the sheets it saves.

use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

/// The facts a product sheet is written from.
pub async fn product(pool: &PgPool, product_id: &str) -> sqlx::Result<Option<Value>> {
    let row = sqlx::query!(
        r#"
        select product_id, name, category, brand, price::float8 as "price!", attributes
        from retail.products where product_id = $1
        "#,
        product_id
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| {
        json!({"product_id": r.product_id, "name": r.name, "category": r.category,
               "brand": r.brand, "price": r.price, "attributes": r.attributes})
    }))
}

/// A finished product sheet; a later run for the same product replaces it.
#[derive(Debug, Clone)]
pub struct Sheet<'a> {
    pub product_id: &'a str,
    pub content: &'a str,
    pub rounds: i32,
    pub approved: bool,
    pub feedback: Option<&'a str>,
    pub run_id: Uuid,
}

pub async fn write_sheet(pool: &PgPool, sheet: &Sheet<'_>) -> sqlx::Result<()> {
    sqlx::query!(
        r#"
        insert into retail.product_sheets (product_id, content, rounds, approved, feedback, run_id)
        values ($1, $2, $3, $4, $5, $6)
        on conflict (product_id) do update
        set content = excluded.content, rounds = excluded.rounds, approved = excluded.approved,
            feedback = excluded.feedback, run_id = excluded.run_id, updated_at = now()
        "#,
        sheet.product_id,
        sheet.content,
        sheet.rounds,
        sheet.approved,
        sheet.feedback,
        sheet.run_id
    )
    .execute(pool)
    .await?;
    Ok(())
}

//! Products, stock and stores: what `tienda` looks up.

use serde_json::{Value, json};
use sqlx::PgPool;

/// Products whose name, category or brand contain any of the query's words, best match first.
pub async fn search_products(pool: &PgPool, query: &str, limit: i64) -> sqlx::Result<Vec<Value>> {
    let patterns: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| {
            word.chars().count() >= 3 && !STOPWORDS.contains(&word.to_lowercase().as_str())
        })
        .map(|word| format!("%{}%", word.to_lowercase()))
        .collect();
    if patterns.is_empty() {
        return Ok(Vec::new());
    }
    let rows = sqlx::query!(
        r#"
        select p.product_id, p.name, p.category, p.brand, p.price::float8 as "price!",
            (select count(*) from unnest($1::text[]) as w(pattern)
             where p.name ilike w.pattern or p.category ilike w.pattern or p.brand ilike w.pattern
            ) as "hits!"
        from retail.products p
        where p.name ilike any($1) or p.category ilike any($1) or p.brand ilike any($1)
        order by 6 desc, p.product_id
        limit $2
        "#,
        &patterns,
        limit
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            json!({"product_id": r.product_id, "name": r.name, "category": r.category,
                   "brand": r.brand, "price": r.price})
        })
        .collect())
}

/// Words too common to search by.
const STOPWORDS: &[&str] = &[
    "que", "los", "las", "del", "con", "para", "por", "una", "uno", "tenéis", "teneis", "hay",
    "tienes", "tiene", "queda", "quedan", "busco", "the", "and", "talla", "esta", "este", "tienda",
    "stock", "cuántas", "cuantas", "cuántos", "cuantos", "unidades",
];

/// A product's stock in one store, and in every other store that has it (nearest city first:
/// stores of the same city before the rest).
pub async fn stock(pool: &PgPool, product_id: &str, store_id: &str) -> sqlx::Result<Value> {
    let rows = sqlx::query!(
        r#"
        select s.store_id, st.name, st.city, s.quantity,
            coalesce(st.city = (select city from retail.stores where store_id = $2), false)
                as "same_city!"
        from retail.stock s
        join retail.stores st using (store_id)
        where s.product_id = $1
        order by (s.store_id = $2) desc, 5 desc, s.quantity desc, s.store_id
        "#,
        product_id,
        store_id
    )
    .fetch_all(pool)
    .await?;
    let here = rows
        .iter()
        .find(|r| r.store_id == store_id)
        .map_or(0, |r| r.quantity);
    let nearby: Vec<Value> = rows
        .iter()
        .filter(|r| r.store_id != store_id && r.quantity > 0)
        .map(|r| json!({"store_id": r.store_id, "name": r.name, "city": r.city, "quantity": r.quantity}))
        .collect();
    Ok(json!({"product_id": product_id, "store_id": store_id, "quantity": here, "nearby": nearby}))
}

/// A store's address, hours and phone (`None` when there is no such store).
pub async fn store(pool: &PgPool, store_id: &str) -> sqlx::Result<Option<Value>> {
    let row = sqlx::query!(
        "select store_id, name, city, address, opening_hours, phone from retail.stores where store_id = $1",
        store_id
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| {
        json!({"store_id": r.store_id, "name": r.name, "city": r.city, "address": r.address,
               "opening_hours": r.opening_hours, "phone": r.phone})
    }))
}

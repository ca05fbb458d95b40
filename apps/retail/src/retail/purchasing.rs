//! References below their reorder point and the daily purchase proposals: `compras`.

use chrono::NaiveDate;
use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

/// A store's reference below its reorder point.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct Reference {
    pub store_id: String,
    pub product_id: String,
    pub name: String,
    pub quantity: i32,
    pub reorder_point: i32,
    pub pack_size: i32,
}

/// Every reference below its reorder point (of one store, or of all), in a stable order.
pub async fn below_reorder_point(
    pool: &PgPool,
    store_id: Option<&str>,
) -> sqlx::Result<Vec<Reference>> {
    sqlx::query_as!(
        Reference,
        r#"
        select s.store_id, s.product_id, p.name, s.quantity, s.reorder_point, p.pack_size
        from retail.stock s
        join retail.products p using (product_id)
        where s.quantity < s.reorder_point and ($1::text is null or s.store_id = $1)
        order by s.store_id, s.product_id
        "#,
        store_id
    )
    .fetch_all(pool)
    .await
}

/// A quantity to order for a reference.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    pub reference: Reference,
    pub quantity: i32,
}

/// Writes a batch's proposals for `pass_date`; writing them again (a re-run batch) replaces
/// them, so each reference has one proposal per day.
pub async fn write_proposals(
    pool: &PgPool,
    pass_date: NaiveDate,
    run_id: Uuid,
    proposals: &[Proposal],
) -> sqlx::Result<()> {
    let stores: Vec<&str> = proposals
        .iter()
        .map(|p| p.reference.store_id.as_str())
        .collect();
    let products: Vec<&str> = proposals
        .iter()
        .map(|p| p.reference.product_id.as_str())
        .collect();
    let quantities: Vec<i32> = proposals.iter().map(|p| p.quantity).collect();
    let stock: Vec<i32> = proposals.iter().map(|p| p.reference.quantity).collect();
    let points: Vec<i32> = proposals
        .iter()
        .map(|p| p.reference.reorder_point)
        .collect();
    sqlx::query!(
        r#"
        insert into retail.purchase_proposals
            (pass_date, store_id, product_id, quantity, stock_at_proposal, reorder_point, run_id)
        select $1, * , $7 from unnest($2::text[], $3::text[], $4::int[], $5::int[], $6::int[])
        on conflict (pass_date, store_id, product_id) do update
        set quantity = excluded.quantity,
            stock_at_proposal = excluded.stock_at_proposal,
            reorder_point = excluded.reorder_point,
            run_id = excluded.run_id
        "#,
        pass_date,
        &stores as &[&str],
        &products as &[&str],
        &quantities,
        &stock,
        &points,
        run_id
    )
    .execute(pool)
    .await?;
    Ok(())
}

//! The `retail` schema (`apps/retail/migrations/`, the app's own): every statement the four graphs and the
//! approvals route run against the business data.
//!
//! Money is `numeric(10, 2)` in the database and `f64` here, cast at the boundary (`::float8`).

use sqlx::PgPool;

pub use catalogue::{search_products, stock, store};
pub use purchasing::{Proposal, Reference, below_reorder_point, write_proposals};
pub use returns::{
    APPROVAL_STATUSES, Approval, ApprovalRequest, Decider, Decision, approval, customer_order,
    decide, record_approval, refund, round2, store_approvals, task_approval, withdraw_pending,
};
pub use sheets::{Sheet, product, write_sheet};

mod catalogue;
mod purchasing;
mod returns;
mod sheets;

/// A small, realistic data set (four stores, a catalogue, stock, orders of two customers);
/// loading it again changes nothing.
///
/// # Errors
///
/// The database failed (or the `retail` schema is missing: run `mostrador migrate`).
pub async fn load_demo_data(pool: &PgPool) -> sqlx::Result<()> {
    sqlx::raw_sql(include_str!("demo.sql"))
        .execute(pool)
        .await?;
    Ok(())
}

//! Orders, returns, the managers' approvals and refunds: `cliente` and `GET /approvals`.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

/// An order of `customer`, with its lines and what each line may still be returned for
/// (`None` when there is no such order, or it is someone else's: the same answer, so a customer
/// cannot probe other customers' order numbers).
pub async fn customer_order(
    pool: &PgPool,
    customer: &str,
    order_id: &str,
) -> sqlx::Result<Option<Value>> {
    let Some(order) = sqlx::query!(
        r#"
        select o.order_id, o.store_id, o.placed_at, o.delivered_at, o.total::float8 as "total!"
        from retail.orders o
        where o.order_id = $1 and o.customer = $2
        "#,
        order_id,
        customer
    )
    .fetch_optional(pool)
    .await?
    else {
        return Ok(None);
    };
    let lines = sqlx::query!(
        r#"
        select l.line, l.product_id, p.name, p.category, l.quantity,
            (l.quantity * l.unit_price)::float8 as "amount!",
            rp.days as "policy_days?", rp.conditions as "conditions?"
        from retail.order_lines l
        join retail.products p using (product_id)
        left join retail.return_policies rp on rp.category = p.category
        where l.order_id = $1
        order by l.line
        "#,
        order_id
    )
    .fetch_all(pool)
    .await?;
    let refunded = sqlx::query_scalar!(
        r#"
        select coalesce(sum(f.amount), 0)::float8 as "refunded!"
        from retail.refunds f join retail.returns r using (return_id)
        where r.order_id = $1
        "#,
        order_id
    )
    .fetch_one(pool)
    .await?;
    let days_since_delivery = order.delivered_at.map(|at| (Utc::now() - at).num_days());
    let lines: Vec<Value> = lines
        .into_iter()
        .map(|l| {
            let returnable = match (days_since_delivery, l.policy_days) {
                (Some(days), Some(limit)) => days <= i64::from(limit),
                _ => false,
            };
            json!({"line": l.line, "product_id": l.product_id, "name": l.name,
                   "category": l.category, "quantity": l.quantity, "amount": l.amount,
                   "policy_days": l.policy_days, "conditions": l.conditions,
                   "returnable": returnable})
        })
        .collect();
    let returnable: f64 = lines
        .iter()
        .filter(|l| l["returnable"] == json!(true))
        .filter_map(|l| l["amount"].as_f64())
        .sum();
    Ok(Some(json!({
        "order_id": order.order_id,
        "store_id": order.store_id,
        "placed_at": order.placed_at,
        "delivered_at": order.delivered_at,
        "days_since_delivery": days_since_delivery,
        "total": order.total,
        "lines": lines,
        "already_refunded": refunded,
        "refundable": round2((returnable - refunded).max(0.0)),
    })))
}

pub fn round2(amount: f64) -> f64 {
    (amount * 100.0).round() / 100.0
}

/// A refund a `cliente` run proposes, waiting for a manager.
#[derive(Debug, Clone)]
pub struct ApprovalRequest<'a> {
    /// The proposing task: the same across the node's re-runs, so recording twice is recording
    /// once.
    pub task_id: &'a str,
    pub thread_id: Uuid,
    pub run_id: Uuid,
    pub store_id: &'a str,
    pub order_id: &'a str,
    pub amount: f64,
    pub reason: &'a str,
}

/// Records the return and its pending approval (once per task); returns the approval.
pub async fn record_approval(
    pool: &PgPool,
    request: &ApprovalRequest<'_>,
) -> sqlx::Result<Approval> {
    let return_id = Uuid::new_v5(
        &Uuid::NAMESPACE_OID,
        format!("return:{}", request.task_id).as_bytes(),
    );
    let approval_id = Uuid::new_v5(
        &Uuid::NAMESPACE_OID,
        format!("approval:{}", request.task_id).as_bytes(),
    );
    let mut tx = pool.begin().await?;
    sqlx::query!(
        r#"
        insert into retail.returns (return_id, order_id, thread_id, reason, proposed_amount)
        values ($1, $2, $3, $4, $5::float8)
        on conflict (return_id) do nothing
        "#,
        return_id,
        request.order_id,
        request.thread_id,
        request.reason,
        request.amount
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        r#"
        insert into retail.approvals
            (approval_id, task_id, thread_id, run_id, store_id, return_id, order_id, amount, reason)
        values ($1, $2, $3, $4, $5, $6, $7, $8::float8, $9)
        on conflict (task_id) do nothing
        "#,
        approval_id,
        request.task_id,
        request.thread_id,
        request.run_id,
        request.store_id,
        return_id,
        request.order_id,
        request.amount,
        request.reason
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    approval(pool, approval_id)
        .await?
        .ok_or_else(|| sqlx::Error::RowNotFound)
}

/// An approval in the managers' queue.
#[derive(Debug, Clone, Serialize)]
pub struct Approval {
    pub approval_id: Uuid,
    pub thread_id: Uuid,
    pub run_id: Uuid,
    pub store_id: String,
    pub return_id: Uuid,
    pub order_id: String,
    /// The refund proposed.
    pub amount: f64,
    pub reason: String,
    /// `pending`, `approved` or `rejected`.
    pub status: String,
    pub approved_amount: Option<f64>,
    pub note: Option<String>,
    pub created_at: DateTime<Utc>,
    pub decided_at: Option<DateTime<Utc>>,
}

/// One approval by id.
pub async fn approval(pool: &PgPool, approval_id: Uuid) -> sqlx::Result<Option<Approval>> {
    sqlx::query_as!(
        Approval,
        r#"
        select approval_id, thread_id, run_id, store_id, return_id, order_id,
            amount::float8 as "amount!", reason, status,
            approved_amount::float8 as "approved_amount?", note, created_at, decided_at
        from retail.approvals
        where approval_id = $1
        "#,
        approval_id
    )
    .fetch_optional(pool)
    .await
}

/// A store's approvals in `status` (`pending` when `None`), oldest first. Only approvals of
/// threads that belong to the store: the same rule that lets a manager resume them.
pub async fn store_approvals(
    pool: &PgPool,
    store_id: &str,
    status: Option<&str>,
    limit: i64,
    offset: i64,
) -> sqlx::Result<Vec<Approval>> {
    sqlx::query_as!(
        Approval,
        r#"
        select a.approval_id, a.thread_id, a.run_id, a.store_id, a.return_id, a.order_id,
            a.amount::float8 as "amount!", a.reason, a.status,
            a.approved_amount::float8 as "approved_amount?", a.note, a.created_at, a.decided_at
        from retail.approvals a
        join mostrador.threads t on t.thread_id = a.thread_id
        where a.store_id = $1 and a.status = coalesce($2, 'pending')
            and t.store = $1 and t.deleted_at is null
        order by a.created_at, a.approval_id
        limit $3 offset $4
        "#,
        store_id,
        status,
        limit,
        offset
    )
    .fetch_all(pool)
    .await
}

/// What a manager decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Refund this amount (the proposed one, or the manager's edit).
    Approve {
        amount: f64,
        note: Option<String>,
    },
    Reject {
        note: Option<String>,
    },
}

impl Decision {
    /// The decision in a resume value: `"approve"`, `"reject"`, or an object with `decision`
    /// (`approve`, `reject` or `edit`), `amount` (for `edit`, at most `proposed`) and `note`.
    ///
    /// # Errors
    ///
    /// Why the value is not a decision, for the manager to read.
    pub fn parse(value: &Value, proposed: f64) -> Result<Self, String> {
        let (name, amount, note) = match value {
            Value::String(name) => (name.as_str(), None, None),
            Value::Object(map) => (
                map.get("decision").and_then(Value::as_str).unwrap_or(""),
                map.get("amount"),
                map.get("note").and_then(Value::as_str).map(str::to_owned),
            ),
            _ => ("", None, None),
        };
        match name {
            "approve" | "approved" => Ok(Decision::Approve {
                amount: proposed,
                note,
            }),
            "reject" | "rejected" => Ok(Decision::Reject { note }),
            "edit" => {
                let amount = amount
                    .and_then(Value::as_f64)
                    .filter(|a| *a > 0.0 && *a <= proposed)
                    .ok_or_else(|| {
                        format!("an edit needs an amount above 0 and at most the proposed {proposed:.2}")
                    })?;
                Ok(Decision::Approve {
                    amount: round2(amount),
                    note,
                })
            }
            _ => Err(
                "the decision must be \"approve\", \"reject\" or {\"decision\": \"edit\", \"amount\": …}"
                    .into(),
            ),
        }
    }
}

/// Marks an approval decided (once: a re-run finds it decided and changes nothing).
pub async fn decide(pool: &PgPool, task_id: &str, decision: &Decision) -> sqlx::Result<()> {
    let (status, amount, note) = match decision {
        Decision::Approve { amount, note } => ("approved", Some(*amount), note.as_deref()),
        Decision::Reject { note } => ("rejected", None, note.as_deref()),
    };
    let mut tx = pool.begin().await?;
    let return_id = sqlx::query_scalar!(
        r#"
        update retail.approvals
        set status = $2, approved_amount = $3::float8, note = $4, decided_at = now()
        where task_id = $1 and status = 'pending'
        returning return_id
        "#,
        task_id,
        status,
        amount,
        note
    )
    .fetch_optional(&mut *tx)
    .await?;
    if let (Some(return_id), "rejected") = (return_id, status) {
        sqlx::query!(
            "update retail.returns set status = 'rejected', updated_at = now() where return_id = $1",
            return_id
        )
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await
}

/// Sends money back for a return, at most once per `idempotency_key` (and per return): a second
/// call returns what the first recorded. Announces each refund on the channel `retail_refunds`.
pub async fn refund(
    pool: &PgPool,
    idempotency_key: &str,
    return_id: Uuid,
    amount: f64,
    thread_id: Uuid,
    run_id: Uuid,
) -> sqlx::Result<Value> {
    let mut tx = pool.begin().await?;
    if let Some(recorded) =
        mostrador_queue::effects::claim(&mut tx, idempotency_key, "refund", thread_id, run_id)
            .await?
    {
        return Ok(recorded);
    }
    let refund_id = Uuid::now_v7();
    let refunded = sqlx::query_scalar!(
        r#"
        insert into retail.refunds (refund_id, return_id, amount, idempotency_key)
        values ($1, $2, $3::float8, $4)
        on conflict (return_id) do nothing
        returning amount::float8 as "amount!"
        "#,
        refund_id,
        return_id,
        amount,
        idempotency_key
    )
    .fetch_optional(&mut *tx)
    .await?;
    let result = match refunded {
        Some(amount) => {
            sqlx::query!(
                "update retail.returns set status = 'refunded', updated_at = now() where return_id = $1",
                return_id
            )
            .execute(&mut *tx)
            .await?;
            sqlx::query!(
                "select pg_notify('retail_refunds', $1)",
                return_id.to_string()
            )
            .execute(&mut *tx)
            .await?;
            json!({"status": "refunded", "refund_id": refund_id, "amount": amount})
        }
        None => json!({"status": "already_refunded", "return_id": return_id}),
    };
    mostrador_queue::effects::record(&mut tx, idempotency_key, &result).await?;
    tx.commit().await?;
    Ok(result)
}

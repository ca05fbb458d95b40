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

/// The approval task `task_id` recorded, if it did: a task that runs again (its resume, a crash)
/// finds the approval as the managers read it.
pub async fn task_approval(pool: &PgPool, task_id: &str) -> sqlx::Result<Option<Approval>> {
    let approval_id = sqlx::query_scalar!(
        "select approval_id from retail.approvals where task_id = $1",
        task_id
    )
    .fetch_optional(pool)
    .await?;
    match approval_id {
        Some(approval_id) => approval(pool, approval_id).await,
        None => Ok(None),
    }
}

/// Withdraws the approvals of `thread_id` still pending: called when the conversation goes on
/// (the thread waits on no approval then), so an approval is pending only while its thread waits
/// on it, and a request the customer replaced leaves the managers' queue.
pub async fn withdraw_pending(pool: &PgPool, thread_id: Uuid) -> sqlx::Result<()> {
    sqlx::query!(
        r#"
        with withdrawn as (
            update retail.approvals set status = 'withdrawn', decided_at = now()
            where thread_id = $1 and status = 'pending'
            returning return_id
        )
        update retail.returns set status = 'withdrawn', updated_at = now()
        where return_id in (select return_id from withdrawn)
        "#,
        thread_id
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// An approval in the managers' queue.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
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
    /// `pending`, `approved`, `rejected` or `withdrawn` (the conversation went on without a
    /// decision).
    #[schema(schema_with = approval_status)]
    pub status: String,
    pub approved_amount: Option<f64>,
    pub note: Option<String>,
    pub created_at: DateTime<Utc>,
    pub decided_at: Option<DateTime<Utc>>,
}

/// The statuses of an approval.
pub const APPROVAL_STATUSES: [&str; 4] = ["pending", "approved", "rejected", "withdrawn"];

fn approval_status() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .enum_values(Some(APPROVAL_STATUSES))
        .into()
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
            and t.tenant = $1 and t.deleted_at is null
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

/// Who answers an approval: the caller the api names in the resuming run's configuration
/// (`langgraph_auth_user`), never the resume value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decider {
    pub subject: String,
    pub roles: Vec<String>,
    /// The retail app's tenants are its stores.
    pub store: Option<String>,
}

impl Decider {
    /// The caller a run's `configurable` names (`None` when it names none: a run the api did not
    /// create).
    pub fn of_run(configurable: &Value) -> Option<Self> {
        let user = configurable.get("langgraph_auth_user")?;
        Some(Self {
            subject: user.get("identity")?.as_str()?.to_owned(),
            roles: user
                .get("roles")?
                .as_array()?
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            store: user
                .get("tenant")
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
    }

    /// Whether this caller decides refunds of an order of `customer` at `store`: a manager of
    /// that store (the order's, not the conversation's) who is not the customer.
    ///
    /// # Errors
    ///
    /// Why not, for the manager to read.
    pub fn may_decide(&self, store: &str, customer: &str) -> Result<(), String> {
        if !self.roles.iter().any(|role| role == "manager") || self.store.as_deref() != Some(store)
        {
            return Err(format!(
                "only a manager of the order's store ({store}) decides its refund"
            ));
        }
        if self.subject == customer {
            return Err("a manager does not decide a refund of their own order".into());
        }
        Ok(())
    }
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
    /// The decision on approval `approval_id` (of `proposed`) in a resume value: `"reject"`, or an
    /// object with `decision` (`approve`, `reject` or `edit`), `approval_id`, `amount` (for
    /// `edit`, at most `proposed`) and `note`. Paying names the approval it pays, so an approval
    /// is never paid on a decision made on another (a request the customer replaced after the
    /// manager read it).
    ///
    /// # Errors
    ///
    /// Why the value is not a decision on this approval, for the manager to read.
    pub fn parse(value: &Value, proposed: f64, approval_id: Uuid) -> Result<Self, String> {
        let (name, amount, note, named) = match value {
            Value::String(name) => (name.as_str(), None, None, None),
            Value::Object(map) => (
                map.get("decision").and_then(Value::as_str).unwrap_or(""),
                map.get("amount"),
                map.get("note").and_then(Value::as_str).map(str::to_owned),
                map.get("approval_id").and_then(Value::as_str),
            ),
            _ => ("", None, None, None),
        };
        let pays = matches!(name, "approve" | "approved" | "edit");
        if pays && named.and_then(|id| Uuid::parse_str(id).ok()) != Some(approval_id) {
            return Err(format!(
                "a refund is approved on the approval it pays: \
                 {{\"decision\": \"{name}\", \"approval_id\": \"{approval_id}\"}}; \
                 the thread now waits on this one, of {proposed:.2}"
            ));
        }
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
                "the decision must be \"reject\", or {\"decision\": \"approve\" | \"edit\", \"approval_id\": …, \"amount\": …}"
                    .into(),
            ),
        }
    }
}

/// Marks an approval decided by `decider` (once: a re-run finds it decided and changes nothing).
pub async fn decide(
    pool: &PgPool,
    task_id: &str,
    decision: &Decision,
    decider: &Decider,
) -> sqlx::Result<()> {
    let (status, amount, note) = match decision {
        Decision::Approve { amount, note } => ("approved", Some(*amount), note.as_deref()),
        Decision::Reject { note } => ("rejected", None, note.as_deref()),
    };
    let mut tx = pool.begin().await?;
    let return_id = sqlx::query_scalar!(
        r#"
        update retail.approvals
        set status = $2, approved_amount = $3::float8, note = $4, decided_at = now(),
            decided_by = $5, decided_store = $6
        where task_id = $1 and status = 'pending'
        returning return_id
        "#,
        task_id,
        status,
        amount,
        note,
        decider.subject,
        decider.store
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

/// Sends money back on an approved approval, at most once per `idempotency_key` (and per return):
/// a second call returns what the first recorded. Pays only what the rules allow when it runs, in
/// the transaction that pays: the approval was approved by a manager of the order's store who is
/// not its customer, and its amount fits in what the order may still refund (the order is locked,
/// so concurrent refunds of one order are counted one after the other). Otherwise nothing is
/// paid and the answer says why. Announces each refund on the channel `retail_refunds`.
pub async fn refund(
    pool: &PgPool,
    idempotency_key: &str,
    approval_id: Uuid,
    thread_id: Uuid,
    run_id: Uuid,
) -> sqlx::Result<Value> {
    let mut tx = pool.begin().await?;
    if let Some(recorded) =
        mostrador_queue::data::effects::claim(&mut tx, idempotency_key, "refund", thread_id, run_id)
            .await?
    {
        return Ok(recorded);
    }
    let result = pay(&mut tx, idempotency_key, approval_id).await?;
    mostrador_queue::data::effects::record(&mut tx, idempotency_key, &result).await?;
    tx.commit().await?;
    Ok(result)
}

async fn pay(
    tx: &mut sqlx::PgConnection,
    idempotency_key: &str,
    approval_id: Uuid,
) -> sqlx::Result<Value> {
    // The lock first, in a statement of its own: what the order has refunded is read after it,
    // in a snapshot that holds every refund committed before the lock was granted.
    let Some(approval) = sqlx::query!(
        r#"
        select a.return_id, a.order_id, a.status, a.approved_amount::float8 as "approved_amount?",
            a.decided_by, a.decided_store, o.customer, o.store_id
        from retail.approvals a
        join retail.orders o using (order_id)
        where a.approval_id = $1
        for update of o
        "#,
        approval_id
    )
    .fetch_optional(&mut *tx)
    .await?
    else {
        return Ok(json!({"status": "not_refunded", "note": "there is no such approval"}));
    };
    let decider = Decider {
        subject: approval.decided_by.unwrap_or_default(),
        roles: vec!["manager".into()],
        store: approval.decided_store,
    };
    let amount = match (approval.status.as_str(), approval.approved_amount) {
        ("approved", Some(amount)) => amount,
        _ => {
            return Ok(json!({"status": "not_refunded", "note": "the approval is not approved"}));
        }
    };
    if let Err(why) = decider.may_decide(&approval.store_id, &approval.customer) {
        return refused(tx, approval.return_id, &why).await;
    }
    let refundable = sqlx::query_scalar!(
        r#"
        select (
            coalesce((
                select sum(l.quantity * l.unit_price)
                from retail.order_lines l
                join retail.products p using (product_id)
                join retail.return_policies rp on rp.category = p.category
                join retail.orders o using (order_id)
                join retail.returns r on r.return_id = $2
                where l.order_id = $1 and o.delivered_at is not null
                    and r.created_at < o.delivered_at + make_interval(days => rp.days + 1)
            ), 0)
            - coalesce((
                select sum(f.amount)
                from retail.refunds f join retail.returns r using (return_id)
                where r.order_id = $1
            ), 0)
        )::float8 as "refundable!"
        "#,
        approval.order_id,
        approval.return_id
    )
    .fetch_one(&mut *tx)
    .await?;
    if amount > refundable + 0.001 {
        let why = format!(
            "the order may refund {:.2} now, less than the {amount:.2} approved",
            refundable.max(0.0)
        );
        return refused(tx, approval.return_id, &why).await;
    }
    let refund_id = Uuid::now_v7();
    let refunded = sqlx::query_scalar!(
        r#"
        insert into retail.refunds (refund_id, return_id, amount, idempotency_key, approval_id)
        values ($1, $2, $3::float8, $4, $5)
        on conflict (return_id) do nothing
        returning amount::float8 as "amount!"
        "#,
        refund_id,
        approval.return_id,
        amount,
        idempotency_key,
        approval_id
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(amount) = refunded else {
        return Ok(json!({"status": "already_refunded", "return_id": approval.return_id}));
    };
    sqlx::query!(
        "update retail.returns set status = 'refunded', updated_at = now() where return_id = $1",
        approval.return_id
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        "select pg_notify('retail_refunds', $1)",
        approval.return_id.to_string()
    )
    .execute(&mut *tx)
    .await?;
    Ok(json!({"status": "refunded", "refund_id": refund_id, "amount": amount}))
}

/// A refund the rules refuse (`not_refunded`): the return says so, and nothing is paid.
async fn refused(tx: &mut sqlx::PgConnection, return_id: Uuid, why: &str) -> sqlx::Result<Value> {
    sqlx::query!(
        "update retail.returns set status = 'refused', updated_at = now() where return_id = $1",
        return_id
    )
    .execute(&mut *tx)
    .await?;
    Ok(json!({"status": "not_refunded", "note": why}))
}

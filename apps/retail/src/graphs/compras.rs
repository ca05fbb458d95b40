//! `compras`, the daily purchasing pass: finds every reference (store × product) below its
//! reorder point, fans out batches of `batch_size` (50) references with `Send` — as many at once
//! as the run's `max_concurrency` allows — asks the model for the quantities of each batch, and
//! writes one proposal per reference and day (`retail.purchase_proposals`; a re-run batch
//! overwrites its own rows, so proposals are written idempotently).
//!
//! A drain lets the batches in flight finish and starts no other; the resumed run asks the model
//! only for the batches that had not finished (the engine's pending writes).
//!
//! Input (all optional): `{"store_id": "madrid-centro", "pass_date": "2026-11-30",
//! "batch_size": 50}`.

use chrono::{NaiveDate, Utc};
use mostrador_graph::{
    Command, Graph, NodeContext, NodeError, Reducer, RetryPolicy, START, Send, StateGraph,
};
use mostrador_model::{Model, Request, json_in};
use serde_json::{Value, json};
use sqlx::PgPool;

use super::{db, run_and_thread};
use crate::retail::{self, Proposal, Reference};

/// References per model call.
pub const BATCH_SIZE: usize = 50;

const SYSTEM: &str = "Eres el planificador de compras de una cadena de tiendas. Para cada \
    referencia (tienda y producto) recibes las existencias, el punto de pedido y el tamaño del \
    lote de compra. Propón cuántas unidades pedir: suficientes para llegar al doble del punto de \
    pedido, en lotes completos. Responde solo con JSON: {\"quantities\": [{\"store_id\": …, \
    \"product_id\": …, \"quantity\": …}]}, una entrada por referencia.";

pub fn graph(pool: &PgPool, model: &Model) -> Graph {
    let (plan_pool, batch_pool) = (pool.clone(), pool.clone());
    let model = model.clone();
    StateGraph::new()
        .channel("store_id", Reducer::LastValue)
        .channel("pass_date", Reducer::LastValue)
        .channel("batch_size", Reducer::LastValue)
        .channel("references", Reducer::LastValue)
        .channel("batches", Reducer::LastValue)
        .channel("done", Reducer::Append)
        .channel("summary", Reducer::LastValue)
        .node("plan", move |ctx| {
            let pool = plan_pool.clone();
            async move { plan(&pool, &ctx).await }
        })
        .node_with(
            "batch",
            move |ctx| {
                let (pool, model) = (batch_pool.clone(), model.clone());
                async move { batch(&pool, &model, &ctx).await }
            },
            Some(RetryPolicy::default()),
            None,
        )
        .node("summarize", |ctx| async move {
            let done = ctx
                .get("done")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let proposals: u64 = done.iter().filter_map(|d| d["proposals"].as_u64()).sum();
            let units: u64 = done.iter().filter_map(|d| d["units"].as_u64()).sum();
            Ok(Command::new().set(
                "summary",
                json!({"batches": done.len(), "proposals": proposals, "units": units}),
            ))
        })
        .edge(START, "plan")
        .edge("batch", "summarize")
        .compile()
        .expect("the compras graph is valid")
}

/// Finds the references to reorder and sends one `batch` task per `batch_size` of them.
async fn plan(pool: &PgPool, ctx: &NodeContext) -> Result<Command, NodeError> {
    let pass_date = match ctx.get("pass_date").and_then(Value::as_str) {
        Some(date) => NaiveDate::parse_from_str(date, "%Y-%m-%d").map_err(|_| {
            NodeError::fatal(format!(
                "pass_date must be a date (YYYY-MM-DD), not {date:?}"
            ))
        })?,
        None => Utc::now().date_naive(),
    };
    let batch_size = match ctx.get("batch_size") {
        None => BATCH_SIZE,
        Some(n) => n
            .as_u64()
            .filter(|n| (1..=1000).contains(n))
            .ok_or_else(|| NodeError::fatal("batch_size must be an integer from 1 to 1000"))?
            as usize,
    };
    let store = ctx.get("store_id").and_then(Value::as_str);
    let references = retail::below_reorder_point(pool, store).await.map_err(db)?;
    let sends: Vec<Send> = references
        .chunks(batch_size)
        .enumerate()
        .map(|(index, chunk)| {
            Send::new(
                "batch",
                json!({"index": index, "pass_date": pass_date, "references": chunk}),
            )
        })
        .collect();
    let mut command = Command::new()
        .set("pass_date", json!(pass_date))
        .set("references", json!(references.len()))
        .set("batches", json!(sends.len()));
    if sends.is_empty() {
        command = command.set("summary", json!({"batches": 0, "proposals": 0, "units": 0}));
    }
    for send in sends {
        command = command.goto(send);
    }
    Ok(command)
}

/// Asks the model for one batch's quantities and writes them.
async fn batch(pool: &PgPool, model: &Model, ctx: &NodeContext) -> Result<Command, NodeError> {
    let (run_id, _) = run_and_thread(ctx)?;
    let arg = ctx.arg().cloned().unwrap_or_default();
    let references: Vec<Reference> = serde_json::from_value(arg["references"].clone())
        .map_err(|err| NodeError::fatal(format!("a batch without references: {err}")))?;
    let pass_date: NaiveDate = serde_json::from_value(arg["pass_date"].clone())
        .map_err(|err| NodeError::fatal(format!("a batch without a pass date: {err}")))?;
    let question =
        json!({"role": "user", "content": json!({"references": references}).to_string()});
    let answer = model
        .ask(
            ctx,
            Request {
                task: "compras",
                system: SYSTEM,
                messages: &[question],
                tools: &[],
            },
        )
        .await?;
    let proposals = quantities(&references, &mostrador_model::text(&answer))
        .map_err(|why| NodeError::retryable(format!("the model's quantities: {why}")))?;
    retail::write_proposals(pool, pass_date, run_id, &proposals)
        .await
        .map_err(db)?;
    let units: i64 = proposals.iter().map(|p| i64::from(p.quantity)).sum();
    Ok(Command::new().set(
        "done",
        json!([{"index": arg["index"], "proposals": proposals.len(), "units": units}]),
    ))
}

/// The model's answer as one proposal per reference of the batch.
///
/// # Errors
///
/// The answer is not the JSON asked for, misses a reference, or proposes a quantity that is not a
/// positive number of units (up to 100,000).
pub fn quantities(references: &[Reference], answer: &str) -> Result<Vec<Proposal>, String> {
    let answer = json_in(answer).ok_or("the answer holds no JSON object")?;
    let given = answer["quantities"]
        .as_array()
        .ok_or("the answer has no \"quantities\" list")?;
    references
        .iter()
        .map(|reference| {
            let entry = given
                .iter()
                .find(|q| {
                    q["store_id"] == reference.store_id && q["product_id"] == reference.product_id
                })
                .ok_or_else(|| {
                    format!(
                        "no quantity for {}/{}",
                        reference.store_id, reference.product_id
                    )
                })?;
            let quantity = entry["quantity"]
                .as_i64()
                .filter(|q| (1..=100_000).contains(q))
                .ok_or_else(|| {
                    format!(
                        "quantity {} for {}/{}",
                        entry["quantity"], reference.store_id, reference.product_id
                    )
                })?;
            Ok(Proposal {
                reference: reference.clone(),
                quantity: quantity as i32,
            })
        })
        .collect()
}

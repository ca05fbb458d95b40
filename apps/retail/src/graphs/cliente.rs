//! `cliente`, customer service for returns. The model looks the order up and checks the return
//! policy (tools), then proposes a refund; the run **interrupts** for a manager of the store. The
//! approval is recorded in the managers' queue (`retail.approvals`) before the interrupt, so the
//! api lists it as soon as the run stops. A manager of the order's store resumes the thread with a
//! decision (`"reject"`, `{"decision": "approve", "approval_id": …}`, or
//! `{"decision": "edit", "approval_id": …, "amount": …}`); the refund is then executed once, keyed
//! by the refunding task, and the model tells the customer.
//!
//! The rules a refund keeps, whatever the customer sends and in whatever order: a decision pays
//! only the approval it names (a request replaced after the manager read it is withdrawn); the
//! decider is the caller the api names in the resuming run, a manager of the order's store who is
//! not its customer; and the refund, when it executes, pays no more than the order may still
//! refund (`retail::refund`). An approval is pending only while its thread waits on it: when the
//! conversation goes on without a decision, `agent` withdraws it.
//!
//! ```text
//! START → agent ⇄ tools
//!           ↓ propose_refund
//!        approval (interrupt) → refund → END
//! ```
//!
//! The model never decides the amount on its own: the approval node caps it at what the order
//! may still return, computed from the database.

use mostrador_graph::{Command, END, Graph, NodeContext, NodeError, Reducer, START, StateGraph};
use mostrador_model::{Model, Request, pending_tool_calls, tool, tool_message};
use mostrador_queue::Thread;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use super::{db, messages, run_and_thread};
use crate::retail::{self, Approval, ApprovalRequest, Decider, Decision};

const SYSTEM: &str = "Eres el servicio de atención al cliente de una cadena de tiendas y \
    gestionas devoluciones. Pide el número de pedido si falta; consulta el pedido y la política \
    de devoluciones con las herramientas; si procede, propón el reembolso con propose_refund (un \
    encargado de la tienda lo aprobará). No prometas nada que no esté aprobado. Responde en \
    español, con amabilidad y brevedad.";

fn tools() -> Vec<Value> {
    let order = json!({"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]});
    vec![
        tool(
            "lookup_order",
            "Un pedido del cliente: tienda, fechas, líneas e importes.",
            order.clone(),
        ),
        tool(
            "check_return_policy",
            "Qué líneas del pedido admiten devolución según la política, y el importe reembolsable.",
            order,
        ),
        tool(
            "propose_refund",
            "Propone un reembolso; un encargado de la tienda debe aprobarlo.",
            json!({"type": "object", "properties": {
                "order_id": {"type": "string"},
                "amount": {"type": "number"},
                "reason": {"type": "string"}
            }, "required": ["order_id", "amount", "reason"]}),
        ),
    ]
}

pub fn graph(pool: &PgPool, model: &Model) -> Graph {
    let (agent_model, refund_model) = (model.clone(), model.clone());
    let (agent_pool, tools_pool, approval_pool, refund_pool) =
        (pool.clone(), pool.clone(), pool.clone(), pool.clone());
    StateGraph::new()
        .channel("messages", Reducer::Messages)
        .channel("decision", Reducer::LastValue)
        .node("agent", move |ctx| {
            let (model, pool) = (agent_model.clone(), agent_pool.clone());
            async move {
                // The conversation goes on, so it waits on no approval: one still pending was
                // replaced (the customer wrote again before a decision) and leaves the queue.
                let (_, thread_id) = run_and_thread(&ctx)?;
                retail::withdraw_pending(&pool, thread_id)
                    .await
                    .map_err(db)?;
                let answer = ask(&model, &ctx, &messages(&ctx)).await?;
                Ok(Command::new().set("messages", json!([answer])))
            }
        })
        .node("tools", move |ctx| {
            let pool = tools_pool.clone();
            async move { run_tools(&pool, &ctx).await }
        })
        .node("approval", move |ctx| {
            let pool = approval_pool.clone();
            async move { approval(&pool, &ctx).await }
        })
        .node("refund", move |ctx| {
            let (pool, model) = (refund_pool.clone(), refund_model.clone());
            async move { refund(&pool, &model, &ctx).await }
        })
        .edge(START, "agent")
        .conditional_edge("agent", |state| {
            let history = state
                .get("messages")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let calls = pending_tool_calls(&history);
            vec![if calls.is_empty() {
                END
            } else if calls.iter().any(|c| c["name"] == "propose_refund") {
                "approval"
            } else {
                "tools"
            }]
        })
        .edge("tools", "agent")
        .edge("refund", END)
        .compile()
        .expect("the cliente graph is valid")
}

async fn ask(model: &Model, ctx: &NodeContext, history: &[Value]) -> Result<Value, NodeError> {
    let tools = tools();
    model
        .ask(
            ctx,
            Request {
                task: "cliente",
                system: SYSTEM,
                messages: history,
                tools: &tools,
            },
        )
        .await
}

/// The customer the thread belongs to.
async fn customer(pool: &PgPool, thread_id: Uuid) -> Result<String, NodeError> {
    Ok(super::thread(pool, thread_id).await?.owner)
}

async fn run_tools(pool: &PgPool, ctx: &NodeContext) -> Result<Command, NodeError> {
    let (_, thread_id) = run_and_thread(ctx)?;
    let customer = customer(pool, thread_id).await?;
    let mut results = Vec::new();
    for call in pending_tool_calls(&messages(ctx)) {
        let order_id = call["args"]["order_id"].as_str().unwrap_or("");
        let order = retail::customer_order(pool, &customer, order_id)
            .await
            .map_err(db)?;
        let result = match (call["name"].as_str().unwrap_or(""), order) {
            (_, None) => json!({"error": format!("the customer has no order {order_id:?}")}),
            ("lookup_order", Some(order)) => json!({
                "order_id": order["order_id"], "store_id": order["store_id"],
                "placed_at": order["placed_at"], "delivered_at": order["delivered_at"],
                "total": order["total"],
                "lines": order["lines"].as_array().into_iter().flatten()
                    .map(|l| json!({"name": l["name"], "quantity": l["quantity"], "amount": l["amount"]}))
                    .collect::<Vec<_>>(),
            }),
            ("check_return_policy", Some(order)) => policy(&order),
            (other, Some(_)) => json!({"error": format!("there is no tool {other:?}")}),
        };
        results.push(tool_message(&call, &result));
    }
    Ok(Command::new().set("messages", Value::Array(results)))
}

/// What the return policy allows for an order.
fn policy(order: &Value) -> Value {
    let refundable = order["refundable"].as_f64().unwrap_or(0.0);
    let why = if order["delivered_at"].is_null() {
        "el pedido aún no se ha entregado".to_owned()
    } else if order["already_refunded"].as_f64().unwrap_or(0.0) > 0.0 && refundable <= 0.0 {
        "ya se reembolsó".to_owned()
    } else if refundable <= 0.0 {
        format!(
            "han pasado {} días desde la entrega, fuera del plazo",
            order["days_since_delivery"]
        )
    } else {
        "dentro del plazo".to_owned()
    };
    json!({
        "order_id": order["order_id"],
        "refundable": refundable,
        "why": why,
        "lines": order["lines"].as_array().into_iter().flatten()
            .map(|l| json!({"name": l["name"], "amount": l["amount"], "returnable": l["returnable"],
                            "policy_days": l["policy_days"], "conditions": l["conditions"]}))
            .collect::<Vec<_>>(),
    })
}

/// Records the approval, then waits for a manager's decision (re-asking while the decision is
/// not one); on a decision, marks the approval decided and goes on to `refund`. When the task runs
/// again (its resume, a crash), it finds the approval it recorded, as the managers read it.
async fn approval(pool: &PgPool, ctx: &NodeContext) -> Result<Command, NodeError> {
    let (run_id, thread_id) = run_and_thread(ctx)?;
    let thread = super::thread(pool, thread_id).await?;
    let customer = thread.owner.clone();
    let call = pending_tool_calls(&messages(ctx))
        .into_iter()
        .find(|c| c["name"] == "propose_refund")
        .ok_or_else(|| NodeError::fatal("approval reached without a proposed refund"))?;
    let approval = match retail::task_approval(pool, ctx.task_id())
        .await
        .map_err(db)?
    {
        Some(approval) => approval,
        None => match propose(pool, ctx, &thread, run_id, &call).await? {
            Ok(approval) => approval,
            Err(refused) => {
                return Ok(Command::new()
                    .set("messages", json!([tool_message(&call, &refused)]))
                    .goto("agent"));
            }
        },
    };
    let (amount, order_id, store_id) = (approval.amount, &approval.order_id, &approval.store_id);
    let mut question = json!({
        "type": "refund_approval",
        "approval_id": approval.approval_id,
        "order_id": order_id,
        "store_id": store_id,
        "amount": amount,
        "reason": approval.reason,
        "question": format!("¿Apruebas un reembolso de {amount:.2} € del pedido {order_id}?"),
        "decisions": ["approve", "reject", "edit"],
    });
    // Each answer is judged with its decider, the caller of the run that gave it: only the latest
    // answer's run is this one (the earlier answers were refused when they were given).
    let (decision, decider) = loop {
        let answer = ctx.interrupt(question.clone())?;
        if !ctx.answer_is_latest() {
            continue;
        }
        let decider = Decider::of_run(ctx.config())
            .ok_or_else(|| NodeError::fatal("the resuming run names no caller"))?;
        let judged = decider
            .may_decide(store_id, &customer)
            .and_then(|()| Decision::parse(&answer, amount, approval.approval_id));
        match judged {
            Ok(decision) => break (decision, decider),
            Err(why) => question["error"] = json!(why),
        }
    };
    retail::decide(pool, ctx.task_id(), &decision, &decider)
        .await
        .map_err(db)?;
    let decided = match &decision {
        Decision::Approve { amount, note } => json!({
            "approved": true, "amount": amount, "note": note,
            "approval_id": approval.approval_id, "call": call,
        }),
        Decision::Reject { note } => json!({
            "approved": false, "note": note, "approval_id": approval.approval_id, "call": call,
        }),
    };
    Ok(Command::new().set("decision", decided).goto("refund"))
}

/// The approval of the refund `call` proposes, recorded for the managers; or why there is none
/// (the tool's answer): the order is not the customer's, nothing is left to refund, or the order is
/// another store's than the conversation's (only the order's store decides, and only its managers
/// see a conversation held with it).
async fn propose(
    pool: &PgPool,
    ctx: &NodeContext,
    thread: &Thread,
    run_id: Uuid,
    call: &Value,
) -> Result<Result<Approval, Value>, NodeError> {
    let order_id = call["args"]["order_id"].as_str().unwrap_or("");
    let Some(order) = retail::customer_order(pool, &thread.owner, order_id)
        .await
        .map_err(db)?
    else {
        return Ok(Err(json!({"status": "refused", "note": format!(
            "no encuentro el pedido {order_id} entre los del cliente"
        )})));
    };
    let refundable = order["refundable"].as_f64().unwrap_or(0.0);
    let asked = call["args"]["amount"].as_f64().unwrap_or(refundable);
    let amount = retail::round2(asked.min(refundable));
    if amount <= 0.0 {
        return Ok(Err(
            json!({"status": "refused", "note": "no queda nada reembolsable en este pedido"}),
        ));
    }
    let store_id = order["store_id"].as_str().unwrap_or("");
    if thread.tenant.as_deref() != Some(store_id) {
        return Ok(Err(json!({"status": "refused", "note": format!(
            "el pedido {order_id} es de la tienda {store_id}: su devolución la decide un \
             encargado de esa tienda, en una conversación con ella"
        )})));
    }
    let request = ApprovalRequest {
        task_id: ctx.task_id(),
        thread_id: thread.thread_id.0,
        run_id,
        store_id,
        order_id,
        amount,
        reason: call["args"]["reason"].as_str().unwrap_or(""),
    };
    Ok(Ok(retail::record_approval(pool, &request)
        .await
        .map_err(db)?))
}

/// Executes the approved refund (once, keyed by this task), then the model tells the customer.
async fn refund(pool: &PgPool, model: &Model, ctx: &NodeContext) -> Result<Command, NodeError> {
    let (run_id, thread_id) = run_and_thread(ctx)?;
    let decision = ctx
        .get("decision")
        .cloned()
        .ok_or_else(|| NodeError::fatal("refund reached without a decision"))?;
    let call = &decision["call"];
    let outcome = if decision["approved"] == json!(true) {
        let approval_id = decision["approval_id"]
            .as_str()
            .and_then(|id| Uuid::parse_str(id).ok())
            .ok_or_else(|| NodeError::fatal("the decision names no approval"))?;
        retail::refund(pool, ctx.task_id(), approval_id, thread_id, run_id)
            .await
            .map_err(db)?
    } else {
        json!({"status": "rejected", "note": decision["note"]})
    };
    let told = tool_message(call, &outcome);
    let mut history = messages(ctx);
    history.push(told.clone());
    let answer = ask(model, ctx, &history).await?;
    Ok(Command::new().set("messages", json!([told, answer])))
}

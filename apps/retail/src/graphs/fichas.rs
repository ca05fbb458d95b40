//! `fichas`, product data sheets: the writer drafts a sheet from the product's facts, the
//! reviewer scores it and says what is missing, and the writer tries again with that feedback, at
//! most `max_rounds` (3) times; then the sheet is saved (`retail.product_sheets`), approved or,
//! after the last round, the best effort marked unapproved. One product per run; fed in bulk
//! through `POST /runs/batch`.
//!
//! Input: `{"product_id": "ZAP-TRAIL-42"}`, optionally `"max_rounds": 1..=10`.
//!
//! ```text
//! START → load → write → review → save → END
//!                  ↑________| (not approved, rounds left)
//! ```

use mostrador_graph::{Command, END, Graph, NodeContext, NodeError, Reducer, START, StateGraph};
use mostrador_model::{Model, Request, json_in, text};
use serde_json::{Value, json};
use sqlx::PgPool;

use super::{db, run_and_thread};
use crate::retail::{self, Sheet};

pub const MAX_ROUNDS: u64 = 3;

const WRITER: &str = "Redactas fichas de producto para la web de una cadena de tiendas, en \
    español y en Markdown, con las secciones «## Descripción», «## Características» (todos los \
    datos del producto) y «## Cuidados». Usa solo los datos que recibes. Si recibes comentarios \
    del revisor, corrige lo que piden.";

const REVIEWER: &str = "Revisas fichas de producto. Comprueba que tienen las secciones \
    Descripción, Características y Cuidados y que mencionan todos los datos del producto. \
    Responde solo con JSON: {\"approved\": true|false, \"score\": 0..1, \"feedback\": \"…\"}.";

pub fn graph(pool: &PgPool, model: &Model) -> Graph {
    let (load_pool, save_pool) = (pool.clone(), pool.clone());
    let (writer, reviewer) = (model.clone(), model.clone());
    StateGraph::new()
        .channel("product_id", Reducer::LastValue)
        .channel("max_rounds", Reducer::LastValue)
        .channel("product", Reducer::LastValue)
        .channel("sheet", Reducer::LastValue)
        .channel("review", Reducer::LastValue)
        .channel("round", Reducer::LastValue)
        .node("load", move |ctx| {
            let pool = load_pool.clone();
            async move {
                let product_id = ctx
                    .get("product_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| NodeError::fatal("the input needs a product_id"))?;
                if let Some(rounds) = ctx.get("max_rounds") {
                    rounds
                        .as_u64()
                        .filter(|n| (1..=10).contains(n))
                        .ok_or_else(|| {
                            NodeError::fatal("max_rounds must be an integer from 1 to 10")
                        })?;
                }
                let product = retail::product(&pool, product_id)
                    .await
                    .map_err(db)?
                    .ok_or_else(|| {
                        NodeError::fatal(format!("there is no product {product_id:?}"))
                    })?;
                Ok(Command::new()
                    .set("product", product)
                    .set("round", json!(0)))
            }
        })
        .node("write", move |ctx| {
            let model = writer.clone();
            async move {
                let question = json!({
                    "product": ctx.get("product"),
                    "feedback": ctx.get("review").and_then(|r| r.get("feedback")),
                    "round": round(&ctx) + 1,
                });
                let answer = ask(&model, &ctx, "fichas_writer", WRITER, &question).await?;
                Ok(Command::new()
                    .set("sheet", json!(text(&answer)))
                    .set("round", json!(round(&ctx) + 1)))
            }
        })
        .node("review", move |ctx| {
            let model = reviewer.clone();
            async move {
                let question = json!({"product": ctx.get("product"), "sheet": ctx.get("sheet")});
                let answer = ask(&model, &ctx, "fichas_reviewer", REVIEWER, &question).await?;
                let review = json_in(&text(&answer))
                    .filter(|r| r["approved"].is_boolean())
                    .ok_or_else(|| NodeError::retryable("the review is not the JSON asked for"))?;
                Ok(Command::new().set("review", review))
            }
        })
        .node("save", move |ctx| {
            let pool = save_pool.clone();
            async move {
                let (run_id, _) = run_and_thread(&ctx)?;
                let review = ctx.get("review").cloned().unwrap_or_default();
                let sheet = Sheet {
                    product_id: ctx.get("product_id").and_then(Value::as_str).unwrap_or(""),
                    content: ctx.get("sheet").and_then(Value::as_str).unwrap_or(""),
                    rounds: i32::try_from(round(&ctx)).unwrap_or(i32::MAX),
                    approved: review["approved"] == json!(true),
                    feedback: review["feedback"].as_str().filter(|f| !f.is_empty()),
                    run_id,
                };
                retail::write_sheet(&pool, &sheet).await.map_err(db)?;
                Ok(Command::new())
            }
        })
        .edge(START, "load")
        .edge("load", "write")
        .edge("write", "review")
        .conditional_edge("review", |state| {
            let approved =
                state.get("review").and_then(|r| r.get("approved")) == Some(&json!(true));
            let rounds = state.get("round").and_then(Value::as_u64).unwrap_or(0);
            let limit = state
                .get("max_rounds")
                .and_then(Value::as_u64)
                .unwrap_or(MAX_ROUNDS);
            vec![if approved || rounds >= limit {
                "save"
            } else {
                "write"
            }]
        })
        .edge("save", END)
        .compile()
        .expect("the fichas graph is valid")
}

fn round(ctx: &NodeContext) -> u64 {
    ctx.get("round").and_then(Value::as_u64).unwrap_or(0)
}

async fn ask(
    model: &Model,
    ctx: &NodeContext,
    task: &'static str,
    system: &str,
    question: &Value,
) -> Result<Value, NodeError> {
    let question = json!({"role": "user", "content": question.to_string()});
    model
        .ask(
            ctx,
            Request {
                task,
                system,
                messages: &[question],
                tools: &[],
            },
        )
        .await
}

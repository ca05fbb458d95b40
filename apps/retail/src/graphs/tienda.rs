//! `tienda`, the store-floor assistant: a clerk asks about products, stock here and in nearby
//! stores, or the store itself; the model calls tools until it can answer. Interactive: one model
//! call per superstep, tools in between.
//!
//! Input: `{"messages": [{"role": "user", "content": "¿Quedan zapatillas Trail 42?"}]}`, and
//! optionally `store_id` (else the thread's store: the clerk's).

use mostrador_graph::{Command, END, Graph, NodeContext, NodeError, Reducer, START, StateGraph};
use mostrador_model::{Model, Request, pending_tool_calls, tool, tool_message};
use serde_json::{Value, json};
use sqlx::PgPool;

use super::{db, messages, run_and_thread};
use crate::retail;

const SYSTEM: &str = "Eres el asistente de sala de una cadena de tiendas. Respondes a \
    dependientes sobre productos, existencias en su tienda y en tiendas cercanas, y datos de la \
    tienda. Usa las herramientas; no inventes existencias ni precios. Responde en español, breve.";

fn tools() -> Vec<Value> {
    vec![
        tool(
            "search_products",
            "Busca productos del catálogo por nombre, categoría o marca.",
            json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
        ),
        tool(
            "stock",
            "Existencias de un producto en esta tienda y en las demás (las de la misma ciudad primero).",
            json!({"type": "object", "properties": {"product_id": {"type": "string"}}, "required": ["product_id"]}),
        ),
        tool(
            "store_info",
            "Dirección, horario y teléfono de esta tienda.",
            json!({"type": "object", "properties": {}}),
        ),
    ]
}

pub fn graph(pool: &PgPool, model: &Model) -> Graph {
    let (model, tools_pool) = (model.clone(), pool.clone());
    StateGraph::new()
        .channel("messages", Reducer::Messages)
        .channel("store_id", Reducer::LastValue)
        .node("agent", move |ctx| {
            let model = model.clone();
            async move {
                let history = messages(&ctx);
                let tools = tools();
                let answer = model
                    .ask(
                        &ctx,
                        Request {
                            task: "tienda",
                            system: SYSTEM,
                            messages: &history,
                            tools: &tools,
                        },
                    )
                    .await?;
                Ok(Command::new().set("messages", json!([answer])))
            }
        })
        .node("tools", move |ctx| {
            let pool = tools_pool.clone();
            async move { run_tools(&pool, &ctx).await }
        })
        .edge(START, "agent")
        .conditional_edge("agent", |state| {
            let history = state
                .get("messages")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            vec![if pending_tool_calls(&history).is_empty() {
                END
            } else {
                "tools"
            }]
        })
        .edge("tools", "agent")
        .compile()
        .expect("the tienda graph is valid")
}

async fn run_tools(pool: &PgPool, ctx: &NodeContext) -> Result<Command, NodeError> {
    let store_id = match ctx.get("store_id").and_then(Value::as_str) {
        Some(store) => Some(store.to_owned()),
        None => {
            let (_, thread_id) = run_and_thread(ctx)?;
            super::thread(pool, thread_id).await?.tenant
        }
    };
    let mut results = Vec::new();
    for call in pending_tool_calls(&messages(ctx)) {
        let args = &call["args"];
        let result = match (call["name"].as_str().unwrap_or(""), store_id.as_deref()) {
            ("search_products", _) => {
                let query = args["query"].as_str().unwrap_or("");
                json!({"products": retail::search_products(pool, query, 5).await.map_err(db)?})
            }
            ("stock", Some(store)) => {
                let product = args["product_id"].as_str().unwrap_or("");
                retail::stock(pool, product, store).await.map_err(db)?
            }
            ("store_info", Some(store)) => retail::store(pool, store)
                .await
                .map_err(db)?
                .unwrap_or_else(|| json!({"error": format!("no store {store:?}")})),
            ("stock" | "store_info", None) => {
                json!({"error": "this conversation has no store: pass store_id in the input"})
            }
            (other, _) => json!({"error": format!("there is no tool {other:?}")}),
        };
        results.push(tool_message(&call, &result));
    }
    Ok(Command::new().set("messages", Value::Array(results)))
}

//! The retail app's offline answers: what the built-in offline model
//! ([`mostrador_model::offline`]) says to each of the four graphs' questions, the way a capable
//! model would, reading the same prompts and tool results, so that `mostrador dev` and the tests
//! drive the graphs through their whole paths (the approval interrupt included) without a model
//! server.
//!
//! Its one scripted weakness: the product-sheet writer leaves out the care section in its first
//! draft, so the evaluator's loop runs a second round as it would with a real model.

use std::collections::BTreeMap;

use mostrador_model::offline::Answer;
use mostrador_model::{Request, json_in, kind, last_human, text};
use serde_json::{Value, json};

/// The answer to `request`, by its task.
pub fn answer(request: Request<'_>) -> Answer {
    match request.task {
        "tienda" => tienda(request.messages),
        "cliente" => cliente(request.messages),
        "compras" => Answer::Text(compras(&last_human(request.messages))),
        "fichas_writer" => Answer::Text(fichas_writer(&last_human(request.messages))),
        "fichas_reviewer" => Answer::Text(fichas_reviewer(&last_human(request.messages))),
        _ => mostrador_model::Offline::default_script(request),
    }
}
/// The results of the tools called since the last human message, by tool name.
fn tool_results(messages: &[Value]) -> BTreeMap<String, Value> {
    let since = messages
        .iter()
        .rposition(|m| kind(m) == "human")
        .map_or(0, |i| i + 1);
    messages[since..]
        .iter()
        .filter(|m| kind(m) == "tool")
        .filter_map(|m| {
            let name = m["name"].as_str()?.to_owned();
            let result = serde_json::from_str(&text(m)).unwrap_or(Value::Null);
            Some((name, result))
        })
        .collect()
}

fn money(amount: &Value) -> String {
    format!("{:.2} €", amount.as_f64().unwrap_or(0.0)).replace('.', ",")
}

fn tienda(messages: &[Value]) -> Answer {
    let question = last_human(messages);
    let lower = question.to_lowercase();
    let results = tool_results(messages);
    let about_store = [
        "horario",
        "abre",
        "abrís",
        "cierra",
        "cerráis",
        "dirección",
        "direccion",
        "teléfono",
        "dónde está",
    ]
    .iter()
    .any(|word| lower.contains(word));
    if about_store {
        let Some(info) = results.get("store_info") else {
            return Answer::Call(vec![("store_info", json!({}))]);
        };
        if info.get("error").is_some() {
            return Answer::Text("No tengo los datos de esta tienda.".into());
        }
        return Answer::Text(format!(
            "{} está en {}, {}. Horario: {}. Teléfono: {}.",
            info["name"].as_str().unwrap_or("La tienda"),
            info["address"].as_str().unwrap_or(""),
            info["city"].as_str().unwrap_or(""),
            info["opening_hours"].as_str().unwrap_or(""),
            info["phone"].as_str().unwrap_or(""),
        ));
    }
    let Some(found) = results.get("search_products") else {
        return Answer::Call(vec![("search_products", json!({"query": question}))]);
    };
    let products = found["products"].as_array().cloned().unwrap_or_default();
    let Some(first) = products.first() else {
        return Answer::Text(format!(
            "No encuentro ningún producto que coincida con «{}». ¿Me dices el nombre o la marca?",
            question.trim()
        ));
    };
    let Some(stock) = results.get("stock") else {
        return Answer::Call(vec![("stock", json!({"product_id": first["product_id"]}))]);
    };
    let mut answer = format!(
        "{} de {} ({}): ",
        first["name"].as_str().unwrap_or(""),
        first["brand"].as_str().unwrap_or(""),
        money(&first["price"]),
    );
    let here = stock["quantity"].as_i64().unwrap_or(0);
    if here > 0 {
        answer.push_str(&format!("quedan {here} unidades en esta tienda."));
    } else {
        answer.push_str("no queda en esta tienda.");
        match stock["nearby"].as_array().and_then(|n| n.first()) {
            Some(near) => answer.push_str(&format!(
                " Hay {} en {} ({}); podemos pedir que lo traigan.",
                near["quantity"],
                near["name"].as_str().unwrap_or(""),
                near["city"].as_str().unwrap_or("")
            )),
            None => answer.push_str(" Tampoco hay en otras tiendas."),
        }
    }
    let others: Vec<&str> = products[1..]
        .iter()
        .take(3)
        .filter_map(|p| p["name"].as_str())
        .collect();
    if !others.is_empty() {
        answer.push_str(&format!(" También tenemos: {}.", others.join(", ")));
    }
    Answer::Text(answer)
}

/// The first order number (`PED-` and digits) the customer wrote.
fn order_number(messages: &[Value]) -> Option<String> {
    messages
        .iter()
        .filter(|m| kind(m) == "human")
        .flat_map(|m| {
            text(m)
                .split(|c: char| !(c.is_alphanumeric() || c == '-'))
                .map(str::to_uppercase)
                .collect::<Vec<_>>()
        })
        .find(|word| {
            word.strip_prefix("PED-").is_some_and(|digits| {
                !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())
            })
        })
}

fn cliente(messages: &[Value]) -> Answer {
    let Some(order_id) = order_number(messages) else {
        return Answer::Text(
            "Para ayudarte con la devolución necesito el número de pedido (por ejemplo, PED-1001)."
                .into(),
        );
    };
    let results = tool_results(messages);
    let Some(order) = results.get("lookup_order") else {
        return Answer::Call(vec![("lookup_order", json!({"order_id": order_id}))]);
    };
    if order.get("error").is_some() {
        return Answer::Text(format!(
            "No encuentro el pedido {order_id} entre tus pedidos. ¿Puedes comprobar el número?"
        ));
    }
    let Some(policy) = results.get("check_return_policy") else {
        return Answer::Call(vec![("check_return_policy", json!({"order_id": order_id}))]);
    };
    if let Some(outcome) = results.get("propose_refund") {
        return Answer::Text(match outcome["status"].as_str() {
            Some("refunded" | "already_refunded") => format!(
                "Hecho: hemos aprobado la devolución del pedido {order_id} y te reembolsamos {}. \
                 Lo verás en tu cuenta en 3 a 5 días laborables.",
                money(&outcome["amount"])
            ),
            Some("not_refunded") => format!(
                "El encargado aprobó la devolución del pedido {order_id}, pero no puedo \
                 reembolsarla: {}.",
                outcome["note"]
                    .as_str()
                    .unwrap_or("el pedido ya no lo permite")
            ),
            Some("refused") => format!(
                "No puedo proponer un reembolso del pedido {order_id}: {}.",
                outcome["note"]
                    .as_str()
                    .unwrap_or("no hay nada que devolver")
            ),
            _ => format!(
                "El encargado de tu tienda ha revisado la devolución del pedido {order_id} y no la \
                 ha aprobado{}. Si quieres, te explico otras opciones.",
                outcome["note"]
                    .as_str()
                    .map(|n| format!(": {n}"))
                    .unwrap_or_default()
            ),
        });
    }
    let refundable = policy["refundable"].as_f64().unwrap_or(0.0);
    if refundable <= 0.0 {
        return Answer::Text(format!(
            "Lo siento: el pedido {order_id} no admite devolución ({}).",
            policy["why"]
                .as_str()
                .unwrap_or("fuera del plazo de la política de devoluciones")
        ));
    }
    Answer::Call(vec![(
        "propose_refund",
        json!({"order_id": order_id, "amount": refundable, "reason": last_human(messages)}),
    )])
}

/// Quantities for a batch: enough to reach twice the reorder point, in whole packs.
fn compras(question: &str) -> String {
    let request = json_in(question).unwrap_or(Value::Null);
    let quantities: Vec<Value> = request["references"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let stock = r["quantity"].as_i64().unwrap_or(0);
            let point = r["reorder_point"].as_i64().unwrap_or(0);
            let pack = r["pack_size"].as_i64().unwrap_or(1).max(1);
            let missing = (2 * point - stock).max(1);
            json!({
                "store_id": r["store_id"],
                "product_id": r["product_id"],
                "quantity": (missing + pack - 1) / pack * pack,
            })
        })
        .collect();
    json!({"quantities": quantities}).to_string()
}

/// The sections a product sheet must have.
pub const SHEET_SECTIONS: [&str; 3] = ["## Descripción", "## Características", "## Cuidados"];

fn fichas_writer(question: &str) -> String {
    let request = json_in(question).unwrap_or(Value::Null);
    let product = &request["product"];
    let feedback = request["feedback"].as_str().unwrap_or("");
    let attributes = product["attributes"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut sheet = format!(
        "# {}\n\n{} · {} · {}\n\n## Descripción\n\n{} de {}, {}.\n\n## Características\n\n",
        product["name"].as_str().unwrap_or(""),
        product["brand"].as_str().unwrap_or(""),
        product["category"].as_str().unwrap_or(""),
        money(&product["price"]),
        product["name"].as_str().unwrap_or(""),
        product["brand"].as_str().unwrap_or(""),
        attributes
            .get("uso")
            .and_then(Value::as_str)
            .unwrap_or("para el día a día"),
    );
    for (key, value) in attributes
        .iter()
        .filter(|(k, _)| *k != "cuidados" && *k != "uso")
    {
        let value = value
            .as_str()
            .map_or_else(|| value.to_string(), str::to_owned);
        sheet.push_str(&format!("- {key}: {value}\n"));
    }
    if feedback.contains("Cuidados") {
        sheet.push_str(&format!(
            "\n## Cuidados\n\n{}\n",
            attributes
                .get("cuidados")
                .and_then(Value::as_str)
                .unwrap_or("Sigue las indicaciones de la etiqueta.")
        ));
    }
    sheet
}

fn fichas_reviewer(question: &str) -> String {
    let request = json_in(question).unwrap_or(Value::Null);
    let sheet = request["sheet"].as_str().unwrap_or("");
    let missing: Vec<&str> = SHEET_SECTIONS
        .iter()
        .filter(|section| !sheet.contains(*section))
        .map(|section| section.trim_start_matches("## "))
        .collect();
    let facts_missing: Vec<String> = request["product"]["attributes"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(key, _)| *key != "cuidados" && *key != "uso")
        .filter(|(_, value)| {
            let value = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            !sheet.contains(&value)
        })
        .map(|(key, _)| key.clone())
        .collect();
    let approved = missing.is_empty() && facts_missing.is_empty();
    let score = 1.0 - 0.25 * missing.len() as f64 - 0.1 * facts_missing.len() as f64;
    let mut feedback = Vec::new();
    if !missing.is_empty() {
        feedback.push(format!("Falta la sección {}.", missing.join(", ")));
    }
    if !facts_missing.is_empty() {
        feedback.push(format!("No menciona: {}.", facts_missing.join(", ")));
    }
    json!({"approved": approved, "score": score.max(0.0), "feedback": feedback.join(" ")})
        .to_string()
}

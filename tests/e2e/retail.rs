//! The four retail graphs under `mostrador dev --demo-data` with the offline model, through the
//! api as a client uses it; the approval flow of `cliente`; the refund executed once when its node
//! runs again after a SIGKILL.

use std::time::Duration;

use mostrador_api::auth::mint;
use mostrador_api::{AuthConfig, Caller, ClaimPaths};
use mostrador_graph::StreamMode;
use mostrador_queue::RunStatus;
use mostrador_queue::run::{NewRun, RunConfig};
use serde_json::{Value, json};
use sqlx::PgPool;
use sqlx::postgres::PgListener;

use crate::support::{Db, Worker, assert_status};

/// The secret the tests give `mostrador dev` (`MOSTRADOR_JWT_SECRET`, set by `Worker::spawn`).
pub const DEV_SECRET: &str = "mostrador-dev-secret";

/// How the retail app's tokens are read (its policy's `[caller]`: the store in `store`, the role
/// in `role`), signed with `secret`.
pub fn retail_auth(secret: &str) -> AuthConfig {
    AuthConfig {
        secret: secret.into(),
        jwks_url: None,
        issuer: "mostrador".into(),
        audience: "mostrador".into(),
        claims: ClaimPaths {
            subject: "sub".into(),
            tenant: "store".into(),
            roles: "role".into(),
        },
    }
}

/// A token for a caller with one role, of a store.
pub fn token(secret: &str, subject: &str, role: &str, store: &str) -> String {
    let caller = Caller::new(subject)
        .with_roles([role])
        .in_tenant(Some(store));
    mint(&retail_auth(secret), &caller, Duration::from_secs(600)).expect("token")
}

/// A JSON request to the api process: status and body (`null` when empty or not JSON).
pub async fn call(
    api: &Worker,
    method: &str,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let bearer = format!("Bearer {token}");
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let (status, text) = api
        .request(
            method,
            path,
            &[
                ("Authorization", &bearer),
                ("Content-Type", "application/json"),
            ],
            &body,
        )
        .await
        .expect("the api answers");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// A customer's new thread on which `cliente` was asked to refund `message`; the thread id and
/// the values the run stopped with (an approval interrupt).
pub async fn ask_for_refund(api: &Worker, customer: &str, message: &str) -> (String, Value) {
    let (status, thread) = call(api, "POST", "/threads", customer, Some(json!({}))).await;
    assert_eq!(status, 200, "{thread}");
    let thread_id = thread["thread_id"].as_str().expect("thread id").to_owned();
    let (status, values) = call(
        api,
        "POST",
        &format!("/threads/{thread_id}/runs/wait"),
        customer,
        Some(json!({"assistant_id": "cliente", "input": {"messages": [
            {"role": "user", "content": message}
        ]}})),
    )
    .await;
    assert_eq!(status, 200, "{values}\n{}", api.log());
    assert_eq!(
        values["__interrupt__"][0]["value"]["type"], "refund_approval",
        "{values}"
    );
    (thread_id, values)
}

/// A manager's resume approving the refund `values` (the run's stop) waits on: a decision names
/// the approval it pays.
pub fn approve(values: &Value) -> Value {
    let approval_id = &values["__interrupt__"][0]["value"]["approval_id"];
    assert!(approval_id.is_string(), "{values}");
    json!({"assistant_id": "cliente",
           "command": {"resume": {"decision": "approve", "approval_id": approval_id}}})
}

async fn dev(db: &Db) -> Worker {
    let dev = Worker::spawn(db, "dev", "dev", &["--demo-data"]);
    dev.until_ready_is(200).await;
    dev
}

fn last_message(values: &Value) -> &Value {
    values["messages"]
        .as_array()
        .and_then(|m| m.last())
        .expect("messages")
}

/// Asks tienda `question` as the caller of `token` and waits for the answer: the final values,
/// after checking the run ended well.
async fn ask_tienda(dev: &Worker, token: &str, question: &str) -> Value {
    let (status, values) = call(
        dev,
        "POST",
        "/runs/wait",
        token,
        Some(json!({"assistant_id": "tienda", "input": {"messages": [
            {"role": "user", "content": question}
        ]}})),
    )
    .await;
    assert_eq!(status, 200, "{values}");
    assert!(values.get("__error__").is_none(), "{values}");
    values
}

/// The content of the messages of `values` that tool `name` answered with.
fn tool_answers<'a>(values: &'a Value, name: &str) -> Vec<&'a str> {
    values["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["type"] == "tool" && m["name"] == name)
        .filter_map(|m| m["content"].as_str())
        .collect()
}

async fn count(pool: &PgPool, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(pool)
        .await
        .expect("count")
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn tienda_answers_from_stock_here_and_nearby(pool: PgPool) {
    let db = Db::new(pool).await;
    let dev = dev(&db).await;
    let clerk = token(DEV_SECRET, "pepe", "clerk", "madrid-centro");
    let values = ask_tienda(&dev, &clerk, "¿Quedan zapatillas de trail Cumbre 42?").await;
    let tools: Vec<&str> = values["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["type"] == "tool")
        .filter_map(|m| m["name"].as_str())
        .collect();
    assert_eq!(tools, ["search_products", "stock"], "{values}");
    let answer = last_message(&values);
    let text = answer["content"].as_str().expect("text");
    assert!(text.contains("no queda en esta tienda"), "{text}");
    assert!(
        text.contains("Madrid Norte"),
        "the nearest store with stock: {text}"
    );
    assert_eq!(
        answer["response_metadata"]["model_name"],
        "mostrador-offline"
    );

    let values = ask_tienda(&dev, &clerk, "¿A qué hora cierra la tienda?").await;
    let text = last_message(&values)["content"].as_str().expect("text");
    assert!(text.contains("Calle de Preciados 12"), "{text}");

    // A caller whose store is none of the chain's (the token `mostrador dev` prints and its
    // dashboard uses): the stock of every store is "nearby", none is "here".
    let stranger = token(DEV_SECRET, "dev", "manager", "dev");
    let values = ask_tienda(&dev, &stranger, "¿Quedan zapatillas de trail Cumbre 42?").await;
    let stock: Value = serde_json::from_str(tool_answers(&values, "stock")[0]).expect("json");
    assert_eq!(stock["quantity"], 0, "{stock}");
    assert!(
        stock["nearby"].as_array().is_some_and(|n| !n.is_empty()),
        "{stock}"
    );
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn compras_proposes_every_reference_below_its_reorder_point(pool: PgPool) {
    let db = Db::new(pool).await;
    let dev = dev(&db).await;
    let below = count(
        &db.pool,
        "select count(*) from retail.stock where quantity < reorder_point",
    )
    .await;
    assert!(below > 5, "the demo data has references to reorder");
    let manager = token(DEV_SECRET, "marta", "manager", "madrid-centro");
    let (status, values) = call(
        &dev,
        "POST",
        "/runs/wait",
        &manager,
        Some(
            json!({"assistant_id": "compras", "input": {"batch_size": 5},
                    "config": {"max_concurrency": 3}}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{values}");
    let batches = (below + 4) / 5;
    assert_eq!(
        values["summary"]["batches"],
        json!(batches),
        "{}",
        values["summary"]
    );
    assert_eq!(values["summary"]["proposals"], json!(below));
    assert_eq!(
        count(&db.pool, "select count(*) from retail.purchase_proposals").await,
        below
    );
    assert_eq!(
        count(
            &db.pool,
            "select count(*) from retail.purchase_proposals pp
             join retail.products p using (product_id)
             where pp.quantity <= 0 or pp.quantity % p.pack_size <> 0
                or pp.stock_at_proposal + pp.quantity < 2 * pp.reorder_point"
        )
        .await,
        0,
        "every proposal is whole packs reaching twice the reorder point"
    );

    // Passing again the same day overwrites the day's proposals.
    let (status, _) = call(
        &dev,
        "POST",
        "/runs/wait",
        &manager,
        Some(json!({"assistant_id": "compras", "input": {"batch_size": 5}})),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        count(&db.pool, "select count(*) from retail.purchase_proposals").await,
        below,
        "one proposal per reference and day"
    );
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn compras_drained_mid_pass_resumes_without_reasking_the_model(pool: PgPool) {
    let db = Db::new(pool).await;
    mostrador_retail::retail::load_demo_data(&db.pool)
        .await
        .expect("demo data");
    let references = count(
        &db.pool,
        "select count(*) from retail.stock where quantity < reorder_point",
    )
    .await;
    let mut first = Worker::start(
        &db,
        "first",
        &["--graphs", "compras", "--offline-latency", "200ms"],
    );
    first.until_ready_is(200).await;
    // One reference per batch, two batches at a time.
    let run = db
        .enqueue_with("compras", |new| NewRun {
            input: Some(json!({"batch_size": 1})),
            config: RunConfig::from_value(json!({"max_concurrency": 2})).expect("a config"),
            stream_mode: vec![StreamMode::Updates, StreamMode::Messages],
            ..new
        })
        .await;
    let mut events = db.follow(&run).await;
    let mut batches_done = 0;
    while batches_done < 4 {
        let event = events
            .next()
            .await
            .expect("events")
            .expect("the run goes on");
        if event.event == "updates" && event.data.get("batch").is_some() {
            batches_done += 1;
        }
    }
    first.terminate();
    assert!(
        first.exit(Duration::from_secs(20)).await.success(),
        "{}",
        first.log()
    );
    assert_status(&db.run(&run).await, RunStatus::Pending);
    let proposed = count(&db.pool, "select count(*) from retail.purchase_proposals").await;
    assert!(
        (4..references).contains(&proposed),
        "drained mid-pass: {proposed} of {references} references proposed"
    );

    let second = Worker::start(&db, "second", &["--graphs", "compras"]);
    second.until_ready_is(200).await;
    assert_status(
        &db.until_end(&run, Duration::from_secs(60)).await,
        RunStatus::Success,
    );
    assert_eq!(
        count(&db.pool, "select count(*) from retail.purchase_proposals").await,
        references
    );
    let asked: i64 = sqlx::query_scalar(
        "select count(distinct data->0->>'id') from mostrador.run_events
         where run_id = $1 and event = 'messages'",
    )
    .bind(run.run_id.0)
    .fetch_one(&db.pool)
    .await
    .expect("model calls");
    assert_eq!(
        asked, references,
        "the model was asked once per batch, across both workers"
    );
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn fichas_fed_in_bulk_write_one_reviewed_sheet_per_product(pool: PgPool) {
    let db = Db::new(pool).await;
    let dev = dev(&db).await;
    let products: Vec<String> =
        sqlx::query_scalar("select product_id from retail.products order by product_id")
            .fetch_all(&db.pool)
            .await
            .expect("products");
    let clerk = token(DEV_SECRET, "pepe", "clerk", "madrid-centro");
    let batch: Vec<Value> = products
        .iter()
        .map(|id| json!({"assistant_id": "fichas", "on_completion": "keep", "input": {"product_id": id}}))
        .chain([json!({"assistant_id": "fichas", "on_completion": "keep", "input": {"product_id": "NO-SUCH"}})])
        .collect();
    let (status, runs) = call(&dev, "POST", "/runs/batch", &clerk, Some(json!(batch))).await;
    assert_eq!(status, 200, "{runs}");
    let runs = runs.as_array().expect("runs").clone();
    assert_eq!(runs.len(), products.len() + 1);
    for run in &runs {
        let path = format!(
            "/threads/{}/runs/{}/join",
            run["thread_id"].as_str().expect("thread"),
            run["run_id"].as_str().expect("run")
        );
        let (status, _) = call(&dev, "GET", &path, &clerk, None).await;
        assert_eq!(status, 200);
    }
    let sheets: Vec<(String, i32, bool, String)> = sqlx::query_as(
        "select product_id, rounds, approved, content from retail.product_sheets order by product_id",
    )
    .fetch_all(&db.pool)
    .await
    .expect("sheets");
    assert_eq!(
        sheets.iter().map(|s| s.0.clone()).collect::<Vec<_>>(),
        products
    );
    for (product, rounds, approved, content) in &sheets {
        assert!(approved, "{product}: approved");
        assert_eq!(
            *rounds, 2,
            "{product}: the first draft lacked the care section"
        );
        assert!(content.contains("## Cuidados"), "{content}");
    }
    let failed: Vec<String> = sqlx::query_scalar(
        "select error::text from mostrador.runs where status = 'error' and graph_id = 'fichas'",
    )
    .fetch_all(&db.pool)
    .await
    .expect("failed runs");
    assert_eq!(
        failed.len(),
        1,
        "the unknown product fails its own run only"
    );
    assert!(failed[0].contains("NO-SUCH"), "{failed:?}");
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn cliente_refund_waits_for_a_manager_of_the_store(pool: PgPool) {
    let db = Db::new(pool).await;
    let dev = dev(&db).await;
    let ana = token(DEV_SECRET, "ana", "customer", "madrid-centro");
    let marta = token(DEV_SECRET, "marta", "manager", "madrid-centro");
    let jordi = token(DEV_SECRET, "jordi", "manager", "barcelona-gracia");

    let (thread_id, values) = ask_for_refund(
        &dev,
        &ana,
        "Hola, quiero devolver el pedido PED-1001: las zapatillas me quedan pequeñas.",
    )
    .await;
    let interrupt = &values["__interrupt__"][0]["value"];
    assert_eq!(interrupt["amount"], json!(115.7));

    // The manager of the store sees it at once; another store's manager does not.
    let (status, queue) = call(&dev, "GET", "/approvals", &marta, None).await;
    assert_eq!(status, 200, "{queue}");
    let queue = queue.as_array().expect("a list").clone();
    assert_eq!(queue.len(), 1, "{queue:?}");
    assert_eq!(queue[0]["thread_id"], json!(thread_id));
    assert_eq!(queue[0]["order_id"], "PED-1001");
    let approval_id = queue[0]["approval_id"].as_str().expect("id").to_owned();
    let (status, foreign) = call(&dev, "GET", "/approvals", &jordi, None).await;
    assert_eq!((status, foreign), (200, json!([])));
    let (status, _) = call(
        &dev,
        "GET",
        &format!("/approvals/{approval_id}"),
        &jordi,
        None,
    )
    .await;
    assert_eq!(
        status, 404,
        "another store's approval does not exist for jordi"
    );
    let (status, _) = call(
        &dev,
        "POST",
        &format!("/threads/{thread_id}/runs"),
        &jordi,
        Some(approve(&values)),
    )
    .await;
    assert_eq!(status, 404, "nor does the thread");

    // The customer can neither see the queue nor decide.
    let (status, _) = call(&dev, "GET", "/approvals", &ana, None).await;
    assert_eq!(status, 403);
    let (status, body) = call(
        &dev,
        "POST",
        &format!("/threads/{thread_id}/runs"),
        &ana,
        Some(approve(&values)),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        count(&db.pool, "select count(*) from retail.refunds").await,
        0
    );

    // A decision that is not one is asked again, and changes nothing: an approval that names no
    // approval (it could be paying another than the one the manager read), or an edit above the
    // proposal.
    let (status, values) = call(
        &dev,
        "POST",
        &format!("/threads/{thread_id}/runs/wait"),
        &marta,
        Some(json!({"assistant_id": "cliente", "command": {"resume": "approve"}})),
    )
    .await;
    assert_eq!(status, 200, "{values}");
    assert!(
        values["__interrupt__"][0]["value"]["error"]
            .as_str()
            .is_some_and(|e| e.contains(&approval_id)),
        "{values}"
    );
    let (status, values) = call(
        &dev,
        "POST",
        &format!("/threads/{thread_id}/runs/wait"),
        &marta,
        Some(json!({"assistant_id": "cliente", "command": {"resume": {"decision": "edit", "amount": 500, "approval_id": approval_id}}})),
    )
    .await;
    assert_eq!(status, 200, "{values}");
    assert!(
        values["__interrupt__"][0]["value"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("at most")),
        "{values}"
    );
    assert_eq!(
        count(&db.pool, "select count(*) from retail.refunds").await,
        0
    );

    let (status, values) = call(
        &dev,
        "POST",
        &format!("/threads/{thread_id}/runs/wait"),
        &marta,
        Some(json!({"assistant_id": "cliente", "command": {"resume": {"decision": "edit", "amount": 89.9, "note": "solo las zapatillas", "approval_id": approval_id}}})),
    )
    .await;
    assert_eq!(status, 200, "{values}");
    let text = last_message(&values)["content"].as_str().expect("text");
    assert!(text.contains("89,90 €"), "{text}");
    let refunds: Vec<(String, f64)> = sqlx::query_as(
        "select r.order_id, f.amount::float8 from retail.refunds f join retail.returns r using (return_id)",
    )
    .fetch_all(&db.pool)
    .await
    .expect("refunds");
    assert_eq!(refunds, [("PED-1001".to_owned(), 89.9)]);
    let (status, decided) = call(
        &dev,
        "GET",
        &format!("/approvals/{approval_id}"),
        &marta,
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(decided["status"], "approved");
    assert_eq!(decided["approved_amount"], json!(89.9));
    let (_, pending) = call(&dev, "GET", "/approvals", &marta, None).await;
    assert_eq!(pending, json!([]));

    // Deciding again is refused: the thread waits for nothing.
    let (status, _) = call(
        &dev,
        "POST",
        &format!("/threads/{thread_id}/runs"),
        &marta,
        Some(json!({"assistant_id": "cliente", "command": {"resume": {"decision": "approve", "approval_id": approval_id}}})),
    )
    .await;
    assert_eq!(status, 409);
    assert_eq!(
        count(&db.pool, "select count(*) from retail.refunds").await,
        1
    );
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn refund_is_not_executed_twice_when_the_node_reruns(pool: PgPool) {
    let db = Db::new(pool).await;
    mostrador_retail::retail::load_demo_data(&db.pool)
        .await
        .expect("demo data");
    let secret = "e2e secret";
    let api = Worker::spawn(&db, "api", "api", &["--jwt-secret", secret]);
    // Every model call of the first worker takes a second: the refund node is still asking the
    // model to word its answer, after the refund, when the worker is killed.
    let mut first = Worker::start(
        &db,
        "first",
        &[
            "--graphs",
            "cliente",
            "--lease",
            "2s",
            "--offline-latency",
            "1s",
        ],
    );
    api.until_ready_is(200).await;
    first.until_ready_is(200).await;

    let ana = token(secret, "ana", "customer", "madrid-centro");
    let marta = token(secret, "marta", "manager", "madrid-centro");
    let (thread_id, waiting) =
        ask_for_refund(&api, &ana, "Quiero devolver el pedido PED-1001").await;

    let mut refunds = PgListener::connect_with(&db.pool).await.expect("listener");
    refunds.listen("retail_refunds").await.expect("listen");
    let (status, run) = call(
        &api,
        "POST",
        &format!("/threads/{thread_id}/runs"),
        &marta,
        Some(approve(&waiting)),
    )
    .await;
    assert_eq!(status, 200, "{run}");
    tokio::time::timeout(Duration::from_secs(30), refunds.recv())
        .await
        .expect("the refund happened within 30 s")
        .expect("notification");
    first.kill().await;

    // The refund is done; the superstep that did it was not saved.
    let (status, state) = call(
        &api,
        "GET",
        &format!("/threads/{thread_id}/state"),
        &marta,
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        state["next"],
        json!(["refund"]),
        "the refund node must run again"
    );
    assert_eq!(
        count(&db.pool, "select count(*) from retail.refunds").await,
        1
    );

    let second = Worker::start(&db, "second", &["--graphs", "cliente"]);
    second.until_ready_is(200).await;
    let path = format!(
        "/threads/{thread_id}/runs/{}/join",
        run["run_id"].as_str().expect("run id")
    );
    let (status, values) = call(&api, "GET", &path, &marta, None).await;
    assert_eq!(status, 200, "{values}");
    let (run_status, attempts): (String, i32) =
        sqlx::query_as("select status::text, attempt from mostrador.runs where run_id = $1::uuid")
            .bind(run["run_id"].as_str())
            .fetch_one(&db.pool)
            .await
            .expect("run");
    assert_eq!(run_status, "success");
    assert!(attempts >= 2, "the run was taken over after the kill");
    let text = last_message(&values)["content"].as_str().expect("text");
    assert!(text.contains("115,70 €"), "{text}");
    assert_eq!(
        count(&db.pool, "select count(*) from retail.refunds").await,
        1,
        "the re-run refund node found the recorded refund"
    );
    assert_eq!(
        count(
            &db.pool,
            "select count(*) from mostrador.tool_effects where tool = 'refund'"
        )
        .await,
        1
    );
}

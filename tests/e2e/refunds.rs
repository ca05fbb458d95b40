//! The refund rules under a hostile mix of callers, through the api of `mostrador dev` with the
//! offline model: customers asking again and again for refunds of the same orders (on several
//! threads, in batches, replacing requests a manager already read), managers deciding what they
//! read (approving, editing, rejecting, naming no approval or another one), a manager deciding a
//! refund of their own order, and another store's manager; all at once, in whatever order the
//! processes interleave them. Then every refund is checked against the rules.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::watch;

use serde_json::{Value, json};
use sqlx::PgPool;

use crate::retail::{DEV_SECRET, call, token};
use crate::support::{Db, Worker};

/// Random cases (seeds) per run of the test.
const CASES: u64 = 6;
/// The store of every order here; `jordi` manages another.
const STORE: &str = "madrid-centro";
/// What each order may refund: its lines are a pair of trail shoes (89.90) and two T-shirts
/// (2 × 19.95), delivered two days ago, both within their 30 days.
const MAY_REFUND: f64 = 129.8;

/// A small deterministic generator (splitmix64): each actor of a case draws its own choices.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        (!items.is_empty()).then(|| &items[self.below(items.len())])
    }
}

/// A decision sent to pay an approval: by whom, and for how much.
#[derive(Debug, Clone)]
struct Paying {
    approval_id: String,
    decider: String,
    amount: f64,
}

/// What the actors of a case share: the approvals the managers read, the decisions that asked
/// for money, and the stateless runs to wait for.
#[derive(Default)]
struct Log {
    seen: Vec<Value>,
    paying: Vec<Paying>,
    batched: Vec<(String, String)>,
}

struct Case<'a> {
    dev: &'a Worker,
    log: Mutex<Log>,
    /// How many requests the customers made, and whether they are done: managers with nothing to
    /// read wait for the next.
    asked: watch::Sender<(u64, bool)>,
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn refunds_never_exceed_what_an_order_may_refund(pool: PgPool) {
    let db = Db::new(pool).await;
    let dev = Worker::spawn(&db, "dev", "dev", &["--demo-data"]);
    dev.until_ready_is(200).await;
    let mut totals = HashMap::<&str, i64>::new();
    for seed in 1..=CASES {
        let case = Case {
            dev: &dev,
            log: Mutex::default(),
            asked: watch::Sender::new((0, false)),
        };
        let customer = format!("cliente-{seed}");
        // A manager who is also a customer of the store: they may not decide their own refund.
        let own = format!("gerente-{seed}");
        let orders = [
            (order_id(seed, 1), customer.clone()),
            (order_id(seed, 2), customer.clone()),
            (order_id(seed, 3), own.clone()),
        ];
        for (order, of) in &orders {
            place_order_at(&db.pool, STORE, order, of).await;
        }
        let customer_token = token(DEV_SECRET, &customer, "customer", STORE);
        let own_token = token(DEV_SECRET, &own, "manager", STORE);
        let marta = format!("marta-{seed}");
        let marta_token = token(DEV_SECRET, &marta, "manager", STORE);
        let jordi_token = token(DEV_SECRET, "jordi", "manager", "barcelona-gracia");
        let mine = [orders[0].0.clone(), orders[1].0.clone()];
        let theirs = [orders[2].0.clone()];
        let customers = async {
            tokio::join!(
                case.customer(&customer_token, false, &mine, seed * 10 + 1),
                case.customer(&own_token, true, &theirs, seed * 10 + 2),
            );
            case.asked.send_modify(|(_, done)| *done = true);
        };
        tokio::join!(
            customers,
            case.manager(&marta, &marta_token, seed * 10 + 3),
            case.manager(&own, &own_token, seed * 10 + 4),
            case.manager("jordi", &jordi_token, seed * 10 + 5),
        );
        case.settle(&marta, &marta_token).await;
        let paying = std::mem::take(&mut case.log.lock().expect("log").paying);
        for (order, customer) in &orders {
            check_order(&db.pool, order, customer, &paying).await;
        }
        for (name, sql) in [
            ("refunds", "select count(*) from retail.refunds"),
            (
                "refused when paying",
                "select count(*) from retail.returns where status = 'refused'",
            ),
            (
                "withdrawn",
                "select count(*) from retail.approvals where status = 'withdrawn'",
            ),
            (
                "decided by their own customer",
                "select count(*) from mostrador.runs r where r.config->'configurable'->>'langgraph_auth_user_id' like 'gerente-%' and r.command is not null",
            ),
        ] {
            let n: i64 = sqlx::query_scalar(sql)
                .fetch_one(&db.pool)
                .await
                .expect("count");
            totals.insert(name, n);
        }
    }
    // The mix reached every rule at least once, so the checks above checked something.
    for (name, n) in &totals {
        assert!(*n > 0, "no case had {name}: {totals:?}\n{}", dev.log());
    }
}

fn order_id(seed: u64, n: u64) -> String {
    format!("PED-7{seed:03}{n}")
}

/// An order of `customer` at `store`, delivered two days ago: a pair of trail shoes and two
/// T-shirts, all of it refundable.
pub async fn place_order_at(pool: &PgPool, store: &str, order_id: &str, customer: &str) {
    sqlx::query(
        "insert into retail.orders (order_id, customer, store_id, placed_at, delivered_at, total)
         values ($1, $2, $3, now() - interval '5 days', now() - interval '2 days', 129.80)",
    )
    .bind(order_id)
    .bind(customer)
    .bind(store)
    .execute(pool)
    .await
    .expect("order");
    sqlx::query(
        "insert into retail.order_lines (order_id, line, product_id, quantity, unit_price)
         values ($1, 1, 'ZAP-TRAIL-42', 1, 89.90), ($1, 2, 'CAM-TEC-M', 2, 19.95)",
    )
    .bind(order_id)
    .execute(pool)
    .await
    .expect("lines");
}

/// The rules, on one order after the case: what it refunded fits in what it may refund, and every
/// refund was approved on its approval, for the amount a manager of the order's store who is not
/// its customer asked to pay.
async fn check_order(pool: &PgPool, order_id: &str, customer: &str, paying: &[Paying]) {
    type Refund = (
        String,
        f64,
        Option<String>,
        Option<String>,
        Option<String>,
        String,
    );
    let refunds: Vec<Refund> = sqlx::query_as(
        "select a.approval_id::text, f.amount::float8, a.decided_by, a.decided_store,
                a.status, a.order_id
             from retail.refunds f
             join retail.returns r using (return_id)
             left join retail.approvals a on a.approval_id = f.approval_id
                and a.return_id = f.return_id
             where r.order_id = $1",
    )
    .bind(order_id)
    .fetch_all(pool)
    .await
    .expect("refunds");
    let total: f64 = refunds.iter().map(|r| r.1).sum();
    assert!(
        total <= MAY_REFUND + 0.001,
        "{order_id} refunded {total:.2}, above the {MAY_REFUND:.2} it may: {refunds:?}"
    );
    for (approval_id, amount, decided_by, decided_store, status, of) in &refunds {
        assert_eq!(
            of, order_id,
            "a refund of {order_id} on another order's approval"
        );
        assert_eq!(status.as_deref(), Some("approved"), "{refunds:?}");
        assert_eq!(decided_store.as_deref(), Some(STORE), "{refunds:?}");
        let decider = decided_by.as_deref().expect("a decider");
        assert_ne!(
            decider, customer,
            "{order_id}: its customer decided a refund"
        );
        let asked = paying.iter().any(|p| {
            p.approval_id == *approval_id
                && p.decider == decider
                && (p.amount - amount).abs() < 0.001
        });
        assert!(
            asked,
            "{order_id}: {amount:.2} paid on {approval_id}, which {decider} never asked to pay \
             that much: {paying:?}"
        );
    }
}

impl Case<'_> {
    /// A customer asking for refunds of `orders` on a few threads of their own, replacing their
    /// requests, batching them, and trying to decide them (`manager`: a customer who is also a
    /// manager of the store, whom the api lets resume, and the graph refuses).
    async fn customer(&self, token: &str, manager: bool, orders: &[String], seed: u64) {
        let mut draw = Draw(seed);
        let mut threads = Vec::new();
        for _ in 0..3 {
            let (status, thread) = call(self.dev, "POST", "/threads", token, Some(json!({}))).await;
            assert_eq!(status, 200, "{thread}");
            threads.push(thread["thread_id"].as_str().expect("id").to_owned());
        }
        for _ in 0..6 {
            let order = draw.pick(orders).expect("an order").clone();
            // Kept when their runs end: the case joins them and decides their approvals.
            let ask = json!({"assistant_id": "cliente", "on_completion": "keep", "input": {"messages": [
                {"role": "user", "content": format!("Quiero devolver el pedido {order}")}
            ]}});
            match draw.below(5) {
                // Several requests at once, each on a new thread.
                0 => {
                    let (status, runs) = call(
                        self.dev,
                        "POST",
                        "/runs/batch",
                        token,
                        Some(json!([ask.clone(), ask.clone(), ask])),
                    )
                    .await;
                    assert_eq!(status, 200, "{runs}");
                    let mut log = self.log.lock().expect("log");
                    for run in runs.as_array().expect("runs") {
                        log.batched.push((
                            run["thread_id"].as_str().expect("thread").into(),
                            run["run_id"].as_str().expect("run").into(),
                        ));
                    }
                }
                // Deciding one's own request: refused before it runs.
                1 => {
                    let thread = draw.pick(&threads).expect("a thread");
                    let seen = self.seen_on(thread);
                    let resume = json!({"assistant_id": "cliente", "command": {"resume": {
                        "decision": "approve", "approval_id": seen.map(|a| a["approval_id"].clone())
                    }}});
                    let path = format!("/threads/{thread}/runs/wait");
                    let (status, body) = call(self.dev, "POST", &path, token, Some(resume)).await;
                    assert!([403, 409].contains(&status) || manager, "{status} {body}");
                }
                // A request on a thread: a new one, or one replacing the request it waits on.
                _ => {
                    let thread = draw.pick(&threads).expect("a thread");
                    let path = format!("/threads/{thread}/runs/wait");
                    let (status, values) = call(self.dev, "POST", &path, token, Some(ask)).await;
                    assert_eq!(status, 200, "{values}\n{}", self.dev.log());
                }
            }
            self.asked.send_modify(|(asked, _)| *asked += 1);
        }
    }

    /// A manager reading the approval queue and deciding what they read, well or badly.
    async fn manager(&self, name: &str, token: &str, seed: u64) {
        let mut draw = Draw(seed);
        let mut asked = self.asked.subscribe();
        let mut decided = 0;
        while decided < 10 {
            // Read before the queue: a request made after this is a change to wait for.
            let done = asked.borrow_and_update().1;
            let (status, queue) = call(self.dev, "GET", "/approvals", token, None).await;
            assert_eq!(status, 200, "{queue}");
            let queue = queue.as_array().cloned().unwrap_or_default();
            self.log.lock().expect("log").seen.extend(queue.clone());
            // Another store's manager tries what others read; anyone may act on a stale read.
            let known = self.log.lock().expect("log").seen.clone();
            let Some(approval) = draw.pick(if queue.is_empty() { &known } else { &queue }) else {
                if done {
                    break;
                }
                asked.changed().await.expect("the case goes on");
                continue;
            };
            decided += 1;
            let other = draw.pick(&known).unwrap_or(approval);
            let proposed = approval["amount"].as_f64().expect("amount");
            let edited = (draw.below(13_000) as f64 / 100.0).max(0.01);
            let (resume, pays) = match draw.below(10) {
                0..=3 => (
                    json!({"decision": "approve", "approval_id": approval["approval_id"]}),
                    Some(proposed),
                ),
                4 | 5 => (
                    json!({"decision": "edit", "approval_id": approval["approval_id"], "amount": edited}),
                    Some(edited),
                ),
                6 => (json!("reject"), None),
                7 => (json!("approve"), None),
                _ => (
                    json!({"decision": "approve", "approval_id": other["approval_id"]}),
                    other["amount"].as_f64(),
                ),
            };
            let approval_id = resume["approval_id"].as_str().map(str::to_owned);
            if let (Some(approval_id), Some(amount)) = (approval_id, pays) {
                self.log.lock().expect("log").paying.push(Paying {
                    approval_id,
                    decider: name.into(),
                    amount,
                });
            }
            let path = format!(
                "/threads/{}/runs/wait",
                approval["thread_id"].as_str().expect("thread")
            );
            let body = json!({"assistant_id": "cliente", "command": {"resume": resume}});
            let (status, answer) = call(self.dev, "POST", &path, token, Some(body)).await;
            // 404: another store's thread; 409: it waits for nothing any more.
            assert!(
                [200, 404, 409].contains(&status),
                "{status} {answer}\n{}",
                self.dev.log()
            );
        }
    }

    /// The end of a case: the batched runs are waited for, and every approval still pending is
    /// approved, as it shows, by a manager who may, so as many refunds as possible try to pay.
    async fn settle(&self, manager: &str, token: &str) {
        let batched = std::mem::take(&mut self.log.lock().expect("log").batched);
        for (thread, run) in batched {
            let path = format!("/threads/{thread}/runs/{run}/join");
            let (status, values) = call(self.dev, "GET", &path, token, None).await;
            assert_eq!(status, 200, "{values}");
        }
        let (status, queue) = call(self.dev, "GET", "/approvals", token, None).await;
        assert_eq!(status, 200, "{queue}");
        for approval in queue.as_array().expect("a list") {
            let approval_id = approval["approval_id"].as_str().expect("id");
            self.log.lock().expect("log").paying.push(Paying {
                approval_id: approval_id.into(),
                decider: manager.into(),
                amount: approval["amount"].as_f64().expect("amount"),
            });
            let path = format!(
                "/threads/{}/runs/wait",
                approval["thread_id"].as_str().expect("thread")
            );
            let resume = json!({"decision": "approve", "approval_id": approval_id});
            let body = json!({"assistant_id": "cliente", "command": {"resume": resume}});
            let (status, answer) = call(self.dev, "POST", &path, token, Some(body)).await;
            assert!([200, 409].contains(&status), "{status} {answer}");
        }
    }

    /// The approval a manager last read on `thread`, if any.
    fn seen_on(&self, thread: &str) -> Option<Value> {
        let log = self.log.lock().expect("log");
        log.seen
            .iter()
            .rev()
            .find(|a| a["thread_id"] == thread)
            .cloned()
    }
}

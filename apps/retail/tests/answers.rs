//! What the graphs accept from a model and from a manager: a batch's quantities must cover every
//! reference with a sane number, and a decision must be one, on the approval it names, by one who
//! may decide it.

use mostrador_retail::graphs::compras::quantities;
use mostrador_retail::retail::{Decider, Decision, Reference};
use serde_json::json;
use uuid::Uuid;

fn reference(product: &str) -> Reference {
    Reference {
        store_id: "s1".into(),
        product_id: product.into(),
        name: product.into(),
        quantity: 2,
        reorder_point: 10,
        pack_size: 6,
    }
}

#[test]
fn quantities_cover_every_reference_of_the_batch_or_are_refused() {
    let batch = [reference("a"), reference("b")];
    let answer = r#"Aquí tienes: {"quantities": [
        {"store_id": "s1", "product_id": "b", "quantity": 12},
        {"store_id": "s1", "product_id": "a", "quantity": 18}]}"#;
    let proposals = quantities(&batch, answer).expect("valid");
    assert_eq!(
        proposals.iter().map(|p| p.quantity).collect::<Vec<_>>(),
        [18, 12],
        "in the batch's order, matched by reference"
    );

    let missing = r#"{"quantities": [{"store_id": "s1", "product_id": "a", "quantity": 18}]}"#;
    assert!(quantities(&batch, missing).is_err_and(|why| why.contains("s1/b")));
    let negative = r#"{"quantities": [{"store_id": "s1", "product_id": "a", "quantity": -1},
        {"store_id": "s1", "product_id": "b", "quantity": 6}]}"#;
    assert!(quantities(&batch, negative).is_err());
    assert!(quantities(&batch, "no JSON here").is_err());
}

#[test]
fn a_decision_pays_only_the_approval_it_names_within_its_proposal() {
    let id = Uuid::now_v7();
    let other = Uuid::now_v7();
    assert_eq!(
        Decision::parse(&json!({"decision": "approve", "approval_id": id}), 50.0, id),
        Ok(Decision::Approve {
            amount: 50.0,
            note: None
        })
    );
    assert_eq!(
        Decision::parse(&json!({"decision": "reject", "note": "usado"}), 50.0, id),
        Ok(Decision::Reject {
            note: Some("usado".into())
        })
    );
    assert_eq!(
        Decision::parse(&json!("reject"), 50.0, id),
        Ok(Decision::Reject { note: None })
    );
    assert_eq!(
        Decision::parse(
            &json!({"decision": "edit", "approval_id": id, "amount": 20.004}),
            50.0,
            id
        ),
        Ok(Decision::Approve {
            amount: 20.0,
            note: None
        })
    );
    for bad in [
        // Paying without naming what is paid, or naming another approval.
        json!("approve"),
        json!({"decision": "approve"}),
        json!({"decision": "approve", "approval_id": other}),
        json!({"decision": "edit", "approval_id": other, "amount": 10}),
        json!({"decision": "edit", "approval_id": id, "amount": 80}),
        json!({"decision": "edit", "approval_id": id}),
        json!({"decision": "edit", "approval_id": id, "amount": 0}),
        json!("yes"),
        json!(true),
        json!(null),
    ] {
        assert!(Decision::parse(&bad, 50.0, id).is_err(), "{bad}");
    }
}

#[test]
fn only_a_manager_of_the_orders_store_who_is_not_its_customer_decides() {
    let caller = |subject: &str, role: &str, store: Option<&str>| {
        Decider::of_run(&json!({"langgraph_auth_user": {
            "identity": subject, "roles": [role], "tenant": store
        }}))
        .expect("a caller")
    };
    assert!(
        caller("marta", "manager", Some("s1"))
            .may_decide("s1", "ana")
            .is_ok()
    );
    for (decider, why) in [
        (
            caller("jordi", "manager", Some("s2")),
            "another store's manager",
        ),
        (caller("pepe", "clerk", Some("s1")), "a clerk"),
        (caller("ana", "customer", Some("s1")), "the customer"),
        (caller("marta", "manager", None), "a manager of no store"),
    ] {
        assert!(decider.may_decide("s1", "ana").is_err(), "{why}");
    }
    assert!(
        caller("marta", "manager", Some("s1"))
            .may_decide("s1", "marta")
            .is_err(),
        "a manager's own order"
    );
    assert_eq!(
        Decider::of_run(&json!({})),
        None,
        "a run that names no caller"
    );
}

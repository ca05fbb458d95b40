//! What the graphs accept from a model and from a manager: a batch's quantities must cover every
//! reference with a sane number, and a decision must be one.

use mostrador_agents::graphs::compras::quantities;
use mostrador_agents::retail::{Decision, Reference};
use serde_json::json;

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
fn a_decision_is_approve_reject_or_an_edit_within_the_proposal() {
    assert_eq!(
        Decision::parse(&json!("approve"), 50.0),
        Ok(Decision::Approve {
            amount: 50.0,
            note: None
        })
    );
    assert_eq!(
        Decision::parse(&json!({"decision": "reject", "note": "usado"}), 50.0),
        Ok(Decision::Reject {
            note: Some("usado".into())
        })
    );
    assert_eq!(
        Decision::parse(&json!({"decision": "edit", "amount": 20.004}), 50.0),
        Ok(Decision::Approve {
            amount: 20.0,
            note: None
        })
    );
    for bad in [
        json!({"decision": "edit", "amount": 80}),
        json!({"decision": "edit"}),
        json!({"decision": "edit", "amount": 0}),
        json!("yes"),
        json!(true),
        json!(null),
    ] {
        assert!(Decision::parse(&bad, 50.0).is_err(), "{bad}");
    }
}

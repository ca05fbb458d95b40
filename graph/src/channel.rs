//! State channels and their reducers.
//!
//! A graph's state is a JSON object whose keys are its channels. Each channel has a reducer that
//! folds the writes of a superstep into its value, in task order, so the result never depends on
//! which task finished first.

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};
use uuid::Uuid;

/// A graph's state: channel name to value.
pub type State = Map<String, Value>;

/// A user reducer: `(current value, update) -> new value`.
pub type ReduceFn = Arc<dyn Fn(Value, Value) -> Result<Value, String> + Send + Sync>;

/// How writes to a channel combine.
#[derive(Clone)]
pub enum Reducer {
    /// The write replaces the value. Two writes in one superstep are an error, as in LangGraph.
    LastValue,
    /// Arrays are concatenated; a scalar write is pushed.
    Append,
    /// LangGraph's `add_messages`: messages are objects with an `id` (assigned when missing); a
    /// message with a known id replaces it; `{"type": "remove", "id": …}` deletes it.
    Messages,
    /// A user function.
    Custom(ReduceFn),
}

impl fmt::Debug for Reducer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reducer::LastValue => f.write_str("LastValue"),
            Reducer::Append => f.write_str("Append"),
            Reducer::Messages => f.write_str("Messages"),
            Reducer::Custom(_) => f.write_str("Custom"),
        }
    }
}

impl Reducer {
    /// A reducer from a function.
    pub fn custom(
        reduce: impl Fn(Value, Value) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Self {
        Reducer::Custom(Arc::new(reduce))
    }

    /// Folds one superstep's `writes` (in task order) into `current`.
    ///
    /// # Errors
    ///
    /// A message explaining why the writes are invalid for this reducer.
    pub fn reduce(&self, current: Option<Value>, writes: Vec<Value>) -> Result<Value, String> {
        match self {
            Reducer::LastValue => {
                let mut writes = writes.into_iter();
                match (writes.next(), writes.next()) {
                    (Some(value), None) => Ok(value),
                    (None, _) => Ok(current.unwrap_or(Value::Null)),
                    (Some(_), Some(_)) => Err(
                        "can receive only one value per superstep; use a reducer that combines writes".into(),
                    ),
                }
            }
            Reducer::Append => {
                let mut items = match current {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(items)) => items,
                    Some(other) => vec![other],
                };
                for write in writes {
                    match write {
                        Value::Array(more) => items.extend(more),
                        one => items.push(one),
                    }
                }
                Ok(Value::Array(items))
            }
            Reducer::Messages => {
                let mut messages = match current {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(items)) => items,
                    Some(_) => return Err("the current value is not a list of messages".into()),
                };
                for write in writes {
                    let batch = match write {
                        Value::Array(batch) => batch,
                        one => vec![one],
                    };
                    for message in batch {
                        merge_message(&mut messages, message)?;
                    }
                }
                Ok(Value::Array(messages))
            }
            Reducer::Custom(reduce) => writes
                .into_iter()
                .try_fold(current.unwrap_or(Value::Null), |value, write| {
                    reduce(value, write)
                }),
        }
    }
}

fn merge_message(messages: &mut Vec<Value>, message: Value) -> Result<(), String> {
    let Value::Object(mut message) = message else {
        return Err("a message must be a JSON object".into());
    };
    let id = match message.get("id").and_then(Value::as_str) {
        Some(id) => id.to_owned(),
        None => {
            let id = Uuid::now_v7().to_string();
            message.insert("id".into(), Value::String(id.clone()));
            id
        }
    };
    let position = messages
        .iter()
        .position(|m| m.get("id").and_then(Value::as_str) == Some(&id));
    let removal = message.get("type").and_then(Value::as_str) == Some("remove");
    match (position, removal) {
        (Some(i), true) => {
            messages.remove(i);
        }
        (None, true) => return Err(format!("cannot remove message {id}: no such message")),
        (Some(i), false) => messages[i] = Value::Object(message),
        (None, false) => messages.push(Value::Object(message)),
    }
    Ok(())
}

/// Returns `map` as a [`State`], or why it is not one.
pub(crate) fn as_state(value: Value, what: &str) -> Result<State, String> {
    match value {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(Map::new()),
        other => Err(format!(
            "{what} must be a JSON object of channel values, got {other}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn last_value_rejects_two_writes_in_a_superstep() {
        assert_eq!(
            Reducer::LastValue.reduce(Some(json!(1)), vec![json!(2)]),
            Ok(json!(2))
        );
        assert!(
            Reducer::LastValue
                .reduce(None, vec![json!(1), json!(2)])
                .is_err()
        );
        assert_eq!(
            Reducer::LastValue.reduce(Some(json!(1)), vec![]),
            Ok(json!(1))
        );
    }

    #[test]
    fn append_concatenates_in_task_order() {
        let value = Reducer::Append.reduce(Some(json!([1])), vec![json!([2, 3]), json!(4)]);
        assert_eq!(value, Ok(json!([1, 2, 3, 4])));
    }

    #[test]
    fn messages_merge_by_id_and_delete() {
        let current = json!([{"id": "a", "content": "hola"}, {"id": "b", "content": "x"}]);
        let value = Reducer::Messages
            .reduce(
                Some(current),
                vec![
                    json!({"id": "a", "content": "adiós"}),
                    json!([{"type": "remove", "id": "b"}, {"content": "new"}]),
                ],
            )
            .expect("valid writes");
        let messages = value.as_array().expect("a list");
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0], json!({"id": "a", "content": "adiós"}));
        assert_eq!(messages[1]["content"], "new");
        assert!(messages[1]["id"].is_string(), "an id is assigned");
        assert!(
            Reducer::Messages
                .reduce(None, vec![json!({"type": "remove", "id": "zz"})])
                .is_err()
        );
    }

    #[test]
    fn custom_reducer_folds_each_write() {
        let sum =
            Reducer::custom(|a, b| Ok(json!(a.as_i64().unwrap_or(0) + b.as_i64().unwrap_or(0))));
        assert_eq!(
            sum.reduce(Some(json!(1)), vec![json!(2), json!(3)]),
            Ok(json!(6))
        );
    }
}

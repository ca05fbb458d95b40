//! The filter a project's auth handler returns, checked once and matched as the official server
//! matches it. Searches and counts match it in their query (`mostrador.auth_admits`, migration
//! 0024); a single resource read by id is matched here, by the same rule.

use serde_json::{Map, Value};

/// A handler's filter over a resource's metadata, its shape checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthFilter(Map<String, Value>);

/// `$or` / `$and` nest this deep at most, as officially.
const MAX_NESTING: usize = 2;

impl AuthFilter {
    /// The filter `value` is, if its shape is one the official server accepts.
    ///
    /// # Errors
    ///
    /// Why it is not: a bug of the project's handler (a 500, as officially).
    pub fn new(value: Value) -> Result<Self, String> {
        let Value::Object(filter) = value else {
            return Err(format!("an auth filter is an object, not {value}"));
        };
        check(&filter, 0)?;
        Ok(Self(filter))
    }

    /// The filter as the queries take it.
    pub fn as_json(&self) -> Value {
        Value::Object(self.0.clone())
    }

    /// Whether `metadata` passes it.
    pub fn admits(&self, metadata: &Value) -> bool {
        admits(metadata, &self.0)
    }
}

fn check(filter: &Map<String, Value>, nesting: usize) -> Result<(), String> {
    if nesting > MAX_NESTING {
        return Err(
            "Your auth handler returned a filter with too many nested operators. The maximum \
             depth for nested operators is 2. Please simplify your filter."
                .into(),
        );
    }
    for (key, wanted) in filter {
        match key.as_str() {
            "$or" | "$and" => {
                let groups = wanted.as_array().filter(|groups| groups.len() >= 2).ok_or_else(|| {
                    format!(
                        "Your auth handler returned a filter with an invalid {key} operator. The \
                         {key} operator must be a list of at least 2 filter objects."
                    )
                })?;
                for group in groups {
                    let group = group
                        .as_object()
                        .ok_or_else(|| format!("each group of {key} is an object"))?;
                    check(group, nesting + 1)?;
                }
            }
            _ => {
                if let Value::Object(operator) = wanted
                    && operator.is_empty()
                {
                    return Err(format!("the filter on {key} names no operator"));
                }
            }
        }
    }
    Ok(())
}

fn admits(metadata: &Value, filter: &Map<String, Value>) -> bool {
    let field = |key: &str| metadata.as_object().and_then(|fields| fields.get(key));
    filter
        .iter()
        .all(|(key, wanted)| match (key.as_str(), wanted) {
            ("$or", Value::Array(groups)) => groups.iter().any(|group| {
                group
                    .as_object()
                    .is_some_and(|group| admits(metadata, group))
            }),
            ("$and", Value::Array(groups)) => groups.iter().all(|group| {
                group
                    .as_object()
                    .is_some_and(|group| admits(metadata, group))
            }),
            (_, Value::Object(operator)) => match operator.iter().next() {
                Some((op, operand)) if op == "$eq" => {
                    field(key).is_some_and(|held| same(held, operand))
                }
                Some((op, operand)) if op == "$contains" => {
                    let Some(Value::Array(held)) = field(key) else {
                        return false;
                    };
                    let holds = |wanted: &Value| held.iter().any(|element| same(element, wanted));
                    match operand {
                        Value::Array(each) => each.iter().all(holds),
                        one => holds(one),
                    }
                }
                // An operator the official server does not know filters nothing.
                _ => true,
            },
            (_, wanted) => field(key).is_some_and(|held| same(held, wanted)),
        })
}

/// JSON equality as Python's (and Postgres's `jsonb`): `1` equals `1.0`.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => a == b || a.as_f64() == b.as_f64(),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same(a, b))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| same(v, w)))
        }
        (a, b) => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn filter(value: Value) -> AuthFilter {
        AuthFilter::new(value).expect("a valid filter")
    }

    #[test]
    fn a_filter_matches_metadata_as_the_official_server_does() {
        let metadata = json!({"owner": "ana", "tags": ["a", "b"], "n": 1});
        for (admitted, f) in [
            (true, json!({"owner": "ana"})),
            (false, json!({"owner": "bo"})),
            (false, json!({"missing": null})),
            (true, json!({"owner": {"$eq": "ana"}})),
            (true, json!({"tags": {"$contains": "a"}})),
            (true, json!({"tags": {"$contains": ["a", "b"]}})),
            (false, json!({"tags": {"$contains": ["a", "c"]}})),
            (false, json!({"owner": {"$contains": "a"}})),
            (true, json!({"n": 1.0})),
            (true, json!({"$or": [{"owner": "bo"}, {"n": 1}]})),
            (false, json!({"$and": [{"owner": "ana"}, {"n": 2}]})),
            (
                false,
                json!({"$or": [{"owner": "bo"}, {"n": 2}], "owner": "ana"}),
            ),
        ] {
            assert_eq!(filter(f.clone()).admits(&metadata), admitted, "{f}");
        }
    }

    #[test]
    fn a_filter_of_the_wrong_shape_is_refused() {
        for bad in [
            json!("ana"),
            json!({"$or": [{"a": 1}]}),
            json!({"$and": "x"}),
            json!({"$or": [{"$or": [{"$or": [{"a": 1}, {"a": 2}]}, {"a": 3}]}, {"a": 4}]}),
            json!({"owner": {}}),
        ] {
            assert!(AuthFilter::new(bad.clone()).is_err(), "{bad}");
        }
    }
}

//! A project's semantic index (`store.index`): its embedding function, run in the api's helper
//! processes ([`ProjectCode`]), embeds the items clients put and the queries they search with;
//! Postgres keeps the vectors and `queue::data::store` ranks items by them.

use mostrador_queue::data::store::Embedded;
use serde_json::Value;

use crate::error::ApiError;
use crate::project_code::{Ask, ProjectCode};

/// The project's embedding function, in its helper processes.
#[derive(Debug, Clone)]
pub struct StoreIndex {
    code: ProjectCode,
}

impl StoreIndex {
    /// The index the helper processes loaded, if the project has one.
    pub fn of(code: &ProjectCode) -> Option<Self> {
        code.ready().index.then(|| Self { code: code.clone() })
    }

    /// The embedded fields of `value`: the index's `fields`, or those of the put's own `index`
    /// (`false`: none).
    ///
    /// # Errors
    ///
    /// The embedding function failed (a 500), or no helper process answered (a 503).
    pub async fn embed(&self, value: &Value, index: &Value) -> Result<Vec<Embedded>, ApiError> {
        let mut answer = self.code.ask(&Ask::Embed { value, index }).await?;
        serde_json::from_value(answer["embedded"].take()).map_err(|err| {
            ApiError::failed(format!("the helper process embedded fields wrongly: {err}"))
        })
    }

    /// The embedding of a search's query.
    ///
    /// # Errors
    ///
    /// As [`StoreIndex::embed`].
    pub async fn query(&self, query: &str) -> Result<Vec<f32>, ApiError> {
        let mut answer = self.code.ask(&Ask::EmbedQuery { query }).await?;
        serde_json::from_value(answer["vector"].take()).map_err(|err| {
            ApiError::failed(format!(
                "the helper process embedded a query wrongly: {err}"
            ))
        })
    }
}

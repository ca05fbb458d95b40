//! Semantic search (`store.index`): the items whose embedded fields are nearest a query's vector,
//! by cosine similarity, an item scored by its best field, as LangGraph's stores rank them.
//!
//! The search is exact: every candidate's vectors are scored, in this process. Postgres picks
//! the candidates (owner, prefix, filter, not expired) and answers only their vectors' ids; a
//! vector never changes once written (a put writes new rows), so each process keeps those it has
//! read, by id, in a [`VectorCache`], and reads from Postgres only those it has not seen.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde::Deserialize;
use sqlx::PgPool;

use super::{Found, Item, Search};
use crate::{Error, Result};

/// An item's embedded field: the path of the value it embeds and the embedding of its text.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Embedded {
    pub field: String,
    pub vector: Vec<f32>,
}

/// The longest vector a field may have: past every embedding model's.
const MAX_DIMS: usize = 16_384;

/// The most vectors one item may have (a field that matches many texts, `tags[*]`, gives one
/// each): with [`MAX_DIMS`], what one put may add to the caller's storage is bounded.
pub const MAX_EMBEDDED: usize = 256;

/// `embedded` as the columns of `store_vectors`: fields, and vectors as little-endian floats.
///
/// # Errors
///
/// [`Error::Invalid`] for a vector that is empty, too long or not finite.
pub(super) fn columns(embedded: &[Embedded]) -> Result<(Vec<String>, Vec<Vec<u8>>)> {
    let invalid = |reason: String| Error::Invalid {
        field: "index",
        reason,
    };
    if embedded.len() > MAX_EMBEDDED {
        return Err(invalid(format!(
            "an item has at most {MAX_EMBEDDED} embedded texts, and this one {}: index fewer fields",
            embedded.len()
        )));
    }
    let mut fields = Vec::with_capacity(embedded.len());
    let mut vectors = Vec::with_capacity(embedded.len());
    for Embedded { field, vector } in embedded {
        if vector.is_empty() || vector.len() > MAX_DIMS {
            return Err(invalid(format!(
                "the embedding of {field:?} has {} dimensions: 1 to {MAX_DIMS}",
                vector.len()
            )));
        }
        if !vector.iter().all(|x| x.is_finite()) {
            return Err(invalid(format!(
                "the embedding of {field:?} holds a number that is not finite"
            )));
        }
        fields.push(field.clone());
        vectors.push(vector.iter().flat_map(|x| x.to_le_bytes()).collect());
    }
    Ok((fields, vectors))
}

/// A vector as a search uses it: its item (and when that was created, which a put that writes
/// new vectors alone may change), and its direction (a unit vector, or zeros).
#[derive(Debug)]
struct Vector {
    namespace: Vec<String>,
    key: String,
    created_at: DateTime<Utc>,
    unit: Box<[f32]>,
}

impl Vector {
    fn new(namespace: Vec<String>, key: String, created_at: DateTime<Utc>, bytes: &[u8]) -> Self {
        let floats: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        Self {
            namespace,
            key,
            created_at,
            unit: unit(&floats),
        }
    }

    fn bytes(&self) -> usize {
        self.unit.len() * 4 + self.key.len() + self.namespace.iter().map(String::len).sum::<usize>()
    }
}

/// `vector` scaled to length 1; zeros stay zeros (similar to nothing, as LangGraph scores them).
fn unit(vector: &[f32]) -> Box<[f32]> {
    let norm = vector
        .iter()
        .map(|x| f64::from(*x) * f64::from(*x))
        .sum::<f64>()
        .sqrt();
    if norm == 0.0 {
        return vector.into();
    }
    #[allow(clippy::cast_possible_truncation)]
    vector
        .iter()
        .map(|x| (f64::from(*x) / norm) as f32)
        .collect()
}

/// The dot product, in eight lanes the compiler can keep in vector registers.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (a_chunks, b_chunks) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a_chunks
        .remainder()
        .iter()
        .zip(b_chunks.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a_chunks.zip(b_chunks) {
        for lane in 0..8 {
            lanes[lane] += x[lane] * y[lane];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// The vectors this process has read, by id, within a budget of bytes: two generations, the
/// newer filled until it holds half the budget, when the older is dropped and the newer takes
/// its place (a vector read from the older moves to the newer). Vectors never change, so what it
/// holds is never stale; one deleted is dropped in its turn.
#[derive(Debug)]
pub struct VectorCache {
    budget: usize,
    generations: Mutex<Generations>,
}

#[derive(Debug, Default)]
struct Generations {
    newer: HashMap<i64, Arc<Vector>>,
    newer_bytes: usize,
    older: HashMap<i64, Arc<Vector>>,
}

impl Default for VectorCache {
    /// 256 MiB: the vectors of about 40,000 items embedded in 1,536 dimensions.
    fn default() -> Self {
        Self::new(256 << 20)
    }
}

impl VectorCache {
    pub fn new(budget_bytes: usize) -> Self {
        Self {
            budget: budget_bytes,
            generations: Mutex::new(Generations::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Generations> {
        self.generations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Those of `ids` it holds, and the ids it does not.
    fn held(&self, ids: &[i64]) -> (Vec<(i64, Arc<Vector>)>, Vec<i64>) {
        let mut generations = self.lock();
        let mut held = Vec::with_capacity(ids.len());
        let mut missing = Vec::new();
        for &id in ids {
            if let Some(vector) = generations.newer.get(&id) {
                held.push((id, vector.clone()));
            } else if let Some(vector) = generations.older.remove(&id) {
                generations.keep(self.budget, id, vector.clone());
                held.push((id, vector));
            } else {
                missing.push(id);
            }
        }
        (held, missing)
    }

    fn keep(&self, read: &[(i64, Arc<Vector>)]) {
        let mut generations = self.lock();
        for (id, vector) in read {
            generations.keep(self.budget, *id, vector.clone());
        }
    }
}

impl Generations {
    fn keep(&mut self, budget: usize, id: i64, vector: Arc<Vector>) {
        if self.newer_bytes >= budget / 2 {
            self.older = std::mem::take(&mut self.newer);
            self.newer_bytes = 0;
        }
        self.newer_bytes += vector.bytes();
        self.newer.insert(id, vector);
    }
}

/// `owner`'s items as `search` asks, the most similar to `query` first, each with its score:
/// then, when fewer than the page, the items no query can find (put without an index, or with
/// `index: false`), newest first, without a score, as LangGraph's stores fill a page.
///
/// # Errors
///
/// [`Error::Invalid`] for a query whose dimensions are not those of the items' vectors (the
/// index's embedding changed since they were put); the database failed.
pub(super) async fn search(
    pool: &PgPool,
    owner: &str,
    search: &Search,
    query: &[f32],
    cache: &VectorCache,
) -> Result<Vec<Found>> {
    let ids = sqlx::query_scalar!(
        r#"
        select v.id
        from mostrador.store_vectors v
        join mostrador.store_items i using (owner, namespace, key)
        where v.owner = $1 and i.owner = $1
          and i.namespace[1:cardinality($2::text[])] = $2
          and ($3::jsonb is null or i.value @> $3)
          and (i.expires_at is null or i.expires_at > now())
        "#,
        owner,
        &search.namespace_prefix as &[String],
        search.filter,
    )
    .fetch_all(pool)
    .await?;
    let (mut vectors, missing) = cache.held(&ids);
    if !missing.is_empty() {
        let read: Vec<(i64, Arc<Vector>)> = sqlx::query!(
            r#"
            select v.id, v.namespace, v.key, i.created_at, v.vector
            from mostrador.store_vectors v
            join mostrador.store_items i using (owner, namespace, key)
            where v.id = any($1) and v.owner = $2
            "#,
            &missing,
            owner,
        )
        .fetch_all(pool)
        .await?
        .into_iter()
        .map(|row| {
            let vector = Vector::new(row.namespace, row.key, row.created_at, &row.vector);
            (row.id, Arc::new(vector))
        })
        .collect();
        cache.keep(&read);
        vectors.extend(read);
    }
    let ranked = rank(&unit(query), &vectors)?;
    let offset = usize::try_from(search.offset).unwrap_or(0);
    let limit = usize::try_from(search.limit).unwrap_or(0);
    let page: Vec<(f32, i64)> = ranked.iter().skip(offset).take(limit).copied().collect();
    let mut items = items_of(pool, owner, &page, search.refresh_ttl).await?;
    let mut found: Vec<Found> = page
        .iter()
        .filter_map(|(score, id)| {
            Some(Found {
                item: items.remove(id)?,
                score: Some(f64::from(*score)),
            })
        })
        .collect();
    if found.len() < limit {
        let skip = offset.saturating_sub(ranked.len());
        let unscored = super::newest(
            pool,
            owner,
            search,
            i64::try_from(limit - found.len()).unwrap_or(0),
            i64::try_from(skip).unwrap_or(0),
            true,
        )
        .await?;
        found.extend(unscored.into_iter().map(|item| Found { item, score: None }));
    }
    Ok(found)
}

/// Each item's best score and the id of the vector that gave it, best first (equal scores in the
/// order the items were created, as LangGraph's in-memory store keeps them, then by namespace and
/// key).
fn rank(query: &[f32], vectors: &[(i64, Arc<Vector>)]) -> Result<Vec<(f32, i64)>> {
    let mut best: HashMap<(&[String], &str), (f32, i64, &Vector)> = HashMap::new();
    for (id, vector) in vectors {
        if vector.unit.len() != query.len() {
            return Err(Error::Invalid {
                field: "query",
                reason: format!(
                    "item {:?} was embedded in {} dimensions and the query in {}: the index's \
                     embedding changed since it was put; put it again",
                    vector.key,
                    vector.unit.len(),
                    query.len()
                ),
            });
        }
        let score = dot(query, &vector.unit);
        let entry = best
            .entry((&vector.namespace, &vector.key))
            .or_insert((score, *id, vector));
        if score > entry.0 {
            *entry = (score, *id, vector);
        }
    }
    let mut ranked: Vec<(f32, i64, &Vector)> = best.into_values().collect();
    ranked.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then_with(|| a.2.created_at.cmp(&b.2.created_at))
            .then_with(|| a.2.namespace.cmp(&b.2.namespace))
            .then_with(|| a.2.key.cmp(&b.2.key))
    });
    Ok(ranked
        .into_iter()
        .map(|(score, id, _)| (score, id))
        .collect())
}

/// The live items of the vectors `page` names, by vector id, their TTL refreshed if asked.
async fn items_of(
    pool: &PgPool,
    owner: &str,
    page: &[(f32, i64)],
    refresh_ttl: bool,
) -> Result<HashMap<i64, Item>> {
    if page.is_empty() {
        return Ok(HashMap::new());
    }
    let ids: Vec<i64> = page.iter().map(|(_, id)| *id).collect();
    let rows = sqlx::query!(
        r#"
        with found as (
            select i.owner, i.namespace, i.key, v.id
            from mostrador.store_vectors v
            join mostrador.store_items i using (owner, namespace, key)
            where v.id = any($2) and v.owner = $1
              and (i.expires_at is null or i.expires_at > now())
        ),
        refreshed as (
            update mostrador.store_items i
            set expires_at = now() + make_interval(secs => i.ttl_minutes * 60)
            from found f
            where $3 and i.ttl_minutes is not null
              and (i.owner, i.namespace, i.key) = (f.owner, f.namespace, f.key)
        )
        select f.id as "id!", i.namespace as "namespace!", i.key as "key!",
               i.value as "value!", i.created_at as "created_at!", i.updated_at as "updated_at!"
        from mostrador.store_items i
        join found f using (owner, namespace, key)
        "#,
        owner,
        &ids,
        refresh_ttl,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let item = Item {
                namespace: row.namespace,
                key: row.key,
                value: row.value,
                created_at: row.created_at,
                updated_at: row.updated_at,
            };
            (row.id, item)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(key: &str, floats: &[f32]) -> Arc<Vector> {
        let bytes: Vec<u8> = floats.iter().flat_map(|x| x.to_le_bytes()).collect();
        Arc::new(Vector::new(
            vec!["memories".into()],
            key.into(),
            Utc::now(),
            &bytes,
        ))
    }

    #[test]
    fn an_item_ranks_by_its_most_similar_field_by_cosine_whatever_the_lengths() {
        let vectors = vec![
            (1, vector("far", &[0.0, 1.0])),
            (2, vector("near", &[10.0, 1.0])),
            (3, vector("both", &[0.0, 3.0])),
            (4, vector("both", &[5.0, 0.0])),
            (5, vector("zero", &[0.0, 0.0])),
        ];
        let ranked = rank(&unit(&[2.0, 0.0]), &vectors).expect("valid");
        let ids: Vec<i64> = ranked.iter().map(|(_, id)| *id).collect();
        assert_eq!(
            ids,
            [4, 2, 1, 5],
            "both by its best field, then near, then far, zero last"
        );
        assert!((ranked[0].0 - 1.0).abs() < 1e-6);
        assert!((ranked[1].0 - 10.0 / 101f32.sqrt()).abs() < 1e-6);
        assert!(ranked[2].0.abs() < 1e-6 && ranked[3].0 == 0.0);
    }

    #[test]
    fn a_query_in_other_dimensions_than_the_items_is_refused_by_name() {
        let err =
            rank(&unit(&[1.0, 0.0, 0.0]), &[(1, vector("old", &[1.0, 0.0]))]).expect_err("refused");
        assert!(
            err.to_string().contains("2 dimensions and the query in 3"),
            "{err}"
        );
    }

    #[test]
    fn the_dot_product_counts_every_dimension_past_the_lanes() {
        let a: Vec<f32> = (0..19).map(|i| i as f32).collect();
        let expected: f32 = a.iter().map(|x| x * x).sum();
        assert_eq!(dot(&a, &a), expected);
    }

    #[test]
    fn the_cache_keeps_what_was_read_within_its_budget_and_forgets_the_oldest() {
        let one = vector("a", &[1.0; 256]);
        let bytes = one.bytes();
        let cache = VectorCache::new(bytes * 4);
        cache.keep(&[(1, one.clone()), (2, one.clone())]);
        assert_eq!(cache.held(&[1, 2, 3]).1, [3]);
        // Two more fill the newer generation past half the budget: 1 and 2 are the older.
        cache.keep(&[(3, one.clone()), (4, one.clone()), (5, one.clone())]);
        let (held, missing) = cache.held(&[1, 2, 3, 4, 5]);
        assert_eq!(held.len() + missing.len(), 5);
        assert!(!missing.is_empty(), "a full cache forgets");
        assert!(held.iter().any(|(id, _)| *id == 5), "the newest is kept");
    }

    #[test]
    fn an_embedding_that_is_empty_not_finite_or_one_too_many_is_refused() {
        let of = |vector: Vec<f32>| {
            columns(&[Embedded {
                field: "$".into(),
                vector,
            }])
        };
        assert!(of(vec![]).is_err());
        assert!(of(vec![1.0, f32::NAN]).is_err());
        let many = vec![
            Embedded {
                field: "tags.0".into(),
                vector: vec![1.0],
            };
            MAX_EMBEDDED + 1
        ];
        assert!(columns(&many).is_err());
        let (fields, vectors) = of(vec![1.0, -2.0]).expect("valid");
        assert_eq!(fields, ["$"]);
        assert_eq!(vectors, [[0, 0, 128, 63, 0, 0, 0, 192]]);
    }
}

//! Semantic search (`store.index`): the items whose embedded fields are nearest a query's vector,
//! by cosine similarity, an item scored by its best field, as LangGraph's stores rank them.
//!
//! The search is exact: every candidate's vectors are scored, in this process. Postgres picks
//! the candidates (owner, prefix, filter, not expired) and answers only their embeddings' ids; an
//! embedding never changes once written (a put that embeds gives it a new id), so each process
//! keeps those it has read, by id, in a [`VectorCache`], and reads from Postgres only those it
//! has not seen. It keeps a search's candidates too, under the generation of their owner's items
//! (`store_generations`, which a trigger bumps on every change), so while the owner's items do
//! not change a search asks Postgres for one row.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::PgPool;

use super::{Found, Item, Search};
use crate::{Error, Result};

/// An item's embedded field: the path of the value it embeds and the embedding of its text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Embedded {
    pub field: String,
    pub vector: Vec<f32>,
}

/// The longest vector a field may have: past every embedding model's.
const MAX_DIMS: usize = 16_384;

/// The most vectors one item may have (a field that matches many texts, `tags[*]`, gives one
/// each): with [`MAX_DIMS`], what one put may add to the caller's storage is bounded.
pub const MAX_EMBEDDED: usize = 256;

/// `embedded` as the columns of `store_items`: the fields, and their vectors one after another
/// as little-endian floats; neither for none.
///
/// # Errors
///
/// [`Error::Invalid`] for too many vectors, or one that is empty, too long, not finite or of
/// another length than the others.
pub(super) fn columns(embedded: &[Embedded]) -> Result<Option<(Vec<String>, Vec<u8>)>> {
    let invalid = |reason: String| Error::Invalid {
        field: "index",
        reason,
    };
    let Some(first) = embedded.first() else {
        return Ok(None);
    };
    if embedded.len() > MAX_EMBEDDED {
        return Err(invalid(format!(
            "an item has at most {MAX_EMBEDDED} embedded texts, and this one {}: index fewer fields",
            embedded.len()
        )));
    }
    let dims = first.vector.len();
    let mut fields = Vec::with_capacity(embedded.len());
    let mut bytes = Vec::with_capacity(embedded.len() * dims * 4);
    for Embedded { field, vector } in embedded {
        if vector.is_empty() || vector.len() > MAX_DIMS {
            return Err(invalid(format!(
                "the embedding of {field:?} has {} dimensions: 1 to {MAX_DIMS}",
                vector.len()
            )));
        }
        if vector.len() != dims {
            return Err(invalid(format!(
                "the embedding of {field:?} has {} dimensions, of {:?} {dims}",
                vector.len(),
                first.field
            )));
        }
        if !vector.iter().all(|x| x.is_finite()) {
            return Err(invalid(format!(
                "the embedding of {field:?} holds a number that is not finite"
            )));
        }
        fields.push(field.clone());
        bytes.extend(vector.iter().flat_map(|x| x.to_le_bytes()));
    }
    Ok(Some((fields, bytes)))
}

/// An item's embedding as a search uses it: its item (and when that was created, which only a put
/// that embeds anew may change), and each field's direction (a unit vector, or zeros).
#[derive(Debug)]
struct Vectors {
    namespace: Vec<String>,
    key: String,
    created_at: DateTime<Utc>,
    units: Vec<Box<[f32]>>,
}

impl Vectors {
    fn new(
        namespace: Vec<String>,
        key: String,
        created_at: DateTime<Utc>,
        fields: usize,
        bytes: &[u8],
    ) -> Self {
        let floats: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let units = floats
            .chunks(floats.len().div_ceil(fields.max(1)).max(1))
            .map(unit)
            .collect();
        Self {
            namespace,
            key,
            created_at,
            units,
        }
    }

    fn bytes(&self) -> usize {
        self.units.iter().map(|unit| unit.len() * 4).sum::<usize>()
            + self.key.len()
            + self.namespace.iter().map(String::len).sum::<usize>()
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

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
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

/// What this process read for semantic searches. The vectors, by id, within a budget of bytes:
/// two generations, the newer filled until it holds half the budget, when the older is dropped
/// and the newer takes its place (a vector read from the older moves to the newer); vectors never
/// change, so what it holds is never stale, and one deleted is dropped in its turn. And the
/// candidates of searches (an owner's prefix and filter), each under the generation of the
/// owner's items it was listed at (`store_generations`), answered again while that holds.
#[derive(Debug)]
pub struct VectorCache {
    budget: usize,
    held: Mutex<Held>,
    lists: Mutex<Lists>,
}

#[derive(Debug, Default)]
struct Held {
    newer: HashMap<i64, Arc<Vectors>>,
    newer_bytes: usize,
    older: HashMap<i64, Arc<Vectors>>,
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
            held: Mutex::new(Held::default()),
            lists: Mutex::new(Lists::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        lock(&self.held)
    }

    /// Those of `ids` it holds, and the ids it does not.
    fn held(&self, ids: &[i64]) -> (Vec<(i64, Arc<Vectors>)>, Vec<i64>) {
        let mut kept = self.lock();
        let mut held = Vec::with_capacity(ids.len());
        let mut missing = Vec::new();
        for &id in ids {
            if let Some(vector) = kept.newer.get(&id) {
                held.push((id, vector.clone()));
            } else if let Some(vector) = kept.older.remove(&id) {
                kept.keep(self.budget, id, vector.clone());
                held.push((id, vector));
            } else {
                missing.push(id);
            }
        }
        (held, missing)
    }

    fn listed(&self, search: &(String, Vec<String>, Option<String>)) -> Option<Arc<Listed>> {
        lock(&self.lists).by_search.get(search).cloned()
    }

    fn list(&self, search: (String, Vec<String>, Option<String>), listed: Arc<Listed>) {
        let mut lists = lock(&self.lists);
        if lists.ids + listed.ids.len() > MAX_LISTED {
            *lists = Lists::default();
        }
        lists.ids += listed.ids.len();
        if let Some(old) = lists.by_search.insert(search, listed) {
            lists.ids -= old.ids.len();
        }
    }

    fn keep(&self, read: &[(i64, Arc<Vectors>)]) {
        let mut kept = self.lock();
        for (id, vector) in read {
            kept.keep(self.budget, *id, vector.clone());
        }
    }
}

/// Searches' candidates: (owner, prefix, filter) → what was listed.
#[derive(Debug, Default)]
struct Lists {
    by_search: HashMap<(String, Vec<String>, Option<String>), Arc<Listed>>,
    ids: usize,
}

/// A search's candidates under a generation of their owner's items: each embedding's id and when
/// its item expires.
#[derive(Debug)]
struct Listed {
    generation: i64,
    ids: Vec<(i64, Option<DateTime<Utc>>)>,
}

/// The most candidates kept across searches (16 bytes each, a few bytes of bookkeeping); past it
/// every list is dropped and listed again when next searched.
const MAX_LISTED: usize = 2_000_000;

impl Held {
    fn keep(&mut self, budget: usize, id: i64, vector: Arc<Vectors>) {
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
    let started = std::time::Instant::now();
    let ids = candidates(pool, owner, search, cache).await?;
    let (mut vectors, missing) = cache.held(&ids);
    if !missing.is_empty() {
        let read: Vec<(i64, Arc<Vectors>)> = sqlx::query!(
            r#"
            select embedding_id as "embedding_id!", namespace, key, created_at,
                   embedded_fields as "embedded_fields!", embedding as "embedding!"
            from mostrador.store_items
            where owner = $1 and embedding_id = any($2)
            "#,
            owner,
            &missing,
        )
        .fetch_all(pool)
        .await?
        .into_iter()
        .map(|row| {
            let fields = row.embedded_fields.len();
            let vectors = Vectors::new(
                row.namespace,
                row.key,
                row.created_at,
                fields,
                &row.embedding,
            );
            (row.embedding_id, Arc::new(vectors))
        })
        .collect();
        cache.keep(&read);
        vectors.extend(read);
    }
    let selected = started.elapsed();
    let read = missing.len();
    let offset = usize::try_from(search.offset).unwrap_or(0);
    let limit = usize::try_from(search.limit).unwrap_or(0);
    let (ranked, scored_items) = rank(&unit(query), &vectors, offset + limit)?;
    let scored = started.elapsed();
    let page: Vec<(f32, i64)> = ranked.iter().skip(offset).copied().collect();
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
    tracing::debug!(
        candidates = ids.len(),
        read,
        selected_us = selected.as_micros(),
        scored_us = (scored - selected).as_micros(),
        fetched_us = (started.elapsed() - scored).as_micros(),
        "a semantic search"
    );
    if found.len() < limit {
        let skip = offset.saturating_sub(scored_items);
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

/// The embeddings' ids of `owner`'s live items that `search` selects: as listed under the current
/// generation of the owner's items, or listed now.
async fn candidates(
    pool: &PgPool,
    owner: &str,
    search: &Search,
    cache: &VectorCache,
) -> Result<Vec<i64>> {
    let asked = (
        owner.to_owned(),
        search.namespace_prefix.clone(),
        search.filter.as_ref().map(Value::to_string),
    );
    let now = Utc::now();
    let live = |listed: &Listed| -> Vec<i64> {
        listed
            .ids
            .iter()
            .filter(|(_, expires)| expires.is_none_or(|at| at > now))
            .map(|(id, _)| *id)
            .collect()
    };
    if let Some(listed) = cache.listed(&asked) {
        let generation = sqlx::query_scalar!(
            "select generation from mostrador.store_generations where owner = $1",
            owner
        )
        .fetch_optional(pool)
        .await?;
        if generation == Some(listed.generation) {
            return Ok(live(&listed));
        }
    }
    // The generation read in the same statement, so the list is exactly what it was then.
    let rows = sqlx::query!(
        r#"
        select (select generation from mostrador.store_generations where owner = $1)
                   as "generation?",
               embedding_id as "embedding_id!", expires_at
        from mostrador.store_items
        where owner = $1
          and namespace[1:cardinality($2::text[])] = $2
          and ($3::jsonb is null or value @> $3)
          and (expires_at is null or expires_at > now())
          and embedding_id is not null
        "#,
        owner,
        &search.namespace_prefix as &[String],
        search.filter,
    )
    .fetch_all(pool)
    .await?;
    let Some(generation) = rows.first().and_then(|row| row.generation) else {
        return Ok(Vec::new());
    };
    let listed = Listed {
        generation,
        ids: rows
            .into_iter()
            .map(|row| (row.embedding_id, row.expires_at))
            .collect(),
    };
    let ids = live(&listed);
    cache.list(asked, Arc::new(listed));
    Ok(ids)
}

/// The `first` items' best scores and their embeddings' ids, best first (equal scores in the order
/// the items were created, as LangGraph's in-memory store keeps them, then by namespace and key),
/// and how many items were scored.
fn rank(
    query: &[f32],
    vectors: &[(i64, Arc<Vectors>)],
    first: usize,
) -> Result<(Vec<(f32, i64)>, usize)> {
    let mut ranked = Vec::with_capacity(vectors.len());
    for (id, item) in vectors {
        let mut best = f32::NEG_INFINITY;
        for unit in &item.units {
            if unit.len() != query.len() {
                return Err(Error::Invalid {
                    field: "query",
                    reason: format!(
                        "item {:?} was embedded in {} dimensions and the query in {}: the \
                         index's embedding changed since it was put; put it again",
                        item.key,
                        unit.len(),
                        query.len()
                    ),
                });
            }
            best = best.max(dot(query, unit));
        }
        ranked.push((best, *id, item.as_ref()));
    }
    let order = |a: &(f32, i64, &Vectors), b: &(f32, i64, &Vectors)| {
        b.0.total_cmp(&a.0)
            .then_with(|| a.2.created_at.cmp(&b.2.created_at))
            .then_with(|| a.2.namespace.cmp(&b.2.namespace))
            .then_with(|| a.2.key.cmp(&b.2.key))
    };
    let scored = ranked.len();
    // Only the first are ordered: the rest are not answered.
    if first < scored {
        ranked.select_nth_unstable_by(first, order);
        ranked.truncate(first);
    }
    ranked.sort_by(order);
    let ranked = ranked
        .into_iter()
        .map(|(score, id, _)| (score, id))
        .collect();
    Ok((ranked, scored))
}

/// The live items of the embeddings `page` names, by embedding id, their TTL refreshed if asked.
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
            select owner, namespace, key
            from mostrador.store_items
            where owner = $1 and embedding_id = any($2)
              and (expires_at is null or expires_at > now())
        ),
        refreshed as (
            update mostrador.store_items i
            set expires_at = now() + make_interval(secs => i.ttl_minutes * 60)
            from found f
            where $3 and i.ttl_minutes is not null
              and (i.owner, i.namespace, i.key) = (f.owner, f.namespace, f.key)
        )
        select i.embedding_id as "id!", i.namespace as "namespace!", i.key as "key!",
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

    fn vectors(key: &str, fields: &[&[f32]]) -> Arc<Vectors> {
        let bytes: Vec<u8> = fields
            .iter()
            .flat_map(|floats| floats.iter().flat_map(|x| x.to_le_bytes()))
            .collect();
        let namespace = vec!["memories".into()];
        Arc::new(Vectors::new(
            namespace,
            key.into(),
            Utc::now(),
            fields.len(),
            &bytes,
        ))
    }

    #[test]
    fn an_item_ranks_by_its_most_similar_field_by_cosine_whatever_the_lengths() {
        let items = vec![
            (1, vectors("far", &[&[0.0, 1.0]])),
            (2, vectors("near", &[&[10.0, 1.0]])),
            (3, vectors("both", &[&[0.0, 3.0], &[5.0, 0.0]])),
            (4, vectors("zero", &[&[0.0, 0.0]])),
        ];
        let (ranked, scored) = rank(&unit(&[2.0, 0.0]), &items, 10).expect("valid");
        assert_eq!(scored, 4);
        let ids: Vec<i64> = ranked.iter().map(|(_, id)| *id).collect();
        assert_eq!(
            ids,
            [3, 2, 1, 4],
            "both by its best field, then near, then far, zero last"
        );
        assert!((ranked[0].0 - 1.0).abs() < 1e-6);
        assert!((ranked[1].0 - 10.0 / 101f32.sqrt()).abs() < 1e-6);
        assert!(ranked[2].0.abs() < 1e-6 && ranked[3].0 == 0.0);
    }

    #[test]
    fn the_first_of_many_are_the_best_in_order() {
        let items: Vec<_> = (0..50)
            .map(|i| (i, vectors(&format!("k{i}"), &[&[1.0, i as f32 / 10.0]])))
            .collect();
        let (first, scored) = rank(&unit(&[1.0, 0.0]), &items, 3).expect("valid");
        assert_eq!(scored, 50);
        let ids: Vec<i64> = first.iter().map(|(_, id)| *id).collect();
        assert_eq!(ids, [0, 1, 2]);
    }

    #[test]
    fn a_query_in_other_dimensions_than_the_items_is_refused_by_name() {
        let old = [(1, vectors("old", &[&[1.0, 0.0]]))];
        let err = rank(&unit(&[1.0, 0.0, 0.0]), &old, 10).expect_err("refused");
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
        let one = vectors("a", &[&[1.0; 256]]);
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
    fn an_embedding_that_is_empty_not_finite_uneven_or_one_too_many_is_refused() {
        let field = |field: &str, vector: Vec<f32>| Embedded {
            field: field.into(),
            vector,
        };
        assert!(columns(&[field("$", vec![])]).is_err());
        assert!(columns(&[field("$", vec![1.0, f32::NAN])]).is_err());
        assert!(columns(&[field("a", vec![1.0]), field("b", vec![1.0, 2.0])]).is_err());
        assert!(columns(&vec![field("tags.0", vec![1.0]); MAX_EMBEDDED + 1]).is_err());
        assert_eq!(columns(&[]).expect("none"), None);
        let (fields, bytes) = columns(&[field("a", vec![1.0]), field("b", vec![-2.0])])
            .expect("valid")
            .expect("some");
        assert_eq!(fields, ["a", "b"]);
        assert_eq!(bytes, [0, 0, 128, 63, 0, 0, 0, 192]);
    }

    #[test]
    fn an_items_vectors_are_read_back_field_by_field() {
        let item = vectors("two", &[&[3.0, 4.0], &[0.0, 2.0]]);
        assert_eq!(item.units.len(), 2);
        assert_eq!(&*item.units[0], &[0.6, 0.8]);
        assert_eq!(&*item.units[1], &[0.0, 1.0]);
    }
}

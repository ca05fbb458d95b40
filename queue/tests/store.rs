//! The Store's semantic index: items ranked by their nearest embedded field, their vectors
//! replaced with them and gone with them, a page filled as LangGraph's stores fill it.

use mostrador_queue::data::store::{self, Embedded, Found, Search, StoreQuota, VectorCache, Write};
use serde_json::{Value, json};
use sqlx::PgPool;

fn embedded(fields: &[(&str, &[f32])]) -> Vec<Embedded> {
    fields
        .iter()
        .map(|(field, vector)| Embedded {
            field: (*field).into(),
            vector: vector.to_vec(),
        })
        .collect()
}

async fn put(pool: &PgPool, owner: &str, key: &str, fields: &[(&str, &[f32])]) {
    let namespace = vec!["memories".to_owned(), owner.to_owned()];
    let value = json!({"text": key});
    let write = Write {
        namespace: &namespace,
        key,
        value: &value,
        ttl_minutes: None,
        embedded: &embedded(fields),
    };
    store::put(pool, owner, write, StoreQuota::default())
        .await
        .expect("put");
}

fn asked(query: Option<&[f32]>, limit: i64, offset: i64) -> Search {
    Search {
        namespace_prefix: vec!["memories".into()],
        query: query.map(<[f32]>::to_vec),
        limit,
        offset,
        refresh_ttl: true,
        ..Search::default()
    }
}

fn keys_and_scores(found: &[Found]) -> Vec<(String, Option<f64>)> {
    found
        .iter()
        .map(|found| {
            let score = found.score.map(|s| (s * 1000.0).round() / 1000.0);
            (found.item.key.clone(), score)
        })
        .collect()
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_search_with_a_query_ranks_items_by_their_nearest_field_then_fills_with_the_unembedded(
    pool: PgPool,
) {
    let cache = VectorCache::default();
    put(&pool, "ana", "east", &[("text", &[1.0, 0.0])]).await;
    put(&pool, "ana", "north", &[("text", &[0.0, 1.0])]).await;
    // Two fields: the nearer counts.
    put(
        &pool,
        "ana",
        "both",
        &[("text", &[0.0, 1.0]), ("tags", &[1.0, 1.0])],
    )
    .await;
    put(&pool, "ana", "plain", &[]).await;
    put(&pool, "bo", "east", &[("text", &[1.0, 0.0])]).await;

    let found = store::search(&pool, "ana", &asked(Some(&[2.0, 0.0]), 10, 0), &cache)
        .await
        .expect("the store answers");
    assert_eq!(
        keys_and_scores(&found),
        [
            ("east".into(), Some(1.0)),
            ("both".into(), Some(0.707)),
            ("north".into(), Some(0.0)),
            ("plain".into(), None),
        ],
        "ranked by cosine, the unembedded after, another owner's never"
    );
    assert_eq!(found[0].item.value, json!({"text": "east"}));

    // Pages: the ranked ones, then the unembedded, none twice.
    let mut paged = Vec::new();
    for offset in 0..4 {
        let page = store::search(&pool, "ana", &asked(Some(&[2.0, 0.0]), 1, offset), &cache)
            .await
            .expect("the store answers");
        paged.extend(keys_and_scores(&page));
    }
    assert_eq!(paged, keys_and_scores(&found));

    // Without a query: newest first, no score.
    let plain = store::search(&pool, "ana", &asked(None, 10, 0), &cache)
        .await
        .expect("the store answers");
    let keys: Vec<_> = keys_and_scores(&plain);
    assert_eq!(
        keys,
        [
            ("plain".into(), None),
            ("both".into(), None),
            ("north".into(), None),
            ("east".into(), None)
        ]
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_put_replaces_its_items_vectors_and_a_delete_takes_them(pool: PgPool) {
    // One cache for every search: what it holds never answers for a vector replaced since.
    let cache = VectorCache::default();
    put(&pool, "ana", "moving", &[("text", &[1.0, 0.0])]).await;
    put(&pool, "ana", "still", &[("text", &[0.6, 0.8])]).await;
    let first = store::search(&pool, "ana", &asked(Some(&[1.0, 0.0]), 10, 0), &cache)
        .await
        .expect("the store answers");
    assert_eq!(first[0].item.key, "moving");

    put(&pool, "ana", "moving", &[("text", &[0.0, 1.0])]).await;
    let second = store::search(&pool, "ana", &asked(Some(&[1.0, 0.0]), 10, 0), &cache)
        .await
        .expect("the store answers");
    assert_eq!(
        keys_and_scores(&second),
        [("still".into(), Some(0.6)), ("moving".into(), Some(0.0))]
    );

    // Put without fields: found by no query, after those that are.
    put(&pool, "ana", "still", &[]).await;
    let third = store::search(&pool, "ana", &asked(Some(&[1.0, 0.0]), 10, 0), &cache)
        .await
        .expect("the store answers");
    assert_eq!(
        keys_and_scores(&third),
        [("moving".into(), Some(0.0)), ("still".into(), None)]
    );

    store::delete(&pool, "ana", &["memories".into(), "ana".into()], "moving")
        .await
        .expect("the store answers");
    let left: i64 = sqlx::query_scalar(
        "select count(*) from mostrador.store_items where embedding is not null",
    )
    .fetch_one(&pool)
    .await
    .expect("the store answers");
    assert_eq!(left, 0, "an item's vectors go with it");
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_semantic_search_keeps_to_the_filter_and_leaves_out_expired_items(pool: PgPool) {
    let cache = VectorCache::default();
    let namespace = vec!["memories".to_owned()];
    for (key, kind, ttl) in [
        ("a", "food", None),
        ("b", "sport", None),
        ("c", "food", Some(1.0)),
    ] {
        let value = json!({"kind": kind});
        let write = Write {
            namespace: &namespace,
            key,
            value: &value,
            ttl_minutes: ttl,
            embedded: &embedded(&[("$", &[1.0, 0.0])]),
        };
        store::put(&pool, "ana", write, StoreQuota::default())
            .await
            .expect("the store answers");
    }
    sqlx::query(
        "update mostrador.store_items set expires_at = now() - interval '1 second' where key = 'c'",
    )
    .execute(&pool)
    .await
    .expect("the store answers");
    let search = Search {
        filter: Some(json!({"kind": "food"})),
        ..asked(Some(&[1.0, 0.0]), 10, 0)
    };
    let found = store::search(&pool, "ana", &search, &cache)
        .await
        .expect("the store answers");
    let keys: Vec<&str> = found.iter().map(|f| f.item.key.as_str()).collect();
    assert_eq!(keys, ["a"]);

    let err = store::search(&pool, "ana", &asked(Some(&[1.0, 0.0, 0.0]), 10, 0), &cache)
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("dimensions"), "{err}");
    let bad = Write {
        namespace: &namespace,
        key: "nan",
        value: &Value::Object(serde_json::Map::new()),
        ttl_minutes: None,
        embedded: &embedded(&[("$", &[f32::NAN])]),
    };
    assert!(
        store::put(&pool, "ana", bad, StoreQuota::default())
            .await
            .is_err()
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_callers_vectors_count_toward_their_storage(pool: PgPool) {
    let quota = StoreQuota {
        items: 10,
        bytes: 4_000,
    };
    let namespace = vec!["memories".to_owned()];
    let value = json!({"text": "short"});
    let write = |key, embedded| Write {
        namespace: &namespace,
        key,
        value: &value,
        ttl_minutes: None,
        embedded,
    };
    let big = embedded(&[("text", &[0.5; 600])]);
    store::put(&pool, "ana", write("first", &big), quota)
        .await
        .expect("2,400 bytes of vector fit");
    let err = store::put(&pool, "ana", write("second", &big), quota)
        .await
        .expect_err("4,800 bytes of vectors do not");
    assert!(err.to_string().contains("MiB in the Store"), "{err}");
    store::put(&pool, "ana", write("second", &[]), quota)
        .await
        .expect("without a vector it fits");
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_searchs_remembered_candidates_never_answer_for_a_change(pool: PgPool) {
    let cache = VectorCache::default();
    let search = |limit| Search {
        refresh_ttl: false,
        ..asked(Some(&[1.0, 0.0]), limit, 0)
    };
    let keys =
        |found: Vec<Found>| -> Vec<String> { found.into_iter().map(|f| f.item.key).collect() };
    put(&pool, "ana", "a", &[("text", &[1.0, 0.0])]).await;
    let namespace = vec!["memories".to_owned(), "ana".to_owned()];
    let value = json!({"text": "brief"});
    let brief = Write {
        namespace: &namespace,
        key: "brief",
        value: &value,
        // 60 ms.
        ttl_minutes: Some(0.001),
        embedded: &embedded(&[("text", &[0.9, 0.1])]),
    };
    store::put(&pool, "ana", brief, StoreQuota::default())
        .await
        .expect("put");
    let first = store::search(&pool, "ana", &search(10), &cache)
        .await
        .expect("search");
    assert_eq!(keys(first), ["a", "brief"]);
    // Expired by time alone, no write: the remembered list still leaves it out.
    tokio::time::sleep(std::time::Duration::from_millis(120)).await;
    let later = store::search(&pool, "ana", &search(10), &cache)
        .await
        .expect("search");
    assert_eq!(keys(later), ["a"]);
    // Another process's write (here: this one's, through SQL alone) is seen at once.
    sqlx::query("update mostrador.store_items set embedding_id = null, embedding = null, embedded_fields = null where key = 'a'")
        .execute(&pool)
        .await
        .expect("update");
    put(&pool, "ana", "b", &[("text", &[0.0, 1.0])]).await;
    let now = store::search(&pool, "ana", &search(10), &cache)
        .await
        .expect("search");
    assert_eq!(keys(now), ["b", "a"], "b scored, a unembedded");
}

//! `/store`: the Store as the official server serves it, each item its writer's own.

use axum::http::StatusCode;
use serde_json::json;
use sqlx::PgPool;

use crate::support::{Api, caller};

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn store_items_are_put_read_searched_and_deleted_by_their_owner_only(pool: PgPool) {
    let api = Api::new(pool.clone()).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let luis = api.token_for(&caller("luis", "customer", None));
    let send = |method: &'static str, path: &'static str, token: &str, body: serde_json::Value| {
        let request = api.request(method, path, token, &body.to_string());
        async { api.send(request).await }
    };
    for (key, food) in [("a", "tortilla"), ("b", "paella")] {
        let (status, _, answer) = send(
            "PUT",
            "/store/items",
            &ana,
            json!({"namespace": ["users", "ana", "memories"], "key": key, "value": {"food": food}}),
        )
        .await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{answer}");
    }
    send(
        "PUT",
        "/store/items",
        &ana,
        json!({"namespace": ["users", "ana", "settings"], "key": "tz", "value": {"tz": "Europe/Madrid"}}),
    )
    .await;

    let get = |token: &str, query: &str| {
        let request = api.request("GET", &format!("/store/items?{query}"), token, "");
        async { api.send(request).await }
    };
    let (status, _, item) = get(&ana, "namespace=users.ana.memories&key=a").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(item["value"], json!({"food": "tortilla"}));
    assert_eq!(item["namespace"], json!(["users", "ana", "memories"]));
    assert!(item["created_at"].is_string() && item["updated_at"].is_string());
    let (status, _, item) = get(&luis, "namespace=users.ana.memories&key=a").await;
    assert_eq!((status, item), (StatusCode::OK, json!(null)), "not luis's");

    let (_, _, found) = send(
        "POST",
        "/store/items/search",
        &ana,
        json!({"namespace_prefix": ["users", "ana"], "filter": {"food": "paella"}}),
    )
    .await;
    let keys: Vec<&str> = found["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|item| item["key"].as_str())
        .collect();
    assert_eq!(keys, ["b"]);
    let (_, _, found) = send(
        "POST",
        "/store/items/search",
        &luis,
        json!({"namespace_prefix": []}),
    )
    .await;
    assert_eq!(found, json!({"items": []}), "luis sees none of ana's");

    let (_, _, listed) = send(
        "POST",
        "/store/namespaces",
        &ana,
        json!({"prefix": ["users"], "max_depth": 3}),
    )
    .await;
    assert_eq!(
        listed,
        json!({"namespaces": [["users", "ana", "memories"], ["users", "ana", "settings"]]})
    );
    let (_, _, listed) = send(
        "POST",
        "/store/namespaces",
        &ana,
        json!({"suffix": ["settings"]}),
    )
    .await;
    assert_eq!(
        listed,
        json!({"namespaces": [["users", "ana", "settings"]]})
    );

    // A TTL: gone once it has passed.
    send(
        "PUT",
        "/store/items",
        &ana,
        json!({"namespace": ["users", "ana", "memories"], "key": "brief", "value": {}, "ttl": 5}),
    )
    .await;
    let (_, _, item) = get(&ana, "namespace=users.ana.memories&key=brief").await;
    assert_eq!(item["key"], "brief");
    sqlx::query("update mostrador.store_items set expires_at = now() - interval '1 second' where key = 'brief'")
        .execute(&pool)
        .await
        .expect("time passes");
    let (_, _, item) = get(&ana, "namespace=users.ana.memories&key=brief").await;
    assert_eq!(item, json!(null), "expired");

    let (status, _, _) = send(
        "DELETE",
        "/store/items",
        &luis,
        json!({"namespace": ["users", "ana", "memories"], "key": "a"}),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, _, item) = get(&ana, "namespace=users.ana.memories&key=a").await;
    assert_eq!(item["key"], "a", "luis's delete touched only luis's items");
    send(
        "DELETE",
        "/store/items",
        &ana,
        json!({"namespace": ["users", "ana", "memories"], "key": "a"}),
    )
    .await;
    let (_, _, item) = get(&ana, "namespace=users.ana.memories&key=a").await;
    assert_eq!(item, json!(null));

    for (method, path, body) in [
        (
            "PUT",
            "/store/items",
            json!({"namespace": ["a.b"], "key": "k", "value": {}}),
        ),
        (
            "PUT",
            "/store/items",
            json!({"namespace": [], "key": "k", "value": {}}),
        ),
        (
            "PUT",
            "/store/items",
            json!({"namespace": ["a"], "key": "k", "value": 3}),
        ),
        (
            "PUT",
            "/store/items",
            json!({"namespace": ["a"], "key": "k", "value": {}, "ttl": -1}),
        ),
        ("POST", "/store/items/search", json!({"limit": 0})),
        ("POST", "/store/namespaces", json!({"max_depth": 0})),
    ] {
        let (status, _, answer) = send(method, path, &ana, body.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {answer}");
    }
    let (status, _, _) = get(&ana, "namespace=users").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "no key");
    let (status, _, _) = get(&ana, "namespace=&key=a").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "an empty label");
}

/// Whoever else asks, under a policy that lets a store's managers read its threads: the owner's
/// items are invisible (read, searched, listed), untouched by their deletes, and their puts at
/// the same namespace and key are items of their own.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn another_callers_namespace_is_invisible_whoever_they_are(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let send = |method: &'static str, path: &str, token: &str, body: serde_json::Value| {
        let request = api.request(method, path, token, &body.to_string());
        async { api.send(request).await }
    };
    let item = json!({"namespace": ["users", "ana", "memories"], "key": "a", "value": {"food": "tortilla"}});
    let (status, _, _) = send("PUT", "/store/items", &ana, item.clone()).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let anas = || async {
        send(
            "GET",
            "/store/items?namespace=users.ana.memories&key=a",
            &ana,
            json!(null),
        )
        .await
        .2
    };
    let strangers = [
        (
            "a customer of the same store",
            caller("luis", "customer", Some("madrid-1")),
        ),
        (
            "a manager of the same store",
            caller("marta", "manager", Some("madrid-1")),
        ),
        (
            "a clerk of the same store",
            caller("pepe", "clerk", Some("madrid-1")),
        ),
        (
            "a manager of another store",
            caller("rosa", "manager", Some("sevilla-2")),
        ),
        ("a caller of no tenant", caller("eve", "customer", None)),
    ];
    for (who, stranger) in strangers {
        let token = api.token_for(&stranger);
        let (status, _, got) = send(
            "GET",
            "/store/items?namespace=users.ana.memories&key=a",
            &token,
            json!(null),
        )
        .await;
        assert_eq!((status, got), (StatusCode::OK, json!(null)), "{who}: get");
        for prefix in [
            json!([]),
            json!(["users"]),
            json!(["users", "ana", "memories"]),
        ] {
            let (status, _, found) = send(
                "POST",
                "/store/items/search",
                &token,
                json!({"namespace_prefix": prefix}),
            )
            .await;
            assert_eq!(
                (status, found),
                (StatusCode::OK, json!({"items": []})),
                "{who}: search under {prefix}"
            );
        }
        let (status, _, listed) = send("POST", "/store/namespaces", &token, json!({})).await;
        assert_eq!(
            (status, listed),
            (StatusCode::OK, json!({"namespaces": []})),
            "{who}: namespaces"
        );
        let (status, _, _) = send(
            "DELETE",
            "/store/items",
            &token,
            json!({"namespace": ["users", "ana", "memories"], "key": "a"}),
        )
        .await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{who}: delete");
        assert_eq!(
            anas().await["value"],
            json!({"food": "tortilla"}),
            "{who}: delete"
        );
        let theirs = json!({"namespace": ["users", "ana", "memories"], "key": "a", "value": {"food": "other"}});
        let (status, _, _) = send("PUT", "/store/items", &token, theirs).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{who}: put");
        assert_eq!(
            anas().await["value"],
            json!({"food": "tortilla"}),
            "{who}: put"
        );
        let (_, _, own) = send(
            "GET",
            "/store/items?namespace=users.ana.memories&key=a",
            &token,
            json!(null),
        )
        .await;
        assert_eq!(
            own["value"],
            json!({"food": "other"}),
            "{who}: their own item"
        );
    }
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn the_projects_store_ttl_applies_to_items_put_without_one_and_expired_ones_are_swept(
    pool: PgPool,
) {
    use mostrador_api::ApiConfig;
    use mostrador_api::app::StoreTtl;

    let api = Api::with(
        pool.clone(),
        ApiConfig {
            store_ttl: StoreTtl {
                default_minutes: Some(60.0),
                refresh_on_read: false,
            },
            ..crate::support::config()
        },
    )
    .await;
    let ana = api.token_for(&caller("ana", "customer", None));
    for (key, body) in [
        (
            "defaulted",
            json!({"namespace": ["n"], "key": "defaulted", "value": {"a": 1}}),
        ),
        (
            "own",
            json!({"namespace": ["n"], "key": "own", "value": {"a": 1}, "ttl": 5}),
        ),
    ] {
        let (status, _, _) = api
            .send(api.request("PUT", "/store/items", &ana, &body.to_string()))
            .await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{key}");
    }
    let ttls: Vec<(String, Option<f64>)> =
        sqlx::query_as("select key, ttl_minutes from mostrador.store_items order by key")
            .fetch_all(&pool)
            .await
            .expect("items");
    assert_eq!(
        ttls,
        [
            ("defaulted".to_owned(), Some(60.0)),
            ("own".to_owned(), Some(5.0))
        ]
    );
    // Reads do not restart the time when the client does not say (`refresh_on_read: false`).
    sqlx::query("update mostrador.store_items set expires_at = now() + interval '1 minute'")
        .execute(&pool)
        .await
        .expect("soon");
    let (status, _, item) = api
        .send(api.request("GET", "/store/items?namespace=n&key=own", &ana, ""))
        .await;
    assert_eq!(status, StatusCode::OK, "{item}");
    let soon: bool = sqlx::query_scalar(
        "select expires_at < now() + interval '2 minutes' from mostrador.store_items where key = 'own'",
    )
    .fetch_one(&pool)
    .await
    .expect("item");
    assert!(soon, "not refreshed");
    // Past their time: swept by the workers.
    sqlx::query("update mostrador.store_items set expires_at = now() - interval '1 second' where key = 'own'")
        .execute(&pool)
        .await
        .expect("expired");
    assert_eq!(
        mostrador_queue::data::store::delete_expired(&pool, 100)
            .await
            .expect("sweep"),
        1
    );
    let left: Vec<String> = sqlx::query_scalar("select key from mostrador.store_items")
        .fetch_all(&pool)
        .await
        .expect("items");
    assert_eq!(left, ["defaulted"]);
}

/// What one caller keeps in the Store is bounded (items, bytes, the size of one value), so that
/// no caller fills the database every tenant shares: past it a new item is a 422 that writes
/// nothing, an item the caller has is still rewritten, and others write as before.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_callers_storage_is_bounded(pool: PgPool) {
    let api = Api::with(
        pool.clone(),
        mostrador_api::ApiConfig {
            body_limit: 4 * 1024 * 1024,
            store_quota: mostrador_queue::data::store::StoreQuota {
                items: 3,
                bytes: 10_000,
            },
            ..crate::support::config()
        },
    )
    .await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let luis = api.token_for(&caller("luis", "customer", None));
    let put = |token: &str, key: &str, value: serde_json::Value| {
        let body = json!({"namespace": ["notes"], "key": key, "value": value}).to_string();
        let request = api.request("PUT", "/store/items", token, &body);
        async { api.send(request).await }
    };
    let items = |owner: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(
                "select count(*) from mostrador.store_items where owner = $1",
            )
            .bind(owner)
            .fetch_one(&pool)
            .await
            .expect("count")
        }
    };
    for key in ["a", "b", "c"] {
        let (status, _, answer) = put(&ana, key, json!({"text": key})).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{answer}");
    }
    let (status, _, answer) = put(&ana, "d", json!({"text": "d"})).await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "past her items: {answer}"
    );
    assert_eq!(items("ana").await, 3, "nothing written");
    let (status, _, answer) = put(&ana, "a", json!({"text": "rewritten"})).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "an item she has: {answer}");

    // Bytes: luis's one large value fits, a second does not.
    // Incompressible (PostgreSQL compresses what it stores, and the quota counts that).
    let mut seed: u64 = 7;
    let noise: String = (0..6_000)
        .map(|_| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            char::from(b'a' + u8::try_from(seed >> 59).expect("5 bits"))
        })
        .collect();
    let large = json!({ "text": noise });
    let (status, _, answer) = put(&luis, "big", large.clone()).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{answer}");
    let (status, _, answer) = put(&luis, "bigger", large).await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "past his bytes: {answer}"
    );
    assert_eq!(items("luis").await, 1);

    // One value is a memory, not a file.
    let huge = json!({"text": "x".repeat(mostrador_queue::data::store::MAX_VALUE_BYTES)});
    let (status, _, answer) = put(&luis, "big", huge).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
}

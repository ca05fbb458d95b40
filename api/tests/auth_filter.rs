//! A project's auth filter (`auth.path`) is matched alike where a search filters rows, in SQL
//! (`mostrador.auth_admits`), and where the api checks one resource it read by id (in Rust).

use mostrador_api::custom_auth::AuthFilter;
use serde_json::{Value, json};
use sqlx::PgPool;

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn the_database_and_the_api_match_an_auth_filter_alike(pool: PgPool) {
    let metadata = [
        json!({}),
        json!({"owner": "ana", "tags": ["a", "b"], "n": 1}),
        json!({"owner": "bo", "tags": [{"k": 1}], "n": 1.0, "nested": {"x": [1]}}),
        json!({"owner": null, "tags": "a"}),
    ];
    let filters = [
        json!({}),
        json!({"owner": "ana"}),
        json!({"owner": null}),
        json!({"owner": {"$eq": "bo"}}),
        json!({"n": 1}),
        json!({"nested": {"$eq": {"x": [1]}}}),
        json!({"tags": {"$contains": "a"}}),
        json!({"tags": {"$contains": ["a", "b"]}}),
        json!({"tags": {"$contains": {"k": 1}}}),
        json!({"tags": {"$contains": ["a", "z"]}}),
        json!({"$or": [{"owner": "ana"}, {"owner": "bo"}], "n": 1}),
        json!({"$and": [{"owner": "ana"}, {"$or": [{"n": 2}, {"tags": {"$contains": "b"}}]}]}),
        json!({"owner": {"$unknown": 1}}),
    ];
    let mut admitted = 0;
    for filter in &filters {
        let rust = AuthFilter::new(filter.clone()).expect("a filter of the right shape");
        for row in &metadata {
            let sql: bool = sqlx::query_scalar("select mostrador.auth_admits($1, $2)")
                .bind(row)
                .bind(filter)
                .fetch_one(&pool)
                .await
                .expect("matched");
            assert_eq!(rust.admits(row), sql, "{filter} on {row}");
            admitted += usize::from(sql);
        }
    }
    // Neither all nor none: the table tells matches from misses.
    assert!(
        admitted > 10 && admitted < filters.len() * metadata.len() - 10,
        "{admitted}"
    );
    let none: Option<Value> = None;
    let all: bool = sqlx::query_scalar("select mostrador.auth_admits('{}', $1)")
        .bind(none)
        .fetch_one(&pool)
        .await
        .expect("matched");
    assert!(all, "no filter admits everything");
}

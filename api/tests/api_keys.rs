//! API keys through the api: a key is its caller, sent as `x-api-key` (what the `langgraph-sdk`
//! sends from `LANGGRAPH_API_KEY`) or as a bearer value, and obeys the same visibility as that
//! caller's token; an unknown, revoked or expired key is one and the same 401; a database that
//! cannot be asked is a 503.

use std::time::Duration;

use axum::body::Body as HttpBody;
use axum::http::{Request, StatusCode, header};
use mostrador_api::{ApiError, AuthError, Caller, Credential};
use mostrador_queue::data::api_keys::{self, NewApiKey};
use serde_json::{Value, json};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use crate::support::{Api, caller};

/// A new key for `who`.
async fn key_for(pool: &PgPool, who: &Caller) -> String {
    key_with_id(pool, who).await.1
}

/// A new key for `who`, with its id.
async fn key_with_id(pool: &PgPool, who: &Caller) -> (api_keys::ApiKeyId, String) {
    let (key, secret) = api_keys::create(
        pool,
        &NewApiKey {
            subject: who.subject.clone(),
            roles: who.roles.iter().cloned().collect(),
            tenant: who.tenant.clone(),
            expires_in: None,
        },
    )
    .await
    .expect("key");
    (key.key_id, secret.expose().to_owned())
}

/// A request sending `key` as `x-api-key`.
fn with_key(method: &str, path: &str, key: &str, body: &str) -> Request<HttpBody> {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("x-api-key", key);
    if !body.is_empty() {
        request = request.header(header::CONTENT_TYPE, "application/json");
    }
    request
        .body(HttpBody::from(body.to_owned()))
        .expect("request")
}

/// A thread of `owner`'s (created with their token).
async fn thread_of(api: &Api, owner: &Caller) -> String {
    let token = api.token_for(owner);
    let (status, _, thread) = api
        .send(api.request(
            "POST",
            "/threads",
            &token,
            r#"{"metadata": {"graph_id": "agent"}}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{thread}");
    thread["thread_id"].as_str().expect("id").to_owned()
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_key_authenticates_as_its_caller_via_x_api_key_and_via_bearer(pool: PgPool) {
    let api = Api::new(pool.clone()).await;
    let ana = caller("ana", "customer", Some("madrid-1"));
    let key = key_for(&pool, &ana).await;
    assert!(key.starts_with("mostrador_"), "{key}");

    let bearer = format!("Bearer {key}");
    for (authorization, x_api_key) in [(None, Some(key.as_str())), (Some(bearer.as_str()), None)] {
        let credential = Credential::from_headers(authorization, x_api_key).expect("a credential");
        let mut caller = api
            .state
            .auth()
            .authenticate(&pool, credential)
            .await
            .expect("authenticated");
        assert!(caller.api_key.take().is_some(), "the key is named");
        assert_eq!(caller, ana);
    }
    let thread_id = thread_of(&api, &ana).await;
    let path = format!("/threads/{thread_id}");
    let (status, _, thread) = api.send(with_key("GET", &path, &key, "")).await;
    assert_eq!(status, StatusCode::OK, "x-api-key: {thread}");
    assert_eq!(thread["thread_id"], json!(thread_id));
    let (status, _, thread) = api.send(api.request("GET", &path, &key, "")).await;
    assert_eq!(status, StatusCode::OK, "Authorization: Bearer: {thread}");

    // What the key creates is its subject's: ana's token sees it.
    let (status, _, created) = api
        .send(with_key(
            "POST",
            "/threads",
            &key,
            r#"{"metadata": {"graph_id": "agent"}}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let created = created["thread_id"].as_str().expect("id");
    let (status, _, _) = api
        .send(api.request(
            "GET",
            &format!("/threads/{created}"),
            &api.token_for(&ana),
            "",
        ))
        .await;
    assert_eq!(status, StatusCode::OK);

    // A bearer JWT beside a foreign x-api-key (the SDK sends LANGSMITH_API_KEY's) counts alone.
    let mut both = api.request("GET", &path, &api.token_for(&ana), "");
    both.headers_mut().insert(
        "x-api-key",
        "lsv2_pt_0123456789abcdef".parse().expect("header value"),
    );
    let (status, _, _) = api.send(both).await;
    assert_eq!(status, StatusCode::OK);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_revoked_key_and_an_expired_key_get_401(pool: PgPool) {
    let api = Api::new(pool.clone()).await;
    let ana = caller("ana", "customer", Some("madrid-1"));
    let (revoked, revoked_secret) = api_keys::create(
        &pool,
        &NewApiKey {
            subject: "ana".into(),
            roles: vec!["customer".into()],
            tenant: Some("madrid-1".into()),
            expires_in: None,
        },
    )
    .await
    .expect("key");
    let (expired, expired_secret) = api_keys::create(
        &pool,
        &NewApiKey {
            subject: "ana".into(),
            roles: vec!["customer".into()],
            tenant: Some("madrid-1".into()),
            expires_in: Some(Duration::from_secs(3600)),
        },
    )
    .await
    .expect("key");
    let (revoked, expired) = (revoked.key_id, expired.key_id);
    let (revoked_secret, expired_secret) = (revoked_secret.expose(), expired_secret.expose());
    for key in [revoked_secret, expired_secret] {
        let (status, _, answer) = api
            .send(with_key("POST", "/assistants/search", key, "{}"))
            .await;
        assert_eq!(status, StatusCode::OK, "valid until now: {answer}");
    }

    api_keys::revoke(&pool, revoked).await.expect("revoke");
    sqlx::query(
        "update mostrador.api_keys set expires_at = now() - interval '1 second' where key_id = $1",
    )
    .bind(expired.0)
    .execute(&pool)
    .await
    .expect("expire");

    // The same answer for a revoked, an expired, an unknown and a malformed key, sent either way.
    let unknown = format!("mostrador_{}", "0".repeat(64));
    let mut answers = Vec::new();
    for key in [revoked_secret, expired_secret, &unknown, "mostrador_short"] {
        answers.push(
            api.send(with_key("POST", "/assistants/search", key, "{}"))
                .await,
        );
        answers.push(
            api.send(api.request("POST", "/assistants/search", key, "{}"))
                .await,
        );
    }
    for (status, headers, body) in &answers {
        assert_eq!(*status, StatusCode::UNAUTHORIZED, "{body}");
        assert_eq!(headers[header::WWW_AUTHENTICATE], "Bearer");
        assert_eq!(*body, json!({"detail": "invalid API key"}));
    }
    assert_eq!(
        api.state
            .auth()
            .authenticate(&pool, Credential::ApiKey(revoked_secret))
            .await,
        Err(AuthError::ApiKey)
    );
    // Ana herself still gets in with a token.
    let (status, _, _) = api
        .send(api.request("POST", "/assistants/search", &api.token_for(&ana), "{}"))
        .await;
    assert_eq!(status, StatusCode::OK);
}

/// The visibility rules of `auth.rs` and `matrix.rs`, with keys instead of tokens: the owner and
/// a manager of the thread's store see it; another customer of the store, a clerk and a manager of
/// another store get the 404 of a thread that does not exist, and do not find it in a search.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_keys_caller_sees_only_what_its_subject_may_see(pool: PgPool) {
    let api = Api::new(pool.clone()).await;
    let ana = caller("ana", "customer", Some("madrid-1"));
    let thread_id = thread_of(&api, &ana).await;
    let who = [
        (ana, true),
        (caller("marta", "manager", Some("madrid-1")), true),
        (caller("luis", "customer", Some("madrid-1")), false),
        (caller("pepe", "clerk", Some("madrid-1")), false),
        (caller("eva", "manager", Some("sevilla-2")), false),
        (caller("sin", "manager", None), false),
    ];
    let routes = [
        ("GET", "/threads/{t}", ""),
        ("GET", "/threads/{t}/state", ""),
        ("POST", "/threads/{t}/history", "{}"),
        ("GET", "/threads/{t}/runs", ""),
    ];
    let (_, _, not_found) = api
        .send(api.request(
            "GET",
            &format!("/threads/{}", uuid::Uuid::now_v7()),
            &api.token_for(&who[0].0),
            "",
        ))
        .await;
    for (caller, sees) in &who {
        let key = key_for(&pool, caller).await;
        for (method, template, body) in routes {
            let path = template.replace("{t}", &thread_id);
            let (status, _, answer) = api.send(with_key(method, &path, &key, body)).await;
            if *sees {
                assert_eq!(
                    status,
                    StatusCode::OK,
                    "{caller:?} {method} {template}: {answer}"
                );
            } else {
                assert_eq!(
                    (status, &answer),
                    (StatusCode::NOT_FOUND, &not_found),
                    "{caller:?} {method} {template}"
                );
            }
        }
        let (status, _, found) = api
            .send(with_key("POST", "/threads/search", &key, "{}"))
            .await;
        assert_eq!(status, StatusCode::OK, "{found}");
        let ids: Vec<&Value> = found
            .as_array()
            .expect("a list")
            .iter()
            .map(|thread| &thread["thread_id"])
            .collect();
        assert_eq!(
            ids.contains(&&json!(thread_id)),
            *sees,
            "{caller:?}: {ids:?}"
        );
    }
}

#[tokio::test]
async fn a_database_that_cannot_be_asked_about_a_key_is_a_503_not_a_401() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("free port")
        .port();
    let down = PgPoolOptions::new()
        .acquire_timeout(Duration::from_millis(500))
        .connect_lazy(&format!("postgres://postgres@127.0.0.1:{port}/none"))
        .expect("lazy pool");
    let auth = mostrador_api::Authenticator::new(&crate::support::config().auth).expect("auth");
    let key = format!("mostrador_{}", "ab".repeat(32));
    let err = auth
        .authenticate(&down, Credential::ApiKey(&key))
        .await
        .expect_err("nobody answers");
    assert!(matches!(err, AuthError::Unavailable(_)), "{err:?}");
    let answer = ApiError::from(err);
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(answer.retry_after.is_some());
    assert!(
        !answer.detail.contains(&key),
        "the key stays out of answers"
    );
}

/// A cron made through the api with a key is bound to it: revoking the key stops the cron (the
/// security review's N-L1), and its maker enables it again with another credential.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_cron_made_with_a_key_stops_when_the_key_is_revoked(pool: PgPool) {
    let api = Api::new(pool.clone()).await;
    let ana = caller("ana", "customer", Some("madrid-1"));
    let (key_id, secret) = key_with_id(&pool, &ana).await;
    let body = serde_json::json!({"assistant_id": "agent", "schedule": "0 9 * * *"}).to_string();
    let (status, _, cron) = api
        .send(with_key("POST", "/runs/crons", &secret, &body))
        .await;
    assert_eq!(status, StatusCode::OK, "{cron}");
    let cron_id = cron["cron_id"].as_str().expect("id").to_owned();
    let enabled = || async {
        sqlx::query_scalar::<_, bool>(
            "select enabled from mostrador.crons where cron_id = $1::uuid",
        )
        .bind(&cron_id)
        .fetch_one(&pool)
        .await
        .expect("cron")
    };
    assert!(enabled().await);
    api_keys::revoke(&pool, key_id).await.expect("revoke");
    assert!(!enabled().await, "stopped with its key");

    let token = api.token_for(&ana);
    let (status, _, cron) = api
        .send(api.request(
            "PATCH",
            &format!("/runs/crons/{cron_id}"),
            &token,
            r#"{"enabled": true}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{cron}");
    assert!(enabled().await, "vouched for again by a token");
}

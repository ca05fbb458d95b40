//! RS256 tokens verified against a JWKS served over HTTP, as Keycloak serves its certs: keys
//! cached, an unknown `kid` fetching them again at most once per 30 s, an unreachable identity
//! provider a 503 rather than a 401.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use mostrador_api::{ApiError, AuthConfig, AuthError, Authenticator, Caller, ClaimPaths};
use serde_json::json;

const KEY_1: &[u8] = include_bytes!("fixtures/jwks-key.der");
const KEY_2: &[u8] = include_bytes!("fixtures/jwks-key-2.der");

/// Serves `jwks` at `/certs`, counting the requests.
async fn identity_provider(jwks: &'static str) -> (String, Arc<AtomicUsize>) {
    let served = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&served);
    let app = Router::new().route(
        "/certs",
        get(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            async move { ([("content-type", "application/json")], jwks) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/certs", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, served)
}

fn config(url: &str) -> AuthConfig {
    AuthConfig {
        secret: String::new(),
        jwks_url: Some(url.to_owned()),
        issuer: "https://keycloak.example/realms/retail".into(),
        audience: "mostrador".into(),
        claims: ClaimPaths::default(),
    }
}

fn rs256(key: &[u8], kid: &str) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("time")
        .as_secs();
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(kid.to_owned());
    let payload = json!({
        "iss": "https://keycloak.example/realms/retail", "aud": "mostrador", "exp": now + 300,
        "sub": "marta", "roles": "manager", "tenant": "madrid-1",
    });
    jsonwebtoken::encode(&header, &payload, &EncodingKey::from_rsa_der(key)).expect("sign")
}

fn marta() -> Caller {
    crate::support::caller("marta", "manager", Some("madrid-1"))
}

#[tokio::test]
async fn rs256_tokens_verify_against_the_jwks_and_keys_are_cached() {
    let (url, served) = identity_provider(include_str!("fixtures/jwks-2.json")).await;
    let auth = Authenticator::new(&config(&url)).expect("config");
    assert_eq!(auth.verify(&rs256(KEY_1, "k1")).await, Ok(marta()));
    assert_eq!(auth.verify(&rs256(KEY_2, "k2")).await, Ok(marta()));
    assert_eq!(auth.verify(&rs256(KEY_1, "k1")).await, Ok(marta()));
    assert_eq!(
        served.load(Ordering::SeqCst),
        1,
        "one fetch served every known key"
    );
    assert_eq!(auth.jwks_fetches().await, 1);
}

#[tokio::test]
async fn unknown_kid_refreshes_the_keys_at_most_once_per_30_seconds() {
    let (url, served) = identity_provider(include_str!("fixtures/jwks-1.json")).await;
    let auth = Authenticator::new(&config(&url)).expect("config");
    assert_eq!(auth.verify(&rs256(KEY_1, "k1")).await, Ok(marta()));
    // k2 is not published: the first try may not fetch again so soon, nor may the next ones.
    for _ in 0..5 {
        assert_eq!(
            auth.verify(&rs256(KEY_2, "k2")).await,
            Err(AuthError::Invalid("unknown signing key".into()))
        );
    }
    assert_eq!(
        served.load(Ordering::SeqCst),
        1,
        "a flood of unknown kids does not flood the provider"
    );
}

#[tokio::test]
async fn forged_or_foreign_tokens_are_rejected() {
    let (url, _) = identity_provider(include_str!("fixtures/jwks-1.json")).await;
    let auth = Authenticator::new(&config(&url)).expect("config");
    assert_eq!(
        auth.verify(&rs256(KEY_2, "k1")).await,
        Err(AuthError::Invalid("bad signature".into())),
        "signed by another key under k1's name"
    );
    let hs256 = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &json!({"sub": "marta", "role": "manager", "exp": 9_999_999_999_u64}),
        &EncodingKey::from_secret(b"guess").expect("key"),
    )
    .expect("sign");
    assert_eq!(
        auth.verify(&hs256).await,
        Err(AuthError::Invalid("unexpected algorithm".into()))
    );
    let mut no_kid = Header::new(Algorithm::RS256);
    no_kid.kid = None;
    let anonymous = jsonwebtoken::encode(
        &no_kid,
        &json!({"sub": "marta"}),
        &EncodingKey::from_rsa_der(KEY_1),
    )
    .expect("sign");
    assert!(matches!(
        auth.verify(&anonymous).await,
        Err(AuthError::Invalid(_))
    ));
}

#[tokio::test]
async fn unreachable_identity_provider_is_a_503_not_a_401() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("free port")
        .port();
    let auth =
        Authenticator::new(&config(&format!("http://127.0.0.1:{port}/certs"))).expect("config");
    let err = auth
        .verify(&rs256(KEY_1, "k1"))
        .await
        .expect_err("nobody serves the keys");
    assert!(matches!(err, AuthError::Unavailable(_)), "{err:?}");
    let answer = ApiError::from(err);
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(answer.retry_after.is_some());
}

/// An identity provider whose JWKS and answer delay the test changes as it goes.
struct Provider {
    url: String,
    jwks: Arc<std::sync::Mutex<String>>,
    delay_ms: Arc<std::sync::atomic::AtomicU64>,
}

async fn provider(jwks: &str) -> Provider {
    let served = Arc::new(std::sync::Mutex::new(jwks.to_owned()));
    let delay_ms = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (jwks_of, delay_of) = (Arc::clone(&served), Arc::clone(&delay_ms));
    let app = Router::new().route(
        "/certs",
        get(move || {
            let (jwks, delay) = (Arc::clone(&jwks_of), Arc::clone(&delay_of));
            async move {
                let wait = delay.load(Ordering::SeqCst);
                tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
                let body = jwks.lock().expect("lock").clone();
                ([("content-type", "application/json")], body)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/certs", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Provider {
        url,
        jwks: served,
        delay_ms,
    }
}

/// jwks-2.json with only `kid`.
fn only(kid: &str) -> String {
    let mut set: serde_json::Value =
        serde_json::from_str(include_str!("fixtures/jwks-2.json")).expect("json");
    set["keys"]
        .as_array_mut()
        .expect("keys")
        .retain(|key| key["kid"] == kid);
    set.to_string()
}

#[tokio::test]
async fn a_rotated_key_is_taken_and_a_retired_one_refused() {
    let idp = provider(&only("k1")).await;
    let auth = Authenticator::new(&config(&idp.url))
        .expect("config")
        .with_jwks_refresh(std::time::Duration::ZERO);
    assert_eq!(auth.verify(&rs256(KEY_1, "k1")).await, Ok(marta()));
    // The provider rotates: k2 signs from now on, and k1 is withdrawn.
    *idp.jwks.lock().expect("lock") = only("k2");
    assert_eq!(auth.verify(&rs256(KEY_2, "k2")).await, Ok(marta()));
    assert_eq!(
        auth.verify(&rs256(KEY_1, "k1")).await,
        Err(AuthError::Invalid("unknown signing key".into()))
    );
}

#[tokio::test]
async fn a_slow_fetch_for_an_unknown_key_does_not_hold_up_known_ones() {
    let idp = provider(&only("k1")).await;
    let auth = Arc::new(
        Authenticator::new(&config(&idp.url))
            .expect("config")
            .with_jwks_refresh(std::time::Duration::ZERO),
    );
    assert_eq!(auth.verify(&rs256(KEY_1, "k1")).await, Ok(marta()));
    idp.delay_ms.store(3_000, Ordering::SeqCst);
    let slow = tokio::spawn({
        let auth = Arc::clone(&auth);
        async move { auth.verify(&rs256(KEY_2, "random-kid")).await }
    });
    // The fetch for the random kid is in flight (the provider answers in 3 s) ...
    while auth.jwks_fetches().await < 2 {
        tokio::task::yield_now().await;
    }
    // ... and a token of a known key is verified meanwhile, well before it ends.
    let known = tokio::time::timeout(
        std::time::Duration::from_millis(1_000),
        auth.verify(&rs256(KEY_1, "k1")),
    )
    .await;
    assert_eq!(known, Ok(Ok(marta())));
    assert!(slow.await.expect("task").is_err());
}

#[tokio::test]
async fn a_token_not_valid_yet_is_refused_and_keys_come_over_https_only() {
    let (url, _) = identity_provider(include_str!("fixtures/jwks-1.json")).await;
    let auth = Authenticator::new(&config(&url)).expect("config");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("time")
        .as_secs();
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("k1".into());
    let early = jsonwebtoken::encode(
        &header,
        &json!({
            "iss": "https://keycloak.example/realms/retail", "aud": "mostrador",
            "exp": now + 3_600, "nbf": now + 600,
            "sub": "marta", "roles": "manager", "tenant": "madrid-1",
        }),
        &EncodingKey::from_rsa_der(KEY_1),
    )
    .expect("sign");
    assert_eq!(
        auth.verify(&early).await,
        Err(AuthError::Invalid("not valid yet".into()))
    );
    for refused in [
        "http://keycloak.example/certs",
        "ftp://127.0.0.1/certs",
        "not a url",
    ] {
        assert!(
            matches!(
                Authenticator::new(&config(refused)),
                Err(AuthError::Invalid(_))
            ),
            "{refused}"
        );
    }
    assert!(Authenticator::new(&config("https://keycloak.example/certs")).is_ok());
}

/// The keys come from the URL the operator named: a redirect elsewhere (to keys an attacker
/// holds) is not followed, and the identity provider counts as unreachable.
#[tokio::test]
async fn a_jwks_url_that_redirects_is_not_followed() {
    let (elsewhere, served) = identity_provider(include_str!("fixtures/jwks-2.json")).await;
    let app = Router::new().route(
        "/certs",
        get(move || {
            let to = elsewhere.clone();
            async move { (StatusCode::FOUND, [("location", to)]) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/certs", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    let auth = Authenticator::new(&config(&url)).expect("config");
    let err = auth
        .verify(&rs256(KEY_1, "k1"))
        .await
        .expect_err("keys behind a redirect are not taken");
    assert!(matches!(err, AuthError::Unavailable(_)), "{err:?}");
    assert_eq!(
        served.load(Ordering::SeqCst),
        0,
        "the redirect was not followed"
    );
}

/// Keys are fetched again once past their max age, so a key the provider retired is refused
/// even though no token ever named a new one; a provider that cannot be reached then keeps the
/// keys known (it said nothing about them).
#[tokio::test]
async fn a_key_the_provider_retires_is_refused_once_the_keys_known_are_old() {
    let max_age = std::time::Duration::from_millis(200);
    let idp = provider(&only("k1")).await;
    let auth = Authenticator::new(&config(&idp.url))
        .expect("config")
        .with_jwks_max_age(max_age);
    assert_eq!(auth.verify(&rs256(KEY_1, "k1")).await, Ok(marta()));
    *idp.jwks.lock().expect("lock") = only("k2");
    assert_eq!(
        auth.verify(&rs256(KEY_1, "k1")).await,
        Ok(marta()),
        "within its max age the set is not fetched"
    );
    assert_eq!(auth.jwks_fetches().await, 1);
    tokio::time::sleep(max_age).await;
    assert_eq!(
        auth.verify(&rs256(KEY_1, "k1")).await,
        Err(AuthError::Invalid("unknown signing key".into())),
        "retired"
    );
    assert_eq!(auth.verify(&rs256(KEY_2, "k2")).await, Ok(marta()));

    // Unreachable past the max age: the keys known still verify.
    let unreachable = Authenticator::new(&config(&idp.url))
        .expect("config")
        .with_jwks_max_age(max_age);
    assert_eq!(unreachable.verify(&rs256(KEY_2, "k2")).await, Ok(marta()));
    *idp.jwks.lock().expect("lock") = "not a key set".to_owned();
    tokio::time::sleep(max_age).await;
    assert_eq!(unreachable.verify(&rs256(KEY_2, "k2")).await, Ok(marta()));
    assert_eq!(unreachable.jwks_fetches().await, 2, "it was asked");
}

//! Tokens: what verifies, what does not and why; and thread visibility, the one authorization
//! check, against a real Postgres.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::StatusCode;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use mostrador_api::auth::mint;
use mostrador_api::authorize::visible_thread;
use mostrador_api::{
    ApiError, AuthConfig, AuthError, Authenticator, Caller, ClaimPaths, Credential,
};
use mostrador_queue::thread::{self, NewThread};
use serde_json::{Value, json};
use sqlx::PgPool;

fn config() -> AuthConfig {
    AuthConfig {
        secret: "development secret".into(),
        jwks_url: None,
        issuer: "https://keycloak.example/realms/retail".into(),
        audience: "mostrador".into(),
        claims: ClaimPaths::default(),
    }
}

use crate::support::{Api, caller};

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
}

/// A token with exactly `payload`, signed as `algorithm` with `secret`.
fn token(payload: &Value, algorithm: Algorithm, secret: &str) -> String {
    jsonwebtoken::encode(
        &Header::new(algorithm),
        payload,
        &EncodingKey::from_secret(secret.as_bytes()).expect("key"),
    )
    .expect("sign")
}

fn valid_payload() -> Value {
    json!({
        "iss": config().issuer,
        "aud": config().audience,
        "exp": now() + 300,
        "sub": "ana",
        "roles": "customer",
        "tenant": "madrid-1",
    })
}

async fn verify(token: &str) -> Result<Caller, AuthError> {
    Authenticator::new(&config())
        .expect("config")
        .verify(token)
        .await
}

#[tokio::test]
async fn minted_token_verifies_as_its_caller() {
    let ana = caller("ana", "manager", Some("madrid-1"));
    let token = mint(&config(), &ana, Duration::from_secs(60)).expect("mint");
    assert_eq!(verify(&token).await, Ok(ana));
    let no_store = caller("luis", "customer", None);
    let token = mint(&config(), &no_store, Duration::from_secs(60)).expect("mint");
    assert_eq!(verify(&token).await, Ok(no_store));
}

#[tokio::test]
async fn claims_are_read_at_configured_paths_and_every_role_counts() {
    let keycloak = AuthConfig {
        claims: ClaimPaths {
            subject: "preferred_username".into(),
            roles: "realm_access.roles".into(),
            tenant: "attributes.store".into(),
        },
        ..config()
    };
    let payload = json!({
        "iss": keycloak.issuer, "aud": keycloak.audience, "exp": now() + 300,
        "preferred_username": "marta",
        "realm_access": {"roles": ["offline_access", "clerk", "manager", "uma_authorization"]},
        "attributes": {"store": "sevilla-2"},
    });
    let token = token(&payload, Algorithm::HS256, &keycloak.secret);
    assert_eq!(
        Authenticator::new(&keycloak)
            .expect("config")
            .verify(&token)
            .await,
        Ok(Caller::new("marta")
            .with_roles(["offline_access", "clerk", "manager", "uma_authorization"])
            .in_tenant(Some("sevilla-2")))
    );
    // Minting writes the same paths.
    let minted = mint(
        &keycloak,
        &caller("marta", "clerk", Some("s")),
        Duration::from_secs(60),
    )
    .expect("mint");
    assert_eq!(
        Authenticator::new(&keycloak)
            .expect("config")
            .verify(&minted)
            .await,
        Ok(caller("marta", "clerk", Some("s")))
    );
}

#[tokio::test]
async fn expired_token_is_rejected() {
    let mut payload = valid_payload();
    payload["exp"] = json!(now() - 120);
    assert_eq!(
        verify(&token(&payload, Algorithm::HS256, &config().secret)).await,
        Err(AuthError::Expired)
    );
}

#[tokio::test]
async fn wrong_audience_issuer_signature_or_algorithm_is_rejected() {
    let secret = config().secret;
    let mut payload = valid_payload();
    payload["aud"] = json!("another-service");
    assert_eq!(
        verify(&token(&payload, Algorithm::HS256, &secret)).await,
        Err(AuthError::Invalid("wrong audience".into()))
    );
    let mut payload = valid_payload();
    payload["iss"] = json!("https://evil.example");
    assert_eq!(
        verify(&token(&payload, Algorithm::HS256, &secret)).await,
        Err(AuthError::Invalid("wrong issuer".into()))
    );
    assert_eq!(
        verify(&token(&valid_payload(), Algorithm::HS256, "another secret")).await,
        Err(AuthError::Invalid("bad signature".into()))
    );
    assert!(matches!(
        verify(&token(&valid_payload(), Algorithm::HS512, &secret)).await,
        Err(AuthError::Invalid(_))
    ));
    assert_eq!(
        verify("not.a.token").await,
        Err(AuthError::Invalid("malformed token".into()))
    );
}

#[tokio::test]
async fn token_without_expiry_or_subject_or_with_malformed_claims_is_rejected() {
    let secret = config().secret;
    for (claim, replacement, expected) in [
        (
            "exp",
            Value::Null,
            AuthError::Invalid("missing exp claim".into()),
        ),
        ("sub", Value::Null, AuthError::Claim("subject")),
        ("sub", json!(""), AuthError::Claim("subject")),
        ("roles", json!(7), AuthError::Claim("roles")),
        ("roles", json!(["manager", 7]), AuthError::Claim("roles")),
        ("tenant", json!(7), AuthError::Claim("tenant")),
        ("tenant", json!(""), AuthError::Claim("tenant")),
    ] {
        let mut payload = valid_payload();
        match replacement {
            Value::Null => {
                payload.as_object_mut().expect("object").remove(claim);
            }
            value => payload[claim] = value,
        }
        assert_eq!(
            verify(&token(&payload, Algorithm::HS256, &secret)).await,
            Err(expected),
            "{claim}"
        );
    }
    // Roles and tenant are optional: a plain owner's token names neither.
    let mut payload = valid_payload();
    let claims = payload.as_object_mut().expect("object");
    claims.remove("roles");
    claims.remove("tenant");
    assert_eq!(
        verify(&token(&payload, Algorithm::HS256, &secret)).await,
        Ok(Caller::new("ana"))
    );
}

#[test]
fn a_request_presents_a_bearer_token_or_an_api_key() {
    let from = Credential::from_headers;
    assert_eq!(from(None, None), Err(AuthError::Missing));
    assert_eq!(from(Some("Basic YW5hOng="), None), Err(AuthError::Missing));
    assert_eq!(from(Some("Bearer "), Some(" ")), Err(AuthError::Missing));
    assert_eq!(
        from(Some("Bearer eyJ.a.b"), None),
        Ok(Credential::Token("eyJ.a.b"))
    );
    assert_eq!(
        from(Some("bearer mostrador_0a"), None),
        Ok(Credential::ApiKey("mostrador_0a")),
        "a bearer value with the key prefix is a key"
    );
    assert_eq!(
        from(None, Some("mostrador_0a")),
        Ok(Credential::ApiKey("mostrador_0a"))
    );
    assert_eq!(
        from(Some("Basic YW5hOng="), Some("lsv2_pt_langsmith")),
        Ok(Credential::ApiKey("lsv2_pt_langsmith")),
        "any x-api-key is a key (an unknown one is refused as such)"
    );
    assert_eq!(
        from(Some("Bearer eyJ.a.b"), Some("lsv2_pt_langsmith")),
        Ok(Credential::Token("eyJ.a.b")),
        "the bearer value counts over an x-api-key the SDK took from LANGSMITH_API_KEY"
    );
}

#[tokio::test]
async fn an_empty_secret_is_a_configuration_error() {
    let empty = AuthConfig {
        secret: String::new(),
        jwks_url: None,
        ..config()
    };
    assert!(Authenticator::new(&empty).is_err());
    assert!(
        format!("{empty:?}").contains("redacted"),
        "secrets stay out of logs"
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn threads_are_visible_to_their_owner_and_managers_of_their_store_only(pool: PgPool) {
    let api = Api::new(pool.clone()).await;
    let thread = thread::create(&pool, &NewThread::new("tienda", "ana").tenant("madrid-1"))
        .await
        .expect("thread");
    let id = thread.thread_id.0.to_string();
    let visible = |who: &Caller| {
        let (state, id, who) = (api.state.clone(), id.clone(), who.clone());
        async move { visible_thread(&state, &who, &id).await }
    };

    assert!(
        visible(&caller("ana", "customer", Some("madrid-1")))
            .await
            .is_ok(),
        "owner"
    );
    assert!(
        visible(&caller("marta", "manager", Some("madrid-1")))
            .await
            .is_ok(),
        "manager of the store"
    );
    for stranger in [
        caller("luis", "customer", Some("madrid-1")),
        caller("pepe", "clerk", Some("madrid-1")),
        caller("eva", "manager", Some("sevilla-2")),
        caller("sin", "manager", None),
    ] {
        assert_eq!(
            visible(&stranger).await.map(|t| t.thread_id),
            Err(ApiError::thread_not_found()),
            "{stranger:?}"
        );
    }

    let ana = caller("ana", "customer", Some("madrid-1"));
    for raw in [
        "not-a-uuid",
        "",
        &uuid::Uuid::now_v7().to_string(),
        "00000000-0000-0000-0000-000000000000",
    ] {
        assert_eq!(
            visible_thread(&api.state, &ana, raw)
                .await
                .map(|t| t.thread_id),
            Err(ApiError::thread_not_found()),
            "{raw:?}: the same 404 as a foreign thread"
        );
    }
    assert_eq!(ApiError::thread_not_found().status, StatusCode::NOT_FOUND);

    // A storeless thread is its owner's alone, whatever a storeless manager says.
    let own = thread::create(&pool, &NewThread::new("cliente", "ana"))
        .await
        .expect("thread");
    assert!(
        visible_thread(
            &api.state,
            &caller("sin", "manager", None),
            &own.thread_id.0.to_string()
        )
        .await
        .is_err()
    );
}

/// A request of `api` with these headers and no credential of its own.
fn keyless(
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> axum::http::Request<axum::body::Body> {
    let mut request = axum::http::Request::builder().method(method).uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if method == "POST" {
        request = request.header("content-type", "application/json");
        return request.body(axum::body::Body::from("{}")).expect("request");
    }
    request.body(axum::body::Body::empty()).expect("request")
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_keyless_request_acts_as_the_development_caller_from_this_machine_only(pool: PgPool) {
    use crate::support::config;

    let development = Caller::new("dev").in_tenant(Some("dev"));
    let api = Api::with(
        pool.clone(),
        mostrador_api::ApiConfig {
            cors: mostrador_api::cors::Cors::parse("localhost,https://smith.langchain.com"),
            development_caller: Some(development),
            ..config()
        },
    )
    .await;
    let local = ("host", "127.0.0.1:8123");
    for headers in [
        vec![local],
        vec![("host", "localhost:2024")],
        // The SDK sends whatever LANGSMITH_API_KEY holds: not a key of mostrador's.
        vec![local, ("x-api-key", "lsv2_pt_0123456789")],
        vec![local, ("origin", "http://localhost:3000")],
        vec![local, ("origin", "https://smith.langchain.com")],
    ] {
        let (status, _, thread) = api.send(keyless("POST", "/threads", &headers)).await;
        assert_eq!(status, StatusCode::OK, "{headers:?}: {thread}");
    }
    let (status, _, found) = api.send(keyless("POST", "/threads/count", &[local])).await;
    assert_eq!(
        (status, found),
        (StatusCode::OK, json!(5)),
        "all the development caller's"
    );
    for headers in [
        // A name that resolves here from elsewhere (DNS rebinding), a page of another site.
        vec![("host", "mostrador.example.com")],
        vec![],
        vec![local, ("origin", "https://evil.example.com")],
    ] {
        let (status, _, _) = api.send(keyless("POST", "/threads", &headers)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{headers:?}");
    }
    // A credential that is mostrador's is checked as always.
    let (status, _, _) = api
        .send(keyless(
            "POST",
            "/threads",
            &[local, ("authorization", "Bearer not-a-token")],
        ))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // Studio's preflight to a server on this machine (Chrome's Private Network Access).
    let (status, headers, _) = api
        .send(keyless(
            "OPTIONS",
            "/threads",
            &[
                local,
                ("origin", "https://smith.langchain.com"),
                ("access-control-request-method", "POST"),
                ("access-control-request-private-network", "true"),
            ],
        ))
        .await;
    assert!(status.is_success(), "{status}");
    assert_eq!(headers["access-control-allow-private-network"], "true");
    assert_eq!(
        headers["access-control-allow-origin"],
        "https://smith.langchain.com"
    );

    // Without a development caller (`mostrador api`), no credential is a 401, from anywhere.
    let api = Api::new(pool).await;
    let (status, _, _) = api.send(keyless("POST", "/threads", &[local])).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_projects_cors_rules_are_applied_as_the_official_server_applies_them(pool: PgPool) {
    use crate::support::config;
    use mostrador_api::cors::{Cors, ProjectCors};

    let api = Api::with(
        pool,
        mostrador_api::ApiConfig {
            cors: Cors::Project(ProjectCors {
                allow_origins: vec!["https://app.example.com".into()],
                allow_origin_regex: Some(r"https://.*\.vercel\.app".into()),
                allow_methods: vec!["GET".into(), "POST".into()],
                allow_headers: vec!["authorization".into()],
                ..ProjectCors::default()
            }),
            ..config()
        },
    )
    .await;
    let preflight = |origin: &'static str, method: &'static str, headers: &'static str| {
        let request = keyless(
            "OPTIONS",
            "/threads",
            &[
                ("origin", origin),
                ("access-control-request-method", method),
                ("access-control-request-headers", headers),
            ],
        );
        async { api.send(request).await.1 }
    };
    let allowed = preflight("https://app.example.com", "POST", "authorization").await;
    assert_eq!(
        allowed["access-control-allow-origin"],
        "https://app.example.com"
    );
    let methods = allowed["access-control-allow-methods"]
        .to_str()
        .expect("ascii");
    assert!(
        methods.contains("POST") && !methods.contains("DELETE"),
        "{methods}"
    );
    let preview = preflight("https://pr-7.vercel.app", "GET", "content-type").await;
    assert_eq!(
        preview["access-control-allow-origin"],
        "https://pr-7.vercel.app"
    );
    let stranger = preflight("https://evil.example.com", "POST", "authorization").await;
    assert!(stranger.get("access-control-allow-origin").is_none());
}

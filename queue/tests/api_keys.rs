//! API keys as stored: only their hash, found by it while neither revoked nor expired.

use std::time::Duration;

use mostrador_queue::Error;
use mostrador_queue::api_keys::{self, ApiKeyId, KEY_PREFIX, NewApiKey};
use sqlx::PgPool;

fn marta() -> NewApiKey {
    NewApiKey {
        subject: "marta".into(),
        roles: vec!["manager".into()],
        tenant: Some("madrid-1".into()),
        expires_in: None,
    }
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn the_stored_row_never_contains_the_secret(pool: PgPool) -> anyhow::Result<()> {
    let (key, secret) = api_keys::create(&pool, &marta()).await?;
    let secret = secret.expose();
    let random = secret.strip_prefix(KEY_PREFIX).expect("the prefix");
    assert_eq!(random.len(), 64, "{secret}");
    assert!(secret.starts_with(&key.key_prefix));
    assert_eq!(key.key_prefix.len(), KEY_PREFIX.len() + 8);

    // Every column, as text and as hex: nothing of the secret beyond the prefix shown.
    let row: String = sqlx::query_scalar(
        "select to_jsonb(k)::text || encode(k.key_hash, 'hex') from mostrador.api_keys k",
    )
    .fetch_one(&pool)
    .await?;
    assert!(!row.contains(&random[8..16]), "{row}");
    assert!(!row.contains(&random[56..]), "{row}");
    let stored_hash: Vec<u8> = sqlx::query_scalar("select key_hash from mostrador.api_keys")
        .fetch_one(&pool)
        .await?;
    let sha256: Vec<u8> = sqlx::query_scalar("select sha256(convert_to($1, 'UTF8'))")
        .bind(secret)
        .fetch_one(&pool)
        .await?;
    assert_eq!(stored_hash, sha256, "the SHA-256 of the key");

    assert_eq!(
        api_keys::list(&pool).await?,
        vec![key.clone()],
        "listed with its prefix, no secret"
    );
    let created = api_keys::create(&pool, &marta()).await?;
    assert!(
        !format!("{created:?}").contains(created.1.expose()),
        "Debug does not print the key"
    );
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_key_authenticates_until_it_is_revoked_or_expires(pool: PgPool) -> anyhow::Result<()> {
    let (key, secret) = api_keys::create(&pool, &marta()).await?;
    assert_eq!(
        api_keys::authenticate(&pool, secret.expose()).await?,
        Some(key.clone())
    );
    let (other, other_secret) = api_keys::create(&pool, &marta()).await?;
    assert_ne!(secret, other_secret, "every key is new");

    let revoked = api_keys::revoke(&pool, key.key_id).await?;
    assert!(revoked.revoked_at.is_some());
    assert_eq!(api_keys::authenticate(&pool, secret.expose()).await?, None);
    let again = api_keys::revoke(&pool, key.key_id).await?;
    assert_eq!(
        again.revoked_at, revoked.revoked_at,
        "the first revocation stays"
    );
    assert!(matches!(
        api_keys::revoke(&pool, ApiKeyId(uuid::Uuid::now_v7())).await,
        Err(Error::ApiKeyNotFound(_))
    ));
    assert!(
        api_keys::authenticate(&pool, other_secret.expose())
            .await?
            .is_some(),
        "revoking one key leaves the others"
    );

    let (expiring, expiring_secret) = api_keys::create(
        &pool,
        &NewApiKey {
            expires_in: Some(Duration::from_secs(60)),
            ..marta()
        },
    )
    .await?;
    let expires_at = expiring.expires_at.expect("an expiry");
    let from_creation = expires_at - expiring.created_at;
    assert_eq!(from_creation.num_seconds(), 60);
    assert!(
        api_keys::authenticate(&pool, expiring_secret.expose())
            .await?
            .is_some()
    );
    sqlx::query(
        "update mostrador.api_keys set expires_at = now() - interval '1 second' where key_id = $1",
    )
    .bind(expiring.key_id.0)
    .execute(&pool)
    .await?;
    assert_eq!(
        api_keys::authenticate(&pool, expiring_secret.expose()).await?,
        None
    );
    let listed = api_keys::list(&pool).await?;
    assert_eq!(listed.len(), 3, "revoked and expired keys are still listed");
    let now = chrono::Utc::now();
    let active: Vec<_> = listed.iter().filter(|key| key.is_active(now)).collect();
    assert_eq!(active.len(), 1);
    assert_eq!(active[0].key_id, other.key_id);
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn malformed_keys_and_invalid_callers_are_refused(pool: PgPool) -> anyhow::Result<()> {
    for malformed in [
        "",
        "mostrador_",
        "eyJhbGciOiJIUzI1NiJ9.e30.x",
        &format!("mostrador_{}", "A".repeat(64)),
        &format!("mostrador_{}", "a".repeat(63)),
    ] {
        assert_eq!(api_keys::authenticate(&pool, malformed).await?, None);
    }
    for (new, field) in [
        (
            NewApiKey {
                subject: String::new(),
                ..marta()
            },
            "subject",
        ),
        (
            NewApiKey {
                roles: vec!["manager".into(), String::new()],
                ..marta()
            },
            "roles",
        ),
        (
            NewApiKey {
                tenant: Some(String::new()),
                ..marta()
            },
            "tenant",
        ),
        (
            NewApiKey {
                expires_in: Some(Duration::from_secs(200 * 366 * 24 * 3600)),
                ..marta()
            },
            "expiry",
        ),
    ] {
        match api_keys::create(&pool, &new).await {
            Err(Error::Invalid { field: got, .. }) => assert_eq!(got, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    assert!(api_keys::list(&pool).await?.is_empty(), "nothing written");
    Ok(())
}

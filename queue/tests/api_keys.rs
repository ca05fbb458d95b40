//! API keys as stored: only their hash, found by it while neither revoked nor expired.

use std::time::Duration;

use mostrador_queue::Error;
use mostrador_queue::data::api_keys::{self, ApiKeyId, KEY_PREFIX, NewApiKey};
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
    assert_eq!(random.len(), 64 + 16, "random digits and a tag: {secret}");
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
    let verifier = api_keys::Verifier::load(&pool).await?;
    let (key, secret) = api_keys::create(&pool, &marta()).await?;
    assert_eq!(
        api_keys::authenticate(&pool, &verifier, secret.expose()).await?,
        Some(key.clone())
    );
    let (other, other_secret) = api_keys::create(&pool, &marta()).await?;
    assert_ne!(secret, other_secret, "every key is new");

    let revoked = api_keys::revoke(&pool, key.key_id).await?;
    assert!(revoked.revoked_at.is_some());
    assert_eq!(
        api_keys::authenticate(&pool, &verifier, secret.expose()).await?,
        None
    );
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
        api_keys::authenticate(&pool, &verifier, other_secret.expose())
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
        api_keys::authenticate(&pool, &verifier, expiring_secret.expose())
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
        api_keys::authenticate(&pool, &verifier, expiring_secret.expose()).await?,
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
    let verifier = api_keys::Verifier::load(&pool).await?;
    for malformed in [
        "",
        "mostrador_",
        "eyJhbGciOiJIUzI1NiJ9.e30.x",
        &format!("mostrador_{}", "A".repeat(64)),
        &format!("mostrador_{}", "a".repeat(63)),
    ] {
        assert_eq!(
            api_keys::authenticate(&pool, &verifier, malformed).await?,
            None
        );
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

/// A key this deployment did not make is refused by its tag, without a query, so a flood of
/// guessed keys costs the database nothing; a key made before keys had tags is still looked up
/// while such keys are active.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_guessed_key_is_refused_without_asking_the_database(pool: PgPool) -> anyhow::Result<()> {
    let (_, made) = api_keys::create(&pool, &marta()).await?;
    let verifier = api_keys::Verifier::load(&pool).await?;
    let made = made.expose().to_owned();
    // The same random digits with another tag, another key's digits with its tag, and a key of
    // the old shape (no tag) while the deployment has none of those.
    let mut forged_tag = made.clone();
    let last = forged_tag.pop().expect("a digit");
    forged_tag.push(if last == '0' { '1' } else { '0' });
    let guesses = [
        forged_tag,
        format!("{KEY_PREFIX}{}{}", "a".repeat(64), &made[made.len() - 16..]),
        format!("{KEY_PREFIX}{}", "b".repeat(64)),
    ];
    pool.close().await;
    for guess in &guesses {
        assert_eq!(
            api_keys::authenticate(&pool, &verifier, guess).await?,
            None,
            "refused without a query (the pool is closed): {guess}"
        );
    }
    assert!(
        api_keys::authenticate(&pool, &verifier, &made)
            .await
            .is_err(),
        "a key with its tag is looked up"
    );
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_key_made_before_tags_still_authenticates(pool: PgPool) -> anyhow::Result<()> {
    let old = format!("{KEY_PREFIX}{}", "c".repeat(64));
    sqlx::query(
        "insert into mostrador.api_keys (key_id, key_prefix, key_hash, subject, roles)
         values (gen_random_uuid(), $1, sha256(convert_to($2, 'UTF8')), 'marta', '{manager}')",
    )
    .bind(&old[..KEY_PREFIX.len() + 8])
    .bind(&old)
    .execute(&pool)
    .await?;
    let verifier = api_keys::Verifier::load(&pool).await?;
    let found = api_keys::authenticate(&pool, &verifier, &old).await?;
    assert_eq!(found.map(|key| key.subject), Some("marta".to_owned()));
    Ok(())
}

//! API keys: long-lived credentials that stand for a caller (a subject, roles, a tenant) exactly
//! as a token does, for the clients that send `x-api-key` (the `langgraph-sdk` with
//! `LANGGRAPH_API_KEY`, agent-chat-ui) or a bearer value that is a key.
//!
//! A key is [`KEY_PREFIX`], 64 hex digits of 32 bytes from the operating system's CSPRNG, and a
//! tag of 16: 64 bits of an HMAC-SHA-256 of those digits under a secret of the deployment's
//! (`mostrador.api_key_secret`). The tag says the key was made here: a [`Verifier`] refuses a
//! guessed one without asking the database, so a flood of random keys costs it nothing. Only
//! its SHA-256 is stored: [`create`] hands the key back once and nothing can show it again, so a
//! leaked table or backup authenticates nobody. With 256 random bits a plain, unsalted hash is
//! enough (nobody can guess their way back to a key), and it is what lets [`authenticate`] find
//! a key with one lookup of a unique index. The key's first characters stay in clear
//! ([`ApiKey::key_prefix`]) so that people can tell their keys apart.

use std::fmt::{self, Write as _};
use std::time::Duration;

use chrono::{DateTime, Utc};
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use uuid::Uuid;

use crate::{Error, Result};

/// How every key starts: what tells a key from a JWT in an `Authorization: Bearer` header.
pub const KEY_PREFIX: &str = "mostrador_";

/// Random bytes in a key (hex-encoded in it).
const KEY_BYTES: usize = 32;

/// Hex digits of the random part kept in clear in [`ApiKey::key_prefix`] (32 of its 256 bits).
const SHOWN_DIGITS: usize = 8;

/// Hex digits of a key's tag (64 bits).
const TAG_DIGITS: usize = 16;

/// How often a [`Verifier`] asks again whether keys made before tags are still active.
const UNTAGGED_RECHECK: Duration = Duration::from_secs(60);

/// The longest expiry a key may be given: 100 years.
const MAX_EXPIRY: Duration = Duration::from_secs(100 * 366 * 24 * 3600);

/// A key's id, for listing and revoking it. Not a secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, sqlx::Type)]
#[sqlx(transparent)]
pub struct ApiKeyId(pub Uuid);

impl fmt::Display for ApiKeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for ApiKeyId {
    type Err = uuid::Error;

    fn from_str(text: &str) -> std::result::Result<Self, Self::Err> {
        Uuid::parse_str(text).map(Self)
    }
}

/// A key as stored: everything but the key itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub key_id: ApiKeyId,
    /// [`KEY_PREFIX`] and the key's first hex digits, to recognise it by.
    pub key_prefix: String,
    pub subject: String,
    /// What the authorization policy gives the caller, as a token's roles claim would.
    pub roles: Vec<String>,
    pub tenant: Option<String>,
    pub created_at: DateTime<Utc>,
    /// `None`: it never expires.
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

impl ApiKey {
    /// Whether the key authenticates at `now`: neither revoked nor expired.
    pub fn is_active(&self, now: DateTime<Utc>) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|expires_at| expires_at > now)
    }
}

/// Who a new key stands for, and for how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewApiKey {
    pub subject: String,
    pub roles: Vec<String>,
    pub tenant: Option<String>,
    /// From its creation; `None`: it never expires.
    pub expires_in: Option<Duration>,
}

/// A key as its holder sends it. [`create`] returns it once; it is never stored and `Debug`
/// does not print it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKeySecret(String);

impl ApiKeySecret {
    /// The key itself, to hand to its holder.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKeySecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKeySecret(<redacted>)")
    }
}

/// Whether `value` is meant as an API key rather than a JWT (it starts with [`KEY_PREFIX`]; a
/// JWT starts with its base64url header, `eyJ`).
pub fn is_api_key(value: &str) -> bool {
    value.starts_with(KEY_PREFIX)
}

/// Creates a key for a caller and returns it with the only copy of the key.
///
/// # Errors
///
/// [`Error::Invalid`] for an empty subject, tenant or role name, or an expiry beyond 100
/// years; [`Error::Random`] if the operating system gives no random bytes; the database failed.
pub async fn create(pool: &PgPool, new: &NewApiKey) -> Result<(ApiKey, ApiKeySecret)> {
    if new.subject.is_empty() {
        return Err(invalid("subject", "may not be empty"));
    }
    if new.tenant.as_deref() == Some("") {
        return Err(invalid("tenant", "may not be empty (leave it out instead)"));
    }
    if new.roles.iter().any(String::is_empty) {
        return Err(invalid("roles", "a role's name may not be empty"));
    }
    if new
        .expires_in
        .is_some_and(|expires_in| expires_in > MAX_EXPIRY)
    {
        return Err(invalid("expiry", "may be at most 100 years"));
    }
    let verifier = Verifier::load(pool).await?;
    let secret = generate(&verifier)?;
    let key_prefix = &secret.0[..KEY_PREFIX.len() + SHOWN_DIGITS];
    let key = sqlx::query_as!(
        ApiKey,
        r#"
        insert into mostrador.api_keys
            (key_id, key_prefix, key_hash, subject, roles, tenant, expires_at, tagged)
        values ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7::float8), true)
        returning
            key_id as "key_id: ApiKeyId",
            key_prefix,
            subject,
            roles,
            tenant,
            created_at,
            expires_at,
            revoked_at
        "#,
        Uuid::now_v7(),
        key_prefix,
        &hash(&secret.0)[..],
        new.subject,
        &new.roles,
        new.tenant,
        new.expires_in.map(|expires_in| expires_in.as_secs_f64()),
    )
    .fetch_one(pool)
    .await?;
    Ok((key, secret))
}

/// What tells a key this deployment made from a guess, without a query: the deployment's tag
/// secret, read once, and whether keys made before tags are still active (asked again every
/// minute while they are; none can be made any more, so once none is, none ever will be).
pub struct Verifier {
    secret: [u8; 32],
    untagged: std::sync::Mutex<Untagged>,
}

struct Untagged {
    active: bool,
    checked_at: std::time::Instant,
}

impl fmt::Debug for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Verifier(<secret>)")
    }
}

impl Verifier {
    /// Reads the deployment's secret and whether untagged keys are active.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn load(pool: &PgPool) -> Result<Self> {
        let secret = sqlx::query_scalar!("select secret from mostrador.api_key_secret")
            .fetch_one(pool)
            .await?;
        let secret = secret.try_into().map_err(|_| Error::Invalid {
            field: "api_key_secret",
            reason: "must be 32 bytes".into(),
        })?;
        Ok(Self {
            secret,
            untagged: std::sync::Mutex::new(Untagged {
                active: untagged_active(pool).await?,
                checked_at: std::time::Instant::now(),
            }),
        })
    }

    fn mac(&self, random: &str) -> Hmac<Sha256> {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC takes a key of any length");
        mac.update(random.as_bytes());
        mac
    }

    /// The tag of a key's random part, in hex.
    fn tag(&self, random: &str) -> String {
        let mut tag = String::with_capacity(TAG_DIGITS);
        let code = self.mac(random).finalize().into_bytes();
        for byte in &code[..TAG_DIGITS / 2] {
            write!(tag, "{byte:02x}").expect("writing to a String cannot fail");
        }
        tag
    }

    /// Whether `key` may be one of this deployment's: a tag that matches (compared in constant
    /// time), or no tag while untagged keys are active.
    async fn vouches(&self, pool: &PgPool, key: &str) -> Result<bool> {
        let Some((random, tag)) = parts(key) else {
            return Ok(false);
        };
        let Some(tag) = tag else {
            return self.untagged_active(pool).await;
        };
        let tag: Option<Vec<u8>> = (0..TAG_DIGITS)
            .step_by(2)
            .map(|at| u8::from_str_radix(&tag[at..at + 2], 16).ok())
            .collect();
        Ok(tag.is_some_and(|tag| self.mac(random).verify_truncated_left(&tag).is_ok()))
    }

    async fn untagged_active(&self, pool: &PgPool) -> Result<bool> {
        {
            let untagged = self
                .untagged
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if !untagged.active || untagged.checked_at.elapsed() < UNTAGGED_RECHECK {
                return Ok(untagged.active);
            }
        }
        let active = untagged_active(pool).await?;
        *self
            .untagged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Untagged {
            active,
            checked_at: std::time::Instant::now(),
        };
        Ok(active)
    }
}

async fn untagged_active(pool: &PgPool) -> Result<bool> {
    Ok(sqlx::query_scalar!(
        r#"
        select exists (
            select 1 from mostrador.api_keys
            where not tagged and revoked_at is null and (expires_at is null or expires_at > now())
        ) as "active!"
        "#
    )
    .fetch_one(pool)
    .await?)
}

/// The key `key` is, if it exists and is neither revoked nor expired: one lookup of the hash's
/// unique index. A value that is not shaped like a key, or whose tag `verifier` refuses, is
/// `None` without a query.
///
/// # Errors
///
/// The database failed (the caller cannot be told apart from an unknown key's, so it must not
/// answer as if the key were unknown).
pub async fn authenticate(pool: &PgPool, verifier: &Verifier, key: &str) -> Result<Option<ApiKey>> {
    if !verifier.vouches(pool, key).await? {
        return Ok(None);
    }
    Ok(sqlx::query_as!(
        ApiKey,
        r#"
        select
            key_id as "key_id: ApiKeyId",
            key_prefix,
            subject,
            roles,
            tenant,
            created_at,
            expires_at,
            revoked_at
        from mostrador.api_keys
        where key_hash = $1
          and revoked_at is null
          and (expires_at is null or expires_at > now())
        "#,
        &hash(key)[..],
    )
    .fetch_optional(pool)
    .await?)
}

/// Every key, newest first, revoked and expired ones included.
///
/// # Errors
///
/// The database failed.
pub async fn list(pool: &PgPool) -> Result<Vec<ApiKey>> {
    Ok(sqlx::query_as!(
        ApiKey,
        r#"
        select
            key_id as "key_id: ApiKeyId",
            key_prefix,
            subject,
            roles,
            tenant,
            created_at,
            expires_at,
            revoked_at
        from mostrador.api_keys
        order by created_at desc, key_id desc
        "#,
    )
    .fetch_all(pool)
    .await?)
}

/// Revokes a key for good: from now on it authenticates nobody, and the crons made with it are
/// disabled in the same statement. Revoking it again keeps the first revocation's time.
///
/// # Errors
///
/// [`Error::ApiKeyNotFound`] when no key has this id; the database failed.
pub async fn revoke(pool: &PgPool, key_id: ApiKeyId) -> Result<ApiKey> {
    sqlx::query_as!(
        ApiKey,
        r#"
        with crons as (
            update mostrador.crons
            set enabled = false, updated_at = now()
            where api_key_id = $1 and enabled
        )
        update mostrador.api_keys
        set revoked_at = coalesce(revoked_at, now())
        where key_id = $1
        returning
            key_id as "key_id: ApiKeyId",
            key_prefix,
            subject,
            roles,
            tenant,
            created_at,
            expires_at,
            revoked_at
        "#,
        key_id as ApiKeyId,
    )
    .fetch_optional(pool)
    .await?
    .ok_or(Error::ApiKeyNotFound(key_id))
}

/// A new key: the prefix, [`KEY_BYTES`] random bytes from the operating system in hex, and
/// their tag.
fn generate(verifier: &Verifier) -> Result<ApiKeySecret> {
    let mut bytes = [0u8; KEY_BYTES];
    getrandom::fill(&mut bytes).map_err(|err| Error::Random(err.to_string()))?;
    let mut key = String::with_capacity(KEY_PREFIX.len() + 2 * KEY_BYTES);
    key.push_str(KEY_PREFIX);
    for byte in bytes {
        write!(key, "{byte:02x}").expect("writing to a String cannot fail");
    }
    let tag = verifier.tag(&key[KEY_PREFIX.len()..]);
    key.push_str(&tag);
    Ok(ApiKeySecret(key))
}

/// A key's random part and its tag (`None` for a key made before tags), if it is shaped like a
/// key.
fn parts(key: &str) -> Option<(&str, Option<&str>)> {
    let digits = key.strip_prefix(KEY_PREFIX)?;
    if !digits
        .bytes()
        .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
    {
        return None;
    }
    match digits.len() {
        n if n == 2 * KEY_BYTES => Some((digits, None)),
        n if n == 2 * KEY_BYTES + TAG_DIGITS => {
            let (random, tag) = digits.split_at(2 * KEY_BYTES);
            Some((random, Some(tag)))
        }
        _ => None,
    }
}

fn hash(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

fn invalid(field: &'static str, reason: &str) -> Error {
    Error::Invalid {
        field,
        reason: reason.to_owned(),
    }
}

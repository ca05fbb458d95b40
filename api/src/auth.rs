//! Who is calling: a JWT from `Authorization: Bearer …`, verified, and the three claims mostrador
//! uses: the subject, the tenant and the roles; or an API key (`x-api-key`, or a bearer value that
//! starts with `mostrador_`), which stands for a subject, a tenant and roles stored with it.
//!
//! Tokens are RS256, verified against the identity provider's JWKS (Keycloak's certs endpoint):
//! keys are cached, and an unknown `kid` refreshes them, at most once per [`JWKS_REFRESH`]; keys
//! older than [`JWKS_MAX_AGE`] are fetched again, so a key the provider retired is refused within
//! it even if no new key ever appears. Or,
//! for development and tests, HS256 with a shared secret (`mostrador token` mints them). Issuer,
//! audience, expiry and `nbf` are always checked; the JWKS is fetched over https (plain http only
//! from loopback), and a fetch never holds up the tokens of keys already known. Claim paths are
//! the policy file's (`[caller]`) because identity providers nest them (Keycloak puts realm roles
//! under `realm_access.roles`); a roles claim may be a string or a list, and a token without one
//! has no roles. Tokens never reach logs: errors say what was wrong with a token, never what it
//! was.
//!
//! A key is looked up by its hash (`mostrador_queue::data::api_keys`); an unknown, revoked or expired
//! key is the same 401, and a database that cannot be asked is a 503, as an unreachable JWKS is:
//! nobody can be authenticated now, which says nothing about the key.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use mostrador_queue::PgPool;
use mostrador_queue::data::api_keys;
use serde_json::{Value, json};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::custom_auth::ProjectUser;

/// The least time between two fetches of the JWKS.
pub const JWKS_REFRESH: Duration = Duration::from_secs(30);

/// How long fetched keys are trusted before they are fetched again (if the provider cannot be
/// reached then, they are kept: it said nothing about them).
pub const JWKS_MAX_AGE: Duration = Duration::from_secs(300);

/// The header the `langgraph-sdk` (from `LANGGRAPH_API_KEY`) and agent-chat-ui send a key in.
pub const API_KEY_HEADER: &str = "x-api-key";

/// An authenticated caller: who (a subject), of which tenant, with which roles. What the roles
/// allow is the authorization policy's ([`crate::policy`]). Under a project's own auth handlers
/// (`auth.path`), the user its authenticate handler returned, whose identity is the subject, and
/// whom its other handlers are asked about ([`crate::custom_auth`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub subject: String,
    pub tenant: Option<String>,
    pub roles: BTreeSet<String>,
    pub project_user: Option<Arc<ProjectUser>>,
    /// The API key the caller authenticated with, if they did (not a token).
    pub api_key: Option<api_keys::ApiKeyId>,
}

impl Caller {
    /// A caller without roles or tenant.
    pub fn new(subject: impl Into<String>) -> Self {
        Self {
            subject: subject.into(),
            tenant: None,
            roles: BTreeSet::new(),
            project_user: None,
            api_key: None,
        }
    }

    /// The caller a project's authenticate handler named (`None`: the project has none, and the
    /// caller is anonymous).
    pub fn of_project(user: Option<ProjectUser>) -> Self {
        let subject = user.as_ref().map(|user| user.identity().to_owned());
        Self {
            project_user: user.map(Arc::new),
            ..Self::new(subject.unwrap_or_default())
        }
    }

    #[must_use]
    pub fn with_roles<I: IntoIterator<Item = S>, S: Into<String>>(mut self, roles: I) -> Self {
        self.roles.extend(roles.into_iter().map(Into::into));
        self
    }

    #[must_use]
    pub fn in_tenant<S: Into<String>>(mut self, tenant: Option<S>) -> Self {
        self.tenant = tenant.map(Into::into);
        self
    }

    pub fn has_role(&self, role: &str) -> bool {
        self.roles.contains(role)
    }
}

/// Where the claims are, as dot-separated paths into the token's payload (a policy file's
/// `[caller]` table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimPaths {
    pub subject: String,
    pub tenant: String,
    /// A role's name or a list of them.
    pub roles: String,
}

impl Default for ClaimPaths {
    fn default() -> Self {
        Self {
            subject: "sub".into(),
            tenant: "tenant".into(),
            roles: "roles".into(),
        }
    }
}

/// How tokens are verified.
#[derive(Clone)]
pub struct AuthConfig {
    /// The HS256 shared secret (development; `mint` signs with it). Unused with a JWKS.
    pub secret: String,
    /// Verify RS256 tokens against this JWKS (e.g. Keycloak's
    /// `/realms/{realm}/protocol/openid-connect/certs`) instead of the secret.
    pub jwks_url: Option<String>,
    pub issuer: String,
    pub audience: String,
    pub claims: ClaimPaths,
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthConfig")
            .field("secret", &"<redacted>")
            .field("jwks_url", &self.jwks_url)
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("claims", &self.claims)
            .finish()
    }
}

/// What a request presents to be authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential<'a> {
    /// A JWT.
    Token(&'a str),
    /// An API key.
    ApiKey(&'a str),
}

impl<'a> Credential<'a> {
    /// The credential of a request, from its `Authorization` and `x-api-key` header values. A
    /// bearer value that starts with the key prefix is a key, any other a JWT. With both headers
    /// the bearer value counts: the SDK sends `x-api-key` from whatever `LANGSMITH_API_KEY` the
    /// environment holds (a LangSmith key, meaningless here), while `Authorization` is a header
    /// its user chose to set.
    ///
    /// # Errors
    ///
    /// [`AuthError::Missing`] without either.
    pub fn from_headers(
        authorization: Option<&'a str>,
        api_key: Option<&'a str>,
    ) -> Result<Self, AuthError> {
        let bearer = authorization
            .and_then(|value| {
                value
                    .strip_prefix("Bearer ")
                    .or_else(|| value.strip_prefix("bearer "))
            })
            .map(str::trim)
            .filter(|bearer| !bearer.is_empty());
        if let Some(bearer) = bearer {
            return Ok(if api_keys::is_api_key(bearer) {
                Credential::ApiKey(bearer)
            } else {
                Credential::Token(bearer)
            });
        }
        api_key
            .map(str::trim)
            .filter(|key| !key.is_empty())
            .map(Credential::ApiKey)
            .ok_or(AuthError::Missing)
    }
}

/// Why a request is not authenticated (a 401).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing bearer token or API key (x-api-key)")]
    Missing,
    /// Unknown, revoked or expired: the answer does not say which.
    #[error("invalid API key")]
    ApiKey,
    #[error("the token has expired")]
    Expired,
    #[error("invalid token: {0}")]
    Invalid(String),
    #[error("the token has no usable {0} claim")]
    Claim(&'static str),
    /// The identity provider's keys cannot be fetched, or the database cannot be asked about a
    /// key: nobody can be authenticated now (a 503).
    #[error("cannot authenticate now: {0}")]
    Unavailable(String),
}

/// Verifies tokens.
pub struct Authenticator {
    keys: Keys,
    validation: Validation,
    claims: ClaimPaths,
    /// What refuses a guessed API key without a query, read on the first key.
    api_keys: tokio::sync::OnceCell<api_keys::Verifier>,
}

enum Keys {
    Secret(DecodingKey),
    Jwks(Jwks),
}

/// The identity provider's signing keys, by `kid`, fetched when a token names one not seen yet.
///
/// Known keys are read under a lock held for a lookup only: a fetch in flight (up to its timeout)
/// never stalls the tokens of known keys. One fetch at a time; tokens of unknown keys wait for it,
/// then find their key or are refused.
struct Jwks {
    url: String,
    client: reqwest::Client,
    cached: std::sync::Mutex<Cached>,
    refreshing: Mutex<()>,
    refresh: Duration,
    max_age: Duration,
}

#[derive(Default)]
struct Cached {
    keys: HashMap<String, DecodingKey>,
    fetched_at: Option<Instant>,
    fetches: u64,
}

impl Jwks {
    fn new(url: &str) -> Result<Self, AuthError> {
        let parsed = reqwest::Url::parse(url)
            .map_err(|err| AuthError::Invalid(format!("the JWKS URL {url:?}: {err}")))?;
        // Keys fetched in clear text could be anyone's: only a local identity provider (tests, a
        // sidecar) is trusted over plain HTTP.
        let loopback = matches!(parsed.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
        if parsed.scheme() != "https" && !(parsed.scheme() == "http" && loopback) {
            return Err(AuthError::Invalid(format!(
                "the JWKS URL {url:?} must be https (plain http only on loopback)"
            )));
        }
        // reqwest is built without a crypto provider of its own; ring is ours (installing it
        // again is a no-op).
        let _ = rustls::crypto::ring::default_provider().install_default();
        // The keys come from the URL the operator named, never from where it redirects.
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|err| AuthError::Unavailable(format!("HTTP client: {err}")))?;
        Ok(Self {
            url: url.to_owned(),
            client,
            cached: std::sync::Mutex::default(),
            refreshing: Mutex::default(),
            refresh: JWKS_REFRESH,
            max_age: JWKS_MAX_AGE,
        })
    }

    fn cached(&self) -> std::sync::MutexGuard<'_, Cached> {
        self.cached
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn known(&self, kid: &str) -> Option<DecodingKey> {
        self.cached().keys.get(kid).cloned()
    }

    /// Whether the keys were fetched longer than their max age ago.
    fn stale(&self) -> bool {
        self.cached()
            .fetched_at
            .is_some_and(|at| at.elapsed() >= self.max_age)
    }

    /// The key `kid` names, refreshing the set if it is unknown and the last fetch is old enough,
    /// or if the set is past its max age (one token's verification fetches it; the others use
    /// the keys as they are meanwhile).
    async fn key(&self, kid: &str) -> Result<DecodingKey, AuthError> {
        let unknown = || AuthError::Invalid("unknown signing key".into());
        if let Some(key) = self.known(kid) {
            if !self.stale() {
                return Ok(key);
            }
            let Ok(_one_fetch) = self.refreshing.try_lock() else {
                return Ok(key);
            };
            if !self.stale() {
                return self.known(kid).ok_or_else(unknown);
            }
            self.note_fetch();
            return match self.fetch().await {
                Ok(keys) => {
                    let key = keys.get(kid).cloned();
                    self.cached().keys = keys;
                    key.ok_or_else(unknown)
                }
                Err(err) => {
                    tracing::warn!(error = %err, "cannot refresh the JWKS: the keys known are kept");
                    Ok(key)
                }
            };
        }
        let _one_fetch = self.refreshing.lock().await;
        // The fetch this one waited for may have brought it.
        if let Some(key) = self.known(kid) {
            return Ok(key);
        }
        if self
            .cached()
            .fetched_at
            .is_some_and(|at| at.elapsed() < self.refresh)
        {
            return Err(unknown());
        }
        self.note_fetch();
        let keys = self.fetch().await?;
        let key = keys.get(kid).cloned();
        // The provider's set as it is now: a retired key is refused from then on.
        self.cached().keys = keys;
        key.ok_or_else(unknown)
    }

    fn note_fetch(&self) {
        let mut cached = self.cached();
        cached.fetched_at = Some(Instant::now());
        cached.fetches += 1;
    }

    async fn fetch(&self) -> Result<HashMap<String, DecodingKey>, AuthError> {
        let unavailable =
            |err: reqwest::Error| AuthError::Unavailable(format!("fetching the JWKS: {err}"));
        let set: JwkSet = self
            .client
            .get(&self.url)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(unavailable)?
            .json()
            .await
            .map_err(unavailable)?;
        Ok(set
            .keys
            .iter()
            .filter_map(|jwk| {
                let kid = jwk.common.key_id.clone()?;
                DecodingKey::from_jwk(jwk).ok().map(|key| (kid, key))
            })
            .collect())
    }
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("claims", &self.claims)
            .finish_non_exhaustive()
    }
}

/// Clock skew tolerated on `exp` and `nbf`.
const LEEWAY: Duration = Duration::from_secs(30);

impl Authenticator {
    /// # Errors
    ///
    /// An empty secret without a JWKS URL.
    pub fn new(config: &AuthConfig) -> Result<Self, AuthError> {
        let (keys, algorithm) = match &config.jwks_url {
            Some(url) => (Keys::Jwks(Jwks::new(url)?), Algorithm::RS256),
            None => (
                Keys::Secret(hs256_key(config, DecodingKey::from_secret)?),
                Algorithm::HS256,
            ),
        };
        let mut validation = Validation::new(algorithm);
        validation.set_issuer(&[&config.issuer]);
        validation.set_audience(&[&config.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY.as_secs();
        Ok(Self {
            keys,
            validation,
            claims: config.claims.clone(),
            api_keys: tokio::sync::OnceCell::new(),
        })
    }

    /// The caller a bearer token stands for.
    ///
    /// # Errors
    ///
    /// [`AuthError`] saying what is wrong with the token.
    pub async fn verify(&self, token: &str) -> Result<Caller, AuthError> {
        let key = match &self.keys {
            Keys::Secret(key) => key.clone(),
            Keys::Jwks(jwks) => {
                let header = jsonwebtoken::decode_header(token)
                    .map_err(|_| AuthError::Invalid("malformed token".into()))?;
                if header.alg != Algorithm::RS256 {
                    return Err(AuthError::Invalid("unexpected algorithm".into()));
                }
                let kid = header
                    .kid
                    .ok_or_else(|| AuthError::Invalid("the token names no signing key".into()))?;
                jwks.key(&kid).await?
            }
        };
        let data =
            jsonwebtoken::decode::<Value>(token, &key, &self.validation).map_err(
                |err| match err.kind() {
                    ErrorKind::ExpiredSignature => AuthError::Expired,
                    ErrorKind::ImmatureSignature => AuthError::Invalid("not valid yet".into()),
                    ErrorKind::InvalidAudience => AuthError::Invalid("wrong audience".into()),
                    ErrorKind::InvalidIssuer => AuthError::Invalid("wrong issuer".into()),
                    ErrorKind::InvalidSignature => AuthError::Invalid("bad signature".into()),
                    ErrorKind::InvalidAlgorithm => {
                        AuthError::Invalid("unexpected algorithm".into())
                    }
                    ErrorKind::MissingRequiredClaim(claim) => {
                        AuthError::Invalid(format!("missing {claim} claim"))
                    }
                    _ => AuthError::Invalid("malformed token".into()),
                },
            )?;
        let payload = data.claims;
        let subject = claim(&payload, &self.claims.subject)
            .and_then(Value::as_str)
            .filter(|subject| !subject.is_empty())
            .ok_or(AuthError::Claim("subject"))?
            .to_owned();
        let roles = match claim(&payload, &self.claims.roles) {
            None | Some(Value::Null) => BTreeSet::new(),
            Some(Value::String(role)) => BTreeSet::from([role.clone()]),
            Some(Value::Array(roles)) => roles
                .iter()
                .map(|role| role.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or(AuthError::Claim("roles"))?,
            Some(_) => return Err(AuthError::Claim("roles")),
        };
        let tenant = match claim(&payload, &self.claims.tenant) {
            None | Some(Value::Null) => None,
            Some(Value::String(tenant)) if !tenant.is_empty() => Some(tenant.clone()),
            Some(_) => return Err(AuthError::Claim("tenant")),
        };
        Ok(Caller {
            subject,
            tenant,
            roles,
            project_user: None,
            api_key: None,
        })
    }

    /// The caller a credential stands for: a token's, verified; a key's, looked up in `pool`.
    ///
    /// # Errors
    ///
    /// For a token, as [`Authenticator::verify`]. For a key, [`AuthError::ApiKey`] when it is
    /// unknown, revoked or expired, and [`AuthError::Unavailable`] when the database failed.
    pub async fn authenticate(
        &self,
        pool: &PgPool,
        credential: Credential<'_>,
    ) -> Result<Caller, AuthError> {
        match credential {
            Credential::Token(token) => self.verify(token).await,
            Credential::ApiKey(key) => self.verify_api_key(pool, key).await,
        }
    }

    /// The least time between two fetches of the JWKS ([`JWKS_REFRESH`] unless set).
    #[must_use]
    pub fn with_jwks_refresh(mut self, every: Duration) -> Self {
        if let Keys::Jwks(jwks) = &mut self.keys {
            jwks.refresh = every;
        }
        self
    }

    /// How long fetched keys are trusted before they are fetched again ([`JWKS_MAX_AGE`] unless
    /// set).
    #[must_use]
    pub fn with_jwks_max_age(mut self, max_age: Duration) -> Self {
        if let Keys::Jwks(jwks) = &mut self.keys {
            jwks.max_age = max_age;
        }
        self
    }

    /// How many times the JWKS was fetched (0 with a shared secret).
    pub async fn jwks_fetches(&self) -> u64 {
        match &self.keys {
            Keys::Secret(_) => 0,
            Keys::Jwks(jwks) => jwks.cached().fetches,
        }
    }

    async fn verify_api_key(&self, pool: &PgPool, key: &str) -> Result<Caller, AuthError> {
        let unavailable = |err: mostrador_queue::Error| {
            tracing::warn!(error = %err, "cannot look up an API key");
            AuthError::Unavailable("the database is unavailable".into())
        };
        let verifier = self
            .api_keys
            .get_or_try_init(|| api_keys::Verifier::load(pool))
            .await
            .map_err(unavailable)?;
        let key = api_keys::authenticate(pool, verifier, key)
            .await
            .map_err(unavailable)?
            .ok_or(AuthError::ApiKey)?;
        Ok(Caller {
            subject: key.subject,
            tenant: key.tenant,
            roles: key.roles.into_iter().collect(),
            project_user: None,
            api_key: Some(key.key_id),
        })
    }
}

fn hs256_key<K>(
    config: &AuthConfig,
    key: impl Fn(&[u8]) -> jsonwebtoken::errors::Result<K>,
) -> Result<K, AuthError> {
    if config.secret.is_empty() {
        return Err(AuthError::Invalid("the HS256 secret is empty".into()));
    }
    key(config.secret.as_bytes()).map_err(|err| AuthError::Invalid(format!("HS256 secret: {err}")))
}

/// The value at a dot-separated path of a JSON object.
fn claim<'a>(payload: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(payload, |value, key| value.as_object()?.get(key))
}

/// Mints an HS256 token for `caller`, valid for `ttl` (development and tests: `mostrador token`).
/// The claims are written at the configured paths.
///
/// # Errors
///
/// An empty secret.
pub fn mint(config: &AuthConfig, caller: &Caller, ttl: Duration) -> Result<String, AuthError> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let mut payload = json!({
        "iss": config.issuer,
        "aud": config.audience,
        "iat": now.as_secs(),
        "exp": (now + ttl).as_secs(),
    });
    set_claim(&mut payload, &config.claims.subject, json!(caller.subject));
    let roles: Vec<&String> = caller.roles.iter().collect();
    let roles = match roles.as_slice() {
        [role] => json!(role),
        roles => json!(roles),
    };
    set_claim(&mut payload, &config.claims.roles, roles);
    if let Some(tenant) = &caller.tenant {
        set_claim(&mut payload, &config.claims.tenant, json!(tenant));
    }
    let key = hs256_key(config, EncodingKey::from_secret)?;
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), &payload, &key)
        .map_err(|err| AuthError::Invalid(format!("signing failed: {err}")))
}

fn set_claim(payload: &mut Value, path: &str, value: Value) {
    let mut keys: Vec<&str> = path.split('.').collect();
    let last = keys.pop().unwrap_or(path);
    let mut object = payload;
    for key in keys {
        object = object
            .as_object_mut()
            .expect("claims are objects all the way down")
            .entry(key)
            .or_insert_with(|| json!({}));
    }
    if let Some(map) = object.as_object_mut() {
        map.insert(last.to_owned(), value);
    }
}

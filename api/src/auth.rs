//! Who is calling: a JWT from `Authorization: Bearer …`, verified, and the three claims mostrador
//! uses: the subject, the role and the store.
//!
//! Tokens are HS256 with a shared secret (development and tests; `mostrador token` mints them).
//! Issuer, audience and expiry are always checked. Claim paths are configurable because identity
//! providers nest them (Keycloak puts realm roles under `realm_access.roles`); a role claim may be
//! a string or a list, and the highest known role in it counts. Tokens never reach logs: errors
//! say what was wrong with a token, never what it was.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde_json::{Value, json};

/// What a caller may do beyond its own threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Customer,
    Clerk,
    /// Sees the threads of its store and decides approvals.
    Manager,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Customer => "customer",
            Role::Clerk => "clerk",
            Role::Manager => "manager",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        [Role::Customer, Role::Clerk, Role::Manager]
            .into_iter()
            .find(|role| role.as_str() == name)
    }

    /// The highest known role in a claim that is a role name or a list of them.
    fn from_claim(claim: &Value) -> Option<Self> {
        match claim {
            Value::String(name) => Self::from_name(name),
            Value::Array(names) => names
                .iter()
                .filter_map(Value::as_str)
                .filter_map(Self::from_name)
                .max(),
            _ => None,
        }
    }
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub subject: String,
    pub role: Role,
    pub store: Option<String>,
}

/// Where the claims are, as dot-separated paths into the token's payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimPaths {
    pub subject: String,
    pub role: String,
    pub store: String,
}

impl Default for ClaimPaths {
    fn default() -> Self {
        Self {
            subject: "sub".into(),
            role: "role".into(),
            store: "store".into(),
        }
    }
}

/// How tokens are verified.
#[derive(Clone)]
pub struct AuthConfig {
    /// The HS256 shared secret.
    pub secret: String,
    pub issuer: String,
    pub audience: String,
    pub claims: ClaimPaths,
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthConfig")
            .field("secret", &"<redacted>")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("claims", &self.claims)
            .finish()
    }
}

/// Why a request is not authenticated (a 401).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing bearer token")]
    Missing,
    #[error("the token has expired")]
    Expired,
    #[error("invalid token: {0}")]
    Invalid(String),
    #[error("the token has no usable {0} claim")]
    Claim(&'static str),
}

/// Verifies tokens.
pub struct Authenticator {
    key: DecodingKey,
    validation: Validation,
    claims: ClaimPaths,
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
    /// An empty secret.
    pub fn new(config: &AuthConfig) -> Result<Self, AuthError> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[&config.issuer]);
        validation.set_audience(&[&config.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.leeway = LEEWAY.as_secs();
        Ok(Self {
            key: hs256_key(config, DecodingKey::from_secret)?,
            validation,
            claims: config.claims.clone(),
        })
    }

    /// The caller a bearer token stands for.
    ///
    /// # Errors
    ///
    /// [`AuthError`] saying what is wrong with the token.
    pub fn verify(&self, token: &str) -> Result<Caller, AuthError> {
        let data =
            jsonwebtoken::decode::<Value>(token, &self.key, &self.validation).map_err(|err| {
                match err.kind() {
                    ErrorKind::ExpiredSignature => AuthError::Expired,
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
                }
            })?;
        let payload = data.claims;
        let subject = claim(&payload, &self.claims.subject)
            .and_then(Value::as_str)
            .filter(|subject| !subject.is_empty())
            .ok_or(AuthError::Claim("subject"))?
            .to_owned();
        let role = claim(&payload, &self.claims.role)
            .and_then(Role::from_claim)
            .ok_or(AuthError::Claim("role"))?;
        let store = match claim(&payload, &self.claims.store) {
            None | Some(Value::Null) => None,
            Some(Value::String(store)) if !store.is_empty() => Some(store.clone()),
            Some(_) => return Err(AuthError::Claim("store")),
        };
        Ok(Caller {
            subject,
            role,
            store,
        })
    }

    /// The caller of a request, from its `Authorization` header value.
    ///
    /// # Errors
    ///
    /// [`AuthError::Missing`] without a bearer token, else as [`Authenticator::verify`].
    pub fn verify_header(&self, authorization: Option<&str>) -> Result<Caller, AuthError> {
        let token = authorization
            .and_then(|value| {
                value
                    .strip_prefix("Bearer ")
                    .or_else(|| value.strip_prefix("bearer "))
            })
            .map(str::trim)
            .filter(|token| !token.is_empty())
            .ok_or(AuthError::Missing)?;
        self.verify(token)
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
    set_claim(
        &mut payload,
        &config.claims.role,
        json!(caller.role.as_str()),
    );
    if let Some(store) = &caller.store {
        set_claim(&mut payload, &config.claims.store, json!(store));
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

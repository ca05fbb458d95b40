//! Which browser origins may call the api (CORS): the operator's list (`--cors-allow-origins`),
//! or a project's own rules (`http.cors` of its `langgraph.json`, read as the official server's
//! CORS middleware reads them).

use std::time::Duration;

use axum::http::header;

/// The browser origins allowed to call the api (CORS): what a page served elsewhere, like
/// agent-chat-ui, needs. Credentials are headers (a token, an API key), never cookies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Cors {
    /// No cross-origin calls.
    #[default]
    Off,
    /// These origins (`https://chat.example.com`), and with `localhost` any port of
    /// `localhost`, `127.0.0.1` or `[::1]` over http (what `mostrador dev` allows).
    Origins {
        listed: Vec<String>,
        localhost: bool,
    },
    /// Any origin (`*`).
    Any,
    /// A project's own rules (`langgraph.json`'s `http.cors`), read as the official server's
    /// CORS middleware reads them.
    Project(ProjectCors),
}

/// `http.cors` of a `langgraph.json`, with Starlette's defaults for what it leaves out (as the
/// official server applies it): no origin, `GET` only, the CORS-safelisted headers only, no
/// credentials, nothing exposed, ten minutes of preflight cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectCors {
    /// Origins, or `*`.
    pub allow_origins: Vec<String>,
    /// An origin matching it whole is allowed too.
    pub allow_origin_regex: Option<String>,
    /// Methods, or `*`.
    pub allow_methods: Vec<String>,
    /// Request headers beyond the safelisted ones, or `*`.
    pub allow_headers: Vec<String>,
    pub allow_credentials: bool,
    pub expose_headers: Vec<String>,
    pub max_age: u64,
}

impl Default for ProjectCors {
    fn default() -> Self {
        Self {
            allow_origins: Vec::new(),
            allow_origin_regex: None,
            allow_methods: vec!["GET".into()],
            allow_headers: Vec::new(),
            allow_credentials: false,
            expose_headers: Vec::new(),
            max_age: 600,
        }
    }
}

impl ProjectCors {
    /// Its origin regex, compiled.
    ///
    /// # Errors
    ///
    /// The regex does not compile.
    pub fn origin_regex(&self) -> Result<Option<regex::Regex>, regex::Error> {
        self.allow_origin_regex
            .as_deref()
            .map(|pattern| regex::Regex::new(&format!("^(?:{pattern})$")))
            .transpose()
    }

    fn layer(&self) -> tower_http::cors::CorsLayer {
        use axum::http::{HeaderName, Method};
        use tower_http::cors::{AllowHeaders, AllowMethods, AllowOrigin, CorsLayer, ExposeHeaders};
        let any = |list: &[String]| list.iter().any(|item| item == "*");
        let origin = if any(&self.allow_origins) && !self.allow_credentials {
            AllowOrigin::any()
        } else {
            // With credentials, `*` answers the request's own origin, as Starlette does.
            let rules = self.clone();
            let regex = self.origin_regex().ok().flatten();
            AllowOrigin::predicate(move |origin, _| {
                origin.to_str().is_ok_and(|origin| {
                    any(&rules.allow_origins)
                        || rules.allow_origins.iter().any(|allowed| allowed == origin)
                        || regex.as_ref().is_some_and(|regex| regex.is_match(origin))
                })
            })
        };
        let methods = if any(&self.allow_methods) {
            AllowMethods::mirror_request()
        } else {
            AllowMethods::list(self.allow_methods.iter().filter_map(|method| {
                Method::from_bytes(method.to_ascii_uppercase().as_bytes()).ok()
            }))
        };
        let safelisted = [
            "accept",
            "accept-language",
            "content-language",
            "content-type",
        ];
        let headers = if any(&self.allow_headers) {
            AllowHeaders::mirror_request()
        } else {
            AllowHeaders::list(
                safelisted
                    .iter()
                    .map(|name| (*name).to_owned())
                    .chain(
                        self.allow_headers
                            .iter()
                            .map(|name| name.to_ascii_lowercase()),
                    )
                    .filter_map(|name| HeaderName::try_from(name).ok()),
            )
        };
        CorsLayer::new()
            .allow_origin(origin)
            .allow_methods(methods)
            .allow_headers(headers)
            .allow_credentials(self.allow_credentials)
            .expose_headers(ExposeHeaders::list(
                self.expose_headers
                    .iter()
                    .filter(|name| *name != "*")
                    .filter_map(|name| HeaderName::try_from(name.to_ascii_lowercase()).ok()),
            ))
            .max_age(Duration::from_secs(self.max_age))
    }

    fn allows(&self, origin: &str) -> bool {
        self.allow_origins
            .iter()
            .any(|allowed| allowed == "*" || allowed == origin)
            || self
                .origin_regex()
                .ok()
                .flatten()
                .is_some_and(|regex| regex.is_match(origin))
    }
}

impl Cors {
    /// `*`, or a comma-separated list of origins, where `localhost` stands for any local one.
    pub fn parse(text: &str) -> Self {
        let mut listed = Vec::new();
        let mut localhost = false;
        for origin in text.split(',').map(str::trim).filter(|o| !o.is_empty()) {
            match origin {
                "*" => return Self::Any,
                "localhost" => localhost = true,
                origin => listed.push(origin.trim_end_matches('/').to_owned()),
            }
        }
        if listed.is_empty() && !localhost {
            Self::Off
        } else {
            Self::Origins { listed, localhost }
        }
    }

    /// The CORS layer; `private_network`: preflights from public origins to this loopback
    /// server are answered yes (Chrome's Private Network Access), as `langgraph dev` answers them.
    pub(crate) fn layer(&self, private_network: bool) -> Option<tower_http::cors::CorsLayer> {
        use tower_http::cors::{AllowHeaders, AllowMethods, AllowOrigin, CorsLayer, ExposeHeaders};
        let origins = match self {
            Self::Off => return None,
            Self::Project(rules) => {
                return Some(rules.layer().allow_private_network(private_network));
            }
            Self::Any => AllowOrigin::any(),
            Self::Origins { .. } => {
                let cors = self.clone();
                AllowOrigin::predicate(move |origin, _| {
                    origin.to_str().is_ok_and(|origin| cors.allows(origin))
                })
            }
        };
        Some(
            CorsLayer::new()
                .allow_origin(origins)
                .allow_methods(AllowMethods::mirror_request())
                .allow_headers(AllowHeaders::mirror_request())
                // The SDKs rejoin a dropped stream at `Location`.
                .expose_headers(ExposeHeaders::list([
                    header::LOCATION,
                    header::CONTENT_LOCATION,
                    header::RETRY_AFTER,
                    header::HeaderName::from_static("x-pagination-total"),
                    header::HeaderName::from_static("x-pagination-next"),
                ]))
                .max_age(Duration::from_secs(3600))
                .allow_private_network(private_network),
        )
    }

    /// Whether a browser at `origin` may call the api.
    pub(crate) fn allows(&self, origin: &str) -> bool {
        match self {
            Self::Off => false,
            Self::Any => true,
            Self::Project(rules) => rules.allows(origin),
            Self::Origins { listed, localhost } => {
                listed.iter().any(|allowed| allowed == origin) || (*localhost && is_local(origin))
            }
        }
    }
}

/// `http://localhost:3000`, `http://127.0.0.1:5173`, `http://[::1]:8080`.
fn is_local(origin: &str) -> bool {
    origin.strip_prefix("http://").is_some_and(is_loopback)
}

/// Whether `authority` (`host` or `host:port`, as a `Host` header or an origin names it) is this
/// machine by a loopback name.
pub(crate) fn is_loopback(authority: &str) -> bool {
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => authority,
    };
    matches!(host, "localhost" | "127.0.0.1" | "[::1]")
}

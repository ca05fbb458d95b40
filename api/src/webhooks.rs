//! Webhooks: a run (or a cron's runs) may name a URL to which, once it has ended, the run and its
//! final values are POSTed, as on the official server. Only to hosts the operator allows
//! ([`WebhookHosts`], `MOSTRADOR_WEBHOOK_HOSTS`): a URL elsewhere is a 422 when the run is made,
//! and is checked again when it is sent, so narrowing the list stops what was queued before.
//! With no list, webhooks are refused: the api never calls out where nobody said it may.
//!
//! The announcement is queued by the statement that ends the run (`queue::data::webhooks`), so none is
//! lost to a crash; every api process sends what is due ([`send`]), at least once, following no
//! redirect, retrying failures with a growing backoff, and giving up after [`MAX_ATTEMPTS`].

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use chrono::Utc;
use mostrador_queue::data::webhooks::{self, Delivery};
use mostrador_queue::{Error as QueueError, run};
use serde_json::json;

use crate::app::AppState;

/// The longest URL a run may name.
const MAX_URL_BYTES: usize = 4096;

/// Attempts before a delivery is given up (logged).
pub const MAX_ATTEMPTS: i32 = 8;

/// How often a process looks for deliveries that are due.
const POLL: Duration = Duration::from_secs(1);

/// Deliveries in flight at once in one process.
const IN_FLIGHT: usize = 64;

/// Deliveries in flight at once to one receiver (a URL's host and port) in one process: a slow
/// receiver holds this many, never the others' turn.
const PER_RECEIVER: usize = 4;

/// How long a receiver has to answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a delivery waits for its run's final state.
const FINAL_STATE_TIMEOUT: Duration = Duration::from_secs(10);

/// The hosts webhooks may be sent to: names (`hooks.example.com`), every name under a domain
/// (`*.example.com`), or addresses, each with a port (`127.0.0.1:9000`), any port (`:*`) or,
/// without one, the default port of http or https.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebhookHosts(Vec<HostRule>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct HostRule {
    /// Lower case; for a wildcard, the domain under it (`example.com`).
    host: String,
    wildcard: bool,
    port: Port,
}

/// The ports a rule allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Port {
    /// None written: the scheme's own (80, 443).
    Default,
    /// `:*`.
    Any,
    Is(u16),
}

impl WebhookHosts {
    /// A comma-separated list; empty: none.
    ///
    /// # Errors
    ///
    /// An entry that is not a host, a `*.` domain or either with a port.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut rules = Vec::new();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let port = |text: &str| match text {
                "*" => Ok(Port::Any),
                text => text
                    .parse::<u16>()
                    .map(Port::Is)
                    .map_err(|_| format!("webhook host {entry:?}: {text:?} is not a port")),
            };
            // An IPv6 address goes in brackets: `[::1]:9000`.
            let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
                let (host, after) = rest
                    .split_once(']')
                    .ok_or_else(|| format!("webhook host {entry:?}: no closing bracket"))?;
                match after {
                    "" => (host, Port::Default),
                    after => match after.strip_prefix(':') {
                        Some(text) => (host, port(text)?),
                        None => {
                            return Err(format!(
                                "webhook host {entry:?}: {after:?} after the address"
                            ));
                        }
                    },
                }
            } else {
                match entry.rsplit_once(':') {
                    Some((host, text)) => (host, port(text)?),
                    None => (entry, Port::Default),
                }
            };
            let (host, wildcard) = match host.strip_prefix("*.") {
                Some(domain) => (domain, true),
                None => (host, false),
            };
            if host.is_empty() || host.contains(['/', '*', '@', ' ']) {
                return Err(format!(
                    "webhook host {entry:?} is not a host name, a `*.` domain or an address"
                ));
            }
            rules.push(HostRule {
                host: host.to_ascii_lowercase(),
                wildcard,
                port,
            });
        }
        Ok(Self(rules))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether webhooks may be sent to `url`.
    ///
    /// # Errors
    ///
    /// Why not, for the caller (a 422).
    pub fn check(&self, url: &str) -> Result<(), String> {
        if self.0.is_empty() {
            return Err(
                "webhooks are off: the operator allows no host (MOSTRADOR_WEBHOOK_HOSTS)".into(),
            );
        }
        if url.len() > MAX_URL_BYTES {
            return Err("Webhook URL too long".into());
        }
        let parsed = reqwest::Url::parse(url)
            .map_err(|_| format!("webhook {url:?} is not an absolute URL"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err("a webhook is an http or https URL".into());
        }
        let host = parsed
            .host_str()
            .ok_or_else(|| "a webhook URL names a host".to_owned())?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        let port = parsed.port_or_known_default();
        let allowed = self.0.iter().any(|rule| {
            let host_matches = if rule.wildcard {
                host.strip_suffix(&rule.host)
                    .is_some_and(|head| head.ends_with('.') && head.len() > 1)
            } else {
                host == rule.host
            };
            // A rule without a port allows the scheme's own (80, 443), not every port: a
            // receiver on another port of that host must be named with it, or `:*`.
            host_matches
                && match rule.port {
                    Port::Default => parsed.port().is_none(),
                    Port::Any => true,
                    Port::Is(wanted) => port == Some(wanted),
                }
        });
        if allowed {
            Ok(())
        } else {
            Err("Webhook domain not allowed".into())
        }
    }
}

/// Sends the deliveries that are due, each as soon as there is room for it, until the api drains:
/// at most [`IN_FLIGHT`] at once, and [`PER_RECEIVER`] to one receiver, so that a receiver that
/// answers slowly (or never) delays only its own deliveries.
pub async fn send(state: AppState, retry_base: Duration) {
    // reqwest is built without a crypto provider of its own; ring is ours (installing it again
    // is a no-op).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = match client_builder().build() {
        Ok(client) => client,
        Err(err) => {
            tracing::error!(error = %err, "cannot build the webhooks' HTTP client: none is sent");
            return;
        }
    };
    let mut shutdown = state.shutdown_signal();
    let mut sending = tokio::task::JoinSet::new();
    // Deliveries in flight by receiver.
    let mut receivers: HashMap<String, usize> = HashMap::new();
    loop {
        let room = IN_FLIGHT - sending.len();
        let full: Vec<String> = receivers
            .iter()
            .filter(|(_, n)| **n >= PER_RECEIVER)
            .map(|(receiver, _)| receiver.clone())
            .collect();
        if room > 0 {
            match webhooks::take(state.pool(), room as i64, PER_RECEIVER as i64, &full).await {
                Ok(due) => {
                    for delivery in due {
                        let receiver = webhooks::receiver(&delivery.url).to_owned();
                        *receivers.entry(receiver.clone()).or_default() += 1;
                        let (state, client) = (state.clone(), client.clone());
                        sending.spawn(async move {
                            deliver(&state, &client, delivery, retry_base).await;
                            receiver
                        });
                    }
                }
                Err(err) => tracing::warn!(error = %err, "cannot take the webhooks that are due"),
            }
        }
        tokio::select! {
            Some(done) = sending.join_next(), if !sending.is_empty() => {
                if let Ok(receiver) = done
                    && let Some(n) = receivers.get_mut(&receiver)
                {
                    *n -= 1;
                    if *n == 0 {
                        receivers.remove(&receiver);
                    }
                }
            }
            () = tokio::time::sleep(POLL) => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
    }
}

/// How every webhook is sent: no redirect followed, bounded in time.
fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(5))
        .timeout(ANSWER_TIMEOUT)
        .user_agent("mostrador")
}

/// Where a webhook goes.
enum Destination {
    /// The address its URL names (an address rule allowed it).
    AsWritten,
    /// One address its host name resolves to now, which the request is pinned to (a name that
    /// resolves elsewhere a moment later changes nothing).
    Pinned(String, SocketAddr),
    /// Nowhere: its name resolves only to addresses that only an address rule may name.
    Refused(String),
}

/// Where a webhook is sent: a name is resolved, and never sent to a loopback, link-local (a
/// cloud's metadata service), unspecified or multicast address.
///
/// # Errors
///
/// The name could not be resolved now (tried again later).
async fn destination(url: &str) -> Result<Destination, String> {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return Ok(Destination::Refused(format!("{url:?} is not a URL")));
    };
    let (Some(name), Some(port)) = (parsed.domain(), parsed.port_or_known_default()) else {
        return Ok(Destination::AsWritten);
    };
    let addresses = tokio::net::lookup_host((name, port))
        .await
        .map_err(|err| format!("{name} does not resolve: {err}"))?;
    Ok(addresses
        .into_iter()
        .find(|address| !reserved(address.ip()))
        .map_or_else(
            || {
                Destination::Refused(format!(
                    "{name} resolves to no address a webhook may be sent to (a loopback or \
                     link-local one)"
                ))
            },
            |address| Destination::Pinned(name.to_owned(), address),
        ))
}

/// An address only an address rule may name: this machine, a link's own (169.254.169.254 answers
/// a cloud's metadata there), none, or many.
fn reserved(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => reserved(IpAddr::V4(v4)),
            None => {
                v6.is_loopback()
                    || v6.is_unspecified()
                    || v6.is_multicast()
                    || v6.is_unicast_link_local()
            }
        },
    }
}

async fn deliver(
    state: &AppState,
    client: &reqwest::Client,
    delivery: Delivery,
    retry_base: Duration,
) {
    let pool = state.pool();
    let attempt = delivery.attempts + 1;
    let forget = || async {
        if let Err(err) = webhooks::done(pool, delivery.run_id).await {
            tracing::warn!(error = %err, run_id = %delivery.run_id.0, "cannot forget a webhook delivery");
        }
    };
    // What could not be read is left held: another attempt comes when the hold expires.
    let later = |why: String| async move {
        if attempt >= MAX_ATTEMPTS {
            tracing::warn!(run_id = %delivery.run_id.0, attempt, why, "webhook given up");
            forget().await;
        } else {
            tracing::warn!(run_id = %delivery.run_id.0, attempt, why, "webhook not sent: later");
        }
    };
    if let Err(why) = state.webhook_hosts().check(&delivery.url) {
        tracing::warn!(run_id = %delivery.run_id.0, url = %delivery.url, why, "webhook no longer allowed: not sent");
        return forget().await;
    }
    let client = match destination(&delivery.url).await {
        Ok(Destination::AsWritten) => client.clone(),
        Ok(Destination::Pinned(name, address)) => {
            match client_builder().resolve(&name, address).build() {
                Ok(client) => client,
                Err(err) => return later(format!("cannot build its HTTP client: {err}")).await,
            }
        }
        Ok(Destination::Refused(why)) => {
            tracing::warn!(run_id = %delivery.run_id.0, url = %delivery.url, why, "webhook refused: not sent");
            return forget().await;
        }
        Err(why) => return later(why).await,
    };
    let run = match run::get(pool, delivery.thread_id, delivery.run_id).await {
        Ok(run) => run,
        Err(QueueError::RunNotFound(_)) => return forget().await,
        Err(err) => return later(format!("cannot read its run: {err}")).await,
    };
    // An ended run's `end` is written with its ending; the bound only keeps one delivery from
    // holding up the others should it not be.
    let values = match tokio::time::timeout(
        FINAL_STATE_TIMEOUT,
        crate::runs::wait::final_state(state, &run),
    )
    .await
    {
        Ok(Ok(values)) => values,
        Ok(Err(err)) => {
            return later(format!("cannot read its final state: {}", err.detail)).await;
        }
        Err(_) => return later("its run has not ended".into()).await,
    };
    let mut payload = json!(crate::runs::run_answer(&run));
    payload["run_started_at"] = json!(run.started_at);
    payload["run_ended_at"] = json!(run.finished_at);
    payload["webhook_sent_at"] = json!(Utc::now());
    payload["values"] = values;
    if let Some(error) = &run.error {
        payload["error"] = json!(error);
    }
    let outcome = client
        .post(&delivery.url)
        .json(&payload)
        .send()
        .await
        .map_err(|err| err.without_url().to_string())
        .and_then(|response| {
            if response.status().is_success() {
                Ok(())
            } else {
                Err(format!("the receiver answered {}", response.status()))
            }
        });
    match outcome {
        Ok(()) => {
            tracing::info!(run_id = %run.run_id.0, attempt, "webhook sent");
            forget().await;
        }
        Err(why) if attempt >= MAX_ATTEMPTS => {
            tracing::warn!(run_id = %run.run_id.0, attempt, why, "webhook given up");
            forget().await;
        }
        Err(why) => {
            let backoff = retry_base
                .saturating_mul(1 << attempt.min(12))
                .min(Duration::from_secs(3600));
            tracing::info!(run_id = %run.run_id.0, attempt, why, ?backoff, "webhook failed: retrying");
            if let Err(err) = webhooks::retry(pool, run.run_id, backoff, &why).await {
                tracing::warn!(error = %err, "cannot set a webhook delivery back");
            }
        }
    }
}

/// A webhook a request names, checked: `None` when it names none.
///
/// # Errors
///
/// A 422 saying why it may not be sent there.
pub fn checked(
    state: &AppState,
    webhook: Option<String>,
) -> Result<Option<String>, crate::ApiError> {
    if let Some(url) = &webhook {
        state
            .webhook_hosts()
            .check(url)
            .map_err(crate::ApiError::unprocessable)?;
    }
    Ok(webhook)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_hosts_and_ports_are_allowed() {
        let hosts = WebhookHosts::parse(
            "hooks.example.com, *.corp.example, 127.0.0.1:9000, [::1]:9001, 10.0.0.7:*",
        )
        .expect("a list");
        for url in [
            "https://hooks.example.com/run-ended",
            "http://HOOKS.example.com/x",
            "https://hooks.example.com:443/x",
            "https://a.corp.example/x",
            "https://a.b.corp.example/x",
            "http://127.0.0.1:9000/hook",
            "http://[::1]:9001/hook",
            "http://10.0.0.7:8123/hook",
            "http://10.0.0.7/hook",
        ] {
            assert_eq!(hosts.check(url), Ok(()), "{url}");
        }
        for url in [
            "https://evil.example.com/",
            "http://hooks.example.com:8080/x",
            "https://hooks.example.com:5432/x",
            "https://corp.example/",
            "https://hooks.example.com.evil.net/",
            "https://evilcorp.example/",
            "http://127.0.0.1:9001/hook",
            "http://127.0.0.1/hook",
            "http://localhost:9000/",
            "ftp://hooks.example.com/",
            "/threads",
            "not a url",
            "https://user@evil.example.com/",
        ] {
            assert!(hosts.check(url).is_err(), "{url}");
        }
        assert!(
            WebhookHosts::default()
                .check("https://hooks.example.com/")
                .is_err()
        );
        for bad in ["https://x.example", "a.example:port", "*.", "a b"] {
            assert!(WebhookHosts::parse(bad).is_err(), "{bad}");
        }
    }
}

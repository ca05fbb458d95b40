//! An assistant's agent card: who it is, where it answers, what it takes, as officially.

use serde::Serialize;
use serde_json::Value;

use super::Fault;
use super::methods::Call;
use crate::error::ApiError;

/// The header that says which history a client wants (`context` or `task`).
pub const HISTORY_SCOPE_HEADER: &str = "LangGraph-A2A-History-Scope";
const HISTORY_SCOPE_EXTENSION: &str = "https://langchain.com/a2a/extensions/history-scope/v1";
/// The A2A version the card declares, as officially.
const PROTOCOL_VERSION: &str = "1.0";

impl Call {
    /// `GetExtendedAgentCard`: the card, as its route answers it.
    pub async fn card(&self) -> Result<Result<Card, Fault>, ApiError> {
        self.card_at(&format!("/a2a/{}", self.assistant_id)).await
    }

    /// The assistant's agent card, asked for at `path`: its address is where the caller reached
    /// this server.
    pub async fn card_at(&self, path: &str) -> Result<Result<Card, Fault>, ApiError> {
        let assistant = match self.assistant().await? {
            Ok(assistant) => assistant,
            Err(fault) => return Ok(Err(fault)),
        };
        let schema = self.input_schema().await?.unwrap_or_default();
        let mut properties: Vec<String> = schema["properties"]
            .as_object()
            .map(|properties| properties.keys().cloned().collect())
            .unwrap_or_default();
        properties.sort();
        let required = schema
            .get("required")
            .cloned()
            .unwrap_or(Value::Array(Vec::new()));
        let description = assistant
            .description
            .clone()
            .filter(|text| !text.is_empty())
            .unwrap_or_else(|| format!("{} assistant", assistant.name));
        let modes = |key: &str| {
            assistant.metadata["a2a"][key]
                .as_array()
                .filter(|modes| !modes.is_empty())
                .map_or_else(
                    || vec!["application/json".to_owned(), "text/plain".to_owned()],
                    |modes| {
                        modes
                            .iter()
                            .filter_map(|mode| mode.as_str().map(str::to_owned))
                            .collect()
                    },
                )
        };
        let (input_modes, output_modes) = (modes("input_modes"), modes("output_modes"));
        let base = self.base_url(path);
        let url = format!("{base}/a2a/{}", self.assistant_id);
        Ok(Ok(Card {
            name: assistant.name.clone(),
            description: description.clone(),
            url: url.clone(),
            supported_interfaces: vec![Interface {
                url,
                protocol_binding: "JSONRPC",
                protocol_version: PROTOCOL_VERSION,
            }],
            capabilities: Capabilities {
                streaming: true,
                push_notifications: false,
                state_transition_history: false,
                extensions: vec![Extension {
                    uri: HISTORY_SCOPE_EXTENSION,
                    description: "Choose task-only or full-context response history",
                    required: false,
                    params: ExtensionParams {
                        header: HISTORY_SCOPE_HEADER,
                        values: ["context", "task"],
                        default: "context",
                        methods: ["SendMessage", "GetTask", "ListTasks"],
                    },
                }],
            },
            default_input_modes: input_modes.clone(),
            default_output_modes: output_modes.clone(),
            skills: vec![Skill {
                id: format!("{}-main", self.assistant_id),
                name: format!("{} Capabilities", assistant.name),
                description,
                tags: ["assistant", "langgraph"],
                examples: Vec::new(),
                input_modes,
                output_modes,
                metadata: SkillMetadata {
                    input_schema: SchemaSummary {
                        required,
                        supports_a2a: properties.iter().any(|p| p == "messages"),
                        properties,
                    },
                },
            }],
            version: env!("CARGO_PKG_VERSION"),
        }))
    }

    /// Where the caller reached this server: the forwarded scheme (else http), the host it
    /// asked for, and the path before the A2A route's own.
    fn base_url(&self, path: &str) -> String {
        let header = |name: &str| {
            self.headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .filter(|value| !value.is_empty())
        };
        let scheme = header("x-forwarded-proto").unwrap_or("http");
        let host = header("host").unwrap_or("localhost");
        let own = format!("/a2a/{}", self.assistant_id);
        let prefix = path
            .strip_suffix("/.well-known/agent-card.json")
            .or_else(|| path.strip_suffix("/.well-known/agent.json"))
            .unwrap_or(path);
        let prefix = prefix.strip_suffix('/').unwrap_or(prefix);
        let prefix = prefix.strip_suffix(own.as_str()).unwrap_or(prefix);
        let host = match host.rsplit_once(':') {
            Some((name, "80")) if scheme == "http" => name,
            Some((name, "443")) if scheme == "https" => name,
            _ => host,
        };
        format!("{scheme}://{host}{prefix}")
    }
}

/// An assistant as an A2A agent.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Card {
    name: String,
    description: String,
    url: String,
    supported_interfaces: Vec<Interface>,
    capabilities: Capabilities,
    default_input_modes: Vec<String>,
    default_output_modes: Vec<String>,
    skills: Vec<Skill>,
    version: &'static str,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Interface {
    url: String,
    protocol_binding: &'static str,
    protocol_version: &'static str,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Capabilities {
    streaming: bool,
    push_notifications: bool,
    state_transition_history: bool,
    extensions: Vec<Extension>,
}

#[derive(Debug, Serialize)]
struct Extension {
    uri: &'static str,
    description: &'static str,
    required: bool,
    params: ExtensionParams,
}

#[derive(Debug, Serialize)]
struct ExtensionParams {
    header: &'static str,
    values: [&'static str; 2],
    default: &'static str,
    methods: [&'static str; 3],
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Skill {
    id: String,
    name: String,
    description: String,
    tags: [&'static str; 2],
    examples: Vec<String>,
    input_modes: Vec<String>,
    output_modes: Vec<String>,
    metadata: SkillMetadata,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SkillMetadata {
    input_schema: SchemaSummary,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SchemaSummary {
    required: Value,
    properties: Vec<String>,
    #[serde(rename = "supportsA2A")]
    supports_a2a: bool,
}

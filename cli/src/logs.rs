//! Where logs and traces go.

use std::io::IsTerminal;

use anyhow::Context;
use tracing_subscriber::EnvFilter;

/// Logs on stderr (text or JSON) and, when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, spans exported over OTLP/HTTP (protobuf) in
/// batches; the exporter reads the other `OTEL_EXPORTER_OTLP_*` variables (headers, timeout) and
/// `OTEL_SERVICE_NAME`. Returns the provider to flush at exit.
pub fn install_tracing(
    log_format: &str,
    command: &str,
) -> anyhow::Result<Option<opentelemetry_sdk::trace::SdkTracerProvider>> {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;

    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = if log_format == "json" {
        fmt.json()
            .with_current_span(true)
            .with_span_list(false)
            .boxed()
    } else {
        fmt.with_ansi(std::io::stderr().is_terminal()).boxed()
    };
    let exporting = [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|name| std::env::var(name).is_ok_and(|value| !value.is_empty()));
    let provider = if exporting {
        // reqwest is built without a crypto provider of its own; ring is ours.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .build()
            .context("invalid OTLP exporter settings")?;
        let service =
            std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| format!("mostrador-{command}"));
        Some(
            opentelemetry_sdk::trace::SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_resource(
                    opentelemetry_sdk::Resource::builder()
                        .with_service_name(service)
                        .build(),
                )
                .build(),
        )
    } else {
        None
    };
    let otel = provider
        .as_ref()
        .map(|provider| tracing_opentelemetry::layer().with_tracer(provider.tracer("mostrador")));
    tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .with(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .init();
    Ok(provider)
}

//! Each request is traced: its trace id comes from the W3C `traceparent` header when a caller
//! (a gateway, a client with OpenTelemetry) sent one, else a new one. The request's span carries
//! it (and, when the process exports traces over OTLP, continues the caller's trace), the response
//! echoes it (`traceparent`), and runs created by the request store it, so the worker's span of
//! the run, its events and its tools name the same trace.

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use uuid::Uuid;

tokio::task_local! {
    static TRACE_ID: String;
}

/// The trace id of the request being handled (`None` outside one).
pub fn current() -> Option<String> {
    TRACE_ID.try_with(Clone::clone).ok()
}

/// The trace id and parent span id of a `traceparent` header (`00-<32 hex trace id>-<16 hex
/// parent id>-<2 hex flags>`); `None` when it is malformed or all zeros, as the W3C rules say to
/// ignore it.
pub fn parse_traceparent(header: &str) -> Option<(String, String)> {
    let mut parts = header.trim().split('-');
    let (version, trace_id, parent_id, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    let valid = hex(version, 2)
        && version != "ff"
        && hex(trace_id, 32)
        && hex(parent_id, 16)
        && hex(flags, 2)
        && trace_id.bytes().any(|b| b != b'0')
        && parent_id.bytes().any(|b| b != b'0');
    valid.then(|| {
        (
            trace_id.to_ascii_lowercase(),
            parent_id.to_ascii_lowercase(),
        )
    })
}

/// Makes `span` a child of a remote span (no-op unless the process exports traces).
pub fn continue_trace(span: &tracing::Span, trace_id: &str, parent_span_id: &str) {
    let (Ok(trace_id), Ok(span_id)) = (
        TraceId::from_hex(trace_id),
        SpanId::from_hex(parent_span_id),
    ) else {
        return;
    };
    let parent = SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    );
    // Without an OpenTelemetry layer there is nothing to continue: the error says just that.
    let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent));
}

/// The middleware: the request's span, with its trace id.
pub async fn traced(request: Request, next: Next) -> Response {
    let incoming = request
        .headers()
        .get("traceparent")
        .and_then(|value| value.to_str().ok())
        .and_then(parse_traceparent);
    let span = tracing::info_span!(
        "request",
        method = %request.method(),
        path = %request.uri().path(),
        trace_id = tracing::field::Empty,
    );
    let trace_id = match incoming {
        Some((trace_id, parent)) => {
            continue_trace(&span, &trace_id, &parent);
            trace_id
        }
        // A new trace: the exporter's id when traces are exported, else one of our own.
        None => {
            let exported = span.context().span().span_context().trace_id();
            if exported == TraceId::INVALID {
                Uuid::new_v4().simple().to_string()
            } else {
                exported.to_string()
            }
        }
    };
    span.record("trace_id", trace_id.as_str());
    let mut response = TRACE_ID
        .scope(trace_id.clone(), next.run(request).instrument(span))
        .await;
    // This server's part of the trace: a span id of its own, sampled.
    let span_id = &Uuid::new_v4().simple().to_string()[..16];
    if let Ok(value) = HeaderValue::from_str(&format!("00-{trace_id}-{span_id}-01")) {
        response.headers_mut().insert("traceparent", value);
    }
    response
}

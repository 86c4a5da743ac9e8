//! Logging: the `tracing` subscriber and the request-logging middleware (request id, method,
//! path, status, latency); progress of the long commands ([`progress`]).

pub mod progress;

use std::io::IsTerminal;
use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;
use rand::Rng;
use tracing::Instrument;
use tracing_subscriber::EnvFilter;

/// Install the global subscriber. `RUST_LOG`, when set, wins over `log.level`. Calling it twice
/// (tests) is harmless.
pub fn init(level: &str) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    // Logs go to stderr: stdout carries the command's output (the address, a password hash).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// Log one line per request, inside a span carrying a fresh request id that is also returned to
/// the client as `X-Request-Id` (so a user's report can be matched to the log).
pub async fn log_requests(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let request_id = format!("{:016x}", rand::thread_rng().gen::<u64>());
    // The path only: query strings may carry tokens.
    let span = tracing::info_span!(
        "request",
        id = %request_id,
        method = %req.method(),
        path = %req.path(),
    );
    let started = Instant::now();
    let result = next.call(req).instrument(span.clone()).await;
    let _entered = span.enter();
    let latency_ms = format!("{:.2}", started.elapsed().as_secs_f64() * 1000.0);
    match result {
        Ok(mut res) => {
            let status = res.status().as_u16();
            if res.status().is_server_error() {
                tracing::warn!(status, %latency_ms, "request failed");
            } else {
                tracing::info!(status, %latency_ms, "request");
            }
            if let Ok(value) = HeaderValue::from_str(&request_id) {
                res.headers_mut()
                    .insert(HeaderName::from_static("x-request-id"), value);
            }
            Ok(res)
        }
        Err(e) => {
            tracing::warn!(%latency_ms, error = %e, "request failed");
            Err(e)
        }
    }
}

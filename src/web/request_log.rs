//! One log line per request (method, path, status, latency) inside a span carrying the
//! request's id, which every line logged while serving it shares and the response returns.

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;
use rand::Rng;
use tracing::Instrument;

/// Log one line per request, inside a span carrying the request id — the one a trusted proxy
/// sent (`web::client::forwarded_request_id`) or a fresh one — that is also returned to the
/// client as `X-Request-Id` (so a user's report can be matched to the log). Every line logged
/// while the request is served, database errors included, is inside that span.
pub(crate) async fn log_requests(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let request_id = crate::web::client::forwarded_request_id(req.request())
        .unwrap_or_else(|| format!("{:016x}", rand::thread_rng().gen::<u64>()));
    // The path only: query strings may carry tokens.
    let span = tracing::info_span!(
        "request",
        id = %request_id,
        method = %req.method(),
        path = %req.path(),
    );
    let started = Instant::now();
    // For the metrics; the request itself is not kept (routing needs it unshared).
    let method = crate::metrics::enabled().then(|| req.method().clone());
    let result = next.call(req).instrument(span.clone()).await;
    let _entered = span.enter();
    let took = started.elapsed();
    let latency_ms = Millis(took);
    if let Some(method) = method {
        // Labelled by the route template, never by the path: bounded whatever clients send.
        let (route, status) = match &result {
            Ok(res) => (res.request().match_pattern(), res.status().as_u16()),
            Err(e) => (None, e.as_response_error().status_code().as_u16()),
        };
        let route = route.as_deref().unwrap_or("unmatched");
        crate::metrics::http_request(route, method.as_str(), status, took);
    }
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

/// A duration written as milliseconds with two decimals (`1.25`) where the log line is
/// formatted, so a request whose line is filtered out formats nothing and none allocates.
#[derive(Debug, Clone, Copy)]
struct Millis(std::time::Duration);

impl std::fmt::Display for Millis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.2}", self.0.as_secs_f64() * 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_is_written_in_milliseconds_with_two_decimals() {
        use std::time::Duration;
        assert_eq!(Millis(Duration::from_micros(1_254)).to_string(), "1.25");
        assert_eq!(Millis(Duration::from_secs(2)).to_string(), "2000.00");
        assert_eq!(Millis(Duration::ZERO).to_string(), "0.00");
    }
}

//! What operators and their tools ask of a running instance: `/healthz` (liveness, here),
//! `/readyz` (readiness, [`ready`]) and `/metrics` (Prometheus, [`scrape`]).
//!
//! `/healthz` for load balancers and monitors: 200 `ok` when the database answers a ping and
//! accepts writes, 503 `unavailable` when it does not answer, 503 `not writable` when it answers
//! but refuses writes (docstore on a full or failing disk).

pub(crate) mod ready;
pub(crate) mod scrape;

use std::time::Duration;

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse};

use crate::state::AppState;
use crate::web::errors::Rendered;

pub(crate) async fn healthz(state: web::Data<AppState>) -> HttpResponse {
    // The driver's own server-selection timeout bounds this too; the outer limit keeps a
    // monitor's probe short even if a connection hangs mid-command.
    let limit = Duration::from_millis(state.db_timeout_ms);
    let healthy = matches!(
        tokio::time::timeout(limit, state.db.ping()).await,
        Ok(Ok(()))
    );
    let refused = if healthy {
        tokio::time::timeout(limit, state.db.writes_refused())
            .await
            .unwrap_or(None)
    } else {
        None
    };
    let (status, body) = match (healthy, refused) {
        (true, None) => (StatusCode::OK, "ok\n"),
        (true, Some(reason)) => {
            // Pages still show, but no cart, order or edit can be saved: not healthy.
            tracing::warn!("health check failed: {reason}");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "not writable: the database refuses writes\n",
            )
        }
        (false, _) => {
            tracing::warn!("health check failed: the database did not answer a ping");
            (StatusCode::SERVICE_UNAVAILABLE, "unavailable\n")
        }
    };
    let mut response = HttpResponse::build(status)
        .insert_header((header::CONTENT_TYPE, "text/plain; charset=utf-8"))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(body);
    // A plain-text answer on purpose: not replaced by the HTML error page.
    response.extensions_mut().insert(Rendered);
    response
}

//! Request bodies must keep arriving. The server cuts off a client that is slow to send its
//! request line and headers, but nothing limits the body: a client could trickle a form a byte
//! at a time and hold a connection (and the worker's attention) for as long as it liked. This
//! middleware gives every body a deadline that grows with what has arrived
//! (`server.body_timeout_secs` plus one second per [`MIN_BYTES_PER_SEC`] received), and bounds
//! how many bodies may be arriving at once (`server.max_concurrent_bodies`); a body past its
//! deadline ends in an error, which the reading handler answers with a 4xx page and the server
//! follows by closing the connection.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::http::{header, StatusCode};
use actix_web::middleware::Next;
use actix_web::web::{self, Bytes};
use actix_web::HttpMessage;
use futures::Stream;
use std::future::Future;

type BoxedPayloadStream = Pin<Box<dyn Stream<Item = Result<Bytes, PayloadError>>>>;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

use crate::web::error_page::error_page;

/// Slowest steady rate a body may arrive at, once the grace period is used up.
pub(crate) const MIN_BYTES_PER_SEC: u64 = 16 * 1024;

/// App data: the deadline and the number of bodies that may be arriving at once.
#[derive(Debug, Clone)]
pub(crate) struct BodyPolicy {
    pub(crate) timeout: Duration,
    slots: Arc<Semaphore>,
}

impl BodyPolicy {
    pub(crate) fn new(timeout: Duration, max_concurrent: usize) -> BodyPolicy {
        BodyPolicy {
            timeout,
            slots: Arc::new(Semaphore::new(max_concurrent.max(1))),
        }
    }
}

/// Whether the request says it has a body.
fn has_body(req: &ServiceRequest) -> bool {
    let headers = req.headers();
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|n| n > 0)
}

/// Middleware: give the body its deadline and a slot, or answer 503 when all slots are taken.
pub(crate) async fn limit_body_time(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let policy = req.app_data::<web::Data<BodyPolicy>>().cloned();
    if let Some(policy) = policy.filter(|_| has_body(&req)) {
        let Ok(permit) = policy.slots.clone().try_acquire_owned() else {
            tracing::warn!("refused a request body: too many bodies are arriving at once");
            let mut page = error_page(StatusCode::SERVICE_UNAVAILABLE, None);
            page.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(5u32));
            page.head_mut()
                .set_connection_type(actix_web::http::ConnectionType::Close);
            return Ok(req.into_response(page));
        };
        let inner = req.take_payload();
        let timed: BoxedPayloadStream = Box::pin(TimedBody::new(inner, policy.timeout, permit));
        req.set_payload(Payload::from(timed));
    }
    next.call(req)
        .await
        .map(ServiceResponse::map_into_boxed_body)
}

struct TimedBody {
    inner: Payload,
    started: Instant,
    grace: Duration,
    received: u64,
    deadline: Pin<Box<Sleep>>,
    /// Held while the body is arriving; released when it ends, fails or is dropped.
    permit: Option<OwnedSemaphorePermit>,
}

impl TimedBody {
    fn new(inner: Payload, grace: Duration, permit: OwnedSemaphorePermit) -> TimedBody {
        let started = Instant::now();
        TimedBody {
            inner,
            started,
            grace,
            received: 0,
            deadline: Box::pin(tokio::time::sleep_until(started + grace)),
            permit: Some(permit),
        }
    }

    fn finish(&mut self) {
        self.permit = None;
        self.inner = Payload::None;
    }
}

impl Stream for TimedBody {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.permit.is_none() {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_next(cx) {
            Poll::Ready(Some(Ok(bytes))) => {
                this.received = this.received.saturating_add(bytes.len() as u64);
                let allowed = this.grace
                    + Duration::from_secs_f64(this.received as f64 / MIN_BYTES_PER_SEC as f64);
                this.deadline.as_mut().reset(this.started + allowed);
                Poll::Ready(Some(Ok(bytes)))
            }
            Poll::Ready(other) => {
                this.finish();
                Poll::Ready(other)
            }
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    tracing::info!(
                        received = this.received,
                        "a request body arrived too slowly; cut off"
                    );
                    this.finish();
                    Poll::Ready(Some(Err(PayloadError::Io(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the request body arrived too slowly",
                    )))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

//! Admin orders: the list newest first with a status filter, and each order's detail page with
//! "mark shipped" and "cancel" (a cancel puts the units back on sale).

use std::collections::HashMap;

use actix_session::SessionExt;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::checkout::orders::{self, Order, OrderStatus};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{render, Layout};
use crate::web::see_other;

/// Rows on the orders list.
const LIST_LIMIT: i64 = 100;

#[derive(Template)]
#[template(path = "admin/orders.html")]
pub struct OrderListPage {
    pub layout: Layout,
    /// `None`: every status.
    pub status: Option<OrderStatus>,
    pub orders: Vec<Order>,
    pub total: u64,
}

impl OrderListPage {
    pub fn statuses(&self) -> [OrderStatus; 3] {
        OrderStatus::ALL
    }

    pub fn is_selected(&self, status: &OrderStatus) -> bool {
        self.status == Some(*status)
    }
}

#[derive(Template)]
#[template(path = "admin/order.html")]
pub struct OrderPage {
    pub layout: Layout,
    pub order: Order,
}

impl OrderPage {
    /// The link to write to the customer; `None` for an address that is not strictly valid
    /// (then the page shows it as plain text).
    pub fn mailto(&self) -> Option<String> {
        crate::web::email::mailto_href(&self.order.email)
    }

    /// Only a paid order can still be shipped or cancelled.
    pub fn is_paid(&self) -> bool {
        self.order.status == OrderStatus::Paid
    }
}

fn detail_url(number: &str) -> String {
    format!("/admin/orders/{number}")
}

/// `GET /admin/orders?status=`: an unknown status shows every order.
pub async fn index(
    req: HttpRequest,
    state: web::Data<AppState>,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let status = params.get("status").and_then(|s| OrderStatus::parse(s));
    let orders = orders::list(&state.db, status, LIST_LIMIT).await?;
    let total = orders::count(&state.db, status).await?;
    render(&OrderListPage {
        layout: Layout::admin(&req),
        status,
        orders,
        total,
    })
}

async fn existing(state: &AppState, number: &str) -> Result<Order, AppError> {
    orders::by_number(&state.db, number)
        .await?
        .ok_or(AppError::NotFound)
}

/// `GET /admin/orders/{number}`
pub async fn show(
    req: HttpRequest,
    state: web::Data<AppState>,
    number: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let order = existing(&state, &number).await?;
    render(&OrderPage {
        layout: Layout::admin(&req),
        order,
    })
}

/// Why an order refused a change, from the status it has now.
fn not_paid_reason(status: OrderStatus) -> &'static str {
    match status {
        OrderStatus::Paid => "it changed while we were updating it; please try again",
        OrderStatus::Shipped => "it was already shipped",
        OrderStatus::Cancelled => "it was already cancelled",
    }
}

/// `POST /admin/orders/{number}/ship`
pub async fn mark_shipped(
    req: HttpRequest,
    state: web::Data<AppState>,
    number: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let order = existing(&state, &number).await?;
    let session = req.get_session();
    if orders::mark_shipped(&state.db, &order.number).await? {
        flash::push(
            &session,
            Level::Success,
            format!("Order {} marked shipped.", order.number),
        );
    } else {
        let now = existing(&state, &order.number).await?;
        flash::push(
            &session,
            Level::Error,
            format!(
                "Order {} was not marked shipped: {}. Only paid orders can be shipped.",
                order.number,
                not_paid_reason(now.status)
            ),
        );
    }
    Ok(see_other(&detail_url(&order.number)))
}

/// `POST /admin/orders/{number}/cancel`: cancel a paid order and return its stock.
pub async fn cancel(
    req: HttpRequest,
    state: web::Data<AppState>,
    number: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let order = existing(&state, &number).await?;
    let session = req.get_session();
    let cancelled = orders::cancel(&state.db, &order.number).await?;
    if cancelled {
        let units = order.unit_count();
        flash::push(
            &session,
            Level::Success,
            format!(
                "Order {} cancelled; {units} {} back in stock.",
                order.number,
                if units == 1 { "unit is" } else { "units are" }
            ),
        );
    } else {
        let now = existing(&state, &order.number).await?;
        flash::push(
            &session,
            Level::Error,
            format!(
                "Order {} was not cancelled: {}. Only paid orders can be cancelled; nothing \
                 was changed.",
                order.number,
                not_paid_reason(now.status)
            ),
        );
    }
    Ok(see_other(&detail_url(&order.number)))
}

//! Admin orders: the list (newest first by number; sortable, filtered by status, searched by number,
//! email or name), and each order's detail page with "mark shipped" and "cancel" (a cancel,
//! confirmed first, puts the units back on sale).

use std::collections::HashMap;

use actix_session::SessionExt;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use bson::{doc, Bson, Document};

use crate::admin::changelist::{ChangeList, Column, Filter, ListSpec, SortKey};
use crate::checkout::orders::{self, Order, OrderStatus};
use crate::domain::OrderNumber;
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{render, Layout};
use crate::web::see_other;

/// Sort keys of the orders list (number and placed are indexed). "Placed" sorts by number: the
/// counter hands numbers out in placing order, while `created` is the clock's reading and goes
/// backwards when the clock is stepped back, which would list a newer order below older ones.
const SORTS: &[SortKey] = &[
    SortKey {
        key: "placed",
        field: "number",
    },
    SortKey {
        key: "number",
        field: "number",
    },
    SortKey {
        key: "customer",
        field: "email",
    },
    SortKey {
        key: "total",
        field: "total",
    },
    SortKey {
        key: "status",
        field: "status",
    },
];

#[derive(Template)]
#[template(path = "admin/orders.html")]
pub(crate) struct OrderListPage {
    pub(crate) layout: Layout,
    pub(crate) list: ChangeList,
    pub(crate) orders: Vec<Order>,
}

#[derive(Template)]
#[template(path = "admin/order.html")]
pub(crate) struct OrderPage {
    pub(crate) layout: Layout,
    pub(crate) order: Order,
}

impl OrderPage {
    /// The link to write to the customer; `None` for an address that is not strictly valid
    /// (then the page shows it as plain text).
    pub(crate) fn mailto(&self) -> Option<String> {
        crate::web::email::mailto_href(&self.order.email)
    }

    /// Only a paid order can still be shipped or cancelled.
    pub(crate) fn is_paid(&self) -> bool {
        self.order.status == OrderStatus::Paid
    }
}

/// The confirmation page of a cancel: what comes back into stock.
#[derive(Template)]
#[template(path = "admin/order_cancel.html")]
pub(crate) struct CancelOrderPage {
    pub(crate) layout: Layout,
    pub(crate) order: Order,
}

impl CancelOrderPage {
    pub(crate) fn is_paid(&self) -> bool {
        self.order.status == OrderStatus::Paid
    }
}

fn detail_url(number: &OrderNumber) -> String {
    format!("/admin/orders/{number}")
}

/// `GET /admin/orders?q=&status=&sort=&page=`: `q` finds any part of the order number, the
/// customer's email or name, ignoring case.
pub(crate) async fn index(
    req: HttpRequest,
    state: web::Data<AppState>,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let statuses: Vec<(&str, &str)> = OrderStatus::ALL
        .iter()
        .map(|s| (s.as_str(), s.as_str()))
        .collect();
    let spec = ListSpec {
        path: "/admin/orders",
        columns: vec![
            Column::sorted("Order", "number"),
            Column::sorted("Placed", "placed"),
            Column::sorted("Customer", "customer"),
            Column::plain_number("Units"),
            Column::number("Total", "total"),
            Column::sorted("Status", "status"),
        ],
        sorts: SORTS,
        default_sort: "-placed",
        filters: vec![Filter::fixed("status", "Status", &statuses)],
        search_label: Some("Order number, email or name contains"),
    };
    let mut list = ChangeList::parse(spec, &params);
    let mut filter = Document::new();
    if let Some(status) = list.filter_value("status") {
        filter.insert("status", status);
    }
    if let Some(pattern) = list.search_pattern() {
        filter.insert(
            "$or",
            ["number", "email", "name"]
                .iter()
                .map(|field| Bson::Document(doc! { *field: pattern.clone() }))
                .collect::<Vec<_>>(),
        );
    }
    let orders = list
        .load(&orders::collection(&state.db), filter, None)
        .await?;
    render(&OrderListPage {
        layout: Layout::admin(&req),
        list,
        orders,
    })
}

/// The order at `number` in an address (exactly as the shop writes numbers).
async fn existing(state: &AppState, number: &str) -> Result<Order, AppError> {
    let number = OrderNumber::parse_exact(number).map_err(|_| AppError::NotFound)?;
    orders::by_number(&state.db, &number)
        .await?
        .ok_or(AppError::NotFound)
}

/// `GET /admin/orders/{number}`
pub(crate) async fn show(
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

/// `GET /admin/orders/{number}/cancel`: what cancelling would do (units back in stock, the
/// refund left to the payment provider), with the confirming form.
pub(crate) async fn confirm_cancel(
    req: HttpRequest,
    state: web::Data<AppState>,
    number: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let order = existing(&state, &number).await?;
    render(&CancelOrderPage {
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
pub(crate) async fn mark_shipped(
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
        let now = existing(&state, order.number.as_str()).await?;
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
pub(crate) async fn cancel(
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
        let now = existing(&state, order.number.as_str()).await?;
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

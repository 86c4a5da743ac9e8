//! Admin carts: how many carts are in each state, the newest carts of one state, and running the
//! expiry and cleanup jobs now instead of waiting for their next scheduled run.

use std::collections::HashMap;

use actix_session::SessionExt;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use bson::doc;

use crate::admin::changelist::{ChangeList, Column, Filter, ListSpec, SortKey};
use crate::cart::{self, Cart, CartStatus};
use crate::jobs;
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{render, Layout};
use crate::web::see_other;

/// Sort keys of the carts list (`changed` is served by the `status, last_modified` index).
const SORTS: &[SortKey] = &[
    SortKey {
        key: "changed",
        field: "last_modified",
    },
    SortKey {
        key: "cart",
        field: "_id",
    },
];

/// One state with its number of carts, for the tabs.
pub(crate) struct StatusCount {
    pub(crate) status: CartStatus,
    pub(crate) count: u64,
}

/// One cart as the list shows it.
pub(crate) struct CartRow {
    pub(crate) id: String,
    pub(crate) short_id: String,
    pub(crate) lines: usize,
    pub(crate) units: i64,
    pub(crate) subtotal: String,
    pub(crate) last_modified: String,
}

impl CartRow {
    fn from_cart(cart: &Cart) -> CartRow {
        CartRow {
            id: cart.id.to_string(),
            // Eight hex digits tell carts apart on one screen; the full id is in the title.
            short_id: cart.id.as_str().chars().take(8).collect(),
            lines: cart.items.len(),
            units: cart.item_count(),
            subtotal: cart.subtotal(),
            last_modified: {
                let zone = crate::db::site::time_zone();
                format!(
                    "{} {}",
                    zone.format(cart.last_modified, "%-d %b %Y, %H:%M:%S"),
                    zone.abbreviation(cart.last_modified)
                )
            },
        }
    }
}

#[derive(Template)]
#[template(path = "admin/carts.html")]
pub(crate) struct CartsPage {
    pub(crate) layout: Layout,
    pub(crate) selected: CartStatus,
    pub(crate) list: ChangeList,
    pub(crate) counts: Vec<StatusCount>,
    pub(crate) carts: Vec<CartRow>,
    pub(crate) expire_after: String,
    pub(crate) cleanup_after: String,
}

fn duration_words(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    if secs >= 60 && secs.is_multiple_of(60) {
        plural(secs / 60, "minute", "minutes")
    } else {
        plural(secs, "second", "seconds")
    }
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `GET /admin/carts?status=&sort=&page=`: an unknown status shows the active carts.
pub(crate) async fn index(
    req: HttpRequest,
    state: web::Data<AppState>,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let statuses: Vec<(&str, &str)> = CartStatus::ALL
        .iter()
        .map(|s| (s.as_str(), s.as_str()))
        .collect();
    let spec = ListSpec {
        path: "/admin/carts",
        columns: vec![
            Column::sorted("Cart", "cart"),
            Column::plain_number("Items"),
            Column::plain_number("Units"),
            Column::plain_number("Subtotal"),
            Column::sorted("Last modified", "changed"),
        ],
        sorts: SORTS,
        default_sort: "-changed",
        filters: vec![
            Filter::fixed("status", "Status", &statuses).with_default(CartStatus::Active.as_str())
        ],
        search_label: None,
    };
    let mut list = ChangeList::parse(spec, &params);
    let selected = list
        .filter_value("status")
        .and_then(CartStatus::parse)
        .unwrap_or(CartStatus::Active);
    let mut counts = Vec::with_capacity(CartStatus::ALL.len());
    for status in CartStatus::ALL {
        let count = cart::count_by_status(&state.db, status).await?;
        counts.push(StatusCount { status, count });
    }
    let carts = list
        .load(
            &cart::collection(&state.db),
            doc! { "status": selected.as_str() },
            None,
        )
        .await?
        .iter()
        .map(CartRow::from_cart)
        .collect();
    render(&CartsPage {
        layout: Layout::admin(&req),
        selected,
        list,
        counts,
        carts,
        expire_after: duration_words(state.cart.expire_after),
        cleanup_after: duration_words(state.cart.cleanup_after),
    })
}

/// `POST /admin/carts/expire`: run cart expiry now.
pub(crate) async fn expire_now(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let report = jobs::expire_idle_carts(&state.db, state.cart.expire_after).await?;
    flash::push(
        &req.get_session(),
        Level::Success,
        format!(
            "Expiry ran: {} expired, {} returned to stock.",
            plural(report.carts_expired, "idle cart", "idle carts"),
            plural(report.reservations_returned, "reservation", "reservations"),
        ),
    );
    Ok(see_other("/admin/carts"))
}

/// `POST /admin/carts/cleanup`: run the stale-reservation cleanup now.
pub(crate) async fn clean_up_now(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let report = jobs::clean_up_reservations(&state.db, state.cart.cleanup_after).await?;
    flash::push(
        &req.get_session(),
        Level::Success,
        format!(
            "Cleanup ran: {} of carts in use refreshed, {} returned to stock, {} counted as \
             sold.",
            plural(report.refreshed, "reservation", "reservations"),
            report.returned,
            report.sold,
        ),
    );
    Ok(see_other("/admin/carts"))
}

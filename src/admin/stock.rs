//! Admin stock levels: for every product what is on sale, reserved in carts, sold and received,
//! fewest available first, with low stock flagged.

use std::collections::HashMap;

use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::catalog::products::{self, StockLevel, LOW_STOCK};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::layout::{render, Layout};

#[derive(Template)]
#[template(path = "admin/stock.html")]
pub struct StockPage {
    pub layout: Layout,
    pub low_only: bool,
    pub levels: Vec<StockLevel>,
    pub low_count: usize,
}

impl StockPage {
    pub fn threshold(&self) -> i64 {
        LOW_STOCK
    }
}

/// `GET /admin/stock?low=1`: any non-empty `low` shows only low stock.
pub async fn index(
    req: HttpRequest,
    state: web::Data<AppState>,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let low_only = params.get("low").is_some_and(|v| !v.is_empty() && v != "0");
    let levels = products::stock_levels(&state.db, low_only).await?;
    let low_count = levels.iter().filter(|l| l.is_low()).count();
    render(&StockPage {
        layout: Layout::admin(&req),
        low_only,
        levels,
        low_count,
    })
}

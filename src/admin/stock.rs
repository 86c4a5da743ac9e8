//! Admin stock levels: for every product what is on sale, reserved in carts, sold and received,
//! fewest available first, with low stock flagged; paged, sortable, filtered by stock level,
//! type and status, and searched by title or SKU.

use std::collections::HashMap;

use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use bson::oid::ObjectId;
use bson::{doc, Bson, Document};
use serde::Deserialize;

use crate::admin::changelist::{ChangeList, Column, Filter, ListSpec, SortKey};
use crate::catalog::admin_search::{stock_condition, STOCK_LEVELS};
use crate::catalog::lifecycle::{self, ProductStatus};
use crate::catalog::products::{self, ProductType, StockLevel, LOW_STOCK};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::layout::{render, Layout};

/// Sort keys of the stock list (`available` and `title` lead indexes).
const SORTS: &[SortKey] = &[
    SortKey {
        key: "available",
        field: "qty",
    },
    SortKey {
        key: "title",
        field: "search_title",
    },
    SortKey {
        key: "sku",
        field: "sku",
    },
    SortKey {
        key: "sold",
        field: "sold",
    },
];

/// One product's row: its stock position and where to edit it.
#[derive(Debug, Deserialize)]
pub(crate) struct StockRow {
    #[serde(rename = "_id")]
    pub(crate) id: ObjectId,
    #[serde(flatten)]
    pub(crate) level: StockLevel,
}

#[derive(Template)]
#[template(path = "admin/stock.html")]
pub(crate) struct StockPage {
    pub(crate) layout: Layout,
    pub(crate) list: ChangeList,
    pub(crate) rows: Vec<StockRow>,
    /// Products at or below the low-stock threshold, whatever the filters.
    pub(crate) low_count: u64,
}

impl StockPage {
    pub(crate) fn threshold(&self) -> i64 {
        LOW_STOCK
    }
}

/// `GET /admin/stock?stock=low&type=&status=&q=&sort=&page=`; the older `low=1` means
/// `stock=low`.
pub(crate) async fn index(
    req: HttpRequest,
    state: web::Data<AppState>,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let mut params = params.into_inner();
    if params.get("low").is_some_and(|v| !v.is_empty() && v != "0") {
        params
            .entry("stock".to_string())
            .or_insert_with(|| "low".to_string());
    }
    let type_options: Vec<(&str, &str)> = ProductType::ALL
        .iter()
        .map(|t| (t.as_str(), t.label()))
        .collect();
    let status_options: Vec<(&str, &str)> = ProductStatus::ALL
        .iter()
        .map(|s| (s.as_str(), s.label()))
        .collect();
    let spec = ListSpec {
        path: "/admin/stock",
        columns: vec![
            Column::sorted("SKU", "sku"),
            Column::sorted("Title", "title"),
            Column::number("Available", "available"),
            Column::plain_number("Reserved in carts"),
            Column::number("Sold", "sold"),
            Column::plain_number("Received"),
        ],
        sorts: SORTS,
        default_sort: "available",
        filters: vec![
            Filter::fixed("stock", "Stock", STOCK_LEVELS),
            Filter::fixed("type", "Type", &type_options),
            Filter::fixed("status", "Status", &status_options),
        ],
        search_label: Some("Title or SKU contains"),
    };
    let mut list = ChangeList::parse(spec, &params);
    let mut filter = Document::new();
    if let Some(qty) = list.filter_value("stock").and_then(stock_condition) {
        filter.insert("qty", qty);
    }
    if let Some(kind) = list.filter_value("type") {
        filter.insert("type", kind);
    }
    if let Some(status) = list.filter_value("status").and_then(ProductStatus::parse) {
        filter.extend(lifecycle::with_status(status));
    }
    if let Some(pattern) = list.search_pattern() {
        filter.insert(
            "$or",
            vec![
                Bson::Document(doc! { "search_title": pattern.clone() }),
                Bson::Document(doc! { "sku": pattern }),
            ],
        );
    }
    let mut projection = products::stock_levels_projection();
    projection.insert("_id", 1);
    let collection = state.db.collection::<StockRow>(products::COLLECTION);
    let rows = list.load(&collection, filter, Some(projection)).await?;
    let low_count = collection
        .count_documents(doc! { "qty": { "$lte": LOW_STOCK } })
        .await
        .map_err(crate::db::DbError::from)?;
    render(&StockPage {
        layout: Layout::admin(&req),
        list,
        rows,
        low_count,
    })
}

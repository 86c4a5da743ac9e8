//! Admin → Products, the list: every product in pages, sortable by title, SKU, price, stock
//! or last change, filtered by type, category (with its subcategories), status and stock
//! level, and searched by any part of the title or SKU.

use std::collections::HashMap;

use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use bson::oid::ObjectId;
use bson::{doc, Bson, Document};

use crate::admin::changelist::{ChangeList, Column, Filter, ListSpec, SortKey};
use crate::catalog::categories;
use crate::catalog::lifecycle::{self, ProductStatus};
use crate::catalog::products::{self, Product, ProductType, LOW_STOCK};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::layout::{render, Layout};

/// Sort keys of the product list; each field but `updated` and `type` leads an index.
const SORTS: &[SortKey] = &[
    SortKey {
        key: "title",
        field: "search_title",
    },
    SortKey {
        key: "sku",
        field: "sku",
    },
    SortKey {
        key: "price",
        field: "pricing.retail",
    },
    SortKey {
        key: "stock",
        field: "qty",
    },
    SortKey {
        key: "type",
        field: "type",
    },
    SortKey {
        key: "updated",
        field: "updated",
    },
];

#[derive(Template)]
#[template(path = "admin/products/list.html")]
pub struct ProductListPage {
    pub layout: Layout,
    pub list: ChangeList,
    pub products: Vec<Product>,
    /// No title or SKU contains the search, so these are the site search's full-text matches
    /// (people, genres, descriptions).
    pub full_text: bool,
}

impl ProductListPage {
    pub fn types(&self) -> [ProductType; 3] {
        ProductType::ALL
    }
}

/// The stock-level filter's choices: sold out, low (at most [`LOW_STOCK`], sold out
/// included, as the stock screen flags them), plenty.
pub const STOCK_LEVELS: &[(&str, &str)] = &[
    ("out", "Sold out"),
    ("low", "Low (3 or fewer)"),
    ("in", "More than 3"),
];

/// The `qty` condition of a stock-level filter value.
pub fn stock_condition(level: &str) -> Option<Document> {
    match level {
        "out" => Some(doc! { "$lte": 0 }),
        "low" => Some(doc! { "$lte": LOW_STOCK }),
        "in" => Some(doc! { "$gt": LOW_STOCK }),
        _ => None,
    }
}

/// `GET /admin/products?q=&type=&category=&status=&stock=&sort=&page=`
pub async fn index(
    req: HttpRequest,
    state: web::Data<AppState>,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let tree = categories::tree_order(categories::all(&state.db).await?);
    let category_options = tree
        .iter()
        .map(|e| (e.category.id.to_hex(), e.category.path_label()))
        .collect();
    let type_options: Vec<(&str, &str)> = ProductType::ALL
        .iter()
        .map(|t| (t.as_str(), t.label()))
        .collect();
    let status_options: Vec<(&str, &str)> = ProductStatus::ALL
        .iter()
        .map(|s| (s.as_str(), s.label()))
        .collect();
    let spec = ListSpec {
        path: "/admin/products",
        columns: vec![
            Column::plain("Photo"),
            Column::sorted("Title", "title"),
            Column::sorted("Type", "type"),
            Column::sorted("SKU", "sku"),
            Column::number("Price", "price"),
            Column::number("Available", "stock"),
            Column::plain("Status"),
            Column::sorted("Changed", "updated"),
        ],
        sorts: SORTS,
        default_sort: "title",
        filters: vec![
            Filter::fixed("type", "Type", &type_options),
            Filter::new("category", "Category", category_options),
            Filter::fixed("status", "Status", &status_options),
            Filter::fixed("stock", "Stock", STOCK_LEVELS),
        ],
        search_label: Some("Title or SKU contains"),
    };
    let mut list = ChangeList::parse(spec, &params);
    let mut filter = Document::new();
    if let Some(kind) = list.filter_value("type") {
        filter.insert("type", kind);
    }
    if let Some(id) = list
        .filter_value("category")
        .and_then(|c| ObjectId::parse_str(c).ok())
    {
        // The category and everything below it.
        filter.insert("category_path", id);
    }
    if let Some(status) = list.filter_value("status").and_then(ProductStatus::parse) {
        filter.extend(lifecycle::with_status(status));
    }
    if let Some(qty) = list.filter_value("stock").and_then(stock_condition) {
        filter.insert("qty", qty);
    }
    let narrowed = filter.clone();
    if let Some(pattern) = list.search_pattern() {
        filter.insert(
            "$or",
            vec![
                Bson::Document(doc! { "search_title": pattern.clone() }),
                Bson::Document(doc! { "sku": pattern }),
            ],
        );
    }
    let collection = products::collection(&state.db);
    let mut products = list.load(&collection, filter, None).await?;
    let mut full_text = false;
    if products.is_empty() && !list.search.is_empty() {
        // Nothing in a title or SKU: try the site search's full-text index, same filters.
        let mut text = narrowed;
        text.extend(crate::search::text_filter(&list.search));
        products = list.load(&collection, text, None).await?;
        full_text = !products.is_empty();
    }
    render(&ProductListPage {
        layout: Layout::admin(&req),
        list,
        products,
        full_text,
    })
}

//! Admin → Products, the list: every product in pages, sortable by title, SKU, price, stock
//! or last change, filtered by type, category (with its subcategories), status and stock
//! level, and searched by any part of the title or SKU. The queries are the catalog's
//! ([`crate::catalog::admin_search`]); this module pages and renders them.

use std::collections::HashMap;

use crate::admin::changelist::{ChangeList, Column, Filter, ListSpec, SortKey};
use crate::catalog::admin_search::{AdminProductSearch, STOCK_LEVELS};
use crate::catalog::categories;
use crate::catalog::lifecycle::ProductStatus;
use crate::catalog::products::{self, Product, ProductType};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::layout::{render, Layout};
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

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
pub(crate) struct ProductListPage {
    pub(crate) layout: Layout,
    pub(crate) list: ChangeList,
    pub(crate) products: Vec<Product>,
    /// No title or SKU contains the search, so these are the site search's full-text matches
    /// (people, genres, descriptions).
    pub(crate) full_text: bool,
}

impl ProductListPage {
    pub(crate) fn types(&self) -> [ProductType; 3] {
        ProductType::ALL
    }
}

/// `GET /admin/products?q=&type=&category=&status=&stock=&sort=&page=`
pub(crate) async fn index(
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
    let search = AdminProductSearch {
        kind: list.filter_value("type"),
        category: list.filter_value("category"),
        status: list.filter_value("status"),
        stock: list.filter_value("stock"),
        search: &list.search,
    };
    let attempts = search.attempts();
    let collection = products::collection(&state.db);
    let mut products = Vec::new();
    let mut full_text = false;
    for attempt in attempts {
        products = list.load(&collection, attempt.filter, None).await?;
        if !products.is_empty() {
            full_text = attempt.full_text;
            break;
        }
    }
    render(&ProductListPage {
        layout: Layout::admin(&req),
        list,
        products,
        full_text,
    })
}

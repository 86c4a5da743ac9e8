//! Admin customers: the list of customer accounts (searched by email or comment name; orders,
//! total spent and last seen per row), each customer's page with their addresses, orders and
//! comments, and the two support actions of a privacy request — download the customer's data
//! (the same JSON file as their own "download my data") and anonymise them (the same erasure
//! as their own "delete my account", after a confirmation page). Both are POSTs under the
//! admin's CSRF check.

use std::collections::HashMap;

use actix_session::SessionExt;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use bson::oid::ObjectId;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use serde::Deserialize;

use crate::accounts::{privacy, privacy_pages, store as accounts_store, Account};
use crate::admin::changelist::{ChangeList, Column, ListSpec, SortKey};
use crate::checkout::orders::{self, Order, OrderStatus};
use crate::comments::Comment;
use crate::db::{site, DbError};
use crate::domain::Money;
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{render, Layout};
use crate::web::see_other;

/// Orders a customer's page lists (the newest).
const ORDERS_SHOWN: i64 = 100;

const SORTS: &[SortKey] = &[
    SortKey {
        key: "seen",
        field: "last_seen",
    },
    SortKey {
        key: "email",
        field: "email",
    },
    SortKey {
        key: "since",
        field: "created",
    },
];

/// One account as the list shows it.
pub(crate) struct CustomerRow {
    pub(crate) id: String,
    pub(crate) email: String,
    pub(crate) name: String,
    pub(crate) orders: u64,
    pub(crate) spent: String,
    pub(crate) last_seen: String,
}

fn when(date: bson::DateTime) -> String {
    date.to_chrono().format("%-d %b %Y, %H:%M UTC").to_string()
}

#[derive(Template)]
#[template(path = "admin/customers.html")]
pub(crate) struct CustomerListPage {
    pub(crate) layout: Layout,
    pub(crate) list: ChangeList,
    pub(crate) customers: Vec<CustomerRow>,
}

#[derive(Deserialize)]
struct OrderSum {
    account_id: ObjectId,
    total: Money,
    status: OrderStatus,
}

/// `GET /admin/customers?q=&sort=&page=`: `q` finds any part of the email or comment name,
/// ignoring case. Orders and total spent (cancelled orders left out) come from one query over
/// the page's accounts' orders.
pub(crate) async fn index(
    req: HttpRequest,
    state: web::Data<AppState>,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let spec = ListSpec {
        path: "/admin/customers",
        columns: vec![
            Column::sorted("Email", "email"),
            Column::plain("Comment name"),
            Column::plain_number("Orders"),
            Column::plain_number("Total spent"),
            Column::sorted("Last seen", "seen"),
        ],
        sorts: SORTS,
        default_sort: "-seen",
        filters: vec![],
        search_label: Some("Email or name contains"),
    };
    let mut list = ChangeList::parse(spec, &params);
    let mut filter = Document::new();
    if let Some(pattern) = list.search_pattern() {
        filter.insert(
            "$or",
            ["email", "display_name"]
                .iter()
                .map(|field| Bson::Document(doc! { *field: pattern.clone() }))
                .collect::<Vec<_>>(),
        );
    }
    let accounts = list
        .load(&accounts_store::collection(&state.db), filter, None)
        .await?;
    let ids: Vec<ObjectId> = accounts.iter().map(|a| a.id).collect();
    let sums: Vec<OrderSum> = state
        .db
        .collection::<OrderSum>(orders::COLLECTION)
        .find(doc! { "account_id": { "$in": ids } })
        .projection(doc! { "account_id": 1, "total": 1, "status": 1 })
        .await
        .map_err(DbError::from)?
        .try_collect()
        .await
        .map_err(DbError::from)?;
    let currency = site::currency();
    let customers = accounts
        .iter()
        .map(|a| {
            let mine = sums.iter().filter(|s| s.account_id == a.id);
            let spent: Money = mine
                .clone()
                .filter(|s| s.status != OrderStatus::Cancelled)
                .map(|s| s.total)
                .sum();
            CustomerRow {
                id: a.id.to_hex(),
                email: a.email.as_str().to_string(),
                name: a.display_name.clone().unwrap_or_default(),
                orders: mine.count() as u64,
                spent: spent.display(&currency),
                last_seen: when(a.last_seen),
            }
        })
        .collect();
    render(&CustomerListPage {
        layout: Layout::admin(&req),
        list,
        customers,
    })
}

#[derive(Template)]
#[template(path = "admin/customer.html")]
pub(crate) struct CustomerPage {
    pub(crate) layout: Layout,
    pub(crate) account: Account,
    pub(crate) last_seen: String,
    pub(crate) orders: Vec<Order>,
    pub(crate) comments: Vec<Comment>,
}

async fn account_of(state: &AppState, id: &str) -> Result<Account, AppError> {
    let id = ObjectId::parse_str(id).map_err(|_| AppError::NotFound)?;
    accounts_store::find_by_id(&state.db, id)
        .await?
        .ok_or(AppError::NotFound)
}

/// `GET /admin/customers/{id}`
pub(crate) async fn show(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let account = account_of(&state, &id).await?;
    let orders = orders::for_account(&state.db, account.id, ORDERS_SHOWN).await?;
    let comments = privacy::comments_of(&state.db, &account).await?;
    render(&CustomerPage {
        layout: Layout::admin(&req),
        last_seen: when(account.last_seen),
        account,
        orders,
        comments,
    })
}

/// `POST /admin/customers/{id}/export`: the customer's data file, for a support request.
pub(crate) async fn export(
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let account = account_of(&state, &id).await?;
    let data = privacy::export(&state.db, &account).await?;
    Ok(privacy_pages::download(&data))
}

#[derive(Template)]
#[template(path = "admin/customer_anonymise.html")]
pub(crate) struct AnonymisePage {
    pub(crate) layout: Layout,
    pub(crate) account: Account,
    pub(crate) orders: u64,
    pub(crate) placeholder: &'static str,
}

/// `GET /admin/customers/{id}/anonymise`: what the erasure removes and keeps.
pub(crate) async fn confirm_anonymise(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let account = account_of(&state, &id).await?;
    let orders = orders::collection(&state.db)
        .count_documents(doc! { "account_id": account.id })
        .await
        .map_err(DbError::from)?;
    render(&AnonymisePage {
        layout: Layout::admin(&req),
        account,
        orders,
        placeholder: privacy::PLACEHOLDER,
    })
}

/// `POST /admin/customers/{id}/anonymise`
pub(crate) async fn anonymise(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let account = account_of(&state, &id).await?;
    let erased = privacy::erase(&state.db, &account).await?;
    flash::push(
        &req.get_session(),
        Level::Success,
        format!(
            "{} is deleted: {} and {} anonymised.",
            account.email,
            plural(erased.orders_anonymised, "order", "orders"),
            plural(erased.comments_anonymised, "comment", "comments"),
        ),
    );
    Ok(see_other("/admin/customers"))
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

//! The admin dashboard: what a shop owner looks at first. Sales today and over the last seven
//! days, orders waiting to ship, low stock, recent orders and comments, and today's traffic.
//! Database facts and demo data live on the System page (`admin::system`).

use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::admin::analytics::{day_url, Chart};
use crate::admin::comments::{newest_with_links, ModeratedComment};
use crate::analytics::report::{self, PageCount};
use crate::analytics::sales::{self, DaySales};
use crate::analytics::svg::{Bar, BarChart};
use crate::analytics::Day;
use crate::catalog::products::{self, StockLevel, LOW_STOCK};
use crate::checkout::orders::{self, Order, OrderStatus};
use crate::db::site;
use crate::domain::{Currency, Money};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::layout::{render, Layout};

/// Comments listed on the dashboard.
const RECENT_COMMENTS: i64 = 5;
/// Orders listed on the dashboard.
const RECENT_ORDERS: i64 = 5;
/// Low-stock products listed (the Stock screen has them all).
const LOW_STOCK_LISTED: usize = 8;
/// Pages listed under today's traffic.
const TOP_PAGES: i64 = 5;
/// Days in the sales chart, today included.
const SALES_DAYS: u32 = 7;

#[derive(Template)]
#[template(path = "admin/dashboard.html")]
pub(crate) struct DashboardPage {
    pub(crate) layout: Layout,
    pub(crate) admin_user: String,
    pub(crate) today: DaySales,
    /// The last seven days, today included: orders and takings.
    pub(crate) week_orders: u64,
    pub(crate) week_total: Money,
    pub(crate) sales_chart: Chart,
    /// Paid orders not yet shipped.
    pub(crate) to_ship: u64,
    pub(crate) low_stock: Vec<StockLevel>,
    pub(crate) low_stock_count: usize,
    pub(crate) recent_orders: Vec<Order>,
    /// The newest comments across the site, linked to where they are.
    pub(crate) recent_comments: Vec<ModeratedComment>,
    pub(crate) views_today: i64,
    pub(crate) top_pages: Vec<PageCount>,
    /// The titles of the top pages that have one.
    pub(crate) page_titles: std::collections::HashMap<String, String>,
    pub(crate) traffic_url: String,
    /// The shop's currency, which the sales figures are shown in.
    pub(crate) currency: Currency,
}

impl DashboardPage {
    /// Sales figures (summed cents) in the shop's currency.
    pub(crate) fn money(&self, amount: &Money) -> String {
        amount.display(&self.currency)
    }

    pub(crate) fn low_stock_threshold(&self) -> i64 {
        LOW_STOCK
    }

    /// A top page's title, or its path when it has none.
    pub(crate) fn page_name<'a>(&'a self, path: &'a str) -> &'a str {
        self.page_titles.get(path).map_or(path, String::as_str)
    }

    pub(crate) fn page_report(&self, path: &str) -> String {
        day_url(self.today.day, Some(path), None)
    }
}

pub(crate) async fn show(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let db = &state.db;
    let day = Day::of(state.db.now());
    let week = sales::daily_sales(db, day, SALES_DAYS).await?;
    let today = week.last().cloned().unwrap_or(DaySales {
        day,
        orders: 0,
        total: Money::ZERO,
    });
    let bars = week
        .iter()
        .map(|d| Bar {
            label: d.day.short(),
            value: d.total.cents(),
        })
        .collect();
    let mut chart = BarChart::new(
        "sales-by-day",
        "Sales over the last 7 days",
        "Day (UTC)",
        "Sales",
        bars,
    );
    chart.format = sales_in_request_currency;
    let low_stock = products::stock_levels(db, true).await?;
    let hourly = report::hourly(db, day, None).await?;
    let top_pages = report::top_pages_of_day(db, day, TOP_PAGES).await?;
    let page_titles =
        super::page_titles::of_paths(db, top_pages.iter().map(|p| p.path.as_str())).await?;
    render(&DashboardPage {
        layout: Layout::admin(&req),
        admin_user: state.admin_user.clone(),
        week_orders: week.iter().map(|d| d.orders).sum(),
        week_total: week.iter().map(|d| d.total).sum(),
        sales_chart: Chart::new(chart),
        today,
        to_ship: orders::count(db, Some(OrderStatus::Paid)).await?,
        low_stock_count: low_stock.len(),
        low_stock: low_stock.into_iter().take(LOW_STOCK_LISTED).collect(),
        recent_orders: orders::list(db, None, RECENT_ORDERS).await?,
        recent_comments: newest_with_links(db, None, None, RECENT_COMMENTS).await?,
        views_today: hourly.iter().sum(),
        top_pages,
        page_titles,
        traffic_url: day_url(day, None, None),
        currency: site::currency(),
    })
}

/// The sales chart's values: the chart takes a plain function, so this one reads the currency
/// of the request that renders the chart (the dashboard page).
fn sales_in_request_currency(cents: i64) -> String {
    Money::from_cents(cents).display(&site::currency())
}

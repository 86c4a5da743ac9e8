//! Sales by day from the orders themselves (paid or shipped; a cancelled order is no sale), for
//! the admin dashboard. Days are UTC, like the traffic reports.

use bson::{doc, DateTime, Document};
use futures::TryStreamExt;
use serde::Deserialize;

use super::Day;
use crate::checkout::orders::{self, OrderStatus};
use crate::db::{Db, DbError};
use crate::domain::Money;

/// One day's takings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DaySales {
    pub(crate) day: Day,
    pub(crate) orders: u64,
    /// Order totals (shipping included).
    pub(crate) total: Money,
}

/// Orders that count as sales placed from `since` on: served by the orders' `status, created`
/// index.
pub fn sales_query(since: DateTime) -> Document {
    doc! {
        "status": { "$in": [OrderStatus::Paid.as_str(), OrderStatus::Shipped.as_str()] },
        "created": { "$gte": since },
    }
}

#[derive(Deserialize)]
struct Sale {
    created: DateTime,
    total: Money,
}

/// Sales on each of the `days` days ending with `last` (oldest first; days without orders are
/// zero).
pub(crate) async fn daily_sales(db: &Db, last: Day, days: u32) -> Result<Vec<DaySales>, DbError> {
    let mut range = Vec::with_capacity(days as usize);
    let mut day = Some(last);
    for _ in 0..days.max(1) {
        let Some(d) = day else { break };
        range.push(DaySales {
            day: d,
            orders: 0,
            total: Money::ZERO,
        });
        day = d.previous();
    }
    range.reverse();
    let Some(first) = range.first().map(|d| d.day) else {
        return Ok(range);
    };
    let sales: Vec<Sale> = db
        .collection::<Sale>(orders::COLLECTION)
        .find(sales_query(first.start()))
        .projection(doc! { "_id": 0, "created": 1, "total": 1 })
        .await?
        .try_collect()
        .await?;
    for sale in sales {
        let day = Day::from_date(sale.created.to_chrono().date_naive());
        if let Some(slot) = range.iter_mut().find(|d| d.day == day) {
            slot.orders += 1;
            slot.total += sale.total;
        }
    }
    Ok(range)
}

//! Reading the pre-aggregated reports: a day's views by hour and by minute, a month's by day,
//! for one page or the whole site, and the most viewed pages. Every query is served by one of
//! the indexes in [`super::indexes`]; a period without documents reads as zeros.

use bson::{doc, Bson, Document};
use futures::TryStreamExt;

use super::{Day, Month, DAILY, MONTHLY};
use crate::db::{Db, DbError};

/// The field daily documents are ranked by (a day's views of the page).
pub(crate) const RANK_FIELD: &str = "daily";
/// The field monthly documents are ranked by (a month's views of the page).
pub(crate) const MONTH_RANK_FIELD: &str = "total";

/// A page and how often it was viewed in a period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageCount {
    pub path: String,
    pub views: i64,
}

/// Every page's daily document for `day`, most viewed first: site totals and top pages.
pub fn day_pages_query(day: Day) -> (Document, Document) {
    (
        doc! { "metadata.date": day.start() },
        doc! { RANK_FIELD: -1 },
    )
}

/// One page's daily document for `day`.
pub fn page_day_query(day: Day, path: &str) -> Document {
    doc! { "metadata.path": path, "metadata.date": day.start() }
}

/// Every page's monthly document for `month`, most viewed first.
pub fn month_pages_query(month: Month) -> (Document, Document) {
    (
        doc! { "metadata.date": month.start() },
        doc! { MONTH_RANK_FIELD: -1 },
    )
}

/// One page's monthly document for `month`.
pub fn page_month_query(month: Month, path: &str) -> Document {
    doc! { "metadata.path": path, "metadata.date": month.start() }
}

/// A stored counter as a number; missing (never incremented) is zero.
fn count(value: Option<&Bson>) -> i64 {
    match value {
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Double(n)) => *n as i64,
        _ => 0,
    }
}

/// The documents of one day (or month) in `collection`: one page's, or every page's.
async fn documents(
    db: &Db,
    collection: &str,
    filter: Document,
    projection: Document,
) -> Result<Vec<Document>, DbError> {
    Ok(db
        .collection::<Document>(collection)
        .find(filter)
        .projection(projection)
        .await?
        .try_collect()
        .await?)
}

fn day_filter(day: Day, path: Option<&str>) -> Document {
    match path {
        Some(path) => page_day_query(day, path),
        None => day_pages_query(day).0,
    }
}

/// Views in each hour (UTC) of `day`, of `path` or of the whole site.
pub async fn hourly(db: &Db, day: Day, path: Option<&str>) -> Result<[i64; 24], DbError> {
    let docs = documents(db, DAILY, day_filter(day, path), doc! { "hourly": 1 }).await?;
    let mut hours = [0; 24];
    for d in &docs {
        let Ok(hourly) = d.get_document("hourly") else {
            continue;
        };
        for (hour, slot) in hours.iter_mut().enumerate() {
            *slot += count(hourly.get(hour.to_string()));
        }
    }
    Ok(hours)
}

/// Views in each minute of `hour` (0–23, UTC) of `day`, of `path` or of the whole site.
pub async fn minutes(
    db: &Db,
    day: Day,
    hour: u32,
    path: Option<&str>,
) -> Result<[i64; 60], DbError> {
    let field = format!("minute.{hour}");
    let docs = documents(db, DAILY, day_filter(day, path), doc! { &field: 1 }).await?;
    let mut minutes = [0; 60];
    for d in &docs {
        let Ok(by_minute) = d
            .get_document("minute")
            .and_then(|m| m.get_document(hour.to_string()))
        else {
            continue;
        };
        for (minute, slot) in minutes.iter_mut().enumerate() {
            *slot += count(by_minute.get(minute.to_string()));
        }
    }
    Ok(minutes)
}

/// Views on each day of `month` (index 0 is the 1st), of `path` or of the whole site.
pub async fn daily(db: &Db, month: Month, path: Option<&str>) -> Result<Vec<i64>, DbError> {
    let filter = match path {
        Some(path) => page_month_query(month, path),
        None => month_pages_query(month).0,
    };
    let docs = documents(db, MONTHLY, filter, doc! { "daily": 1 }).await?;
    let mut days = vec![0; month.days() as usize];
    for d in &docs {
        let Ok(by_day) = d.get_document("daily") else {
            continue;
        };
        for (i, slot) in days.iter_mut().enumerate() {
            *slot += count(by_day.get((i + 1).to_string()));
        }
    }
    Ok(days)
}

/// The `limit` most viewed pages of `day`.
pub(crate) async fn top_pages_of_day(
    db: &Db,
    day: Day,
    limit: i64,
) -> Result<Vec<PageCount>, DbError> {
    let (filter, sort) = day_pages_query(day);
    top_pages(db, DAILY, filter, sort, RANK_FIELD, limit).await
}

/// The `limit` most viewed pages of `month`.
pub async fn top_pages_of_month(
    db: &Db,
    month: Month,
    limit: i64,
) -> Result<Vec<PageCount>, DbError> {
    let (filter, sort) = month_pages_query(month);
    top_pages(db, MONTHLY, filter, sort, MONTH_RANK_FIELD, limit).await
}

async fn top_pages(
    db: &Db,
    collection: &str,
    filter: Document,
    sort: Document,
    field: &str,
    limit: i64,
) -> Result<Vec<PageCount>, DbError> {
    let docs: Vec<Document> = db
        .collection::<Document>(collection)
        .find(filter)
        .sort(sort)
        .limit(limit)
        .projection(doc! { "_id": 0, "metadata.path": 1, field: 1 })
        .await?
        .try_collect()
        .await?;
    Ok(docs
        .iter()
        .filter_map(|d| {
            let path = d.get_document("metadata").ok()?.get_str("path").ok()?;
            Some(PageCount {
                path: path.to_string(),
                views: count(d.get(field)),
            })
        })
        .collect())
}

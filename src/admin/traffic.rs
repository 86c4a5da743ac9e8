//! Admin → Analytics → Traffic: visitors and page views over a chosen range (by hour, day, week
//! or month, chosen by its length), sources, top pages, devices and browsers, searches, the
//! product funnel and the slowest pages, each table also as CSV. Read from the traffic log
//! (`analytics::rolled`): the roll-ups for the complete days (and hours) of the range, the
//! events only for what is not rolled up yet, so a report costs the same at any traffic.
//! Charts are inline SVG with their numbers as tables.

use std::collections::HashMap;

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::admin::analytics::Chart;
use crate::analytics::dimensions::Dim;
use crate::analytics::events::{EventLog, LogStats};
use crate::analytics::rolled;
use crate::analytics::rollup::Level;
use crate::analytics::svg::{Bar, BarChart};
use crate::analytics::traffic::{self, Range, Row};
use crate::analytics::Day;
use crate::db::Db;
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::layout::{render, Layout};

/// Rows of each ranked table.
const TOP: i64 = 20;
/// Views a page template needs in the range to be ranked by its response time.
const MIN_VIEWS_FOR_TIMING: i64 = 5;

/// One table of the report, as shown and as exported.
pub(crate) struct Table {
    /// Also the `table` parameter of its CSV export.
    pub(crate) id: &'static str,
    pub(crate) title: String,
    pub(crate) columns: Vec<&'static str>,
    pub(crate) rows: Vec<Vec<String>>,
    pub(crate) csv_url: String,
    /// Said when there are no rows.
    pub(crate) empty: &'static str,
}

#[derive(Template)]
#[template(path = "admin/analytics/traffic.html")]
pub(crate) struct TrafficPage {
    pub(crate) layout: Layout,
    pub(crate) from: Day,
    pub(crate) to: Day,
    pub(crate) views: i64,
    pub(crate) visitors: u64,
    /// How the numbers were read, for the page to say.
    pub(crate) source_note: String,
    pub(crate) views_chart: Chart,
    pub(crate) visitors_chart: Chart,
    pub(crate) tables: Vec<Table>,
    /// This instance's traffic log since it started (`None`: the log is off).
    pub(crate) queue: Option<LogStats>,
}

/// The range asked for: `from` and `to` (`YYYY-MM-DD`), by default the last seven days.
fn parse_range(query: &HashMap<String, String>, today: Day) -> Result<Range, AppError> {
    let day = |name: &str| -> Result<Option<Day>, AppError> {
        match query.get(name).map(|v| v.trim()).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(s) => Day::parse(s).map(Some).ok_or_else(|| {
                AppError::BadRequest(format!(
                    "{s:?} is not a date. Write the day as YYYY-MM-DD, for example 2026-11-21."
                ))
            }),
        }
    };
    let to = day("to")?.unwrap_or(today);
    let from = match day("from")? {
        Some(from) => from,
        None => Day::from_date(to.date() - chrono::Duration::days(6)),
    };
    Range::new(from, to).ok_or_else(|| {
        AppError::BadRequest("The range must end on or after its start, within ten years.".into())
    })
}

fn period_label(at: bson::DateTime, level: Level) -> String {
    let t = at.to_chrono();
    match level {
        Level::Hour => t.format("%a %-d %H:00").to_string(),
        Level::Day => t.format("%a %-d %b").to_string(),
        Level::Week => t.format("Week of %-d %b %Y").to_string(),
        Level::Month => t.format("%B %Y").to_string(),
    }
}

fn url(path: &str, range: Range, table: Option<&str>) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.append_pair("from", &range.from.iso());
    query.append_pair("to", &range.to.iso());
    if let Some(table) = table {
        query.append_pair("table", table);
    }
    format!("{path}?{}", query.finish())
}

fn ranked(rows: Vec<Row>, name: impl Fn(&str) -> String) -> Vec<Vec<String>> {
    rows.into_iter()
        .map(|r| vec![name(&r.label), r.count.to_string(), r.visitors.to_string()])
        .collect()
}

/// Every table of the report for `range`.
/// The tables of page views broken down by one event field, in the report's order:
/// (table id, dimension, title, first column, what an empty table says).
const BREAKDOWNS: [(&str, Dim, &str, &str, &str); 5] = [
    (
        "referrers",
        Dim::Referrer,
        "Sources: referring sites",
        "Site",
        "No visits came from another site.",
    ),
    (
        "campaigns",
        Dim::UtmCampaign,
        "Sources: campaigns (utm_campaign)",
        "Campaign",
        "No visits carried a campaign.",
    ),
    (
        "utm_sources",
        Dim::UtmSource,
        "Sources: utm_source",
        "Source",
        "No visits carried a utm_source.",
    ),
    (
        "devices",
        Dim::Device,
        "Devices",
        "Device",
        "No page views in this range.",
    ),
    (
        "browsers",
        Dim::Browser,
        "Browsers",
        "Browser",
        "No page views in this range.",
    ),
];

/// The search tables: (table id, title, dimension, empty message).
const SEARCHES: [(&str, &str, Dim, &str); 2] = [
    (
        "searches",
        "Top searches",
        Dim::Search,
        "Nobody searched in this range.",
    ),
    (
        "no_results",
        "Searches with no results",
        Dim::NoResults,
        "Every search found something.",
    ),
];

async fn tables(db: &Db, range: Range) -> Result<Vec<Table>, AppError> {
    let table = |id, title: &str, columns, rows, empty| Table {
        id,
        title: title.to_string(),
        columns,
        rows,
        csv_url: url("/admin/analytics/traffic.csv", range, Some(id)),
        empty,
    };
    let counted = vec!["Page views", "Visitors"];
    let pages = rolled::top(db, range, Dim::Path, TOP).await?;
    let titles = super::page_titles::of_paths(db, pages.iter().map(|p| p.label.as_str())).await?;
    let page_rows: Vec<Vec<String>> = pages
        .into_iter()
        .map(|p| {
            vec![
                titles
                    .get(&p.label)
                    .cloned()
                    .unwrap_or_else(|| p.label.clone()),
                p.label.clone(),
                p.count.to_string(),
                p.visitors.to_string(),
            ]
        })
        .collect();
    let plain = |s: &str| s.to_string();
    let mut tables = vec![table(
        "pages",
        "Top pages",
        vec!["Title", "Path", "Page views", "Visitors"],
        page_rows,
        "No page views in this range.",
    )];
    for (id, dim, title, column, empty) in BREAKDOWNS {
        let rows = ranked(rolled::top(db, range, dim, TOP).await?, plain);
        tables.push(table(
            id,
            title,
            [vec![column], counted.clone()].concat(),
            rows,
            empty,
        ));
    }
    for (id, title, dim, empty) in SEARCHES {
        let rows = ranked(rolled::top(db, range, dim, TOP).await?, plain);
        tables.push(table(
            id,
            title,
            vec!["Search", "Searches", "Visitors"],
            rows,
            empty,
        ));
    }
    let steps = rolled::funnel(db, range).await?;
    let first = steps.first().map_or(0, |s| s.visitors);
    let mut previous = first;
    let funnel_rows = steps
        .iter()
        .map(|s| {
            let row = vec![
                s.name.to_string(),
                s.visitors.to_string(),
                s.events.to_string(),
                traffic::rate(s.visitors, previous),
                traffic::rate(s.visitors, first),
            ];
            previous = s.visitors;
            row
        })
        .collect();
    tables.push(table(
        "funnel",
        "Product funnel",
        vec![
            "Step",
            "Visitors",
            "Events",
            "Of the step before",
            "Of product viewers",
        ],
        funnel_rows,
        "",
    ));
    let slowest = rolled::slowest(db, range, MIN_VIEWS_FOR_TIMING, TOP as usize).await?;
    tables.push(table(
        "slowest",
        "Slowest pages (95th percentile response time)",
        vec!["Page", "Page views", "95th percentile (ms)", "Median (ms)"],
        slowest
            .into_iter()
            .map(|t| {
                vec![
                    t.template,
                    t.views.to_string(),
                    t.p95_ms.to_string(),
                    t.median_ms.to_string(),
                ]
            })
            .collect(),
        "No page was viewed often enough in this range to time it.",
    ));
    Ok(tables)
}

/// What the page says about where its numbers come from.
const SOURCE_NOTE: &str = "Complete days come from the roll-ups, the hours since from the traffic \
     events: page views and other counts are exact, visitors are estimated within about 2 %.";

/// `GET /admin/analytics/traffic?from=YYYY-MM-DD&to=YYYY-MM-DD`
pub(crate) async fn show(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let db = &state.db;
    let today = Day::from_date(db.now().to_chrono().date_naive());
    let range = parse_range(&query, today)?;
    let level = range.granularity();
    let series = rolled::series(db, range, level).await?;
    let visitors = rolled::visitors(db, range).await?;
    let bars = |value: fn(&traffic::Point) -> i64| {
        series
            .iter()
            .map(|p| Bar {
                label: period_label(p.at, level),
                value: value(p),
            })
            .collect::<Vec<_>>()
    };
    let period = format!("{} to {}", range.from.long(), range.to.long());
    let x_axis = match level {
        Level::Hour => "Hour (UTC)",
        Level::Day => "Day",
        Level::Week => "ISO week",
        Level::Month => "Month",
    };
    let mut views_chart = BarChart::new(
        "traffic-views",
        &format!("Page views by {}, {period}", level.unit()),
        x_axis,
        "Page views",
        bars(|p| p.views),
    );
    let mut visitors_chart = BarChart::new(
        "traffic-visitors",
        &format!("Visitors by {}, {period}", level.unit()),
        x_axis,
        "Visitors",
        bars(|p| p.visitors as i64),
    );
    let every = (series.len() / 12).max(1);
    views_chart.label_every = every;
    visitors_chart.label_every = every;
    render(&TrafficPage {
        layout: Layout::admin(&req),
        views: series.iter().map(|p| p.views).sum(),
        visitors,
        source_note: SOURCE_NOTE.to_string(),
        views_chart: Chart::new(views_chart),
        visitors_chart: Chart::new(visitors_chart),
        tables: tables(db, range).await?,
        // Each instance counts its own queue: behind a load balancer, this is the one that
        // answered (the page says so).
        queue: req.app_data::<web::Data<EventLog>>().map(|log| log.stats()),
        from: range.from,
        to: range.to,
    })
}

/// `GET /admin/analytics/traffic.csv?table=…&from=…&to=…`: one table of the report as CSV.
pub(crate) async fn csv(
    state: web::Data<AppState>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let db = &state.db;
    let today = Day::from_date(db.now().to_chrono().date_naive());
    let range = parse_range(&query, today)?;
    let wanted = query.get("table").map(String::as_str).unwrap_or_default();
    let table = if wanted == "series" {
        let level = range.granularity();
        let series = rolled::series(db, range, level).await?;
        Table {
            id: "series",
            title: String::new(),
            columns: vec!["Period start (UTC)", "Page views", "Visitors"],
            rows: series
                .iter()
                .map(|p| {
                    vec![
                        p.at.to_chrono().to_rfc3339(),
                        p.views.to_string(),
                        p.visitors.to_string(),
                    ]
                })
                .collect(),
            csv_url: String::new(),
            empty: "",
        }
    } else {
        tables(db, range)
            .await?
            .into_iter()
            .find(|t| t.id == wanted)
            .ok_or_else(|| AppError::BadRequest(format!("There is no table {wanted:?}.")))?
    };
    let name = format!(
        "traffic-{}-{}-{}.csv",
        table.id,
        range.from.iso(),
        range.to.iso()
    );
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, "text/csv; charset=utf-8"))
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{name}\""),
        ))
        .body(traffic::csv(&table.columns, &table.rows)))
}

impl TrafficPage {
    /// The CSV of the time series.
    pub(crate) fn series_csv_url(&self) -> String {
        match Range::new(self.from, self.to) {
            Some(range) => url("/admin/analytics/traffic.csv", range, Some("series")),
            None => String::new(),
        }
    }
}

//! Admin → Analytics: page views of a day (by hour, and by minute within a chosen hour) or of a
//! month (by day), for the whole site or one page, with the most viewed pages. Charts are inline
//! SVG with their numbers as a table; a bad date, hour or path in the address is a 400 page.

use std::collections::HashMap;

use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::analytics::counter::CounterStats;
use crate::analytics::report::{self, PageCount};
use crate::analytics::svg::{Bar, BarChart};
use crate::analytics::{Day, Month, PageViewCounter, OTHER_PATH};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::layout::{render, Layout};

/// Pages listed under "Top pages".
const TOP_PAGES: i64 = 20;
/// Longest path accepted in the query string (the counter counts none longer).
const MAX_PATH_BYTES: usize = 512;

/// A chart ready for a page: the SVG and the same numbers as table rows.
pub(crate) struct Chart {
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) x_axis: String,
    pub(crate) y_axis: String,
    pub(crate) svg: String,
    pub(crate) rows: Vec<ChartRow>,
    pub(crate) total: String,
}

/// One bar as a table row.
pub(crate) struct ChartRow {
    pub(crate) label: String,
    /// The value as written (a count, or money).
    pub(crate) value: String,
    /// Where the row's label leads (a month's day leads to that day's report).
    pub(crate) href: Option<String>,
}

impl Chart {
    pub(crate) fn new(chart: BarChart) -> Chart {
        Chart {
            svg: chart.render(),
            rows: chart
                .bars
                .iter()
                .map(|b| ChartRow {
                    label: b.label.clone(),
                    value: (chart.format)(b.value),
                    href: None,
                })
                .collect(),
            total: (chart.format)(chart.total()),
            id: chart.id,
            title: chart.title,
            x_axis: chart.x_axis,
            y_axis: chart.y_axis,
        }
    }

    /// Link each row's label (in bar order; extra links are ignored).
    pub(crate) fn with_links(mut self, links: impl IntoIterator<Item = Option<String>>) -> Chart {
        for (row, href) in self.rows.iter_mut().zip(links) {
            row.href = href;
        }
        self
    }
}

/// A link to the day view.
pub(crate) fn day_url(day: Day, path: Option<&str>, hour: Option<u32>) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.append_pair("date", &day.iso());
    if let Some(hour) = hour {
        query.append_pair("hour", &hour.to_string());
    }
    if let Some(path) = path {
        query.append_pair("path", path);
    }
    format!("/admin/analytics?{}", query.finish())
}

/// A link to the month view.
pub(crate) fn month_url(month: Month, path: Option<&str>) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.append_pair("month", &month.iso());
    if let Some(path) = path {
        query.append_pair("path", path);
    }
    format!("/admin/analytics/month?{}", query.finish())
}

/// A top page with the links of its drill-down.
pub(crate) struct RankedPage {
    pub(crate) path: String,
    /// The page's title when it is known (a product, a post, a fixed page).
    pub(crate) title: Option<String>,
    pub(crate) views: i64,
    /// Its own report for the same period.
    pub(crate) report_url: String,
    /// The page itself on the site (`None` for the catch-all).
    pub(crate) site_url: Option<String>,
}

/// The page itself on the site, when `path` is one (not the catch-all, nothing a browser would
/// read as another site: see [`crate::web::links::local_path`]).
pub(crate) fn site_link(path: &str) -> Option<String> {
    crate::web::links::local_path(path).map(str::to_string)
}

fn ranked(
    pages: Vec<PageCount>,
    titles: &HashMap<String, String>,
    report_url: impl Fn(&str) -> String,
) -> Vec<RankedPage> {
    pages
        .into_iter()
        .map(|p| RankedPage {
            report_url: report_url(&p.path),
            site_url: site_link(&p.path),
            title: titles.get(&p.path).cloned(),
            path: p.path,
            views: p.views,
        })
        .collect()
}

/// The titles of the ranked pages and of the page a report is narrowed to.
async fn titles_of(
    db: &crate::db::Db,
    top: &[PageCount],
    path: Option<&str>,
) -> Result<HashMap<String, String>, AppError> {
    let paths = top.iter().map(|p| p.path.as_str()).chain(path);
    Ok(super::page_titles::of_paths(db, paths).await?)
}

/// How a chart's title names the page `path`: its title in quotes when known, else its path.
fn page_name(path: &str, titles: &HashMap<String, String>) -> String {
    match titles.get(path) {
        Some(title) => format!("“{title}”"),
        None => path.to_string(),
    }
}

/// What the counter reports about itself, for the page footer.
pub(crate) struct CounterStatus {
    pub(crate) enabled: bool,
    pub(crate) stats: CounterStats,
}

fn counter_status(req: &HttpRequest) -> CounterStatus {
    match req.app_data::<web::Data<PageViewCounter>>() {
        Some(counter) => CounterStatus {
            enabled: true,
            stats: counter.stats(),
        },
        None => CounterStatus {
            enabled: false,
            stats: CounterStats::default(),
        },
    }
}

#[derive(Template)]
#[template(path = "admin/analytics/day.html")]
pub(crate) struct DayPage {
    pub(crate) layout: Layout,
    pub(crate) day: Day,
    pub(crate) hour: u32,
    pub(crate) path: Option<String>,
    pub(crate) total: i64,
    pub(crate) hourly: Chart,
    pub(crate) by_minute: Chart,
    pub(crate) top_pages: Vec<RankedPage>,
    pub(crate) previous_url: Option<String>,
    pub(crate) next_url: Option<String>,
    pub(crate) month_url: String,
    pub(crate) all_pages_url: String,
    /// The chosen page on the site.
    pub(crate) page_link: Option<String>,
    pub(crate) counter: CounterStatus,
}

impl DayPage {
    pub(crate) fn hours(&self) -> std::ops::Range<u32> {
        0..24
    }
}

#[derive(Template)]
#[template(path = "admin/analytics/month.html")]
pub(crate) struct MonthPage {
    pub(crate) layout: Layout,
    pub(crate) month: Month,
    pub(crate) path: Option<String>,
    pub(crate) total: i64,
    pub(crate) daily: Chart,
    pub(crate) top_pages: Vec<RankedPage>,
    pub(crate) previous_url: Option<String>,
    pub(crate) next_url: Option<String>,
    pub(crate) all_pages_url: String,
    pub(crate) first_day_url: String,
    /// The chosen page on the site.
    pub(crate) page_link: Option<String>,
    pub(crate) counter: CounterStatus,
}

fn param<'a>(query: &'a HashMap<String, String>, name: &str) -> Option<&'a str> {
    query.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
}

fn parse_path(query: &HashMap<String, String>) -> Result<Option<String>, AppError> {
    match param(query, "path") {
        None => Ok(None),
        Some(p) if (p.starts_with('/') || p == OTHER_PATH) && p.len() <= MAX_PATH_BYTES => {
            Ok(Some(p.to_string()))
        }
        Some(_) => Err(AppError::BadRequest(
            "The page must be a path on this site, beginning with /.".into(),
        )),
    }
}

fn hour_bars(hourly: &[i64; 24]) -> Vec<Bar> {
    hourly
        .iter()
        .enumerate()
        .map(|(h, n)| Bar {
            label: format!("{h:02}"),
            value: *n,
        })
        .collect()
}

/// The hourly chart of `day` (shared with the dashboard).
/// `path` is the page the chart is narrowed to, as the title should name it.
pub(crate) fn hourly_chart(id: &str, day: Day, hourly: &[i64; 24], path: Option<&str>) -> Chart {
    let title = match path {
        Some(p) => format!("Views of {p} by hour, {}", day.long()),
        None => format!("Page views by hour, {}", day.long()),
    };
    Chart::new(BarChart::new(
        id,
        &title,
        "Hour of day (UTC)",
        "Views",
        hour_bars(hourly),
    ))
}

/// `GET /admin/analytics?date=YYYY-MM-DD&hour=H&path=/p`: a day, today by default.
pub(crate) async fn day(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let day = match param(&query, "date") {
        None => Day::of(state.db.now()),
        Some(s) => Day::parse(s).ok_or_else(|| {
            AppError::BadRequest(format!(
                "{s:?} is not a date. Write the day as YYYY-MM-DD, for example 2026-11-21."
            ))
        })?,
    };
    let path = parse_path(&query)?;
    let hourly = report::hourly(&state.db, day, path.as_deref()).await?;
    let hour = match param(&query, "hour") {
        Some(s) => s.parse::<u32>().ok().filter(|h| *h < 24).ok_or_else(|| {
            AppError::BadRequest("The hour must be a number from 0 to 23.".into())
        })?,
        // The busiest hour (the first of equals), so the minute chart shows something.
        None => (0..24u32)
            .max_by_key(|h| (hourly[*h as usize], std::cmp::Reverse(*h)))
            .unwrap_or(0),
    };
    let minutes = report::minutes(&state.db, day, hour, path.as_deref()).await?;
    let top = report::top_pages_of_day(&state.db, day, TOP_PAGES).await?;
    let titles = titles_of(&state.db, &top, path.as_deref()).await?;
    let named = path.as_deref().map(|p| page_name(p, &titles));
    let minute_bars = minutes
        .iter()
        .enumerate()
        .map(|(m, n)| Bar {
            label: format!("{hour:02}:{m:02}"),
            value: *n,
        })
        .collect();
    let mut by_minute = BarChart::new(
        "views-by-minute",
        &format!("Views by minute, {hour:02}:00–{hour:02}:59 UTC"),
        "Minute",
        "Views",
        minute_bars,
    );
    by_minute.label_every = 10;
    render(&DayPage {
        layout: Layout::admin(&req),
        total: hourly.iter().sum(),
        hourly: hourly_chart("views-by-hour", day, &hourly, named.as_deref()),
        by_minute: Chart::new(by_minute),
        top_pages: ranked(top, &titles, |p| day_url(day, Some(p), None)),
        previous_url: day.previous().map(|d| day_url(d, path.as_deref(), None)),
        next_url: day.next().map(|d| day_url(d, path.as_deref(), None)),
        month_url: month_url(day.month(), path.as_deref()),
        all_pages_url: day_url(day, None, None),
        page_link: path.as_deref().and_then(site_link),
        counter: counter_status(&req),
        day,
        hour,
        path,
    })
}

/// `GET /admin/analytics/month?month=YYYY-MM&path=/p`: a month, this month by default.
pub(crate) async fn month(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let month = match param(&query, "month") {
        None => Day::of(state.db.now()).month(),
        Some(s) => Month::parse(s).ok_or_else(|| {
            AppError::BadRequest(format!(
                "{s:?} is not a month. Write it as YYYY-MM, for example 2026-11."
            ))
        })?,
    };
    let path = parse_path(&query)?;
    let daily = report::daily(&state.db, month, path.as_deref()).await?;
    let top = report::top_pages_of_month(&state.db, month, TOP_PAGES).await?;
    let bars = daily
        .iter()
        .enumerate()
        .map(|(i, n)| Bar {
            label: (i + 1).to_string(),
            value: *n,
        })
        .collect();
    let titles = titles_of(&state.db, &top, path.as_deref()).await?;
    let title = match &path {
        Some(p) => format!(
            "Views of {} by day, {}",
            page_name(p, &titles),
            month.long()
        ),
        None => format!("Page views by day, {}", month.long()),
    };
    let mut chart = BarChart::new("views-by-day", &title, "Day of month", "Views", bars);
    chart.label_every = 2;
    render(&MonthPage {
        layout: Layout::admin(&req),
        total: daily.iter().sum(),
        daily: Chart::new(chart).with_links(
            (1..=month.days()).map(|n| month.day(n).map(|d| day_url(d, path.as_deref(), None))),
        ),
        top_pages: ranked(top, &titles, |p| month_url(month, Some(p))),
        previous_url: month.previous().map(|m| month_url(m, path.as_deref())),
        next_url: month.next().map(|m| month_url(m, path.as_deref())),
        all_pages_url: month_url(month, None),
        first_day_url: day_url(month.first_day(), path.as_deref(), None),
        page_link: path.as_deref().and_then(site_link),
        counter: counter_status(&req),
        month,
        path,
    })
}

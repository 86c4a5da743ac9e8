//! Admin → Menus: the header's and footer's navigation, edited as ordered rows (label,
//! address, position) in one form that works without JavaScript. An address is a path on this
//! site (a page, a section, a tag, a category …: the form suggests the site's own) or an
//! `https://` address. Stored with the site settings (`db::site::save_menus`), so every
//! instance reads them through the settings cache and sees a change within its few seconds.

use std::collections::HashMap;

use actix_session::SessionExt;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::db::site::{self, MenuItem, Menus};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{render, render_status, Layout};
use crate::web::see_other;

/// Links one menu may hold.
pub(crate) const MAX_ITEMS: usize = 12;
/// Longest label, in characters.
pub(crate) const MAX_LABEL: usize = 40;
/// Longest address, in characters.
pub(crate) const MAX_HREF: usize = 300;
/// Empty rows offered for new links under each menu.
const BLANK_ROWS: usize = 3;

/// The two menus, by their form name.
pub(crate) const MENUS: [(&str, &str); 2] = [("header", "Header"), ("footer", "Footer")];

/// One row of the form, as shown or as typed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Row {
    pub(crate) label: String,
    pub(crate) href: String,
    pub(crate) position: String,
    pub(crate) error: Option<String>,
}

/// A menu's rows in the form.
pub(crate) struct MenuRows {
    pub(crate) name: &'static str,
    pub(crate) title: &'static str,
    pub(crate) rows: Vec<Row>,
    pub(crate) error: Option<String>,
}

#[derive(Template)]
#[template(path = "admin/menus.html")]
pub(crate) struct MenusPage {
    pub(crate) layout: Layout,
    pub(crate) menus: Vec<MenuRows>,
    /// Paths of this site the address fields suggest.
    pub(crate) targets: Vec<(String, String)>,
    pub(crate) form_error: Option<String>,
    pub(crate) max_items: usize,
}

fn rows_of(items: &[MenuItem]) -> Vec<Row> {
    let mut rows: Vec<Row> = items
        .iter()
        .enumerate()
        .map(|(i, item)| Row {
            label: item.label.clone(),
            href: item.href.clone(),
            position: (i + 1).to_string(),
            error: None,
        })
        .collect();
    rows.extend((0..BLANK_ROWS).map(|_| Row::default()));
    rows
}

/// What the address fields suggest: the sections, the published pages, the categories and
/// the most used tags, each with a description.
async fn targets(state: &AppState) -> Result<Vec<(String, String)>, AppError> {
    let mut targets: Vec<(String, String)> = vec![
        ("/".into(), "Home".into()),
        ("/products".into(), "Shop".into()),
        ("/categories".into(), "Categories".into()),
        ("/search".into(), "Search".into()),
        ("/orders/lookup".into(), "Find your order".into()),
        ("/tags/".into(), "Tags".into()),
    ];
    for section in crate::content::model::SECTIONS {
        targets.push((format!("/{}/", section.name), section.title.to_string()));
    }
    let pages = crate::content::store::latest(&state.db, "pages", 50).await?;
    for page in pages {
        targets.push((page.url(), format!("Page “{}”", page.metadata.title)));
    }
    for category in crate::catalog::categories::all(&state.db)
        .await?
        .iter()
        .take(50)
    {
        targets.push((
            format!("/categories/{}", category.slug),
            format!("Category “{}”", category.name),
        ));
    }
    Ok(targets)
}

async fn page(
    req: &HttpRequest,
    state: &AppState,
    menus: Vec<MenuRows>,
    form_error: Option<String>,
) -> Result<MenusPage, AppError> {
    Ok(MenusPage {
        layout: Layout::admin(req),
        menus,
        targets: targets(state).await?,
        form_error,
        max_items: MAX_ITEMS,
    })
}

/// `GET /admin/menus`
pub(crate) async fn show(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let stored = site::load(&state.db).await?.menus;
    let menus = MENUS
        .iter()
        .map(|(name, title)| MenuRows {
            name,
            title,
            rows: rows_of(if *name == "header" {
                &stored.header
            } else {
                &stored.footer
            }),
            error: None,
        })
        .collect();
    render(&page(&req, &state, menus, None).await?)
}

/// Check one row; `None` for an empty one (removed).
fn parse_row(row: &mut Row) -> Option<Result<(i64, MenuItem), ()>> {
    row.label = row.label.trim().to_string();
    row.href = row.href.trim().to_string();
    if row.label.is_empty() && row.href.is_empty() {
        return None;
    }
    let mut problems = Vec::new();
    if row.label.is_empty() {
        problems.push("Enter the link's label.".to_string());
    } else if row.label.chars().count() > MAX_LABEL || row.label.chars().any(char::is_control) {
        problems.push(format!(
            "Keep the label to {MAX_LABEL} characters on one line."
        ));
    }
    let local = crate::web::links::local_path(&row.href).is_some();
    let external = crate::web::meta::is_absolute_web_url(&row.href);
    if row.href.is_empty() || row.href.chars().count() > MAX_HREF || !(local || external) {
        problems.push(
            "Enter a path on this site starting with / (e.g. /pages/about) or an https:// address."
                .to_string(),
        );
    }
    let position = match row.position.trim() {
        "" => i64::MAX,
        p => match p.parse::<i64>() {
            Ok(n) if (0..=1000).contains(&n) => n,
            _ => {
                problems.push("Enter the position as a whole number, e.g. 3.".to_string());
                0
            }
        },
    };
    if !problems.is_empty() {
        row.error = Some(problems.join(" "));
        return Some(Err(()));
    }
    Some(Ok((
        position,
        MenuItem {
            label: row.label.clone(),
            href: row.href.clone(),
        },
    )))
}

/// The rows of menu `name` as posted (`{name}_label_{i}`, `{name}_href_{i}`,
/// `{name}_position_{i}`), in row order.
fn posted_rows(form: &HashMap<String, String>, name: &str) -> Vec<Row> {
    let mut indexes: Vec<usize> = form
        .keys()
        .filter_map(|k| k.strip_prefix(&format!("{name}_label_"))?.parse().ok())
        .filter(|i| *i < 100)
        .collect();
    indexes.sort_unstable();
    indexes.dedup();
    let get = |field: &str, i: usize| {
        form.get(&format!("{name}_{field}_{i}"))
            .cloned()
            .unwrap_or_default()
    };
    indexes
        .into_iter()
        .map(|i| Row {
            label: get("label", i),
            href: get("href", i),
            position: get("position", i),
            error: None,
        })
        .collect()
}

/// `POST /admin/menus`: both menus saved together, ordered by position (ties and empty
/// positions keep the rows' order); empty rows are dropped. Any mistake sends the form back as
/// typed with the row's message, and nothing is saved.
pub(crate) async fn save(
    req: HttpRequest,
    state: web::Data<AppState>,
    form: web::Form<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let form = form.into_inner();
    let mut shown = Vec::new();
    let mut parsed: Vec<Vec<MenuItem>> = Vec::new();
    let mut failed = false;
    for (name, title) in MENUS {
        let mut rows = posted_rows(&form, name);
        let mut items: Vec<(i64, usize, MenuItem)> = Vec::new();
        for (i, row) in rows.iter_mut().enumerate() {
            match parse_row(row) {
                None => {}
                Some(Ok((position, item))) => items.push((position, i, item)),
                Some(Err(())) => failed = true,
            }
        }
        let error = (items.len() > MAX_ITEMS).then(|| {
            failed = true;
            format!("A menu holds at most {MAX_ITEMS} links; remove some.")
        });
        items.sort_by_key(|(position, i, _)| (*position, *i));
        parsed.push(items.into_iter().map(|(_, _, item)| item).collect());
        rows.extend((0..BLANK_ROWS).map(|_| Row::default()));
        shown.push(MenuRows {
            name,
            title,
            rows,
            error,
        });
    }
    if failed {
        let page = page(
            &req,
            &state,
            shown,
            Some("The menus were not saved: correct the rows marked below.".into()),
        )
        .await?;
        return render_status(StatusCode::UNPROCESSABLE_ENTITY, &page);
    }
    let footer = parsed.pop().unwrap_or_default();
    let header = parsed.pop().unwrap_or_default();
    site::save_menus(&state.db, &Menus { header, footer }).await?;
    state.site.invalidate();
    flash::push(&req.get_session(), Level::Success, "Menus saved.");
    Ok(see_other("/admin/menus"))
}

//! Admin → Content: nodes by section and type with title search, paging and sorting; create
//! and edit per type; saving under the nonce the form was loaded with (a lost race gets the
//! 409 conflict page with both versions, a diff, re-apply and discard); publish, schedule,
//! unpublish; tags; photo upload and replace; delete with confirmation; orphaned-file clean-up.

use std::collections::{HashMap, HashSet};

use actix_session::SessionExt;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use bson::oid::ObjectId;
use bson::{doc, DateTime};
use futures::StreamExt;

use crate::admin::products::FieldView;
use crate::catalog::{is_valid_slug, typed_slug};
use crate::content::model::{
    self, section, Detail, LinkDetail, Node, NodeInput, NodeType, PhotoDetail, QuoteDetail,
    Section, TextDetail, VideoDetail, SECTIONS,
};
use crate::content::photos::{self, PhotoError};
use crate::content::video::Video;
use crate::content::ContentError;
use crate::domain::EditVersion;
use crate::media::UploadError;
use crate::state::AppState;
use crate::web::conflict::Conflict;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{html_response, render, Layout};
use crate::web::see_other;

const LIST_LIMIT: i64 = 25;
const MAX_TITLE: usize = 200;
/// The editor's text field; the form body limit is derived from the same constant.
const MAX_TEXT: usize = crate::config::MAX_TEXT_CHARS;
const MAX_SHORT: usize = 500;
const DEFAULT_AUTHOR: &str = "The Bazaar team";

/// `(name, label, hint, input)` of the fields every node has.
const COMMON_FIELDS: &[(&str, &str, &str, &str)] = &[
    ("title", "Title", "", "text"),
    (
        "slug",
        "Slug",
        "Lowercase words joined by dashes; empty: made from the title.",
        "text",
    ),
    ("author", "Author", "", "text"),
];

fn type_fields(
    kind: NodeType,
) -> &'static [(&'static str, &'static str, &'static str, &'static str)] {
    match kind {
        NodeType::Page | NodeType::Entry => &[(
            "text",
            "Text",
            "Markdown: # headings, *emphasis*, [links](https://…), lists. HTML is removed.",
            "textarea",
        )],
        NodeType::Photo => &[("caption", "Caption", "", "text")],
        NodeType::Video => &[(
            "url",
            "Video address",
            "A YouTube or Vimeo page, e.g. https://www.youtube.com/watch?v=… or https://vimeo.com/…",
            "text",
        )],
        NodeType::Quote => &[
            ("text", "Quote", "", "textarea"),
            ("source", "Source", "Who said or wrote it.", "text"),
        ],
        NodeType::Link => &[
            ("url", "Address", "https://…", "text"),
            ("text", "Link text", "", "text"),
        ],
    }
}

fn all_fields(
    kind: NodeType,
) -> impl Iterator<Item = &'static (&'static str, &'static str, &'static str, &'static str)> {
    COMMON_FIELDS.iter().chain(type_fields(kind))
}

use crate::web::field_errors::FieldErrors;

struct Submitted(HashMap<String, String>);

impl Submitted {
    fn get(&self, name: &str) -> &str {
        self.0.get(name).map_or("", |v| v.trim())
    }

    /// Long text keeps its inner whitespace (Markdown depends on it); only the ends go.
    fn text(&self, name: &str) -> String {
        self.0.get(name).map_or(String::new(), |v| {
            v.replace("\r\n", "\n").trim().to_string()
        })
    }
}

/// Check a submitted form for a node of `kind` in `section`.
fn parse_node(
    section: &Section,
    kind: NodeType,
    form: &Submitted,
) -> Result<NodeInput, FieldErrors> {
    let mut errors = FieldErrors::default();
    for (name, label, _, input) in all_fields(kind) {
        let limit = if *input == "textarea" {
            MAX_TEXT
        } else if *name == "title" {
            MAX_TITLE
        } else {
            MAX_SHORT
        };
        if form.get(name).chars().count() > limit {
            errors.add(
                name,
                format!("{label} is too long (at most {limit} characters)."),
            );
        }
    }
    let title = form.get("title").to_string();
    if title.is_empty() {
        errors.add("title", "Enter a title.");
    }
    let slug = typed_slug(form.get("slug"), &title);
    if !is_valid_slug(&slug) || slug == "feed-atom" {
        errors.add(
            "slug",
            "Use lowercase letters and digits (of any alphabet) and single dashes (no spaces), e.g. about-us.",
        );
    }
    let author = match form.get("author") {
        "" => DEFAULT_AUTHOR.to_string(),
        a => a.to_string(),
    };
    let detail = match kind {
        NodeType::Page | NodeType::Entry => {
            let text = form.text("text");
            if text.is_empty() {
                errors.add("text", "Enter the text.");
            }
            let d = TextDetail { text };
            if kind == NodeType::Page {
                Detail::Page(d)
            } else {
                Detail::Entry(d)
            }
        }
        NodeType::Photo => Detail::Photo(PhotoDetail {
            caption: form.get("caption").to_string(),
            ..PhotoDetail::default()
        }),
        NodeType::Video => {
            let url = form.get("url").to_string();
            let provider = match Video::parse(&url) {
                Some(v) => v.provider().to_string(),
                None => {
                    errors.add("url", "Enter the address of a YouTube or Vimeo video.");
                    String::new()
                }
            };
            Detail::Video(VideoDetail { url, provider })
        }
        NodeType::Quote => {
            let text = form.text("text");
            if text.is_empty() {
                errors.add("text", "Enter the quote.");
            }
            Detail::Quote(QuoteDetail {
                text,
                source: form.get("source").to_string(),
            })
        }
        NodeType::Link => {
            let url = form.get("url").to_string();
            if !model::is_web_url(&url) {
                errors.add("url", "Enter an address starting with https:// or http://.");
            }
            let text = match form.get("text") {
                "" => url.clone(),
                t => t.to_string(),
            };
            Detail::Link(LinkDetail { url, text })
        }
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(NodeInput {
        section: section.name.to_string(),
        slug,
        title,
        author,
        detail,
    })
}

/// The form's values for a stored node.
fn values_of(node: &Node) -> HashMap<String, String> {
    let mut v = HashMap::new();
    v.insert("title".to_string(), node.metadata.title.clone());
    v.insert("slug".to_string(), node.metadata.slug.clone());
    v.insert("author".to_string(), node.metadata.author.name.clone());
    match node.detail() {
        Some(Detail::Page(d)) | Some(Detail::Entry(d)) => {
            v.insert("text".into(), d.text);
        }
        Some(Detail::Photo(d)) => {
            v.insert("caption".into(), d.caption);
        }
        Some(Detail::Video(d)) => {
            v.insert("url".into(), d.url);
        }
        Some(Detail::Quote(d)) => {
            v.insert("text".into(), d.text);
            v.insert("source".into(), d.source);
        }
        Some(Detail::Link(d)) => {
            v.insert("url".into(), d.url);
            v.insert("text".into(), d.text);
        }
        None => {}
    }
    v
}

fn field_views(
    kind: NodeType,
    values: &HashMap<String, String>,
    errors: &FieldErrors,
) -> Vec<FieldView> {
    all_fields(kind)
        .map(|(name, label, hint, input)| FieldView {
            name,
            label,
            hint,
            input,
            value: values.get(*name).cloned().unwrap_or_default(),
            error: errors.get(name).cloned(),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// List

pub struct SectionTab {
    pub name: &'static str,
    pub title: &'static str,
    pub current: bool,
}

#[derive(Template)]
#[template(path = "admin/content/list.html")]
pub struct ContentListPage {
    pub layout: Layout,
    pub section: &'static Section,
    pub tabs: Vec<SectionTab>,
    pub kind: String,
    pub search: String,
    pub sort: String,
    pub nodes: Vec<Node>,
    pub total: u64,
    pub page: u64,
    pub pages: u64,
}

impl ContentListPage {
    pub fn types(&self) -> &'static [NodeType] {
        self.section.types
    }

    pub fn page_url(&self, n: u64) -> String {
        let mut url = form_urlencoded::Serializer::new(String::new());
        url.append_pair("section", self.section.name);
        if !self.kind.is_empty() {
            url.append_pair("type", &self.kind);
        }
        if !self.search.is_empty() {
            url.append_pair("q", &self.search);
        }
        url.append_pair("sort", &self.sort);
        url.append_pair("page", &n.to_string());
        format!("/admin/content?{}", url.finish())
    }
}

fn section_param(params: &HashMap<String, String>) -> Result<&'static Section, AppError> {
    match params.get("section").map(String::as_str) {
        None | Some("") => Ok(&SECTIONS[0]),
        Some(name) => section(name).ok_or_else(|| {
            AppError::BadRequest("Choose a section: pages, blog or gallery.".into())
        }),
    }
}

/// `GET /admin/content?section=&type=&q=&sort=&page=`
pub async fn index(
    req: HttpRequest,
    state: web::Data<AppState>,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let section = section_param(&params)?;
    let kind = match params.get("type").map(String::as_str) {
        None | Some("") => None,
        Some(t) => Some(
            NodeType::parse(t)
                .filter(|t| section.types.contains(t))
                .ok_or_else(|| AppError::BadRequest("That type is not in this section.".into()))?,
        ),
    };
    let search: String = params
        .get("q")
        .map(|q| q.trim().chars().take(100).collect())
        .unwrap_or_default();
    let sort = match params.get("sort").map(String::as_str) {
        Some("title") => "title",
        Some("published") => "published",
        _ => "updated",
    };
    let page = match params.get("page").map(|p| p.parse::<u64>()) {
        None => 1,
        Some(Ok(n)) if (1..=10_000).contains(&n) => n,
        _ => {
            return Err(AppError::BadRequest(
                "The page number must be a whole number from 1.".into(),
            ))
        }
    };
    let (nodes, total) = model::admin_list(
        &state.db,
        &model::AdminQuery {
            section: section.name,
            kind,
            search: &search,
            sort,
            skip: (page - 1) * LIST_LIMIT as u64,
            limit: LIST_LIMIT,
        },
    )
    .await?;
    render(&ContentListPage {
        layout: Layout::admin(&req),
        section,
        tabs: SECTIONS
            .iter()
            .map(|s| SectionTab {
                name: s.name,
                title: s.title,
                current: s.name == section.name,
            })
            .collect(),
        kind: kind.map(|k| k.as_str().to_string()).unwrap_or_default(),
        search,
        sort: sort.to_string(),
        nodes,
        total,
        page,
        pages: total.div_ceil(LIST_LIMIT as u64).max(1),
    })
}

// ---------------------------------------------------------------------------------------------
// Create and edit

#[derive(Template)]
#[template(path = "admin/content/form.html")]
pub struct ContentFormPage {
    pub layout: Layout,
    pub section: &'static Section,
    pub kind: NodeType,
    /// `None` when creating.
    pub node: Option<Node>,
    pub action: String,
    /// The nonce this form saves under (empty when creating).
    pub nonce: String,
    pub fields: Vec<FieldView>,
    pub form_error: Option<String>,
}

impl ContentFormPage {
    pub fn tags(&self) -> Vec<String> {
        self.node
            .as_ref()
            .map(|n| n.metadata.tags.clone())
            .unwrap_or_default()
    }
}

/// The 409 page: both versions, the diff, a form re-applying the editor's values over the
/// stored version (it carries the stored nonce), and a way to discard them.
#[derive(Template)]
#[template(path = "admin/content/conflict.html")]
pub struct ContentConflictPage {
    pub layout: Layout,
    pub node: Node,
    pub conflict: Conflict,
    pub action: String,
    pub nonce: String,
    pub fields: Vec<FieldView>,
}

fn kind_in_section(
    params: &HashMap<String, String>,
) -> Result<(&'static Section, NodeType), AppError> {
    let section = section_param(params)?;
    let kind = params
        .get("type")
        .and_then(|t| NodeType::parse(t))
        .filter(|t| section.types.contains(t))
        .ok_or_else(|| {
            AppError::BadRequest(format!(
                "Choose a type this section holds: {}.",
                section
                    .types
                    .iter()
                    .map(|t| t.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
    Ok((section, kind))
}

fn new_action(section: &Section, kind: NodeType) -> String {
    format!(
        "/admin/content/new?section={}&type={}",
        section.name,
        kind.as_str()
    )
}

fn edit_url(id: ObjectId) -> String {
    format!("/admin/content/{}/edit", id.to_hex())
}

/// An id from the URL; one that is not an ObjectId is a 404.
use crate::web::parse_object_id as parse_id;

fn render_status<T: Template>(status: StatusCode, page: &T) -> Result<HttpResponse, AppError> {
    let html = page
        .render()
        .map_err(|e| AppError::Internal(anyhow::anyhow!("rendering a template failed: {e}")))?;
    Ok(html_response(status, html))
}

/// `GET /admin/content/new?section=blog&type=entry`
pub async fn new(
    req: HttpRequest,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let (section, kind) = kind_in_section(&params)?;
    let mut values = HashMap::new();
    values.insert("author".to_string(), DEFAULT_AUTHOR.to_string());
    render(&ContentFormPage {
        layout: Layout::admin(&req),
        section,
        kind,
        node: None,
        action: new_action(section, kind),
        nonce: String::new(),
        fields: field_views(kind, &values, &FieldErrors::default()),
        form_error: None,
    })
}

/// `POST /admin/content/new?section=blog&type=entry`
pub async fn create(
    req: HttpRequest,
    state: web::Data<AppState>,
    params: web::Query<HashMap<String, String>>,
    form: web::Form<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let (section, kind) = kind_in_section(&params)?;
    let form = Submitted(form.into_inner());
    let errors = match parse_node(section, kind, &form) {
        Ok(input) => {
            let published = (form.get("publish") == "1").then(|| state.db.now());
            match model::create(&state.db, input, published, Vec::new()).await {
                Ok(node) => {
                    flash::push(
                        &req.get_session(),
                        Level::Success,
                        format!(
                            "Added “{}”{}.",
                            node.metadata.title,
                            if published.is_some() {
                                " and published it"
                            } else {
                                " as a draft"
                            }
                        ),
                    );
                    return Ok(see_other(&edit_url(node.id)));
                }
                Err(ContentError::SlugTaken) => slug_taken(),
                Err(e) => return Err(e.into()),
            }
        }
        Err(errors) => errors,
    };
    render_status(
        StatusCode::UNPROCESSABLE_ENTITY,
        &ContentFormPage {
            layout: Layout::admin(&req),
            section,
            kind,
            node: None,
            action: new_action(section, kind),
            nonce: String::new(),
            fields: field_views(kind, &form.0, &errors),
            form_error: Some("The item was not saved: correct the fields marked below.".into()),
        },
    )
}

async fn load(state: &AppState, id: &str) -> Result<Node, AppError> {
    model::by_id(&state.db, parse_id(id)?)
        .await?
        .ok_or(AppError::NotFound)
}

fn node_section(node: &Node) -> Result<&'static Section, AppError> {
    section(&node.metadata.section).ok_or_else(|| {
        AppError::Internal(anyhow::anyhow!(
            "node in unknown section {}",
            node.metadata.section
        ))
    })
}

/// `GET /admin/content/{id}/edit`
pub async fn edit(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let node = load(&state, &id).await?;
    let section = node_section(&node)?;
    let values = values_of(&node);
    render(&ContentFormPage {
        layout: Layout::admin(&req),
        section,
        kind: node.metadata.kind,
        action: edit_url(node.id),
        nonce: node.metadata.nonce.to_hex(),
        fields: field_views(node.metadata.kind, &values, &FieldErrors::default()),
        node: Some(node),
        form_error: None,
    })
}

/// `POST /admin/content/{id}/edit`: save under the form's nonce.
pub async fn update(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let node = load(&state, &id).await?;
    let section = node_section(&node)?;
    let kind = node.metadata.kind;
    let form = Submitted(form.into_inner());
    let form_nonce = EditVersion::parse(form.get("nonce")).map_err(|_| {
        AppError::BadRequest("The form is missing its version; open the editor again.".into())
    })?;
    let errors = match parse_node(section, kind, &form) {
        Ok(input) => match model::save_with_nonce(&state.db, &node, form_nonce, &input).await {
            Ok(true) => {
                flash::push(&req.get_session(), Level::Success, "Saved.");
                return Ok(see_other(&edit_url(node.id)));
            }
            Ok(false) => return conflict(&req, &state, node.id, &form).await,
            Err(ContentError::SlugTaken) => slug_taken(),
            Err(e) => return Err(e.into()),
        },
        Err(errors) => errors,
    };
    render_status(
        StatusCode::UNPROCESSABLE_ENTITY,
        &ContentFormPage {
            layout: Layout::admin(&req),
            section,
            kind,
            action: edit_url(node.id),
            // Keep the nonce the editor loaded: their next save must still be checked against it.
            nonce: form_nonce.to_hex(),
            fields: field_views(kind, &form.0, &errors),
            node: Some(node),
            form_error: Some("The changes were not saved: correct the fields marked below.".into()),
        },
    )
}

/// The save matched nothing: show both versions (the stored one read now) with the diff.
async fn conflict(
    req: &HttpRequest,
    state: &AppState,
    id: ObjectId,
    form: &Submitted,
) -> Result<HttpResponse, AppError> {
    let stored = model::by_id(&state.db, id).await?.ok_or_else(|| {
        AppError::Conflict("This item was deleted while you were editing it.".into())
    })?;
    let kind = stored.metadata.kind;
    let stored_values = values_of(&stored);
    let mut conflict = Conflict::new();
    let mut theirs = HashMap::new();
    for (name, label, _, _) in all_fields(kind) {
        let mine = if type_fields(kind)
            .iter()
            .any(|f| f.3 == "textarea" && f.0 == *name)
        {
            form.text(name)
        } else {
            form.get(name).to_string()
        };
        conflict.field(
            *label,
            &mine,
            stored_values.get(*name).map_or("", String::as_str),
        );
        theirs.insert(name.to_string(), mine);
    }
    let page = ContentConflictPage {
        layout: Layout::admin(req),
        action: edit_url(stored.id),
        nonce: stored.metadata.nonce.to_hex(),
        fields: field_views(kind, &theirs, &FieldErrors::default()),
        conflict,
        node: stored,
    };
    render_status(StatusCode::CONFLICT, &page)
}

// ---------------------------------------------------------------------------------------------
// Publishing and tags

/// `POST /admin/content/{id}/publish` (`at` empty: now; else `YYYY-MM-DDTHH:MM`, UTC).
pub async fn publish(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let node = load(&state, &id).await?;
    let session = req.get_session();
    let at = form.get("at").map_or("", |s| s.trim());
    let now = state.db.now();
    let when = if at.is_empty() {
        Some(now)
    } else {
        parse_datetime(at)
    };
    match when {
        Some(when) => {
            model::set_published(&state.db, node.id, Some(when)).await?;
            let message = if when > now {
                format!(
                    "Scheduled for {} UTC.",
                    when.to_chrono().format("%Y-%m-%d %H:%M")
                )
            } else {
                "Published.".to_string()
            };
            flash::push(&session, Level::Success, message);
        }
        None => flash::push(
            &session,
            Level::Error,
            "Enter the publication time as YYYY-MM-DD HH:MM (UTC), or leave it empty for now.",
        ),
    }
    Ok(see_other(&edit_url(node.id)))
}

/// `YYYY-MM-DDTHH:MM` (what a datetime-local input sends) or with a space, in UTC.
fn parse_datetime(s: &str) -> Option<DateTime> {
    let s = s.replace(' ', "T");
    let (date, time) = s.split_once('T')?;
    let mut d = date.split('-');
    let (y, m, day): (i32, u32, u32) = (
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
    );
    let mut t = time.split(':');
    let (h, min): (u32, u32) = (t.next()?.parse().ok()?, t.next()?.parse().ok()?);
    if d.next().is_some() || !(1970..=9999).contains(&y) {
        return None;
    }
    let date = bson::DateTime::builder()
        .year(y)
        .month(u8::try_from(m).ok()?)
        .day(u8::try_from(day).ok()?)
        .hour(u8::try_from(h).ok()?)
        .minute(u8::try_from(min).ok()?)
        .build()
        .ok()?;
    Some(date)
}

/// `POST /admin/content/{id}/unpublish`: back to draft.
pub async fn unpublish(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let node = load(&state, &id).await?;
    model::set_published(&state.db, node.id, None).await?;
    flash::push(
        &req.get_session(),
        Level::Success,
        "Unpublished: it is a draft again.",
    );
    Ok(see_other(&edit_url(node.id)))
}

/// `POST /admin/content/{id}/tags` (`tags`: comma-separated)
pub async fn add_tags(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let id = parse_id(&id)?;
    let session = req.get_session();
    match model::parse_tags(form.get("tags").map_or("", String::as_str)) {
        Err(why) => flash::push(&session, Level::Error, format!("Not tagged: {why}")),
        Ok(tags) if tags.is_empty() => flash::push(
            &session,
            Level::Error,
            "Enter tags of letters and digits, separated by commas.",
        ),
        Ok(tags) => {
            if !model::add_tags(&state.db, id, &tags).await? {
                return Err(AppError::NotFound);
            }
            flash::push(
                &session,
                Level::Success,
                format!("Tagged: {}.", tags.join(", ")),
            );
        }
    }
    Ok(see_other(&edit_url(id)))
}

/// `POST /admin/content/{id}/tags/remove` (`tag`)
pub async fn remove_tag(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let id = parse_id(&id)?;
    let tag = form.get("tag").cloned().unwrap_or_default();
    if !model::remove_tag(&state.db, id, &tag).await? {
        return Err(AppError::NotFound);
    }
    flash::push(
        &req.get_session(),
        Level::Success,
        format!("Removed the tag “{tag}”."),
    );
    Ok(see_other(&edit_url(id)))
}

// ---------------------------------------------------------------------------------------------
// Photos

/// `POST /admin/content/{id}/photo?csrf_token=…&nonce=…` (multipart, field `photo`): streams
/// into GridFS under the node's upload lock, then switches the node to the new file.
pub async fn upload_photo(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    params: web::Query<HashMap<String, String>>,
    mut payload: actix_multipart::Multipart,
) -> Result<HttpResponse, AppError> {
    let id = parse_id(&id)?;
    let nonce = params
        .get("nonce")
        .and_then(|n| EditVersion::parse(n).ok())
        .ok_or_else(|| {
            AppError::BadRequest(
                "The upload form is missing its version; open the editor again.".into(),
            )
        })?;
    let session = req.get_session();
    let mut outcome = Err(PhotoError::Upload(UploadError::Empty));
    loop {
        match payload.next().await {
            None => break,
            Some(Err(e)) => {
                tracing::info!(error = %e, "a photo upload could not be read");
                outcome = Err(PhotoError::Upload(UploadError::Interrupted));
                break;
            }
            Some(Ok(field)) if field.name() == Some("photo") => {
                let filename: String = field
                    .content_disposition()
                    .and_then(|cd| cd.get_filename())
                    .map(|f| f.chars().filter(|c| !c.is_control()).take(100).collect())
                    .unwrap_or_else(|| "photo".to_string());
                outcome = photos::upload(
                    &state.db,
                    id,
                    nonce,
                    &filename,
                    field,
                    (state.max_upload_bytes, state.max_image_pixels),
                )
                .await;
                break;
            }
            Some(Ok(_)) => continue,
        }
    }
    match outcome {
        Ok(_) => flash::push(&session, Level::Success, "Photo uploaded."),
        Err(PhotoError::NotFound) => return Err(AppError::NotFound),
        Err(PhotoError::Db(e)) => return Err(e.into()),
        Err(PhotoError::Busy) => {
            return Err(AppError::Conflict(PhotoError::Busy.to_string()));
        }
        Err(e) => flash::push(&session, Level::Error, format!("Photo not uploaded: {e}.")),
    }
    Ok(see_other(&edit_url(id)))
}

/// Orphans listed on one review page (and so deleted by one confirmation) at most.
const MAX_ORPHANS_LISTED: usize = 1000;

#[derive(Template)]
#[template(path = "admin/content/orphans.html")]
pub struct OrphansPage {
    pub layout: Layout,
    pub orphans: Vec<photos::OrphanFile>,
    /// Orphans found beyond the listed ones.
    pub more: usize,
}

impl OrphansPage {
    /// Files the confirmation deletes, copies included.
    pub fn total_files(&self) -> usize {
        self.orphans.iter().map(|o| 1 + o.derivatives.len()).sum()
    }

    pub fn size(&self, o: &photos::OrphanFile) -> String {
        match o.length {
            n if n >= 1024 * 1024 => format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0)),
            n if n >= 1024 => format!("{} KiB", n / 1024),
            n => format!("{n} bytes"),
        }
    }

    pub fn uploaded(&self, o: &photos::OrphanFile) -> String {
        o.uploaded.map_or(String::new(), |d| {
            d.to_chrono().format("%Y-%m-%d %H:%M").to_string()
        })
    }
}

/// `GET /admin/content/orphans`: the dry run. Lists the files the clean-up would delete (older
/// than an hour, referred to from nowhere), with a button to confirm.
pub async fn review_orphans(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let mut orphans = photos::find_orphans(&state.db, photos::ORPHAN_GRACE).await?;
    let more = orphans.len().saturating_sub(MAX_ORPHANS_LISTED);
    orphans.truncate(MAX_ORPHANS_LISTED);
    render(&OrphansPage {
        layout: Layout::admin(&req),
        orphans,
        more,
    })
}

/// `POST /admin/content/orphans` with the `file` ids the review page listed: delete those that
/// are still orphans (one linked since the list was shown is kept), each with its copies.
pub async fn clean_orphans(
    req: HttpRequest,
    state: web::Data<AppState>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, AppError> {
    let chosen: HashSet<ObjectId> = form
        .iter()
        .filter(|(name, _)| name == "file")
        .filter_map(|(_, value)| ObjectId::parse_str(value).ok())
        .collect();
    let removed = photos::remove_orphans(&state.db, photos::ORPHAN_GRACE, &chosen).await?;
    flash::push(
        &req.get_session(),
        Level::Success,
        format!("Removed {removed} orphaned files."),
    );
    Ok(see_other("/admin/content"))
}

// ---------------------------------------------------------------------------------------------
// Delete

#[derive(Template)]
#[template(path = "admin/content/delete.html")]
pub struct DeletePage {
    pub layout: Layout,
    pub node: Node,
}

/// `GET /admin/content/{id}/delete`: what will go, and a button.
pub async fn confirm_delete(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let node = load(&state, &id).await?;
    render(&DeletePage {
        layout: Layout::admin(&req),
        node,
    })
}

/// `POST /admin/content/{id}/delete`
pub async fn delete(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let id = parse_id(&id)?;
    let node = model::delete(&state.db, id)
        .await?
        .ok_or(AppError::NotFound)?;
    // The node is gone first: its file then has no referrer, so a crash here leaves an orphan.
    if let Some(file) = node.photo_file() {
        crate::media::delete_file(&state.db, file).await?;
    }
    state
        .db
        .collection::<bson::Document>("comments")
        .delete_many(doc! { "discussion_id": id })
        .await
        .map_err(crate::db::DbError::from)?;
    flash::push(
        &req.get_session(),
        Level::Success,
        format!("Deleted “{}”.", node.metadata.title),
    );
    Ok(see_other(&format!(
        "/admin/content?section={}",
        node.metadata.section
    )))
}

/// The form error for a slug another node of the section already has (error 11000).
fn slug_taken() -> FieldErrors {
    let mut e = FieldErrors::default();
    e.add(
        "slug",
        "That slug is already used in this section; choose another.",
    );
    e
}

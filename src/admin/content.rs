//! Admin → Content: nodes by section and type with title search, paging and sorting; create
//! per type; one edit form per node (fields, tags, publication; its buttons save draft,
//! update, publish, schedule, unpublish) saved in one update under the edit token it was
//! loaded with (`admin::form`; stored as the node's `nonce`). A lost race is merged three ways
//! with the stored version (changes on one side only are kept and saved); only true conflicts
//! get the 409 page with both versions and a choice each. Photo upload and replace; delete with
//! confirmation; orphaned-file clean-up.

use std::collections::{HashMap, HashSet};

use actix_session::SessionExt;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use bson::oid::ObjectId;
use bson::{doc, DateTime};
use futures::StreamExt;

use crate::admin::form::{
    self, field_views, FieldConflict, FieldSpec, FieldView, Input, MergeAs, Submitted, Values,
};
use crate::catalog::typed_slug;
use crate::content::model::{
    self, section, Detail, LinkDetail, Node, NodeInput, NodeType, PhotoDetail, QuoteDetail,
    Section, TextDetail, VideoDetail, SECTIONS,
};
use crate::content::photos::{self, PhotoError};
use crate::content::revisions::{self, Revision};
use crate::content::store;
use crate::content::video::Video;
use crate::content::ContentError;
use crate::domain::Slug;
use crate::media::UploadError;
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::field_errors::FieldErrors;
use crate::web::flash::{self, Level};
use crate::web::layout::{render, render_status, Layout};
use crate::web::see_other;

const LIST_LIMIT: i64 = 25;
const MAX_TITLE: usize = 200;
/// The editor's text field; the form body limit is derived from the same constant.
const MAX_TEXT: usize = crate::config::MAX_TEXT_CHARS;
const MAX_SHORT: usize = 500;
const DEFAULT_AUTHOR: &str = "The Bazaar team";
/// Revisions the edit page lists, newest first.
const REVISIONS_LISTED: i64 = 50;

/// The fields every node has.
const COMMON_FIELDS: &[FieldSpec] = &[
    FieldSpec::new("title", "Title", Input::Text)
        .max_chars(MAX_TITLE)
        .required("Enter a title."),
    FieldSpec::new("slug", "Slug", Input::Text)
        .max_chars(MAX_SHORT)
        .help("Lowercase words joined by dashes; empty: made from the title."),
    FieldSpec::new("author", "Author", Input::Text).max_chars(MAX_SHORT),
];

/// A one-line field of a node.
const fn short(name: &'static str, label: &'static str) -> FieldSpec {
    FieldSpec::new(name, label, Input::Text).max_chars(MAX_SHORT)
}

/// A node's long text: Markdown, merged line by line when two editors changed it.
const fn long(name: &'static str, label: &'static str) -> FieldSpec {
    FieldSpec::new(name, label, Input::Textarea)
        .max_chars(MAX_TEXT)
        .merge(MergeAs::Lines)
}

/// The optional commentary of a video, quote or link.
const COMMENTARY_FIELD: FieldSpec = long("commentary", "Commentary")
    .help("Optional: your words about it, in Markdown, shown under it.");

/// A page's and a blog entry's fields after the common ones.
const TEXT_FIELDS: &[FieldSpec] = &[
    long("text", "Text")
        .help("Markdown: # headings, *emphasis*, [links](https://…), lists. HTML is removed.")
        .required("Enter the text."),
    short("excerpt", "Excerpt").help(
        "Optional: what lists and search results show instead of the text's opening (plain text).",
    ),
];

const PHOTO_FIELDS: &[FieldSpec] = &[
    short("caption", "Caption").help("Printed under the photo."),
    short("alt", "Alt text").help(
        "What the photo shows, for people who cannot see it; empty: the caption is read out.",
    ),
];

const VIDEO_FIELDS: &[FieldSpec] = &[
    short("url", "Video address").help(
        "A YouTube or Vimeo page, e.g. https://www.youtube.com/watch?v=… or https://vimeo.com/…",
    ),
    COMMENTARY_FIELD,
];

const QUOTE_FIELDS: &[FieldSpec] = &[
    long("text", "Quote").required("Enter the quote."),
    short("source", "Source").help("Who said or wrote it."),
    COMMENTARY_FIELD,
];

const LINK_FIELDS: &[FieldSpec] = &[
    short("url", "Address").help("https://…"),
    short("text", "Link text"),
    COMMENTARY_FIELD,
];

fn type_fields(kind: NodeType) -> &'static [FieldSpec] {
    match kind {
        NodeType::Page | NodeType::Entry => TEXT_FIELDS,
        NodeType::Photo => PHOTO_FIELDS,
        NodeType::Video => VIDEO_FIELDS,
        NodeType::Quote => QUOTE_FIELDS,
        NodeType::Link => LINK_FIELDS,
    }
}

fn all_fields(kind: NodeType) -> impl Iterator<Item = &'static FieldSpec> + Clone {
    COMMON_FIELDS.iter().chain(type_fields(kind))
}

/// Check a submitted form for a node of `kind` in `section`.
fn parse_node(
    section: &Section,
    kind: NodeType,
    form: &Submitted,
) -> Result<NodeInput, FieldErrors> {
    let mut errors = FieldErrors::default();
    form::check(all_fields(kind), form, &mut errors);
    let title = form.get("title").to_string();
    // `feed-atom` would shadow the section's feed address.
    let slug = Slug::parse(&typed_slug(form.get("slug"), &title))
        .ok()
        .filter(|slug| slug.as_str() != "feed-atom");
    if slug.is_none() {
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
            let d = TextDetail {
                text: form.text("text"),
                excerpt: form.get("excerpt").to_string(),
            };
            if kind == NodeType::Page {
                Detail::Page(d)
            } else {
                Detail::Entry(d)
            }
        }
        NodeType::Photo => Detail::Photo(PhotoDetail {
            caption: form.get("caption").to_string(),
            alt: form.get("alt").to_string(),
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
            Detail::Video(VideoDetail {
                url,
                provider,
                commentary: form.text("commentary"),
            })
        }
        NodeType::Quote => Detail::Quote(QuoteDetail {
            text: form.text("text"),
            source: form.get("source").to_string(),
            commentary: form.text("commentary"),
        }),
        NodeType::Link => {
            let url = form.get("url").to_string();
            if !model::is_web_url(&url) {
                errors.add("url", "Enter an address starting with https:// or http://.");
            }
            let text = match form.get("text") {
                "" => url.clone(),
                t => t.to_string(),
            };
            Detail::Link(LinkDetail {
                url,
                text,
                commentary: form.text("commentary"),
            })
        }
    };
    let (Some(slug), true) = (slug, errors.is_empty()) else {
        return Err(errors);
    };
    Ok(NodeInput {
        section: section.name.to_string(),
        slug,
        title,
        author,
        detail,
    })
}

/// The form's values for a stored node.
fn values_of(node: &Node) -> Values {
    let mut v = Values::new();
    v.insert("title".to_string(), node.metadata.title.clone());
    v.insert("slug".to_string(), node.metadata.slug.to_string());
    v.insert("author".to_string(), node.metadata.author.name.clone());
    match node.detail() {
        Some(Detail::Page(d)) | Some(Detail::Entry(d)) => {
            v.insert("text".into(), d.text);
            v.insert("excerpt".into(), d.excerpt);
        }
        Some(Detail::Photo(d)) => {
            v.insert("caption".into(), d.caption);
            v.insert("alt".into(), d.alt);
        }
        Some(Detail::Video(d)) => {
            v.insert("url".into(), d.url);
            v.insert("commentary".into(), d.commentary);
        }
        Some(Detail::Quote(d)) => {
            v.insert("text".into(), d.text);
            v.insert("source".into(), d.source);
            v.insert("commentary".into(), d.commentary);
        }
        Some(Detail::Link(d)) => {
            v.insert("url".into(), d.url);
            v.insert("text".into(), d.text);
            v.insert("commentary".into(), d.commentary);
        }
        None => {}
    }
    v
}

fn node_fields(kind: NodeType, values: &Values, errors: &FieldErrors) -> Vec<FieldView> {
    field_views(all_fields(kind), values, errors)
}

// ---------------------------------------------------------------------------------------------
// List

pub(crate) struct SectionTab {
    pub(crate) name: &'static str,
    pub(crate) title: &'static str,
    pub(crate) current: bool,
}

#[derive(Template)]
#[template(path = "admin/content/list.html")]
pub(crate) struct ContentListPage {
    pub(crate) layout: Layout,
    pub(crate) section: &'static Section,
    pub(crate) tabs: Vec<SectionTab>,
    pub(crate) kind: String,
    pub(crate) search: String,
    pub(crate) sort: String,
    pub(crate) nodes: Vec<Node>,
    pub(crate) total: u64,
    pub(crate) page: u64,
    pub(crate) pages: u64,
    /// The site clock's time the statuses are told at.
    pub(crate) now: DateTime,
}

impl ContentListPage {
    pub(crate) fn types(&self) -> &'static [NodeType] {
        self.section.types
    }

    pub(crate) fn page_url(&self, n: u64) -> String {
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
pub(crate) async fn index(
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
    let (nodes, total) = store::admin_list(
        &state.db,
        &store::AdminQuery {
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
        now: state.db.now(),
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
pub(crate) struct ContentFormPage {
    pub(crate) layout: Layout,
    pub(crate) section: &'static Section,
    pub(crate) kind: NodeType,
    /// `None` when creating.
    pub(crate) node: Option<Node>,
    pub(crate) action: String,
    /// The edit token this form saves under (empty when creating).
    pub(crate) edit_version: String,
    pub(crate) fields: Vec<FieldView>,
    /// The tag field's value: the whole list, comma-separated.
    pub(crate) tags: String,
    /// The publication field's value (`YYYY-MM-DDTHH:MM` in the site's time zone; empty for
    /// none).
    pub(crate) published_at: String,
    /// Hidden fields: what the form was loaded with (`base_*`), and on the conflict page the
    /// sides a choice can take (`mine_*`, `theirs_*`).
    pub(crate) base: Vec<(String, String)>,
    /// Messages for the tag and publication fields (the others are in `fields`).
    pub(crate) errors: FieldErrors,
    pub(crate) form_error: Option<String>,
    /// The node's newest revisions, for the edit page's Revisions panel; `None` on the pages
    /// that do not show it (create, and the form sent back with errors or conflicts).
    pub(crate) revisions: Option<Vec<Revision>>,
    /// The newest pictures of the media library, offered for insertion into a text (empty
    /// where the node has no Markdown text, and on the pages sent back with errors).
    pub(crate) pictures: Vec<crate::content::library::LibraryFile>,
    /// The typed text rendered as readers would see it (the Preview button); `Some` also means
    /// the form holds unsaved changes.
    pub(crate) preview: Option<String>,
    /// The site clock's time the node's status is told at.
    pub(crate) now: DateTime,
}

impl ContentFormPage {
    pub(crate) fn error(&self, field: &str) -> Option<String> {
        self.errors.get(field).cloned()
    }

    /// The site's time zone, which the publication field is typed in.
    pub(crate) fn zone_name(&self) -> &'static str {
        crate::db::site::time_zone().name()
    }

    /// Whether the node has its photo already.
    pub(crate) fn has_photo(&self) -> bool {
        self.node.as_ref().is_some_and(|n| n.photo_file().is_some())
    }

    /// Whether the form carries a photo picker (a photo node's form: multipart).
    pub(crate) fn is_photo(&self) -> bool {
        self.kind == NodeType::Photo
    }

    /// Where the form posts: a multipart form carries its CSRF token in the query, since the
    /// body is not read before the upload streams.
    pub(crate) fn post_url(&self) -> String {
        if self.is_photo() {
            format!("{}?csrf_token={}", self.action, self.layout.csrf_token())
        } else {
            self.action.clone()
        }
    }

    /// Whether the form offers a Preview (kinds with Markdown text).
    pub(crate) fn has_preview(&self) -> bool {
        matches!(self.kind, NodeType::Page | NodeType::Entry)
    }

    /// Whether the page holds typed changes not saved yet (a preview, or errors to correct):
    /// the unsaved-changes warning is armed from the start.
    pub(crate) fn unsaved(&self) -> bool {
        self.preview.is_some() || self.form_error.is_some()
    }

    /// Whether the node is published or scheduled (so the save button keeps it so).
    pub(crate) fn has_date(&self) -> bool {
        self.node
            .as_ref()
            .is_some_and(|n| n.metadata.published.is_some())
    }

    pub(crate) fn is_live(&self) -> bool {
        self.node.as_ref().is_some_and(|n| n.is_published(self.now))
    }
}

/// The 409 page: what merged, the conflicting fields side by side, and the edit form holding
/// the merged edit (it carries the stored nonce and the stored version as its base).
#[derive(Template)]
#[template(path = "admin/content/conflict.html")]
pub(crate) struct ContentConflictPage {
    pub(crate) layout: Layout,
    pub(crate) node: Node,
    pub(crate) action: String,
    pub(crate) edit_version: String,
    pub(crate) saved_by: String,
    pub(crate) saved_at: String,
    pub(crate) merged: Vec<String>,
    pub(crate) conflicts: Vec<FieldConflict>,
    pub(crate) form: ContentFormPage,
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

/// `GET /admin/content/new?section=blog&type=entry`
pub(crate) async fn new(
    req: HttpRequest,
    state: web::Data<AppState>,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let (section, kind) = kind_in_section(&params)?;
    let mut values = HashMap::new();
    values.insert("author".to_string(), DEFAULT_AUTHOR.to_string());
    render(&ContentFormPage {
        layout: Layout::admin(&req),
        now: state.db.now(),
        section,
        kind,
        node: None,
        action: new_action(section, kind),
        edit_version: String::new(),
        fields: node_fields(kind, &values, &FieldErrors::default()),
        tags: String::new(),
        published_at: String::new(),
        base: Vec::new(),
        errors: FieldErrors::default(),
        form_error: None,
        revisions: None,
        pictures: Vec::new(),
        preview: None,
    })
}

/// `POST /admin/content/new?section=blog&type=entry`
pub(crate) async fn create(
    req: HttpRequest,
    state: web::Data<AppState>,
    params: web::Query<HashMap<String, String>>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, AppError> {
    let (section, kind) = kind_in_section(&params)?;
    let form = Submitted::from_pairs(form.into_inner());
    let parsed = parse_node(section, kind, &form).and_then(|input| {
        if kind == NodeType::Photo && form.get("publish") == "1" {
            let mut errors = FieldErrors::default();
            errors.add(
                "publish",
                "Add it as a draft and upload the photo first: a photo post cannot be published without its photo.",
            );
            return Err(errors);
        }
        Ok(input)
    });
    let errors = match parsed {
        Ok(input) => {
            let published = (form.get("publish") == "1").then(|| state.db.now());
            match store::create(&state.db, input, published, Vec::new()).await {
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
            now: state.db.now(),
            section,
            kind,
            node: None,
            action: new_action(section, kind),
            edit_version: String::new(),
            fields: node_fields(kind, &form.values(), &errors),
            tags: String::new(),
            published_at: String::new(),
            base: Vec::new(),
            errors,
            form_error: Some("The item was not saved: correct the fields marked below.".into()),
            revisions: None,
            pictures: Vec::new(),
            preview: None,
        },
    )
}

async fn load(state: &AppState, id: &str) -> Result<Node, AppError> {
    store::by_id(&state.db, parse_id(id)?)
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
pub(crate) async fn edit(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let node = load(&state, &id).await?;
    let section = node_section(&node)?;
    let values = values_of(&node);
    render(&ContentFormPage {
        layout: Layout::admin(&req),
        now: state.db.now(),
        section,
        kind: node.metadata.kind,
        action: edit_url(node.id),
        edit_version: node.metadata.nonce.to_hex(),
        fields: node_fields(node.metadata.kind, &values, &FieldErrors::default()),
        tags: node.metadata.tags.join(", "),
        published_at: minute_of(node.metadata.published),
        base: base_fields(&node),
        errors: FieldErrors::default(),
        revisions: Some(revisions::list(&state.db, node.id, REVISIONS_LISTED).await?),
        pictures: pictures_for(&state, node.metadata.kind).await?,
        preview: None,
        node: Some(node),
        form_error: None,
    })
}

/// The library pictures the editor offers: for kinds with Markdown text only.
async fn pictures_for(
    state: &AppState,
    kind: NodeType,
) -> Result<Vec<crate::content::library::LibraryFile>, AppError> {
    if matches!(kind, NodeType::Page | NodeType::Entry) {
        crate::admin::media::picker(state).await
    } else {
        Ok(Vec::new())
    }
}

/// The hidden `base_*` fields of the edit form (`form::base_fields`): the values it was loaded
/// with, and its photo, tags and exact publication, for the three-way merge of a lost race.
fn base_fields(node: &Node) -> Vec<(String, String)> {
    let mut values = values_of(node);
    for spec in all_fields(node.metadata.kind) {
        values.entry(spec.name.to_string()).or_default();
    }
    if node.metadata.kind == NodeType::Photo {
        let photo = node.photo_file().map(|f| f.to_hex()).unwrap_or_default();
        values.insert("photo".into(), photo);
    }
    values.insert("tags".into(), node.metadata.tags.join(", "));
    values.insert("publication".into(), millis_of(node.metadata.published));
    form::base_fields(&values)
}

/// A publication time for the form's datetime-local input (minutes, in the site's time zone);
/// empty for none.
fn minute_of(when: Option<DateTime>) -> String {
    when.map(|w| crate::db::site::time_zone().format(w, "%Y-%m-%dT%H:%M"))
        .unwrap_or_default()
}

/// A publication time exactly (milliseconds), for hidden fields; empty for none.
fn millis_of(when: Option<DateTime>) -> String {
    when.map(|w| w.timestamp_millis().to_string())
        .unwrap_or_default()
}

fn parse_millis(s: &str) -> Option<DateTime> {
    s.trim().parse::<i64>().ok().map(DateTime::from_millis)
}

/// What a submission of the edit form asks, parsed once: its values, tags and publication.
struct Edit {
    values: Values,
    /// `None`: the form had no tag field (the stored tags stay).
    tags: Option<Vec<String>>,
    publication: Option<DateTime>,
    /// The button asks for no change of the publication (Save, or Publish on a published
    /// node with its date untouched): the stored one stays, whatever the form's base says.
    keep_publication: bool,
    /// The publication field as typed, shown again when the form comes back with errors.
    typed_date: String,
}

/// The buttons of the one edit form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Save,
    Publish,
    Schedule,
    Unpublish,
    /// The conflict page's form: the publication is given exactly (`publication`).
    Resolve,
    /// Show the typed text rendered, save nothing.
    Preview,
}

impl Action {
    fn parse(s: &str) -> Option<Action> {
        Some(match s {
            "" | "save" => Action::Save,
            "publish" => Action::Publish,
            "schedule" => Action::Schedule,
            "unpublish" => Action::Unpublish,
            "resolve" => Action::Resolve,
            "preview" => Action::Preview,
            _ => return None,
        })
    }
}

/// The field values as submitted (long text normalised like the save does).
fn submitted_values(kind: NodeType, form: &Submitted) -> Values {
    all_fields(kind)
        .map(|spec| {
            let value = if spec.input == Input::Textarea {
                form.text(spec.name)
            } else {
                form.get(spec.name).to_string()
            };
            (spec.name.to_string(), value)
        })
        .collect()
}

/// Read the form: conflict choices applied, tags and the publication the pressed button asks
/// for. The publication is worked out against the base (what the form was loaded with), so
/// "Publish" on a published node keeps its date unless the editor changed the date field.
fn read_edit(
    kind: NodeType,
    form: &mut Submitted,
    now: DateTime,
    errors: &mut FieldErrors,
) -> Edit {
    // The conflict page's per-conflict choices: take the carried value of the chosen side
    // (`mine_{name}`, `theirs_{name}`); "edit" keeps the field as typed.
    form.apply_choices(&["mine", "theirs"], &[]);
    let values = submitted_values(kind, form);
    for spec in all_fields(kind) {
        if spec.input == Input::Textarea
            && crate::web::merge::has_conflict_markers(values.get(spec.name).map_or("", |s| s))
        {
            errors.add(
                spec.name,
                format!("{} still holds both versions between <<<<<<< and >>>>>>> lines: keep what should stay and delete the marker lines.", spec.label),
            );
        }
    }
    let tags = form.has("tags").then(|| {
        model::parse_tags(form.get("tags")).unwrap_or_else(|why| {
            errors.add("tags", why);
            Vec::new()
        })
    });
    let base_publication = parse_millis(form.get("base_publication"));
    let typed = form.get("published_at");
    let date_changed = typed != minute_of(base_publication);
    let parsed = match typed {
        "" => None,
        t => match parse_datetime(t) {
            Some(when) => Some(when),
            None => {
                errors.add(
                    "published_at",
                    format!(
                        "Enter the publication time as YYYY-MM-DD HH:MM ({}).",
                        crate::db::site::time_zone()
                    ),
                );
                None
            }
        },
    };
    let action = Action::parse(form.get("action")).unwrap_or_else(|| {
        errors.add("published_at", "Choose one of the form's buttons.");
        Action::Save
    });
    let mut keep_publication = false;
    let publication = match action {
        Action::Resolve => parse_millis(form.get("publication")),
        Action::Unpublish => None,
        Action::Schedule => {
            if typed.is_empty() {
                errors.add("published_at", "Enter the time to schedule it for.");
            }
            parsed.or(base_publication)
        }
        Action::Publish => match (base_publication, date_changed, parsed) {
            (_, true, Some(when)) => Some(when),
            (Some(when), false, _) if when <= now => {
                keep_publication = true;
                Some(when)
            }
            _ => Some(now),
        },
        Action::Save | Action::Preview => match (base_publication, date_changed, parsed) {
            (Some(_), true, Some(when)) => Some(when),
            (None, true, Some(_)) => {
                errors.add(
                    "published_at",
                    "A publication time is filled in: press Schedule to schedule it, or clear it to keep a draft.",
                );
                None
            }
            (base, ..) => {
                keep_publication = true;
                base
            }
        },
    };
    Edit {
        values,
        tags,
        publication,
        keep_publication,
        typed_date: typed.to_string(),
    }
}

/// The three-way merge of an edit with the version stored since its form was loaded.
struct MergeOutcome {
    edit: Edit,
    /// Labels of the fields the other editor changed that were merged in.
    merged: Vec<String>,
    /// The fields both changed differently (each carries what either choice takes).
    conflicts: Vec<FieldConflict>,
}

fn merge_edit(kind: NodeType, form: &Submitted, mine: Edit, stored: &Node) -> MergeOutcome {
    use crate::web::merge::{merge_set, merge_value, Merged};
    let base = form.base().unwrap_or_default();
    let theirs = values_of(stored);
    let fields = form::merge_fields(all_fields(kind), Some(&base), &mine.values, &theirs);
    let mut out = MergeOutcome {
        edit: Edit {
            values: fields.values,
            tags: None,
            publication: None,
            keep_publication: false,
            typed_date: mine.typed_date.clone(),
        },
        merged: fields.merged,
        conflicts: fields.conflicts,
    };
    // The form holds long text with both versions between markers, other fields mine.
    for conflict in &out.conflicts {
        out.edit
            .values
            .insert(conflict.name.clone(), conflict.unsettled.clone());
    }
    let stored_tags = &stored.metadata.tags;
    out.edit.tags = mine.tags.map(|tags| {
        let base_tags = model::parse_tags(form.get("base_tags")).unwrap_or_default();
        let merged = merge_set(&base_tags, &tags, stored_tags);
        if base_tags != *stored_tags {
            out.merged.push("Tags".into());
        }
        merged
    });
    let base_publication = parse_millis(form.get("base_publication"));
    out.edit.publication = match merge_value(
        &base_publication,
        &mine.publication,
        &stored.metadata.published,
    ) {
        Merged::Same(p) | Merged::Mine(p) => p,
        Merged::Theirs(p) => {
            out.merged.push("Publication".into());
            p
        }
        Merged::Conflict(m, t) => {
            let label = |p: Option<DateTime>| match p {
                None => "draft".to_string(),
                Some(p) => crate::db::site::time_zone().minute_label(p),
            };
            out.conflicts.push(FieldConflict {
                name: "publication".into(),
                label: "Publication".into(),
                base: label(base_publication),
                mine: label(m),
                theirs: label(t),
                hunks: Vec::new(),
                take_mine: millis_of(m),
                take_theirs: millis_of(t),
                unsettled: millis_of(m),
            });
            m
        }
    };
    out
}

use crate::admin::admin_name;

/// `POST /admin/content/{id}/edit`: the one edit form (text, tags, publication) saved in one
/// update under the form's nonce. When someone saved in between, the edit is merged three
/// ways with what they saved: changes on one side only are kept and saved (conditional again,
/// retried if it lost once more); true conflicts get the 409 page with both versions.
pub(crate) async fn update(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, AppError> {
    let stored = load(&state, &id).await?;
    let form = Submitted::from_pairs(form.into_inner());
    let outcome = save_form(&req, &state, stored, form, None).await?;
    Ok(outcome.response)
}

/// What [`save_form`] answered, and the file its save replaced (a photo node's old photo,
/// when a new one was saved).
struct FormOutcome {
    response: HttpResponse,
    saved: bool,
    replaced: Option<ObjectId>,
}

impl From<HttpResponse> for FormOutcome {
    fn from(response: HttpResponse) -> Self {
        FormOutcome {
            response,
            saved: false,
            replaced: None,
        }
    }
}

/// Files one photo node's edit form may carry.
const PHOTOS_PER_FORM: usize = 1;

/// `POST /admin/content/{id}/edit?csrf_token=…` as `multipart/form-data`: a photo node's one
/// edit form with its photo picker. The chosen photo streams into storage first; the fields
/// are then saved as [`update`] saves them, with the new photo in the same nonce-guarded
/// update. The replaced photo is deleted once the save landed; when it does not (a field
/// error, a conflict), the new one is deleted and the form says to choose it again.
pub(crate) async fn update_with_photo(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    payload: actix_multipart::Multipart,
) -> Result<HttpResponse, AppError> {
    let stored = load(&state, &id).await?;
    let mut form =
        crate::admin::upload_form::read(&state, payload, "photo", PHOTOS_PER_FORM).await?;
    let photo = form
        .stored
        .pop()
        .map(|(image, filename)| store::NewPhoto { image, filename });
    let mut fields = Submitted::from_pairs(form.pairs.drain(..));
    if let Some(refused) = form.refused.first() {
        fields.set(PHOTO_REFUSED, refused.clone());
    }
    let new_file = photo.as_ref().map(|p| p.image.id);
    let outcome = match save_form(&req, &state, stored, fields, photo).await {
        Ok(outcome) => outcome,
        Err(e) => {
            if let Some(file) = new_file {
                crate::media::delete_file(&state.db, file).await?;
            }
            return Err(e);
        }
    };
    match (outcome.saved, new_file) {
        (true, Some(_)) => {
            if let Some(old) = outcome.replaced {
                crate::media::delete_file(&state.db, old).await?;
            }
        }
        (false, Some(file)) => {
            crate::media::delete_file(&state.db, file).await?;
        }
        (_, None) => {}
    }
    Ok(outcome.response)
}

/// The form field under which [`update_with_photo`] hands a refused upload's reason on.
const PHOTO_REFUSED: &str = "photo_refused";

/// The one edit form's save (see [`update`]), with a photo node's new photo when one came.
async fn save_form(
    req: &HttpRequest,
    state: &AppState,
    mut stored: Node,
    mut form: Submitted,
    photo: Option<store::NewPhoto>,
) -> Result<FormOutcome, AppError> {
    let req = req.clone();
    let section = node_section(&stored)?;
    let kind = stored.metadata.kind;
    let form_nonce = form.edit_version().ok().flatten().ok_or_else(|| {
        AppError::BadRequest("The form is missing its version; open the editor again.".into())
    })?;
    let mut errors = FieldErrors::default();
    let mine = read_edit(kind, &mut form, state.db.now(), &mut errors);
    if Action::parse(form.get("action")) == Some(Action::Preview) {
        return Ok(preview_page(&req, state, section, stored, &form, &mine)
            .await?
            .into());
    }
    match form.get(PHOTO_REFUSED) {
        "" => {}
        why => errors.add(
            "photo",
            format!("The photo was not accepted ({why}); choose another file."),
        ),
    }
    if photo.is_some() && photo_chosen_again(&form, &stored) {
        errors.add(
            "photo",
            format!(
                "{} replaced the photo at {}, after you opened the editor: your photo was not \
                 saved. Choose it again to replace theirs.",
                stored
                    .metadata
                    .updated_by
                    .as_deref()
                    .unwrap_or("Another editor"),
                stored.updated_label()
            ),
        );
    }
    let by = admin_name(&req);
    for _ in 0..3 {
        let merging = stored.metadata.nonce != form_nonce;
        // A button that changes no publication asks for the version it started from: merged,
        // that takes the stored one; and so it does directly, base fields or none.
        let wish = match (mine.keep_publication, merging) {
            (false, _) => mine.publication,
            (true, true) => parse_millis(form.get("base_publication")),
            (true, false) => stored.metadata.published,
        };
        let (edit, merged) = if merging {
            let outcome = merge_edit(
                kind,
                &form,
                Edit {
                    values: mine.values.clone(),
                    tags: mine.tags.clone(),
                    publication: wish,
                    keep_publication: false,
                    typed_date: mine.typed_date.clone(),
                },
                &stored,
            );
            if !outcome.conflicts.is_empty() {
                return Ok(
                    conflict_page(&req, state.db.now(), section, stored, outcome, errors)?.into(),
                );
            }
            (outcome.edit, outcome.merged)
        } else {
            (
                Edit {
                    values: mine.values.clone(),
                    tags: mine.tags.clone(),
                    publication: wish,
                    keep_publication: false,
                    typed_date: mine.typed_date.clone(),
                },
                Vec::new(),
            )
        };
        let mut errors = errors.clone();
        if kind == NodeType::Photo
            && edit.publication.is_some()
            && stored.photo_file().is_none()
            && photo.is_none()
        {
            errors.add(
                "published_at",
                "Upload the photo first: a photo post cannot be published without its photo.",
            );
        }
        let input = match parse_node(section, kind, &Submitted::from_pairs(edit.values.clone())) {
            Ok(input) if errors.is_empty() => input,
            Ok(_) => {
                return Ok(
                    edit_errors(&req, state.db.now(), section, stored, &edit, errors)?.into(),
                )
            }
            Err(more) => {
                errors.extend(more);
                return Ok(
                    edit_errors(&req, state.db.now(), section, stored, &edit, errors)?.into(),
                );
            }
        };
        let extras = store::EditExtras {
            tags: edit.tags.clone(),
            published: (edit.publication != stored.metadata.published).then_some(edit.publication),
            by: by.clone(),
            kept: revisions::Retention::new(state.revisions_kept),
            photo: photo.clone(),
        };
        let nonce = stored.metadata.nonce;
        match store::save_edit(&state.db, &stored, nonce, &input, &extras).await {
            Ok(true) => {
                let mut message = saved_message(&stored, &edit, state.db.now());
                if !merged.is_empty() {
                    message = format!(
                        "{message} Merged with the changes {} saved at {}: {}.",
                        stored
                            .metadata
                            .updated_by
                            .as_deref()
                            .unwrap_or("another editor"),
                        stored.updated_label(),
                        merged.join(", ")
                    );
                }
                if photo.is_some() {
                    message.push_str(" The new photo is in place.");
                }
                flash::push(&req.get_session(), Level::Success, message);
                return Ok(FormOutcome {
                    response: see_other(&edit_url(stored.id)),
                    saved: true,
                    replaced: stored.photo_file(),
                });
            }
            Ok(false) => {
                stored = store::by_id(&state.db, stored.id).await?.ok_or_else(|| {
                    AppError::Conflict("This item was deleted while you were editing it.".into())
                })?;
                if photo.is_some() && photo_chosen_again(&form, &stored) {
                    // Someone replaced the photo between the last read and this save.
                    let mut errors = errors.clone();
                    errors.add(
                        "photo",
                        "The photo was replaced by another editor meanwhile: yours was not \
                         saved. Choose it again to replace theirs.",
                    );
                    return Ok(
                        edit_errors(&req, state.db.now(), section, stored, &edit, errors)?.into(),
                    );
                }
            }
            Err(ContentError::SlugTaken) => {
                errors.extend(slug_taken());
                return Ok(
                    edit_errors(&req, state.db.now(), section, stored, &edit, errors)?.into(),
                );
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(AppError::Conflict(
        "This item keeps changing while you save it; open the editor again.".into(),
    ))
}

/// Whether the stored photo is no longer the one the form was loaded with (`base_photo`): a
/// new photo sent with it would silently replace another editor's.
fn photo_chosen_again(form: &Submitted, stored: &Node) -> bool {
    let base = form.get("base_photo");
    let now = stored.photo_file().map(|f| f.to_hex()).unwrap_or_default();
    base != now
}

/// The Preview button: the form again exactly as typed (same nonce and base, so a later save
/// merges as it would have), with the text rendered as readers will see it above it. Nothing
/// is saved; the page says so, and the unsaved-changes warning stays armed.
async fn preview_page(
    req: &HttpRequest,
    state: &AppState,
    section: &'static Section,
    stored: Node,
    form: &Submitted,
    edit: &Edit,
) -> Result<HttpResponse, AppError> {
    let kind = stored.metadata.kind;
    let text = edit.values.get("text").map_or("", String::as_str);
    let rendered = match kind {
        NodeType::Page | NodeType::Entry => crate::content::markdown::render(text),
        _ => String::new(),
    };
    let base = form.prefixed(form::BASE_PREFIX);
    render(&ContentFormPage {
        layout: Layout::admin(req),
        now: state.db.now(),
        section,
        kind,
        action: edit_url(stored.id),
        edit_version: form.get(form::EDIT_TOKEN).to_string(),
        fields: node_fields(kind, &edit.values, &FieldErrors::default()),
        tags: form.get("tags").to_string(),
        published_at: edit.typed_date.clone(),
        base,
        errors: FieldErrors::default(),
        form_error: None,
        revisions: None,
        pictures: pictures_for(state, kind).await?,
        preview: Some(rendered),
        node: Some(stored),
    })
}

/// What the flash says after a save, by what happened to the publication.
fn saved_message(stored: &Node, edit: &Edit, now: DateTime) -> String {
    if edit.publication == stored.metadata.published {
        return "Saved.".into();
    }
    match edit.publication {
        None => "Saved and unpublished: it is a draft again.".into(),
        Some(when) if when > now => format!(
            "Saved and scheduled for {}.",
            crate::db::site::time_zone().minute_label(when)
        ),
        Some(_) => "Saved and published.".into(),
    }
}

/// The edit form again (422) with everything the editor sent and what to correct. It saves
/// under the stored nonce with the stored version as its base: what was sent is already merged.
fn edit_errors(
    req: &HttpRequest,
    now: DateTime,
    section: &'static Section,
    stored: Node,
    edit: &Edit,
    errors: FieldErrors,
) -> Result<HttpResponse, AppError> {
    let kind = stored.metadata.kind;
    render_status(
        StatusCode::UNPROCESSABLE_ENTITY,
        &ContentFormPage {
            layout: Layout::admin(req),
            now,
            section,
            kind,
            action: edit_url(stored.id),
            edit_version: stored.metadata.nonce.to_hex(),
            fields: node_fields(kind, &edit.values, &errors),
            tags: edit
                .tags
                .as_ref()
                .unwrap_or(&stored.metadata.tags)
                .join(", "),
            published_at: edit.typed_date.clone(),
            base: base_fields(&stored),
            errors,
            node: Some(stored),
            form_error: Some("The changes were not saved: correct the fields marked below.".into()),
            revisions: None,
            pictures: Vec::new(),
            preview: None,
        },
    )
}

/// The 409 page: only the fields both editors changed differently, side by side (yours, theirs,
/// the version you started from) with a choice each, in a form holding the whole merged edit.
fn conflict_page(
    req: &HttpRequest,
    now: DateTime,
    section: &'static Section,
    stored: Node,
    outcome: MergeOutcome,
    errors: FieldErrors,
) -> Result<HttpResponse, AppError> {
    let kind = stored.metadata.kind;
    let mut carried: Vec<(String, String)> = base_fields(&stored);
    // What each choice takes (`Submitted::apply_choices`).
    for c in &outcome.conflicts {
        carried.push((format!("mine_{}", c.name), c.take_mine.clone()));
        carried.push((format!("theirs_{}", c.name), c.take_theirs.clone()));
    }
    carried.push(("publication".into(), millis_of(outcome.edit.publication)));
    let page = ContentConflictPage {
        layout: Layout::admin(req),
        action: edit_url(stored.id),
        edit_version: stored.metadata.nonce.to_hex(),
        saved_by: stored
            .metadata
            .updated_by
            .clone()
            .unwrap_or_else(|| "another editor".into()),
        saved_at: stored.updated_label(),
        merged: outcome.merged,
        conflicts: outcome.conflicts,
        form: ContentFormPage {
            layout: Layout::admin(req),
            now,
            section,
            kind,
            action: edit_url(stored.id),
            edit_version: stored.metadata.nonce.to_hex(),
            fields: node_fields(kind, &outcome.edit.values, &errors),
            tags: outcome
                .edit
                .tags
                .as_ref()
                .unwrap_or(&stored.metadata.tags)
                .join(", "),
            published_at: minute_of(outcome.edit.publication),
            base: carried,
            errors,
            node: Some(stored.clone()),
            form_error: None,
            revisions: None,
            pictures: Vec::new(),
            preview: None,
        },
        node: stored,
    };
    render_status(StatusCode::CONFLICT, &page)
}

/// `YYYY-MM-DDTHH:MM` (what a datetime-local input sends) or with a space, read in the site's
/// time zone.
fn parse_datetime(s: &str) -> Option<DateTime> {
    let s = s.trim().replace(' ', "T");
    let local = chrono::NaiveDateTime::parse_from_str(&s, "%Y-%m-%dT%H:%M").ok()?;
    if !(1970..=9999).contains(&chrono::Datelike::year(&local)) {
        return None;
    }
    Some(crate::db::site::time_zone().instant(local))
}

// ---------------------------------------------------------------------------------------------
// Photos

/// `POST /admin/content/{id}/photo?csrf_token=…&edit_version=…` (multipart, field `photo`): streams
/// into GridFS under the node's upload lock, then switches the node to the new file.
pub(crate) async fn upload_photo(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    params: web::Query<HashMap<String, String>>,
    mut payload: actix_multipart::Multipart,
) -> Result<HttpResponse, AppError> {
    let id = parse_id(&id)?;
    let nonce = Submitted::from_pairs(params.into_inner())
        .edit_version()
        .ok()
        .flatten()
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

// ---------------------------------------------------------------------------------------------
// Revisions

/// One revision of a node next to the current version (or another revision): each field of
/// both, with a line diff from the revision to the other, and the form restoring the revision.
#[derive(Template)]
#[template(path = "admin/content/revision.html")]
pub(crate) struct RevisionPage {
    pub(crate) layout: Layout,
    pub(crate) node: Node,
    pub(crate) revision: Revision,
    /// The revision compared with, when not the current version (`?against=`).
    pub(crate) against: Option<Revision>,
    /// `stored`: the revision's value; `theirs`: the compared version's.
    pub(crate) diff: crate::web::conflict::Conflict,
    /// The current version's edit token: a restore saves under it, so an edit saved meanwhile
    /// is detected rather than overwritten.
    pub(crate) edit_version: String,
    /// Other revisions to compare with.
    pub(crate) others: Vec<Revision>,
}

impl RevisionPage {
    /// What the revision is compared with, in words.
    pub(crate) fn other_label(&self) -> String {
        match &self.against {
            Some(r) => format!("the revision of {}", r.at_label()),
            None => "the current version".into(),
        }
    }
}

/// A publication as the revision page shows it.
fn publication_label(when: Option<DateTime>) -> String {
    match when {
        None => "draft".into(),
        Some(p) => crate::db::site::time_zone().minute_label(p),
    }
}

/// Every editable field of `old` and `new` (two versions of one node), with line diffs.
fn version_diff(old: &Node, new: &Node) -> crate::web::conflict::Conflict {
    let mut diff = crate::web::conflict::Conflict::new();
    let (old_values, new_values) = (values_of(old), values_of(new));
    for spec in all_fields(old.metadata.kind) {
        // The author is not part of a revision: the current one stays on restore.
        if spec.name == "author" {
            continue;
        }
        let value = |v: &Values| v.get(spec.name).cloned().unwrap_or_default();
        diff.field(spec.label, &value(&new_values), &value(&old_values));
    }
    diff.field(
        "Tags",
        &new.metadata.tags.join(", "),
        &old.metadata.tags.join(", "),
    );
    diff.field(
        "Publication",
        &publication_label(new.metadata.published),
        &publication_label(old.metadata.published),
    );
    diff
}

/// Revision `rev` of `node`; a bad or foreign id is a 404.
async fn load_revision(state: &AppState, node: &Node, rev: &str) -> Result<Revision, AppError> {
    revisions::get(&state.db, node.id, parse_id(rev)?)
        .await?
        .ok_or(AppError::NotFound)
}

/// `GET /admin/content/{id}/revisions/{rev}?against={other}`: the revision, its diff against
/// the current version (or revision `other`), and a button restoring it.
pub(crate) async fn revision(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let (id, rev) = path.into_inner();
    let node = load(&state, &id).await?;
    let revision = load_revision(&state, &node, &rev).await?;
    let against = match params.get("against").map(String::as_str) {
        None | Some("") => None,
        Some(other) => Some(load_revision(&state, &node, other).await?),
    };
    let then = node.as_of(&revision);
    let diff = match &against {
        Some(other) => version_diff(&then, &node.as_of(other)),
        None => version_diff(&then, &node),
    };
    let others = revisions::list(&state.db, node.id, REVISIONS_LISTED)
        .await?
        .into_iter()
        .filter(|r| r.id != revision.id)
        .collect();
    render(&RevisionPage {
        layout: Layout::admin(&req),
        edit_version: node.metadata.nonce.to_hex(),
        node,
        revision,
        against,
        diff,
        others,
    })
}

/// `POST /admin/content/{id}/revisions/{rev}/restore` (`edit_version`: the current version's when the
/// revision page was opened): saves the revision's fields through the same nonce-guarded save
/// as the edit form, so the version it replaces becomes a revision in turn, and an edit saved
/// since the page was opened is reported (409) rather than overwritten.
pub(crate) async fn restore_revision(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, AppError> {
    let (id, rev) = path.into_inner();
    let node = load(&state, &id).await?;
    let revision = load_revision(&state, &node, &rev).await?;
    let form_nonce = Submitted::from_pairs(form.into_inner())
        .edit_version()
        .ok()
        .flatten()
        .ok_or_else(|| {
            AppError::BadRequest("The form is missing its version; open the revision again.".into())
        })?;
    let changed = || {
        AppError::Conflict(
            "This item was saved since you opened the revision: open the revision again to \
             compare it with the new version before restoring it."
                .into(),
        )
    };
    if form_nonce != node.metadata.nonce {
        return Err(changed());
    }
    let detail = Detail::parse(node.metadata.kind, &revision.detail).map_err(|e| {
        AppError::Internal(anyhow::anyhow!(
            "revision {} of node {} has an unreadable detail: {e}",
            revision.id,
            node.id
        ))
    })?;
    let input = NodeInput {
        section: node.metadata.section.clone(),
        slug: revision.slug.clone(),
        title: revision.title.clone(),
        author: node.metadata.author.name.clone(),
        detail,
    };
    let extras = store::EditExtras {
        tags: Some(revision.tags.clone()),
        published: (revision.published != node.metadata.published).then_some(revision.published),
        by: admin_name(&req),
        kept: revisions::Retention::new(state.revisions_kept),
        photo: None,
    };
    match store::save_edit(&state.db, &node, form_nonce, &input, &extras).await {
        Ok(true) => {
            flash::push(
                &req.get_session(),
                Level::Success,
                format!(
                    "Restored the version of {}; the version it replaced is kept as a revision.",
                    revision.at_label()
                ),
            );
            Ok(see_other(&edit_url(node.id)))
        }
        Ok(false) => Err(changed()),
        Err(ContentError::SlugTaken) => Err(AppError::Conflict(format!(
            "Not restored: its slug “{}” is now used by another item of this section.",
            revision.slug
        ))),
        Err(e) => Err(e.into()),
    }
}

/// Orphans listed on one review page (and so deleted by one confirmation) at most.
const MAX_ORPHANS_LISTED: usize = 1000;

#[derive(Template)]
#[template(path = "admin/content/orphans.html")]
pub(crate) struct OrphansPage {
    pub(crate) layout: Layout,
    pub(crate) orphans: Vec<photos::OrphanFile>,
    /// Orphans found beyond the listed ones.
    pub(crate) more: usize,
}

impl OrphansPage {
    /// Files the confirmation deletes, copies included.
    pub(crate) fn total_files(&self) -> usize {
        self.orphans.iter().map(|o| 1 + o.derivatives.len()).sum()
    }

    pub(crate) fn size(&self, o: &photos::OrphanFile) -> String {
        match o.length {
            n if n >= 1024 * 1024 => format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0)),
            n if n >= 1024 => format!("{} KiB", n / 1024),
            n => format!("{n} bytes"),
        }
    }

    pub(crate) fn uploaded(&self, o: &photos::OrphanFile) -> String {
        o.uploaded.map_or(String::new(), |d| {
            crate::db::site::time_zone().minute_label(d)
        })
    }
}

/// `GET /admin/content/orphans`: the dry run. Lists the files the clean-up would delete (older
/// than an hour, referred to from nowhere), with a button to confirm.
pub(crate) async fn review_orphans(
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
pub(crate) async fn clean_orphans(
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
pub(crate) struct DeletePage {
    pub(crate) layout: Layout,
    pub(crate) node: Node,
    /// The site clock's time that says whether the node is public.
    pub(crate) now: DateTime,
}

/// `GET /admin/content/{id}/delete`: what will go, and a button.
pub(crate) async fn confirm_delete(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let node = load(&state, &id).await?;
    render(&DeletePage {
        layout: Layout::admin(&req),
        now: state.db.now(),
        node,
    })
}

/// `POST /admin/content/{id}/delete`
pub(crate) async fn delete(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let id = parse_id(&id)?;
    let node = store::delete(&state.db, id)
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

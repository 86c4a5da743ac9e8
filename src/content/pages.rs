//! Public content pages: a section's list (`/{section}/`), a node (`/{section}/{slug}`) and
//! the tag pages (`/tags/{tag}`) listing nodes and products. Drafts and nodes scheduled for
//! later are never shown: every query asks for what a visitor may see at the site clock's now,
//! and a node page read from the content cache (which keeps scheduled nodes, never drafts)
//! checks its node's publication time against now on every view.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::catalog::card::ProductCard;
use crate::catalog::products;
use crate::comments::pages::{self as comment_pages, CommentInput, Submitted};
use crate::comments::rate_limit::CommentRateLimit;
use crate::comments::thread::{self, PageAt, ThreadView};
use crate::content::model::{self, section, Node, Section};
use crate::content::store;
use crate::content::stream::{self, At, Cursor, Neighbour};
use crate::db::site::SiteSettings;
use crate::db::{Db, DbError};
use crate::domain::Slug;
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::layout::{render, Layout};
use crate::web::meta::{PageMeta, ScriptJson, SocialImage};
use crate::web::rendered::Part;

/// Nodes per list page.
pub const PAGE_SIZE: i64 = 10;
/// Gallery thumbnails per page.
pub(crate) const GRID_PAGE_SIZE: i64 = 24;
/// Most nodes and products a tag page lists of each.
/// A content refusal is shown as a conflict; a database failure as its page.
impl From<crate::content::ContentError> for AppError {
    fn from(e: crate::content::ContentError) -> Self {
        use crate::content::ContentError;
        match e {
            ContentError::Db(db) => db.into(),
            other => AppError::Conflict(other.to_string()),
        }
    }
}

const TAG_LIMIT: i64 = 50;

#[derive(Template)]
#[template(path = "content/section.html")]
pub(crate) struct SectionPage {
    pub(crate) layout: Layout,
    pub(crate) section: &'static Section,
    /// The page's cards and its "Newer" and "Older" links ([`StreamPart`]), as rendered once
    /// for the cached page.
    pub(crate) cards: Arc<str>,
}

/// A stream page's cards (no body text: `metadata.summary` stands in for it) and its "Newer"
/// and "Older" links: what a [`SectionPage`] shows of the cached [`stream::Page`], rendered
/// once per cached page and site settings (`web::rendered`).
#[derive(Template)]
#[template(path = "content/_stream.html")]
struct StreamPart<'a> {
    section: &'static Section,
    stream: &'a stream::Page,
}

impl StreamPart<'_> {
    /// Where "Newer posts" leads: the first page when it is the newest.
    fn newer_url(&self, point: &Cursor) -> String {
        format!("/{}/?after={}", self.section.name, point.token())
    }

    fn older_url(&self, point: &Cursor) -> String {
        format!("/{}/?before={}", self.section.name, point.token())
    }
}

#[derive(Template)]
#[template(path = "content/node.html")]
pub(crate) struct NodePage {
    pub(crate) layout: Layout,
    pub(crate) section: &'static Section,
    /// The node, as the content cache holds it (shared by the views meanwhile).
    pub(crate) node: Arc<Node>,
    /// What the page shows of the node alone, made once per cached node.
    pub(crate) view: Arc<PostView>,
    /// The posts just newer and just older in the section (none for pages).
    pub(crate) newer: Option<Neighbour>,
    pub(crate) older: Option<Neighbour>,
    /// The node's comments (the page asked for) and the comment form.
    pub(crate) thread: ThreadView,
    /// Shown through a preview link (`content::preview`): a banner, no comments, no neighbours.
    pub(crate) preview: bool,
    /// The site clock's time the preview banner tells the node's status at.
    pub(crate) now: bson::DateTime,
}

/// What a post's (or page's) page shows of the node alone, made once per cached node and
/// site settings and address (`web::rendered`) rather than once per view: the article's
/// HTML ([`PostBody`]) and the node's `<head>` metadata. A preview and a refused comment's
/// page, which read the node from the database, make their own.
pub(crate) struct PostView {
    /// The article's breadcrumb, title, date line, body and tags.
    body: String,
    /// The title, description, picture and structured data [`node_meta`] sets.
    title: String,
    description: String,
    image: Option<SocialImage>,
    json_ld: Vec<ScriptJson>,
}

impl PostView {
    /// The view of `node` in `section` for pages with these settings at this site address.
    fn new(
        section: &'static Section,
        node: &Node,
        settings: &SiteSettings,
        site_url: &str,
    ) -> Result<PostView, AppError> {
        let body = render_part(&PostBody { section, node })?;
        // The defaults of a public page, then what the node changes: only the fields this
        // view keeps are read back (the canonical address is the request's).
        let mut meta = PageMeta::for_page(site_url, "", settings);
        node_meta(&mut meta, section, node);
        Ok(PostView {
            body,
            json_ld: meta.take_json_ld(),
            title: meta.title,
            description: meta.description,
            image: meta.image,
        })
    }

    /// The view of `node` for a page not served from the content cache (a preview, a refused
    /// comment's page), made for this request alone with the current settings and the
    /// address `layout` was made for.
    fn uncached(
        section: &'static Section,
        node: &Node,
        layout: &Layout,
    ) -> Result<Arc<PostView>, AppError> {
        let settings = crate::db::site::current();
        PostView::new(section, node, &settings, &layout.meta.site_url).map(Arc::new)
    }

    /// Sets what [`node_meta`] sets in `meta` (the layout's defaults for the page).
    fn fill_meta(&self, meta: &mut PageMeta, section: &Section) {
        meta.title.clone_from(&self.title);
        meta.description.clone_from(&self.description);
        meta.image.clone_from(&self.image);
        section_meta(meta, section);
        for json in &self.json_ld {
            meta.push_script_json(json.clone());
        }
    }
}

/// The part of a node's page inside its `<article>` before the neighbour links.
#[derive(Template)]
#[template(path = "content/_post.html")]
struct PostBody<'a> {
    section: &'static Section,
    node: &'a Node,
}

#[derive(Template)]
#[template(path = "content/tag.html")]
pub(crate) struct TagPage {
    pub(crate) layout: Layout,
    pub(crate) tag: String,
    /// What the tag page lists ([`TagListingPart`]), as rendered once for the cached listing.
    pub(crate) listed: Arc<str>,
}

/// The newest published nodes and the products on sale carrying a tag (at most
/// [`TAG_LIMIT`] of each).
#[derive(Debug)]
pub(crate) struct TagListing {
    pub(crate) nodes: Vec<Node>,
    pub(crate) products: Vec<ProductCard>,
    /// The listing rendered as the tag page shows it ([`TagListingPart`]).
    shown: Part,
}

/// The posts and products a [`TagPage`] lists, rendered once per cached [`TagListing`] and
/// site settings (`web::rendered`: the dates' time zone, the prices' currency).
#[derive(Template)]
#[template(path = "content/_tag_listing.html")]
struct TagListingPart<'a> {
    listing: &'a TagListing,
}

/// `part` rendered, as a page's error when rendering fails.
fn render_part(part: &impl Template) -> Result<String, AppError> {
    part.render()
        .map_err(|e| AppError::Internal(anyhow::anyhow!("rendering a template failed: {e}")))
}

/// The tag page's listing: from the content cache while fresh (a product write through this
/// instance makes it stale too, since it lists products), else two finds.
async fn tag_listing(state: &AppState, tag: &str) -> Result<Arc<TagListing>, AppError> {
    let db = &state.db;
    let key = (TAG_PAGE, tag.to_string());
    Ok(crate::content::cache::get_or_load(db, key, true, async {
        let nodes = store::published_with_tag(db, tag, TAG_LIMIT).await?;
        let products = products::with_tag(db, tag, TAG_LIMIT).await?;
        Ok::<_, crate::db::DbError>(TagListing {
            nodes,
            products,
            shown: Part::default(),
        })
    })
    .await?)
}

/// The tag pages' part of the content cache's keys.
const TAG_PAGE: &str = "tag page";

fn known_section(name: &str) -> Result<&'static Section, AppError> {
    section(name).ok_or(AppError::NotFound)
}

/// `GET /{section}/` (and without the trailing slash).
pub(crate) async fn list(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let section = known_section(&path)?;
    let param = |name: &str| params.get(name).map(String::as_str);
    let at = At::from_params(param("before"), param("after"), param("page"))
        .map_err(|m| AppError::BadRequest(m.into()))?;
    let size = if section.grid {
        GRID_PAGE_SIZE
    } else {
        PAGE_SIZE
    };
    let stream = stream::page(&state.db, section.name, at, size).await?;
    if stream.nodes.is_empty() && at != At::Newest {
        return Err(AppError::NotFound);
    }
    let mut layout = Layout::public(&req);
    let base = format!("/{}/", section.name);
    layout.meta.listing(&base, &params);
    layout.meta.title = section.title.to_string();
    layout.meta.add_feed(
        format!("{} · {}", layout.meta.site_name, section.title),
        &format!("/{}/feed.atom", section.name),
    );
    let cards = stream
        .shown
        .get_or_render(&crate::db::site::current(), || {
            render_part(&StreamPart {
                section,
                stream: &stream,
            })
        })?;
    render(&SectionPage {
        layout,
        section,
        cards,
    })
}

/// `GET /{section}/{slug}` (`?after=` / `?before=` page through its comments)
pub(crate) async fn show(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let (section_name, slug) = path.into_inner();
    let section = known_section(&section_name)?;
    let cached = match Slug::parse(&slug) {
        Ok(slug) => shown_node(&state.db, section.name, &slug).await?,
        // An address segment that is no slug names no node.
        Err(_) => None,
    };
    let Some((node, cached)) = cached else {
        return moved(&req, &state, &section_name, &slug, "").await;
    };
    let at = PageAt::from_params(
        params.get("after").map(String::as_str),
        params.get("before").map(String::as_str),
    );
    let mut thread = comments_page(&state, &node, at).await?;
    thread.prefill_remembered(&req);
    let (newer, older) = neighbours_of(&state, section, &node).await?;
    let mut layout = Layout::public(&req);
    let settings = crate::db::site::current();
    let site_url = &layout.meta.site_url;
    let view = cached.view.get_or_make(&settings, site_url, || {
        PostView::new(section, &node, &settings, site_url).map(Arc::new)
    })?;
    view.fill_meta(&mut layout.meta, section);
    render(&NodePage {
        layout,
        section,
        node,
        view,
        newer,
        older,
        thread,
        preview: false,
        now: state.db.now(),
    })
}

/// A page of `node`'s comments. The first page, what nearly every view shows, is read from the
/// content cache while fresh (keyed by the node and its count of visible comments, so it
/// always matches the count shown above it); the pages further on are read each time.
async fn comments_page(state: &AppState, node: &Node, at: PageAt) -> Result<ThreadView, DbError> {
    let db = &state.db;
    let count = node.metadata.comment_count;
    if at != PageAt::First {
        return thread::page(db, node.discussion(), count, at, &state.comments).await;
    }
    let size = state.comments.page_size;
    let key = (node.id, count);
    let comments = crate::content::cache::get_or_load(db, key, false, async {
        thread::read_page(db, node.id, count, &PageAt::First, size).await
    })
    .await?;
    Ok(thread::view(
        db,
        node.discussion(),
        count,
        (*comments).clone(),
        &state.comments,
    ))
}

/// `GET /preview/{id}?expires=…&sig=…`: any node, draft or scheduled, as readers will see it,
/// to whoever holds a link the site signed, until it expires (`content::preview`). A link that
/// is not the site's is a 404; an expired one says so.
pub(crate) async fn preview(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    use crate::content::preview::{self, Checked};
    let id = bson::oid::ObjectId::parse_str(path.as_str()).map_err(|_| AppError::NotFound)?;
    let expires = params
        .get("expires")
        .and_then(|e| e.parse::<i64>().ok())
        .ok_or(AppError::NotFound)?;
    let sig = params.get("sig").map_or("", String::as_str);
    match preview::check(&state.db, id, expires, sig).await? {
        Checked::Forged => return Err(AppError::NotFound),
        Checked::Expired => {
            return Err(AppError::Forbidden(
                "This preview link has expired. Ask the editor for a new one.",
            ))
        }
        Checked::Valid => {}
    }
    // This browser may now fetch the draft's photo until the link expires.
    preview::grant(&actix_session::SessionExt::get_session(&req), id, expires);
    // Read from the database, never the content cache: a preview shows drafts.
    let node = Arc::new(
        store::by_id(&state.db, id)
            .await?
            .ok_or(AppError::NotFound)?,
    );
    let section = known_section(&node.metadata.section)?;
    let thread = thread::first_page(
        &state.db,
        node.discussion(),
        node.metadata.comment_count,
        &state.comments,
    )
    .await?;
    let mut layout = Layout::public(&req);
    let view = PostView::uncached(section, &node, &layout)?;
    view.fill_meta(&mut layout.meta, section);
    layout.meta.noindex = true;
    let mut response = render(&NodePage {
        layout,
        section,
        node,
        view,
        newer: None,
        older: None,
        thread,
        preview: true,
        now: state.db.now(),
    })?;
    response.headers_mut().insert(
        actix_web::http::header::CACHE_CONTROL,
        actix_web::http::header::HeaderValue::from_static("private, no-store"),
    );
    Ok(response)
}

/// The posts around `node` in its section; pages have no order, so no neighbours.
async fn neighbours_of(
    state: &AppState,
    section: &Section,
    node: &Node,
) -> Result<(Option<Neighbour>, Option<Neighbour>), AppError> {
    if section.name == "pages" {
        return Ok((None, None));
    }
    Ok(stream::neighbours(&state.db, node).await?)
}

/// What a node says of itself in a shared link: its first words (an entry's or page's text, a
/// photo's caption, a quote, a link's text) and its photo.
fn node_meta(meta: &mut PageMeta, section: &Section, node: &Node) {
    meta.title = node.metadata.title.clone();
    meta.describe(&node.summary().text);
    if let Some(file) = node.photo_file() {
        meta.picture(file, &node.metadata.title);
    }
    section_meta(meta, section);
    if section.name == "pages" {
        return;
    }
    let url = meta.absolute(&node.url());
    let published = node.metadata.published.unwrap_or(node.metadata.created);
    let settings = crate::db::site::current();
    let keywords = node.metadata.tags.join(", ");
    let data = crate::web::meta::json_for_script(&PostingData {
        context: "https://schema.org",
        kind: "BlogPosting",
        headline: &node.metadata.title,
        url: &url,
        main_entity_of_page: &url,
        date_published: iso(published),
        date_modified: iso(node.metadata.updated),
        author: NamedData {
            kind: "Person",
            name: &node.metadata.author.name,
        },
        publisher: NamedData {
            kind: "Organization",
            name: settings.organisation_name(),
        },
        description: &meta.description,
        image: meta.image.as_ref().map(|image| [image.url.as_str()]),
        keywords: (!keywords.is_empty()).then_some(keywords.as_str()),
    });
    meta.push_script_json(data);
}

/// What a node's section sets in its page's metadata: the section's feed, and for the
/// tumblelog and the gallery (not pages) the `article` type, since their posts are articles
/// with an author and dates.
fn section_meta(meta: &mut PageMeta, section: &Section) {
    meta.add_feed(
        format!("{} · {}", meta.site_name, section.title),
        &format!("/{}/feed.atom", section.name),
    );
    if section.name != "pages" {
        meta.og_type = "article";
    }
}

/// schema.org's `BlogPosting`, serialized in this key order (picture and keywords last, when
/// there are any). Written from typed values, not built as `serde_json` maps first.
#[derive(serde::Serialize)]
struct PostingData<'a> {
    #[serde(rename = "@context")]
    context: &'static str,
    #[serde(rename = "@type")]
    kind: &'static str,
    headline: &'a str,
    url: &'a str,
    #[serde(rename = "mainEntityOfPage")]
    main_entity_of_page: &'a str,
    #[serde(rename = "datePublished")]
    date_published: String,
    #[serde(rename = "dateModified")]
    date_modified: String,
    author: NamedData<'a>,
    publisher: NamedData<'a>,
    description: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    image: Option<[&'a str; 1]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    keywords: Option<&'a str>,
}

/// A `Person` or `Organization` known by its name.
#[derive(serde::Serialize)]
struct NamedData<'a> {
    #[serde(rename = "@type")]
    kind: &'static str,
    name: &'a str,
}

fn iso(at: bson::DateTime) -> String {
    at.to_chrono().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Where a handler reads the node it shows or posts to from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    /// The content cache ([`shown_node`]): the pages a visitor reads.
    Cached,
    /// The database: a comment being posted, so that whether the discussion is closed, and
    /// the count the refused form shows, are never up to [`crate::content::cache::TTL`] old.
    Fresh,
}

/// The published node at `(section, slug)`, or 404.
async fn published_node(
    state: &AppState,
    (section_name, slug): (String, String),
    read: Read,
) -> Result<(&'static Section, Arc<Node>), AppError> {
    let section = known_section(&section_name)?;
    // An address segment that is no slug names no node (a 404, like any unknown slug).
    let slug = Slug::parse(&slug).map_err(|_| AppError::NotFound)?;
    let node = match read {
        Read::Cached => shown_node(&state.db, section.name, &slug)
            .await?
            .map(|(node, _)| node),
        Read::Fresh => store::published_by_slug(&state.db, section.name, &slug)
            .await?
            .map(Arc::new),
    };
    Ok((section, node.ok_or(AppError::NotFound)?))
}

/// A post (or page) as the content cache keeps it: the node at its address unless it is a
/// draft (`None`: no node there, or a draft), what its page shows of it once a view has made
/// that, and whether this entry's node was marked live.
struct CachedNode {
    node: Option<Arc<Node>>,
    view: Part<PostView>,
    /// [`store::keep_shown`] has marked the node live for this entry: a scheduled node shown
    /// before the background job marked it is written once per entry, not once per view.
    marked_live: AtomicBool,
}

/// The node at `/{section}/{slug}` if a visitor may see it now, with the content cache's entry
/// holding it: from the content cache while fresh (at most [`crate::content::cache::TTL`] old,
/// dropped by this instance's node and comment writes), else one find. The cache keeps
/// scheduled nodes too and each view checks the publication time against the site's clock at
/// the view, so a scheduled post shows once its time comes, not once the entry is reloaded.
async fn shown_node(
    db: &Db,
    section: &'static str,
    slug: &Slug,
) -> Result<Option<(Arc<Node>, Arc<CachedNode>)>, DbError> {
    let key = (section, slug.as_str().to_string());
    let cached = crate::content::cache::get_or_load(db, key, false, async {
        let node = store::published_or_scheduled_by_slug(db, section, slug).await?;
        Ok::<_, DbError>(CachedNode {
            node: node.map(Arc::new),
            view: Part::default(),
            marked_live: AtomicBool::new(false),
        })
    })
    .await?;
    let Some(node) = cached.node.clone() else {
        return Ok(None);
    };
    if !store::is_visible_at(&node, db.now()) {
        return Ok(None);
    }
    if !node.metadata.live && !cached.marked_live.load(Ordering::Relaxed) {
        store::keep_shown(db, std::slice::from_ref(&*node)).await?;
        cached.marked_live.store(true, Ordering::Relaxed);
    }
    Ok(Some((node, cached)))
}

/// Nothing published at `/{section}/{slug}`: when a published node was renamed away from that
/// slug, `301` to the same place (`rest`: what followed the slug in the path; the query too)
/// under its slug now; otherwise not found. A node holding the slug now is always found first.
async fn moved(
    req: &HttpRequest,
    state: &AppState,
    section_name: &str,
    slug: &str,
    rest: &str,
) -> Result<HttpResponse, AppError> {
    let section = known_section(section_name)?;
    let Some(url) = store::moved_to(&state.db, section.name, slug).await? else {
        return Err(AppError::NotFound);
    };
    let mut location = format!("{url}{rest}");
    if !req.query_string().is_empty() {
        location.push('?');
        location.push_str(req.query_string());
    }
    Ok(crate::web::moved_permanently(&location))
}

/// `GET /{section}/{slug}/comments`: the comments are on the node's page.
pub(crate) async fn comments_anchor(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, AppError> {
    let (section_name, slug) = path.into_inner();
    match published_node(&state, (section_name.clone(), slug.clone()), Read::Cached).await {
        Ok((_, node)) => Ok(crate::web::see_other(&format!("{}#comments", node.url()))),
        Err(AppError::NotFound) => moved(&req, &state, &section_name, &slug, "/comments").await,
        Err(e) => Err(e),
    }
}

/// `POST /{section}/{slug}/comments`: a new comment. A refused one shows the node again with
/// the form filled in and what to fix.
pub(crate) async fn post_comment(
    req: HttpRequest,
    state: web::Data<AppState>,
    comment_rate: web::Data<CommentRateLimit>,
    path: web::Path<(String, String)>,
    input: web::Form<CommentInput>,
) -> Result<HttpResponse, AppError> {
    let (section, node) = published_node(&state, path.into_inner(), Read::Fresh).await?;
    let discussion = node.discussion();
    match comment_pages::submit(
        &req,
        &state,
        &comment_rate,
        &discussion,
        None,
        input.into_inner(),
    )
    .await?
    {
        Submitted::Posted(redirect) => Ok(redirect),
        Submitted::Refused(form, status) => {
            let mut thread = thread::first_page(
                &state.db,
                discussion,
                node.metadata.comment_count,
                &state.comments,
            )
            .await?;
            thread.form = form;
            let (newer, older) = neighbours_of(&state, section, &node).await?;
            let layout = Layout::public(&req);
            let view = PostView::uncached(section, &node, &layout)?;
            let page = NodePage {
                layout,
                section,
                node,
                view,
                newer,
                older,
                thread,
                preview: false,
                now: state.db.now(),
            };
            let html = page.render().map_err(|e| {
                AppError::Internal(anyhow::anyhow!("rendering a template failed: {e}"))
            })?;
            Ok(crate::web::layout::html_response(status, html))
        }
    }
}

/// `GET /{section}/{slug}/comments/{comment}`: a comment's permalink.
pub(crate) async fn comment_permalink(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String, String)>,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let (section, slug, comment) = path.into_inner();
    let path = (section.clone(), slug.clone());
    let (_, node) = match published_node(&state, path, Read::Cached).await {
        // Only a well-formed comment slug is carried over into the new address.
        Err(AppError::NotFound) if crate::comments::CommentPath::parse(&comment).is_some() => {
            let rest = format!("/comments/{comment}");
            return moved(&req, &state, &section, &slug, &rest).await;
        }
        found => found?,
    };
    comment_pages::permalink(
        &req,
        &state,
        node.discussion(),
        node.metadata.comment_count,
        &crate::comments::CommentPath::parse(&comment).ok_or(AppError::NotFound)?,
        params.get("after").map(String::as_str),
    )
    .await
}

/// `POST /{section}/{slug}/comments/{comment}`: a reply to that comment.
pub(crate) async fn post_reply(
    req: HttpRequest,
    state: web::Data<AppState>,
    comment_rate: web::Data<CommentRateLimit>,
    path: web::Path<(String, String, String)>,
    input: web::Form<CommentInput>,
) -> Result<HttpResponse, AppError> {
    let (section, slug, comment) = path.into_inner();
    let (_, node) = published_node(&state, (section, slug), Read::Fresh).await?;
    comment_pages::reply(
        &req,
        &state,
        &comment_rate,
        node.discussion(),
        node.metadata.comment_count,
        &crate::comments::CommentPath::parse(&comment).ok_or(AppError::NotFound)?,
        input.into_inner(),
    )
    .await
}

/// `GET /tags/{tag}` (and with a trailing slash, the tag feed's `alternate` link): published
/// nodes and products carrying the tag.
pub(crate) async fn tag(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let tag = path.into_inner();
    // Longer than any tag can be (counted in characters: a Japanese tag is three bytes a
    // character), so nothing to look up.
    if tag.chars().count() > model::MAX_TAG_CHARS {
        return Err(AppError::NotFound);
    }
    let listing = tag_listing(&state, &tag).await?;
    if listing.nodes.is_empty() && listing.products.is_empty() {
        return Err(AppError::NotFound);
    }
    let mut layout = Layout::public(&req);
    layout.meta.title = format!("Tagged {tag}");
    layout.meta.canonical = layout
        .meta
        .absolute(&format!("/tags/{}", crate::web::meta::path_segment(&tag)));
    layout.meta.add_feed(
        format!("{} · tagged {tag}", layout.meta.site_name),
        &crate::content::feed::tag_feed_path(&tag),
    );
    let listed = listing
        .shown
        .get_or_render(&crate::db::site::current(), || {
            render_part(&TagListingPart { listing: &listing })
        })?;
    render(&TagPage {
        layout,
        tag,
        listed,
    })
}

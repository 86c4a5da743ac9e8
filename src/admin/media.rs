//! Admin → Media: the media library. Every uploaded original with its thumbnail, size,
//! dimensions and where it is used (`content::library`); several files uploaded at once; one
//! page per file to set its alt text and caption, copy the Markdown that shows it, and delete
//! it (refused, with the list of places, while anything shows it).

use actix_session::SessionExt;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use bson::oid::ObjectId;
use futures::StreamExt;
use serde::Deserialize;

use crate::content::library::{self, Deleted, Description, LibraryFile, Use};
use crate::media::{self, UploadError};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{render, render_status, Layout};
use crate::web::{parse_object_id, see_other};

/// Files one upload may carry at most (each within `media.max_upload_mb`).
pub(crate) const MAX_FILES_PER_UPLOAD: usize = 20;

/// Sizes as people read them.
pub(crate) fn size_label(bytes: i64) -> String {
    match bytes {
        n if n >= 1024 * 1024 => format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0)),
        n if n >= 1024 => format!("{} KiB", n / 1024),
        n => format!("{n} bytes"),
    }
}

fn uploaded_label(file: &LibraryFile) -> String {
    file.uploaded.map_or(String::new(), |d| {
        crate::db::site::time_zone().minute_label(d)
    })
}

#[derive(Template)]
#[template(path = "admin/media/library.html")]
pub(crate) struct LibraryPage {
    pub(crate) layout: Layout,
    pub(crate) files: Vec<(LibraryFile, Vec<Use>)>,
    /// The `?before=` of the next page, when there is one.
    pub(crate) next: Option<String>,
    pub(crate) first_page: bool,
    pub(crate) max_upload_mb: usize,
    pub(crate) max_files: usize,
}

impl LibraryPage {
    pub(crate) fn size(&self, file: &LibraryFile) -> String {
        size_label(file.length)
    }

    pub(crate) fn uploaded(&self, file: &LibraryFile) -> String {
        uploaded_label(file)
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct LibraryQuery {
    before: Option<String>,
}

/// `GET /admin/media?before=…`: one page of the library, newest first.
pub(crate) async fn index(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: web::Query<LibraryQuery>,
) -> Result<HttpResponse, AppError> {
    // A page token that is not an id (edited by hand) starts from the newest.
    let before = query
        .before
        .as_deref()
        .and_then(|b| ObjectId::parse_str(b).ok());
    let (files, more) = library::page(&state.db, before, library::PAGE_SIZE).await?;
    let ids: Vec<ObjectId> = files.iter().map(|f| f.id).collect();
    let mut uses = library::uses(&state.db, &ids).await?;
    let next = if more {
        files.last().map(|f| f.id.to_hex())
    } else {
        None
    };
    let files = files
        .into_iter()
        .map(|f| {
            let places = uses.remove(&f.id).unwrap_or_default();
            (f, places)
        })
        .collect();
    render(&LibraryPage {
        layout: Layout::admin(&req),
        files,
        next,
        first_page: before.is_none(),
        max_upload_mb: state.max_upload_bytes / (1024 * 1024),
        max_files: MAX_FILES_PER_UPLOAD,
    })
}

/// The name an upload is stored under: the browser's file name without control characters,
/// bounded.
fn stored_name(field: &actix_multipart::Field) -> String {
    field
        .content_disposition()
        .and_then(|cd| cd.get_filename())
        .map(|f| f.chars().filter(|c| !c.is_control()).take(100).collect())
        .filter(|f: &String| !f.trim().is_empty())
        .unwrap_or_else(|| "image".to_string())
}

/// `POST /admin/media?csrf_token=…` (multipart, any number of `files` fields up to
/// [`MAX_FILES_PER_UPLOAD`]): each file streams into GridFS as it arrives, checked like every
/// upload (type sniffed from the bytes, size and pixel limits). One refused file does not stop
/// the others; the flash says which were stored and why any were not.
pub(crate) async fn upload(
    req: HttpRequest,
    state: web::Data<AppState>,
    mut payload: actix_multipart::Multipart,
) -> Result<HttpResponse, AppError> {
    let session = req.get_session();
    let mut stored = 0usize;
    let mut refused: Vec<String> = Vec::new();
    let mut seen = 0usize;
    while let Some(field) = payload.next().await {
        let field = match field {
            Ok(field) => field,
            Err(e) => {
                tracing::info!(error = %e, "a media upload could not be read");
                refused.push(format!("the upload was interrupted: {e}"));
                break;
            }
        };
        if field.name() != Some("files") {
            continue;
        }
        let name = stored_name(&field);
        seen += 1;
        if seen > MAX_FILES_PER_UPLOAD {
            refused.push(format!(
                "{name}: at most {MAX_FILES_PER_UPLOAD} files per upload"
            ));
            continue;
        }
        match media::store_upload_limited(
            &state.db,
            &name,
            field,
            state.max_upload_bytes,
            state.max_image_pixels,
        )
        .await
        {
            Ok(_) => stored += 1,
            // A browser sends an empty part when no file was chosen.
            Err(UploadError::Empty) => seen -= 1,
            Err(UploadError::Db(e)) => return Err(e.into()),
            Err(e) => refused.push(format!("{name}: {e}")),
        }
    }
    if stored > 0 {
        let noun = if stored == 1 { "file" } else { "files" };
        flash::push(
            &session,
            Level::Success,
            format!(
                "Uploaded {stored} {noun}: add alt text to each so screen readers can describe it."
            ),
        );
    }
    if !refused.is_empty() {
        flash::push(
            &session,
            Level::Error,
            format!("Not uploaded: {}.", refused.join("; ")),
        );
    } else if stored == 0 {
        flash::push(
            &session,
            Level::Error,
            "Choose one or more images to upload.",
        );
    }
    Ok(see_other("/admin/media"))
}

#[derive(Template)]
#[template(path = "admin/media/file.html")]
pub(crate) struct FilePage {
    pub(crate) layout: Layout,
    pub(crate) file: LibraryFile,
    pub(crate) uses: Vec<Use>,
    /// The alt text and caption as typed (kept when refused).
    pub(crate) alt: String,
    pub(crate) caption: String,
    pub(crate) error: Option<String>,
    pub(crate) max_chars: usize,
}

impl FilePage {
    pub(crate) fn size(&self) -> String {
        size_label(self.file.length)
    }

    pub(crate) fn uploaded(&self) -> String {
        uploaded_label(&self.file)
    }
}

async fn file_page(
    req: &HttpRequest,
    state: &AppState,
    id: ObjectId,
    typed: Option<(String, String)>,
    error: Option<String>,
) -> Result<FilePage, AppError> {
    let file = library::file(&state.db, id)
        .await?
        .ok_or(AppError::NotFound)?;
    let uses = library::uses(&state.db, &[id])
        .await?
        .remove(&id)
        .unwrap_or_default();
    let (alt, caption) = typed.unwrap_or_else(|| (file.alt.clone(), file.caption.clone()));
    Ok(FilePage {
        layout: Layout::admin(req),
        file,
        uses,
        alt,
        caption,
        error,
        max_chars: library::MAX_TEXT_CHARS,
    })
}

/// `GET /admin/media/{id}/edit`: one file, its alt text and caption, where it is used.
pub(crate) async fn edit(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let id = parse_object_id(&id)?;
    render(&file_page(&req, &state, id, None, None).await?)
}

#[derive(Debug, Deserialize)]
pub(crate) struct DescribeForm {
    #[serde(default)]
    alt: String,
    #[serde(default)]
    caption: String,
}

/// `POST /admin/media/{id}/edit`: save the alt text and caption; a refused value comes back in
/// the form with the reason.
pub(crate) async fn describe(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<DescribeForm>,
) -> Result<HttpResponse, AppError> {
    let id = parse_object_id(&id)?;
    let form = form.into_inner();
    let description = match Description::parse(&form.alt, &form.caption) {
        Ok(description) => description,
        Err(e) => {
            let page = file_page(
                &req,
                &state,
                id,
                Some((form.alt, form.caption)),
                Some(format!("Not saved: {e}.")),
            )
            .await?;
            return render_status(StatusCode::UNPROCESSABLE_ENTITY, &page);
        }
    };
    if !library::describe(&state.db, id, &description).await? {
        return Err(AppError::NotFound);
    }
    flash::push(&req.get_session(), Level::Success, "Saved.");
    Ok(see_other(&format!("/admin/media/{}/edit", id.to_hex())))
}

#[derive(Debug, Deserialize)]
pub(crate) struct DeleteForm {
    #[serde(default)]
    confirm: String,
}

/// `POST /admin/media/{id}/delete` with `confirm=1`: delete the file and its copies, or, while
/// anything shows it, refuse with the list of places (409, nothing deleted).
pub(crate) async fn delete(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<DeleteForm>,
) -> Result<HttpResponse, AppError> {
    let id = parse_object_id(&id)?;
    if form.confirm != "1" {
        let mut page = file_page(&req, &state, id, None, None).await?;
        page.error = Some("Not deleted: tick the box to confirm.".to_string());
        return render_status(StatusCode::UNPROCESSABLE_ENTITY, &page);
    }
    match library::delete_unused(&state.db, id).await? {
        Deleted::NotFound => Err(AppError::NotFound),
        Deleted::NotYet => {
            let mut page = file_page(&req, &state, id, None, None).await?;
            page.error = Some(
                "Not deleted yet: older content is still being checked for the files it shows. Try again in a minute."
                    .to_string(),
            );
            render_status(StatusCode::SERVICE_UNAVAILABLE, &page)
        }
        Deleted::InUse(places) => {
            let mut page = file_page(&req, &state, id, None, None).await?;
            page.error = Some(format!(
                "Not deleted: it is used by {} place{}. Remove it from each of them first.",
                places.len(),
                if places.len() == 1 { "" } else { "s" }
            ));
            page.uses = places;
            render_status(StatusCode::CONFLICT, &page)
        }
        Deleted::Deleted(_) => {
            flash::push(
                &req.get_session(),
                Level::Success,
                "Deleted the file and its copies.",
            );
            Ok(see_other("/admin/media"))
        }
    }
}

/// Pictures the content editor offers to insert (the newest of the library).
pub(crate) const PICKER_SIZE: i64 = 12;

/// The newest library files for the editor's "Insert a picture" list.
pub(crate) async fn picker(state: &AppState) -> Result<Vec<LibraryFile>, AppError> {
    Ok(library::page(&state.db, None, PICKER_SIZE).await?.0)
}

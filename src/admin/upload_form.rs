//! Forms that carry images (`multipart/form-data`): the product create form's photos and a
//! photo node's one edit form. Each image streams into storage as it arrives (checked like
//! every upload: type sniffed from the bytes, size and pixel limits), the text fields are
//! collected within the same limit a plain form has, and a form that is not going to be
//! saved deletes the images it stored ([`ImageForm::discard`]).

use actix_web::web::Bytes;
use futures::StreamExt;

use crate::media::{self, StoredImage, UploadError};
use crate::state::AppState;
use crate::web::errors::AppError;

/// Text a multipart form may hold in all (like a plain form).
const MAX_TEXT_BYTES: usize = crate::web::csrf::MAX_FORM_BYTES;

/// A read multipart form.
#[derive(Default)]
pub(crate) struct ImageForm {
    /// The text fields, in the order sent.
    pub(crate) pairs: Vec<(String, String)>,
    /// The images stored, in the order chosen, with the name each was sent under.
    pub(crate) stored: Vec<(StoredImage, String)>,
    /// Why any image was refused (`name: reason`).
    pub(crate) refused: Vec<String>,
}

impl ImageForm {
    /// Delete the images this form stored (it is not going to be saved).
    pub(crate) async fn discard(&self, state: &AppState) -> Result<(), AppError> {
        for (image, _) in &self.stored {
            media::delete_file(&state.db, image.id).await?;
        }
        Ok(())
    }
}

/// Drain what is left of a part (an empty file picker, a refused image).
async fn skip(field: &mut actix_multipart::Field) {
    while let Some(chunk) = field.next().await {
        if chunk.is_err() {
            break;
        }
    }
}

/// Read `payload`, storing the files of field `file_field` (at most `max_images`; an empty
/// picker sends an empty part, which is skipped). A broken or oversized form is a 400, with
/// whatever it stored already deleted.
pub(crate) async fn read(
    state: &AppState,
    mut payload: actix_multipart::Multipart,
    file_field: &str,
    max_images: usize,
) -> Result<ImageForm, AppError> {
    let mut form = ImageForm::default();
    let mut text_bytes = 0usize;
    while let Some(field) = payload.next().await {
        let mut field = match field {
            Ok(field) => field,
            Err(e) => {
                tracing::info!(error = %e, "a form with images could not be read");
                form.discard(state).await?;
                return Err(incomplete());
            }
        };
        let name = field.name().unwrap_or_default().to_string();
        if name == file_field {
            let filename: String = field
                .content_disposition()
                .and_then(|cd| cd.get_filename())
                .map(|f| f.chars().filter(|c| !c.is_control()).take(100).collect())
                .unwrap_or_default();
            if filename.is_empty() {
                skip(&mut field).await;
                continue;
            }
            if form.stored.len() >= max_images {
                form.refused
                    .push(format!("{filename}: at most {max_images} at once"));
                skip(&mut field).await;
                continue;
            }
            match media::store_upload_limited(
                &state.db,
                &filename,
                field,
                state.max_upload_bytes,
                state.max_image_pixels,
            )
            .await
            {
                Ok(stored) => form.stored.push((stored, filename)),
                Err(UploadError::Db(e)) => {
                    form.discard(state).await?;
                    return Err(e.into());
                }
                Err(e) => form.refused.push(format!("{filename}: {e}")),
            }
            continue;
        }
        let mut value: Vec<u8> = Vec::new();
        while let Some(chunk) = field.next().await {
            let chunk: Bytes = match chunk {
                Ok(chunk) => chunk,
                Err(e) => {
                    tracing::info!(error = %e, "a form field could not be read");
                    form.discard(state).await?;
                    return Err(incomplete());
                }
            };
            text_bytes += chunk.len();
            if text_bytes > MAX_TEXT_BYTES {
                form.discard(state).await?;
                return Err(AppError::BadRequest("The form is too large.".into()));
            }
            value.extend_from_slice(&chunk);
        }
        let Ok(value) = String::from_utf8(value) else {
            form.discard(state).await?;
            return Err(AppError::BadRequest(
                "The form's text is not valid UTF-8.".into(),
            ));
        };
        form.pairs.push((name, value));
    }
    Ok(form)
}

fn incomplete() -> AppError {
    AppError::BadRequest("The form arrived incomplete; please send it again.".into())
}

//! `createBackup`: write a consistent point-in-time backup of every database to a directory on
//! the server's machine, in mongodump's layout (see the `dump` module). The command and its
//! `backupDir` field are those of Percona Server for MongoDB's hot backup, so existing tooling
//! reads naturally; run it against the `admin` database.

use super::args::Args;
use super::Reply;
use crate::error::{Error, Result};
use crate::state::ServerState;
use bson::doc;
use std::path::PathBuf;
use std::sync::Arc;

/// `{createBackup: 1, backupDir: "/absolute/new/dir"}` → `{collections, documents, bytes,
/// createdAt}` once the files are written and read back against their checksums.
pub(crate) async fn create_backup(
    state: &Arc<ServerState>,
    db: &str,
    args: &Args<'_>,
) -> Result<Reply> {
    args.allow_only(&["backupDir"])?;
    if db != "admin" {
        return Err(Error::new(
            crate::error::ErrorCode::Unauthorized,
            "createBackup may only be run against the admin database.",
        ));
    }
    let dir = match args.string("backupDir")? {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => {
            return Err(Error::bad_value(
                "createBackup needs backupDir, a directory path",
            ))
        }
    };
    if !dir.is_absolute() {
        return Err(Error::bad_value(format!(
            "backupDir must be an absolute path (the server's working directory is not the \
             client's), got {}",
            dir.display()
        )));
    }
    let state = Arc::clone(state);
    let manifest = tokio::task::spawn_blocking(move || crate::dump::backup_server(&state, &dir))
        .await
        .map_err(|e| Error::internal(format!("the backup task failed: {e}")))?
        .map_err(|e| Error::internal(format!("backup failed: {e}")))?;
    let reply = doc! {
        "collections": manifest.collections.len() as i64,
        "documents": manifest.documents() as i64,
        "bytes": manifest.bytes() as i64,
        "createdAt": bson::DateTime::from_millis(manifest.created_at_ms),
    };
    Ok(Reply::read(reply))
}

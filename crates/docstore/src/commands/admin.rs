//! Handshake and administrative commands (`hello`, `ping`, `buildInfo`, ...).
//! STUB: replaced by the wire module work.

use crate::error::Result;
use crate::state::{ConnectionInfo, ServerState};
use bson::{doc, Document};
use std::sync::Arc;

/// `None` when `name` is not an admin command.
pub fn handle(
    name: &str,
    _state: &Arc<ServerState>,
    _conn: &ConnectionInfo,
    _cmd: &Document,
) -> Option<Result<Document>> {
    match name {
        "ping" => Some(Ok(doc! {})),
        _ => None,
    }
}

//! Command dispatch: find the command by its first field, run it, shape the reply.

pub mod admin;

use crate::error::{Error, ErrorCode};
use crate::state::{ConnectionInfo, ServerState};
use bson::{doc, Document};
use std::sync::Arc;

/// Run one command document (OP_MSG body with document sequences merged, or a legacy OP_QUERY
/// command) and return the reply document, `ok: 1` or MongoDB's error shape.
pub async fn dispatch(state: &Arc<ServerState>, conn: &ConnectionInfo, cmd: Document) -> Document {
    let Some(name) = cmd.keys().next().cloned() else {
        return Error::new(ErrorCode::FailedToParse, "empty command").to_command_reply();
    };
    let result = if let Some(r) = admin::handle(&name, state, conn, &cmd) {
        r
    } else {
        Err(Error::new(
            ErrorCode::CommandNotFound,
            format!("no such command: '{name}'"),
        ))
    };
    match result {
        Ok(mut reply) => {
            if !reply.contains_key("ok") {
                reply.insert("ok", 1.0);
            }
            reply
        }
        Err(e) => e.to_command_reply(),
    }
}

#[allow(dead_code)]
fn ok() -> Document {
    doc! { "ok": 1.0 }
}

//! `collMod`: hiding and unhiding an index (`index: {name | keyPattern, hidden}`), answered
//! with `hidden_old`/`hidden_new` as mongod does; the validator, capped-size and time-series
//! options are `ddl::coll_mod`'s. Options docstore lacks (TTL index changes, views, ...) are
//! refused by name rather than ignored.

use super::args::{self, Args};
use super::Reply;
use crate::error::{Error, ErrorCode, Result};
use crate::state::ServerState;
use crate::value::compare_documents;
use bson::{doc, Bson, Document};
use std::cmp::Ordering;
use std::sync::Arc;

/// Which index an `index` option names.
enum Target<'a> {
    Name(&'a str),
    KeyPattern(&'a Document),
}

pub(crate) fn coll_mod(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    let coll = args.collection()?;
    let others = args
        .cmd
        .keys()
        .skip(1)
        .any(|k| k != "index" && !args::is_generic_field(k));
    if others {
        if args.get("index").is_some() {
            // mongod applies both at once; two separate writes here would not be atomic.
            return Err(Error::not_supported(
                "collMod with 'index' together with other options (send them separately)",
            ));
        }
        return super::ddl::coll_mod(state, db, args);
    }
    let Some(index) = args.document("index")? else {
        // `{collMod: "c"}` alone changes nothing and succeeds, as in mongod.
        return match state.catalog.get(db, coll) {
            Some(_) => Ok(Reply::read(Document::new())),
            None => Err(namespace_not_found(db, coll)),
        };
    };
    let (target, hidden) = parse_index_option(index)?;
    let outcome = state.catalog.write(db, coll, false, |c| {
        let found = c.indexes().iter().find(|i| match &target {
            Target::Name(name) => i.spec.name == *name,
            Target::KeyPattern(key) => compare_documents(&i.spec.key, key) == Ordering::Equal,
        });
        let Some(found) = found else {
            let described = match &target {
                Target::Name(name) => (*name).to_string(),
                Target::KeyPattern(key) => {
                    crate::printing::fmt_value(&Bson::Document((*key).clone()))
                }
            };
            return Err(Error::new(
                ErrorCode::IndexNotFound,
                format!("cannot find index {described} for ns {db}.{coll}"),
            ));
        };
        if found.spec.name == "_id_" {
            return Err(Error::bad_value("can't hide _id index"));
        }
        let name = found.spec.name.clone();
        c.set_index_hidden(&name, hidden)
    })?;
    let Some(outcome) = outcome else {
        return Err(namespace_not_found(db, coll));
    };
    let was = outcome.value?;
    // Hiding a hidden index (or unhiding a visible one) is a no-op without the two fields.
    let reply = if was == hidden {
        Document::new()
    } else {
        doc! { "hidden_old": was, "hidden_new": hidden }
    };
    Ok(Reply::write(reply, outcome.lsn))
}

fn namespace_not_found(db: &str, coll: &str) -> Error {
    Error::new(
        ErrorCode::NamespaceNotFound,
        format!("ns does not exist: {db}.{coll}"),
    )
}

/// `{name | keyPattern, hidden}`: exactly one way of naming the index and the `hidden` flag.
fn parse_index_option(index: &Document) -> Result<(Target<'_>, bool)> {
    let mut name = None;
    let mut key = None;
    let mut hidden = None;
    for (field, value) in index {
        match (field.as_str(), value) {
            ("name", Bson::String(s)) => name = Some(s.as_str()),
            ("keyPattern", Bson::Document(d)) => key = Some(d),
            ("hidden", Bson::Boolean(b)) => hidden = Some(*b),
            ("name" | "keyPattern" | "hidden", other) => {
                return Err(Error::type_mismatch(format!(
                    "BSON field 'collMod.index.{field}' is the wrong type '{}'",
                    crate::value::type_name(other)
                )))
            }
            ("expireAfterSeconds" | "prepareUnique" | "unique" | "forceNonUnique", _) => {
                return Err(Error::not_supported(format!(
                    "collMod index option '{field}'"
                )))
            }
            _ => {
                return Err(Error::location(
                    40415,
                    format!("BSON field 'collMod.index.{field}' is an unknown field."),
                ))
            }
        }
    }
    let target = match (name, key) {
        (Some(_), Some(_)) => {
            return Err(Error::new(
                ErrorCode::InvalidOptions,
                "Cannot specify both key pattern and name.",
            ))
        }
        (Some(n), None) => Target::Name(n),
        (None, Some(k)) => Target::KeyPattern(k),
        (None, None) => {
            return Err(Error::new(
                ErrorCode::InvalidOptions,
                "Must specify either index name or key pattern.",
            ))
        }
    };
    let hidden = hidden.ok_or_else(|| {
        Error::new(
            ErrorCode::InvalidOptions,
            "no expireAfterSeconds or hidden field",
        )
    })?;
    Ok((target, hidden))
}

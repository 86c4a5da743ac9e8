//! Reading command arguments with MongoDB's type errors, rejecting fields a command does not
//! know, and the options every command shares (write concern, transactions); `collation` is
//! `crate::collation`'s.

use crate::error::{Error, ErrorCode, Result};
use crate::value::{type_name, Number};
use bson::{Bson, Document};

/// Fields the drivers and shells attach to any command.
const GENERIC_FIELDS: &[&str] = &[
    "$db",
    "lsid",
    "$clusterTime",
    "$readPreference",
    "readConcern",
    "writeConcern",
    "comment",
    "maxTimeMS",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
    "txnNumber",
    "startTransaction",
    "autocommit",
    "$audit",
    "$client",
];

/// Whether `field` is one the drivers attach to any command (`lsid`, `$db`, ...).
pub(crate) fn is_generic_field(field: &str) -> bool {
    GENERIC_FIELDS.contains(&field)
}

/// A command document with the command's name, for error messages.
pub(crate) struct Args<'a> {
    pub name: &'a str,
    pub cmd: &'a Document,
    /// An insert's `documents` as the client sent them, not in `cmd`
    /// ([`crate::wire::OpMsg::documents`]).
    pub sent: Option<&'a [std::sync::Arc<[u8]>]>,
}

impl<'a> Args<'a> {
    pub(crate) fn new(name: &'a str, cmd: &'a Document) -> Self {
        Args {
            name,
            cmd,
            sent: None,
        }
    }

    /// These arguments with an insert's `documents` as sent.
    pub(crate) fn with_sent_documents(self, sent: Option<&'a [std::sync::Arc<[u8]>]>) -> Self {
        Args { sent, ..self }
    }

    /// Refuse fields outside `known` (and the generic ones), as MongoDB's IDL parser does.
    pub(crate) fn allow_only(&self, known: &[&str]) -> Result<()> {
        for key in self.cmd.keys().skip(1) {
            if !known.contains(&key.as_str()) && !GENERIC_FIELDS.contains(&key.as_str()) {
                return Err(Error::location(
                    40415,
                    format!("BSON field '{}.{}' is an unknown field.", self.name, key),
                ));
            }
        }
        Ok(())
    }

    fn wrong_type(&self, field: &str, value: &Bson, expected: &str) -> Error {
        Error::type_mismatch(format!(
            "BSON field '{}.{}' is the wrong type '{}', expected type '{}'",
            self.name,
            field,
            type_name(value),
            expected
        ))
    }

    /// The collection named by the command's first field.
    pub(crate) fn collection(&self) -> Result<&'a str> {
        match self.cmd.get(self.name) {
            Some(Bson::String(s)) if !s.is_empty() => Ok(s.as_str()),
            Some(Bson::String(_)) => Err(Error::new(
                ErrorCode::InvalidNamespace,
                "Invalid namespace specified ''",
            )),
            Some(other) => Err(Error::new(
                ErrorCode::InvalidNamespace,
                format!("collection name has invalid type {}", type_name(other)),
            )),
            None => Err(Error::failed_to_parse("missing collection name")),
        }
    }

    pub(crate) fn get(&self, field: &str) -> Option<&'a Bson> {
        self.cmd.get(field)
    }

    /// The command's `let` variables, each value evaluated as an expression (see
    /// [`crate::expression::evaluate_let`]).
    pub(crate) fn let_vars(&self) -> Result<Option<Document>> {
        self.document("let")?
            .map(crate::expression::evaluate_let)
            .transpose()
    }

    pub(crate) fn document(&self, field: &str) -> Result<Option<&'a Document>> {
        match self.cmd.get(field) {
            None | Some(Bson::Null) => Ok(None),
            Some(Bson::Document(d)) => Ok(Some(d)),
            Some(other) => Err(self.wrong_type(field, other, "object")),
        }
    }

    pub(crate) fn required_document(&self, field: &str) -> Result<&'a Document> {
        self.document(field)?.ok_or_else(|| {
            Error::location(
                40414,
                format!(
                    "BSON field '{}.{}' is missing but a required field",
                    self.name, field
                ),
            )
        })
    }

    pub(crate) fn array(&self, field: &str) -> Result<Option<&'a Vec<Bson>>> {
        match self.cmd.get(field) {
            None => Ok(None),
            Some(Bson::Array(a)) => Ok(Some(a)),
            Some(other) => Err(self.wrong_type(field, other, "array")),
        }
    }

    /// An array of documents (`documents`, `updates`, `deletes`, `pipeline`...).
    pub(crate) fn documents(&self, field: &str) -> Result<Vec<&'a Document>> {
        let Some(items) = self.array(field)? else {
            return Err(Error::location(
                40414,
                format!(
                    "BSON field '{}.{}' is missing but a required field",
                    self.name, field
                ),
            ));
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Bson::Document(d) => Ok(d),
                other => Err(self.wrong_type(&format!("{field}.{i}"), other, "object")),
            })
            .collect()
    }

    pub(crate) fn bool(&self, field: &str, default: bool) -> Result<bool> {
        match self.cmd.get(field) {
            None | Some(Bson::Null) => Ok(default),
            Some(Bson::Boolean(b)) => Ok(*b),
            Some(v) => match Number::from_bson(v) {
                Some(n) => Ok(n.as_f64() != 0.0),
                None => Err(self.wrong_type(field, v, "bool")),
            },
        }
    }

    /// An integral numeric field.
    pub(crate) fn i64(&self, field: &str) -> Result<Option<i64>> {
        match self.cmd.get(field) {
            None | Some(Bson::Null) => Ok(None),
            Some(v) => match Number::from_bson(v) {
                Some(n) => match n.as_i64_exact() {
                    Some(i) => Ok(Some(i)),
                    None => Err(Error::failed_to_parse(format!(
                        "Expected field {field} to have an integral value, got {v}"
                    ))),
                },
                None => Err(self.wrong_type(field, v, "long")),
            },
        }
    }

    /// A non-negative integral field (`skip`, `limit`, `batchSize`).
    pub(crate) fn non_negative(&self, field: &str) -> Result<Option<i64>> {
        match self.i64(field)? {
            Some(n) if n < 0 => Err(Error::location(
                51024,
                format!("BSON field '{field}' value must be >= 0, actual value '{n}'"),
            )),
            other => Ok(other),
        }
    }

    pub(crate) fn string(&self, field: &str) -> Result<Option<&'a str>> {
        match self.cmd.get(field) {
            None | Some(Bson::Null) => Ok(None),
            Some(Bson::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.wrong_type(field, other, "string")),
        }
    }
}

/// Commands that carry transaction fields are refused as a standalone mongod refuses them.
pub(crate) fn reject_transactions(cmd: &Document) -> Result<()> {
    if cmd.contains_key("txnNumber")
        || cmd.contains_key("startTransaction")
        || cmd.contains_key("autocommit")
    {
        return Err(Error::new(
            ErrorCode::IllegalOperation,
            "Transaction numbers are only allowed on a replica set member or mongos",
        ));
    }
    Ok(())
}

/// `readConcern` levels a single node can honour.
pub(crate) fn check_read_concern(cmd: &Document) -> Result<()> {
    let Some(rc) = cmd.get("readConcern") else {
        return Ok(());
    };
    let Bson::Document(rc) = rc else {
        return Err(Error::type_mismatch("readConcern must be an object"));
    };
    match rc.get("level") {
        None => Ok(()),
        Some(Bson::String(l)) if ["local", "available", "majority"].contains(&l.as_str()) => Ok(()),
        Some(Bson::String(l)) if ["snapshot", "linearizable"].contains(&l.as_str()) => {
            Err(Error::not_supported(format!("readConcern level '{l}'")))
        }
        Some(other) => Err(Error::failed_to_parse(format!(
            "readConcern level must be one of local, available, majority, snapshot, linearizable; got {other}"
        ))),
    }
}

/// What a write concern asks for, once validated for a standalone server.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct WriteConcern {
    /// Wait for the journal to reach disk before replying.
    pub journal: bool,
}

pub(crate) fn write_concern(cmd: &Document) -> Result<WriteConcern> {
    let Some(wc) = cmd.get("writeConcern") else {
        return Ok(WriteConcern::default());
    };
    let Bson::Document(wc) = wc else {
        return Err(Error::failed_to_parse("writeConcern must be an object"));
    };
    match wc.get("w") {
        None => {}
        Some(Bson::String(s)) if s == "majority" => {}
        Some(Bson::String(tag)) => {
            return Err(Error::new(
                ErrorCode::Location(79),
                format!("No write concern mode named '{tag}' found in replica set configuration"),
            ))
        }
        Some(v) => match Number::from_bson(v).and_then(Number::as_i64_exact) {
            Some(0) | Some(1) => {}
            Some(n) if n > 1 => {
                return Err(Error::bad_value("cannot use 'w' > 1 on a standalone"));
            }
            _ => {
                return Err(Error::failed_to_parse(format!(
                    "w has to be a number or string, got {v}"
                )))
            }
        },
    }
    let flag = |k: &str| match wc.get(k) {
        Some(Bson::Boolean(b)) => *b,
        Some(v) => Number::from_bson(v).is_some_and(|n| n.as_f64() != 0.0),
        None => false,
    };
    Ok(WriteConcern {
        journal: flag("j") || flag("fsync"),
    })
}

/// The commands in the Stable API's version 1 (MongoDB 7.0), by the names mongod reports them
/// under. `saslStart`/`saslContinue` are included as mongod declares them, so that a client
/// with `apiStrict` can authenticate.
const API_VERSION_1: &[&str] = &[
    "abortTransaction",
    "aggregate",
    "authenticate",
    "collMod",
    "commitTransaction",
    "count",
    "create",
    "createIndexes",
    "delete",
    "drop",
    "dropDatabase",
    "dropIndexes",
    "endSessions",
    "explain",
    "find",
    "findAndModify",
    "getMore",
    "hello",
    "insert",
    "killCursors",
    "listCollections",
    "listDatabases",
    "listIndexes",
    "ping",
    "refreshSessions",
    "saslContinue",
    "saslStart",
    "update",
];

/// The Stable API parameters (`apiVersion`, `apiStrict`, `apiDeprecationErrors`), enforced as
/// mongod enforces them: `apiStrict`/`apiDeprecationErrors` need `apiVersion` (4886600), the
/// only version is "1" (322 APIVersionError), and with `apiStrict: true` a command outside
/// version 1 is refused (323 APIStrictError). No version-1 command is deprecated, so
/// `apiDeprecationErrors: true` refuses nothing.
pub(crate) fn check_api_parameters(name: &str, cmd: &Document) -> Result<()> {
    let field_type = |field: &str, value: &Bson, expected: &str| {
        Error::type_mismatch(format!(
            "BSON field 'APIParametersFromClient.{field}' is the wrong type '{}', expected \
             type '{expected}'",
            type_name(value)
        ))
    };
    let version = match cmd.get("apiVersion") {
        None => None,
        Some(Bson::String(v)) => Some(v.as_str()),
        Some(other) => return Err(field_type("apiVersion", other, "string")),
    };
    let mut strict = false;
    for field in ["apiStrict", "apiDeprecationErrors"] {
        match cmd.get(field) {
            None => {}
            Some(Bson::Boolean(b)) => {
                if version.is_none() {
                    return Err(Error::location(
                        4886600,
                        "Provided apiStrict and/or apiDeprecationErrors without passing \
                         apiVersion",
                    ));
                }
                strict |= field == "apiStrict" && *b;
            }
            Some(other) => return Err(field_type(field, other, "bool")),
        }
    }
    let Some(version) = version else {
        return Ok(());
    };
    if version != "1" {
        return Err(Error::new(
            ErrorCode::APIVersionError,
            "API version must be \"1\"",
        ));
    }
    // mongod names a command by its canonical spelling.
    let canonical = match name {
        "findandmodify" => "findAndModify",
        other => other,
    };
    if strict && !API_VERSION_1.contains(&canonical) {
        return Err(Error::new(
            ErrorCode::APIStrictError,
            format!(
                "Provided apiStrict:true, but the command {canonical} is not in API Version 1. \
                 Information on supported commands and migrations in API Version 1 can be \
                 found at https://dochub.mongodb.org/core/manual-versioned-api."
            ),
        ));
    }
    Ok(())
}

/// Stages docstore runs that are outside the Stable API's version 1, refused under
/// `apiStrict: true` as mongod refuses them.
const STAGES_OUTSIDE_API_VERSION_1: &[&str] = &["$collStats"];

/// With `apiStrict: true`, a pipeline stage outside API version 1 is 323 APIStrictError.
pub(crate) fn check_api_strict_stages(cmd: &Document, stages: &[Document]) -> Result<()> {
    if cmd.get("apiStrict") != Some(&Bson::Boolean(true)) {
        return Ok(());
    }
    let outside = stages
        .iter()
        .filter_map(|s| s.keys().next())
        .find(|name| STAGES_OUTSIDE_API_VERSION_1.contains(&name.as_str()));
    match outside {
        Some(name) => Err(Error::new(
            ErrorCode::APIStrictError,
            format!("{name} is not allowed with 'apiStrict: true' in API Version 1"),
        )),
        None => Ok(()),
    }
}

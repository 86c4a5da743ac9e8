//! Collection options that govern writes, parsed from the stored options document: the
//! validator (`validator`, `validationLevel`, `validationAction`) and the capped limits
//! (`capped`, `size`, `max`). `create` and `collMod` parse through here, so options that reach
//! storage always parse again when a collection is loaded.

use crate::error::{Error, ErrorCode, Result};
use crate::query::schema::Schema;
use crate::query::Filter;
use bson::{doc, Bson, Document};

/// Largest capped size MongoDB accepts: 1 PB.
const MAX_CAPPED_SIZE: i64 = 1024 * 1024 * 1024 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    Strict,
    Moderate,
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Error,
    Warn,
}

/// A collection's validator: the query every inserted or updated document must match.
#[derive(Debug, Clone)]
pub(crate) struct Validator {
    spec: Document,
    filter: Filter,
    level: Level,
    action: Action,
}

pub(crate) fn parse_level(value: &Bson) -> Result<Level> {
    match value {
        Bson::String(s) if s == "strict" => Ok(Level::Strict),
        Bson::String(s) if s == "moderate" => Ok(Level::Moderate),
        Bson::String(s) if s == "off" => Ok(Level::Off),
        Bson::String(s) => Err(Error::bad_value(format!(
            "Enumeration value '{s}' for field 'validationLevel' is not a valid value."
        ))),
        _ => Err(Error::type_mismatch(
            "BSON field 'validationLevel' is the wrong type, expected type 'string'",
        )),
    }
}

pub(crate) fn parse_action(value: &Bson) -> Result<Action> {
    match value {
        Bson::String(s) if s == "error" => Ok(Action::Error),
        Bson::String(s) if s == "warn" => Ok(Action::Warn),
        Bson::String(s) => Err(Error::bad_value(format!(
            "Enumeration value '{s}' for field 'validationAction' is not a valid value."
        ))),
        _ => Err(Error::type_mismatch(
            "BSON field 'validationAction' is the wrong type, expected type 'string'",
        )),
    }
}

/// Parse a `validator` option's query, refusing what mongod refuses in validators.
pub(crate) fn parse_validator_filter(value: &Bson) -> Result<Filter> {
    let Bson::Document(spec) = value else {
        return Err(Error::type_mismatch(
            "BSON field 'validator' is the wrong type, expected type 'object'",
        ));
    };
    for op in ["$text", "$where", "$near", "$nearSphere", "$geoNear"] {
        if mentions(spec, op) {
            return Err(Error::bad_value(format!(
                "{op} is not allowed in collection validators"
            )));
        }
    }
    Filter::parse(spec)
}

/// Whether `op` appears as a key anywhere in `d`.
fn mentions(d: &Document, op: &str) -> bool {
    fn in_value(v: &Bson, op: &str) -> bool {
        match v {
            Bson::Document(d) => mentions(d, op),
            Bson::Array(items) => items.iter().any(|i| in_value(i, op)),
            _ => false,
        }
    }
    d.iter().any(|(k, v)| k == op || in_value(v, op))
}

impl Validator {
    /// The validator the options describe; `None` without one (or with `{}`).
    pub(crate) fn from_options(options: &Document) -> Result<Option<Validator>> {
        let level = match options.get("validationLevel") {
            Some(v) => parse_level(v)?,
            None => Level::Strict,
        };
        let action = match options.get("validationAction") {
            Some(v) => parse_action(v)?,
            None => Action::Error,
        };
        let Some(value) = options.get("validator") else {
            return Ok(None);
        };
        let filter = parse_validator_filter(value)?;
        let spec = match value {
            Bson::Document(d) if !d.is_empty() => d.clone(),
            _ => return Ok(None),
        };
        Ok(Some(Validator {
            spec,
            filter,
            level,
            action,
        }))
    }

    /// Whether the document satisfies the validator (whatever the level): `validate`'s count.
    pub(crate) fn complies(&self, doc: &Document) -> bool {
        self.filter.matches(doc)
    }

    /// An insert: checked unless the level is `off`.
    pub(crate) fn check_insert(&self, ns: &str, doc: &Document) -> Result<()> {
        if self.level == Level::Off {
            return Ok(());
        }
        self.verdict(ns, doc)
    }

    /// An update of `old` into `new`: under `moderate`, a document that already failed the
    /// validator may be updated without being checked.
    pub(crate) fn check_update(&self, ns: &str, old: &Document, new: &Document) -> Result<()> {
        match self.level {
            Level::Off => Ok(()),
            Level::Moderate if !self.complies(old) => Ok(()),
            _ => self.verdict(ns, new),
        }
    }

    /// Whether an update must look at the document it replaces (moderate only).
    pub(crate) fn needs_old_document(&self) -> bool {
        self.level == Level::Moderate
    }

    pub(crate) fn is_off(&self) -> bool {
        self.level == Level::Off
    }

    fn verdict(&self, ns: &str, doc: &Document) -> Result<()> {
        if self.filter.matches(doc) {
            return Ok(());
        }
        let error = self.failure(doc);
        match self.action {
            Action::Error => Err(error),
            Action::Warn => {
                // mongod logs the failure (id 20294) and stores the document.
                tracing::warn!(
                    namespace = ns,
                    "Document would fail validation: {}",
                    error
                        .extra
                        .as_ref()
                        .map(|e| e.to_string())
                        .unwrap_or_default()
                );
                Ok(())
            }
        }
    }

    /// Error 121 with `errInfo: {failingDocumentId, details}` in mongod's shape.
    fn failure(&self, doc: &Document) -> Error {
        let mut info = Document::new();
        if let Some(id) = doc.get("_id") {
            info.insert("failingDocumentId", id.clone());
        }
        info.insert("details", self.details(doc));
        Error::new(
            ErrorCode::DocumentValidationFailure,
            "Document failed validation",
        )
        .with_extra(doc! { "errInfo": info })
    }

    /// Why `doc` fails the validator.
    fn details(&self, doc: &Document) -> Document {
        query_details(&self.spec, doc)
    }
}

/// Whether `doc` matches the one-clause query `{key: value}`.
fn clause_matches(key: &str, value: &Bson, doc: &Document) -> bool {
    let mut clause = Document::new();
    clause.insert(key, value.clone());
    Filter::parse(&clause).is_ok_and(|f| f.matches(doc))
}

/// Why `doc` fails `query`: its one failing clause explained, or, when the query has several
/// clauses, mongod's `$and` with `clausesNotSatisfied`.
fn query_details(query: &Document, doc: &Document) -> Document {
    let failing: Vec<(usize, Document)> = query
        .iter()
        .enumerate()
        .filter(|(_, (key, value))| !clause_matches(key, value, doc))
        .map(|(i, (key, value))| (i, clause_details(key, value, doc)))
        .collect();
    if query.len() == 1 {
        if let Some((_, d)) = failing.into_iter().next() {
            return d;
        }
        return Document::new();
    }
    doc! {
        "operatorName": "$and",
        "clausesNotSatisfied": failing
            .into_iter()
            .map(|(i, d)| doc! { "index": i as i32, "details": d })
            .collect::<Vec<_>>(),
    }
}

/// One failing clause explained.
fn clause_details(key: &str, value: &Bson, doc: &Document) -> Document {
    match (key, value) {
        ("$jsonSchema", Bson::Document(spec)) => {
            let rules = Schema::parse(spec)
                .map(|s| s.failures(doc))
                .unwrap_or_default();
            let mut d = doc! { "operatorName": "$jsonSchema" };
            if let Ok(title) = spec.get_str("title") {
                d.insert("title", title);
            }
            d.insert("schemaRulesNotSatisfied", rules);
            d
        }
        ("$expr", expr) => doc! {
            "operatorName": "$expr",
            "specifiedAs": { "$expr": expr.clone() },
            "reason": "expression did not match",
            "expressionResult": false,
        },
        (op @ ("$and" | "$or" | "$nor"), Bson::Array(clauses)) => {
            let queries = clauses.iter().enumerate().filter_map(|(i, c)| match c {
                Bson::Document(q) => Some((i, q)),
                _ => None,
            });
            let matches = |q: &Document| Filter::parse(q).is_ok_and(|f| f.matches(doc));
            if op == "$nor" {
                // A `$nor` fails on the clauses the document satisfies.
                let satisfied: Vec<Document> = queries
                    .filter(|(_, q)| matches(q))
                    .map(|(i, q)| doc! { "index": i as i32, "details": { "specifiedAs": q.clone() } })
                    .collect();
                return doc! { "operatorName": op, "clausesSatisfied": satisfied };
            }
            let failing: Vec<Document> = queries
                .filter(|(_, q)| !matches(q))
                .map(|(i, q)| doc! { "index": i as i32, "details": query_details(q, doc) })
                .collect();
            doc! { "operatorName": op, "clausesNotSatisfied": failing }
        }
        (field, condition) => field_details(field, condition, doc),
    }
}

/// A failing condition on one field: its first failing operator, the reason mongod gives for
/// that operator, and the value considered.
fn field_details(field: &str, condition: &Bson, doc: &Document) -> Document {
    let operator = match condition {
        Bson::Document(ops) if ops.keys().next().is_some_and(|k| k.starts_with('$')) => ops
            .iter()
            .find(|(op, arg)| {
                let mut single = Document::new();
                single.insert(op.as_str(), (*arg).clone());
                !clause_matches(field, &Bson::Document(single), doc)
            })
            .or_else(|| ops.iter().next())
            .map_or_else(|| "$eq".to_string(), |(op, _)| op.clone()),
        Bson::RegularExpression(_) => "$regex".to_string(),
        _ => "$eq".to_string(),
    };
    let mut d = doc! {
        "operatorName": operator.as_str(),
        "specifiedAs": { field: condition.clone() },
    };
    let value = crate::path::get_path(doc, field);
    let reason = match (operator.as_str(), value) {
        ("$exists", Some(_)) => "field was present",
        ("$exists", None) | (_, None) => "field was missing",
        ("$type", Some(_)) => "type did not match",
        ("$in", Some(_)) => "no matching value found in array",
        ("$nin", Some(_)) => "matching value found in array",
        ("$regex", Some(_)) => "regular expression did not match",
        ("$ne", Some(_)) | ("$not", Some(_)) => "comparison succeeded",
        _ => "comparison failed",
    };
    d.insert("reason", reason);
    if let Some(v) = value {
        d.insert("consideredValue", v.clone());
        if operator == "$type" {
            d.insert("consideredType", crate::value::type_name(v));
        }
    }
    d
}

/// A capped collection's limits, as enforced: `size` raised as mongod raises it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Capped {
    pub max_bytes: u64,
    pub max_docs: Option<u64>,
}

impl Capped {
    /// The limits the options describe; `None` for a collection that is not capped.
    pub(crate) fn from_options(options: &Document) -> Result<Option<Capped>> {
        let capped = match options.get("capped") {
            None => false,
            Some(Bson::Boolean(b)) => *b,
            Some(_) => {
                return Err(Error::type_mismatch(
                    "BSON field 'capped' is the wrong type, expected type 'bool'",
                ))
            }
        };
        if !capped {
            if options.contains_key("size") || options.contains_key("max") {
                return Err(Error::new(
                    ErrorCode::InvalidOptions,
                    "the 'size' and 'max' fields are only valid for a capped collection",
                ));
            }
            return Ok(None);
        }
        let size = match options.get("size") {
            Some(v) => whole_number("size", v)?,
            None => {
                return Err(Error::new(
                    ErrorCode::InvalidOptions,
                    "the 'size' field is required when 'capped' is true",
                ))
            }
        };
        if size <= 0 || size > MAX_CAPPED_SIZE {
            return Err(Error::bad_value(
                "capped size must be greater than 0 and less than or equal to 1 PB",
            ));
        }
        let max = match options.get("max") {
            Some(v) => whole_number("max", v)?,
            None => 0,
        };
        Ok(Some(Capped {
            max_bytes: effective_size(size),
            // mongod treats a `max` of zero or less as no limit on the count.
            max_docs: (max > 0).then_some(max as u64),
        }))
    }
}

/// mongod's rounding of a capped size: at least 4096 bytes, else up to a multiple of 256.
pub(crate) fn effective_size(size: i64) -> u64 {
    let size = size.max(0) as u64;
    if size <= 4096 {
        4096
    } else {
        size.div_ceil(256) * 256
    }
}

fn whole_number(field: &str, value: &Bson) -> Result<i64> {
    match value {
        Bson::Int32(i) => Ok(*i as i64),
        Bson::Int64(i) => Ok(*i),
        Bson::Double(d) if d.is_finite() => Ok(d.trunc() as i64),
        _ => Err(Error::type_mismatch(format!(
            "BSON field '{field}' is the wrong type, expected a number"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_sizes_are_rounded_as_mongod_rounds_them() {
        assert_eq!(effective_size(1), 4096);
        assert_eq!(effective_size(4097), 4352);
        assert_eq!(effective_size(8192), 8192);
    }

    #[test]
    fn a_moderate_validator_lets_invalid_documents_be_updated() {
        let v = Validator::from_options(&doc! {
            "validator": { "a": { "$gte": 0 } },
            "validationLevel": "moderate",
        })
        .unwrap()
        .unwrap();
        assert!(v
            .check_update("d.c", &doc! { "a": -5 }, &doc! { "a": -6 })
            .is_ok());
        assert!(v
            .check_update("d.c", &doc! { "a": 5 }, &doc! { "a": -6 })
            .is_err());
    }

    #[test]
    fn a_failing_or_lists_each_clause_with_its_reason() {
        let v = Validator::from_options(&doc! { "validator": {
            "$or": [ { "a": { "$type": "string" } }, { "b": { "$exists": true } } ],
        } })
        .unwrap()
        .unwrap();
        let e = v
            .check_insert("d.c", &doc! { "_id": 1, "a": 5 })
            .unwrap_err();
        let info = e.extra.unwrap().get_document("errInfo").unwrap().clone();
        let details = info.get_document("details").unwrap();
        assert_eq!(details.get_str("operatorName").unwrap(), "$or");
        let clauses = details.get_array("clausesNotSatisfied").unwrap();
        let first = clauses[0]
            .as_document()
            .unwrap()
            .get_document("details")
            .unwrap();
        assert_eq!(first.get_str("reason").unwrap(), "type did not match");
        assert_eq!(first.get_str("consideredType").unwrap(), "int");
        let second = clauses[1]
            .as_document()
            .unwrap()
            .get_document("details")
            .unwrap();
        assert_eq!(second.get_str("reason").unwrap(), "field was missing");
    }

    #[test]
    fn a_failure_explains_the_clause_that_failed() {
        let v = Validator::from_options(&doc! { "validator": { "a": { "$gte": 0 } } })
            .unwrap()
            .unwrap();
        let e = v
            .check_insert("d.c", &doc! { "_id": 1, "a": -1 })
            .unwrap_err();
        assert_eq!(e.code_number(), 121);
        let info = e.extra.unwrap().get_document("errInfo").unwrap().clone();
        assert_eq!(info.get_i32("failingDocumentId").unwrap(), 1);
        let details = info.get_document("details").unwrap();
        assert_eq!(details.get_str("operatorName").unwrap(), "$gte");
        assert_eq!(details.get_str("reason").unwrap(), "comparison failed");
    }
}

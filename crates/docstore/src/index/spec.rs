//! Index definitions: parsing and validating a `createIndexes` entry (key pattern, options,
//! TTL, partial filter, text options) into an [`IndexSpec`].

use super::partial;
use crate::error::{Error, ErrorCode, Result};
use crate::keystring;
use crate::query::Filter;
use crate::support::{refuse, Kind::IndexOption};
use crate::value::{compare_documents, type_name};
use bson::{doc, Bson, Document};
use std::cmp::Ordering;

/// An index definition as given to `createIndexes` and reported by `listIndexes`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IndexSpec {
    pub name: String,
    /// Key pattern, e.g. `{ a: 1, b: -1 }`.
    pub key: Document,
    pub unique: bool,
    pub sparse: bool,
    pub partial_filter: Option<Document>,
    pub expire_after_seconds: Option<i64>,
    /// Options accepted for compatibility that change nothing here (`background`, `dropDups`,
    /// `storageEngine`), kept as given so that `listIndexes` shows them as mongod does.
    pub kept_options: Document,
    /// Set for a text index (whose `key` is then the normalised `{…, _fts: "text", _ftsx: 1}`).
    pub text: Option<crate::text::TextOptions>,
    /// A hidden index is kept up to date (and its uniqueness enforced) but the planner never
    /// chooses it and a hint cannot name it; `collMod` toggles it.
    pub hidden: bool,
    /// The index's collation (`None`: simple): its string keys are the collation's comparison
    /// keys.
    pub collation: Option<std::sync::Arc<crate::collation::Collation>>,
    /// Whether the spec named its collation (`{locale: "simple"}` included); when it did not,
    /// `createIndexes` gives the index the collection's default collation.
    pub collation_given: bool,
}

impl IndexSpec {
    /// Parse one entry of `createIndexes.indexes` (validating options; unsupported kinds such as
    /// wildcard or columnstore are errors naming the feature).
    pub(crate) fn parse(spec: &Document) -> Result<IndexSpec> {
        let mut key = None;
        let mut name = None;
        let mut unique = false;
        let mut sparse = false;
        let mut partial_filter = None;
        let mut expire_after_seconds = None;
        let mut kept_options = Document::new();
        let mut hidden = false;
        let mut raw_text = crate::text::RawTextOptions::default();
        let mut collation = crate::collation::Requested::Default;
        for (field, value) in spec {
            match field.as_str() {
                "key" => match value {
                    Bson::Document(d) => key = Some(d.clone()),
                    other => return Err(field_type_error("key", "an object", other)),
                },
                "name" => match value {
                    Bson::String(s) => name = Some(s.clone()),
                    other => return Err(field_type_error("name", "a string", other)),
                },
                "unique" => unique = option_flag("unique", value)?,
                "sparse" => sparse = option_flag("sparse", value)?,
                "partialFilterExpression" => match value {
                    Bson::Document(d) => partial_filter = Some(d.clone()),
                    other => {
                        return Err(field_type_error(
                            "partialFilterExpression",
                            "an object",
                            other,
                        ))
                    }
                },
                "expireAfterSeconds" => expire_after_seconds = Some(parse_ttl(value)?),
                // Accepted and meaningless here: docstore always builds v2 indexes in the
                // foreground.
                // `ns` is dropped from specs since MongoDB 4.4; `v` is always 2 here.
                "v" | "ns" => {}
                // mongod ignores `dropDups` (since 3.0) and `background` (since 4.2) but keeps
                // them in the spec it lists.
                "background" | "dropDups" | "storageEngine" => {
                    kept_options.insert(field.clone(), value.clone());
                }
                "hidden" => hidden = option_flag("hidden", value)?,
                "prepareUnique" => {
                    if crate::value::is_truthy(value) {
                        return Err(refuse(IndexOption, "prepareUnique"));
                    }
                }
                "collation" => collation = crate::collation::parse(Some(value))?,
                "weights" => raw_text.weights = Some(value.clone()),
                "default_language" => raw_text.default_language = Some(value.clone()),
                "language_override" => raw_text.language_override = Some(value.clone()),
                "textIndexVersion" => raw_text.version = Some(value.clone()),
                "2dsphereIndexVersion" => {
                    let version = crate::value::to_f64(value);
                    if !matches!(version, Some(v) if v == 2.0 || v == 3.0) {
                        return Err(Error::new(
                            ErrorCode::CannotCreateIndex,
                            format!(
                                "unsupported geo index version {{ 2dsphereIndexVersion : {} }}, \
                                 only support versions: [2,3]",
                                keystring::render(value)
                            ),
                        ));
                    }
                    kept_options.insert(field.clone(), value.clone());
                }
                // A `2d` index's precision and bounds (listed as given).
                "bits" | "min" | "max" => {
                    if !crate::value::is_number(value) {
                        return Err(field_type_error(field, "a number", value));
                    }
                    kept_options.insert(field.clone(), value.clone());
                }
                "bucketSize" => return Err(refuse(IndexOption, "bucketSize")),
                "wildcardProjection" => return Err(refuse(IndexOption, "wildcardProjection")),
                "clustered" => return Err(refuse(IndexOption, "clustered")),
                other => {
                    return Err(Error::new(
                        ErrorCode::InvalidIndexSpecificationOption,
                        format!(
                            "The field '{other}' is not valid for an index specification. \
                             Specification: {}",
                            keystring::render_document(spec)
                        ),
                    ))
                }
            }
        }
        let Some(mut key) = key else {
            return Err(Error::failed_to_parse(
                "The 'key' field is a required property of an index specification",
            ));
        };
        let Some(name) = name else {
            return Err(Error::failed_to_parse(
                "The 'name' field is a required property of an index specification",
            ));
        };
        // mongod reports the spec as it normalised it, with the index version appended.
        let shown = || {
            let mut normalised = spec.clone();
            if !normalised.contains_key("v") {
                normalised.insert("v", 2);
            }
            keystring::render_document(&normalised)
        };
        let in_spec = |message: String| {
            Error::new(
                ErrorCode::CannotCreateIndex,
                format!(
                    "Error in specification {} :: caused by :: {message}",
                    shown()
                ),
            )
        };
        if name.is_empty() {
            return Err(in_spec("The index name cannot be empty".into()));
        }
        validate_key_pattern(&key).map_err(|e| match e {
            KeyPatternError::Invalid(message) => in_spec(message),
            KeyPatternError::Unsupported(e) => e,
        })?;
        let geo_fields = key.values().filter(|v| is_geo(v)).count();
        if geo_fields > 0 {
            if unique {
                return Err(Error::not_supported("unique geospatial indexes"));
            }
            // mongod lists the version it builds: 3 unless asked for 2.
            let sphere = key
                .values()
                .any(|v| matches!(v, Bson::String(s) if s == "2dsphere"));
            if sphere && !kept_options.contains_key("2dsphereIndexVersion") {
                kept_options.insert("2dsphereIndexVersion", 3);
            }
        }
        if unique && key.values().any(is_hashed) {
            return Err(Error::location(
                16764,
                "Currently hashed indexes cannot guarantee uniqueness. Use a regular index.",
            ));
        }
        let text = if crate::text::is_text_key(&key) || !raw_text.is_empty() {
            let (normalized, options) = crate::text::normalize(&key, &raw_text)?;
            key = normalized;
            Some(options)
        } else {
            None
        };
        let is_id_pattern =
            key.len() == 1 && key.get("_id").and_then(crate::value::to_f64) == Some(1.0);
        // The _id index is always unique and never hidden: asking for either is refused by
        // name, as mongod does (not answered "already exists").
        for (option, given) in [("unique", unique), ("hidden", hidden)] {
            if given && is_id_pattern {
                return Err(Error::new(
                    ErrorCode::InvalidIndexSpecificationOption,
                    format!(
                        "The field '{option}' is not valid for an _id index specification. \
                         Specification: {}",
                        keystring::render_document(spec)
                    ),
                ));
            }
        }
        if expire_after_seconds.is_some() {
            if is_id_pattern {
                return Err(Error::new(
                    ErrorCode::InvalidIndexSpecificationOption,
                    format!(
                        "The field 'expireAfterSeconds' is not valid for an _id index \
                         specification. Specification: {}",
                        keystring::render_document(spec)
                    ),
                ));
            }
            // MongoDB's docs say a compound TTL index is "ignored"; mongod (since 4.4) refuses it.
            if key.len() != 1 {
                return Err(Error::new(
                    ErrorCode::CannotCreateIndex,
                    format!(
                        "TTL indexes are single-field indexes, compound indexes do not support \
                         TTL. Index spec: {}",
                        keystring::render_document(spec)
                    ),
                ));
            }
        }
        if let Some(filter) = &partial_filter {
            if sparse {
                return Err(in_spec(
                    "cannot mix \"partialFilterExpression\" and \"sparse\" options".into(),
                ));
            }
            if let Err(partial::Refusal::NotAllowed(op, code)) = partial::validate(filter) {
                return Err(Error::location(
                    code,
                    format!(
                        "Error in specification {} :: caused by :: {op} is not allowed in this \
                         context",
                        shown()
                    ),
                ));
            }
            if let Err(mut e) = Filter::parse(filter) {
                e.message = format!(
                    "Error in specification {} :: caused by :: {}",
                    shown(),
                    e.message
                );
                return Err(e);
            }
            partial::validate(filter).map_err(|r| in_spec(r.message()))?;
            if is_id_pattern {
                return Err(in_spec("_id index cannot be a partial index".into()));
            }
        }
        let collation_given = !matches!(collation, crate::collation::Requested::Default);
        let collation = collation.or_default(None);
        if let Some(c) = &collation {
            refuse_collated_kind(text.is_some(), c)?;
        }
        Ok(IndexSpec {
            name,
            key,
            unique,
            sparse,
            partial_filter,
            expire_after_seconds,
            kept_options,
            text,
            hidden,
            collation,
            collation_given,
        })
    }

    /// The `_id_` index every collection has.
    pub(crate) fn id_index() -> IndexSpec {
        IndexSpec {
            name: "_id_".into(),
            key: doc! { "_id": 1 },
            unique: true,
            sparse: false,
            partial_filter: None,
            expire_after_seconds: None,
            kept_options: Document::new(),
            text: None,
            hidden: false,
            collation: None,
            collation_given: false,
        }
    }

    /// Give an index that named no collation its collection's default (as `createIndexes`
    /// does); a text index keeps the simple collation only when it asked for it.
    pub(crate) fn inherit_collation(
        &mut self,
        default: Option<&std::sync::Arc<crate::collation::Collation>>,
    ) -> Result<()> {
        if self.collation_given {
            return Ok(());
        }
        if let Some(c) = default {
            refuse_collated_kind(self.text.is_some(), c)?;
            self.collation = Some(c.clone());
        }
        Ok(())
    }

    /// The form `listIndexes` returns (`v: 2`, `key`, `name`, options that are set).
    pub(crate) fn to_document(&self) -> Document {
        let mut d = doc! { "v": 2, "key": self.key.clone(), "name": self.name.clone() };
        // The _id index is unique by nature and MongoDB does not list the flag for it.
        if self.unique && self.name != "_id_" {
            d.insert("unique", true);
        }
        if self.sparse {
            d.insert("sparse", true);
        }
        if let Some(filter) = &self.partial_filter {
            d.insert("partialFilterExpression", filter.clone());
        }
        if let Some(secs) = self.expire_after_seconds {
            match i32::try_from(secs) {
                Ok(s) => d.insert("expireAfterSeconds", s),
                Err(_) => d.insert("expireAfterSeconds", secs),
            };
        }
        if self.hidden {
            d.insert("hidden", true);
        }
        d.extend(self.kept_options.clone());
        if let Some(text) = &self.text {
            d.insert("weights", text.weights.clone());
            d.insert("default_language", text.default_language.clone());
            d.insert("language_override", text.language_override.clone());
            d.insert("textIndexVersion", text.version);
        }
        if let Some(c) = &self.collation {
            d.insert("collation", c.spec().clone());
        }
        d
    }

    /// Compare a requested index (`self`) with an existing one for `createIndexes`:
    /// `Ok(true)` when it is the same index (nothing to do), `Ok(false)` when they are
    /// unrelated, and MongoDB's conflict errors (85 IndexOptionsConflict, 86
    /// IndexKeySpecsConflict) otherwise.
    pub(crate) fn same_definition(&self, existing: &IndexSpec) -> Result<bool> {
        // Key pattern and partial filter identify an index; the other options only qualify it.
        let same_key = compare_documents(&self.key, &existing.key) == Ordering::Equal;
        let same_partial =
            match (&self.partial_filter, &existing.partial_filter) {
                (None, None) => true,
                (Some(a), Some(b)) => compare_documents(a, b) == Ordering::Equal,
                _ => false,
            } && crate::collation::same(self.collation.as_ref(), existing.collation.as_ref());
        // Asking for the _id index again, under any name, is a no-op as in MongoDB.
        if existing.name == "_id_"
            && same_key
            && same_partial
            && !self.sparse
            && self.expire_after_seconds.is_none()
        {
            return Ok(true);
        }
        let same_options = self.unique == existing.unique
            && self.sparse == existing.sparse
            && self.expire_after_seconds == existing.expire_after_seconds
            && self.text == existing.text
            && self.hidden == existing.hidden;
        let both = || {
            format!(
                "Requested index: {}, existing index: {}",
                keystring::render_document(&self.to_document()),
                keystring::render_document(&existing.to_document())
            )
        };
        if self.name == existing.name {
            if !same_key || !same_partial {
                return Err(Error::new(
                    ErrorCode::IndexKeySpecsConflict,
                    format!(
                        "An existing index has the same name as the requested index. When index \
                         names are not specified, they are auto generated and can cause \
                         conflicts. Please refer to our documentation. {}",
                        both()
                    ),
                ));
            }
            if same_options {
                return Ok(true);
            }
            return Err(Error::new(
                ErrorCode::IndexOptionsConflict,
                format!(
                    "An equivalent index already exists with the same name but different \
                     options. {}",
                    both()
                ),
            ));
        }
        if same_key && same_partial {
            if same_options {
                return Err(Error::new(
                    ErrorCode::IndexOptionsConflict,
                    format!(
                        "Index already exists with a different name: {}",
                        existing.name
                    ),
                ));
            }
            return Err(Error::new(
                ErrorCode::IndexOptionsConflict,
                format!(
                    "An equivalent index already exists with a different name and options. {}",
                    both()
                ),
            ));
        }
        Ok(false)
    }
}

/// Text indexes hold terms, not values: mongod refuses them any collation but the simple one.
fn refuse_collated_kind(text: bool, collation: &crate::collation::Collation) -> Result<()> {
    if text {
        return Err(Error::new(
            ErrorCode::CannotCreateIndex,
            format!(
                "Index type 'text' does not support collation: {}",
                keystring::render_document(collation.spec())
            ),
        ));
    }
    Ok(())
}

fn field_type_error(field: &str, expected: &str, got: &Bson) -> Error {
    Error::type_mismatch(format!(
        "The field '{field}' must be {expected}, but got {}",
        type_name(got)
    ))
}

fn option_flag(field: &str, value: &Bson) -> Result<bool> {
    match value {
        Bson::Boolean(b) => Ok(*b),
        v if crate::value::is_number(v) => Ok(crate::value::is_truthy(v)),
        other => Err(field_type_error(field, "a boolean", other)),
    }
}

fn parse_ttl(value: &Bson) -> Result<i64> {
    let Some(secs) = crate::value::to_f64(value) else {
        return Err(Error::new(
            ErrorCode::CannotCreateIndex,
            format!(
                "TTL index 'expireAfterSeconds' option must be numeric, but received a type of \
                 '{}'",
                type_name(value)
            ),
        ));
    };
    if secs.is_nan() || !(0.0..=i32::MAX as f64).contains(&secs) {
        return Err(Error::new(
            ErrorCode::CannotCreateIndex,
            "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a \
             lower number",
        ));
    }
    Ok(secs as i64)
}

enum KeyPatternError {
    /// A malformed pattern (wrapped into "Error in specification …").
    Invalid(String),
    /// A legal index kind docstore does not implement.
    Unsupported(Error),
}

fn validate_key_pattern(key: &Document) -> std::result::Result<(), KeyPatternError> {
    use KeyPatternError::*;
    if key.is_empty() {
        return Err(Invalid("Index keys cannot be empty.".into()));
    }
    for (field, value) in key {
        if field.is_empty() {
            return Err(Invalid("Index keys cannot be an empty field.".into()));
        }
        let is_text = matches!(value, Bson::String(s) if s == "text");
        if (field == "$**" || field.ends_with(".$**")) && !(is_text && field == "$**") {
            return Err(Unsupported(Error::not_supported("wildcard indexes")));
        }
        if field.starts_with('$') && !is_text {
            return Err(Invalid(
                "Index key contains an illegal field name: field name starts with '$'.".into(),
            ));
        }
        if field.split('.').any(str::is_empty) {
            return Err(Invalid("Index keys cannot contain an empty field.".into()));
        }
        match value {
            Bson::String(kind) if kind == "hashed" => {
                if key.values().filter(|v| is_hashed(v)).count() > 1 {
                    return Err(Invalid(format!(
                        "A maximum of one index field is allowed to be hashed but found {} for \
                         'key' {}",
                        key.values().filter(|v| is_hashed(v)).count(),
                        keystring::render_document(key)
                    )));
                }
            }
            Bson::String(kind) => {
                let feature = match kind.as_str() {
                    "text" | "2dsphere" => continue,
                    "2d" => {
                        if key.values().filter(|v| is_geo(v)).count() > 1 {
                            return Err(Invalid("can't have 2 geo fields".into()));
                        }
                        if key.keys().next() != Some(field) {
                            return Err(Invalid("2d has to be first in index".into()));
                        }
                        continue;
                    }
                    "geoHaystack" => "geoHaystack indexes",
                    "hashed" => "hashed indexes",
                    "columnstore" => "columnstore indexes",
                    other => return Err(Invalid(format!("Unknown index plugin '{other}'"))),
                };
                return Err(Unsupported(Error::not_supported(feature)));
            }
            v if crate::value::is_number(v) => {
                let n = crate::value::to_f64(v).unwrap_or(0.0);
                if n == 0.0 || n.is_nan() {
                    return Err(Invalid(
                        "Values in the index key pattern can't be 0.".into(),
                    ));
                }
            }
            other => {
                return Err(Invalid(format!(
                    "Values in v:2 index key pattern cannot be of type {}. Only numbers > 0, \
                     numbers < 0, and strings are allowed.",
                    type_name(other)
                )))
            }
        }
    }
    Ok(())
}

/// Whether a key pattern value asks for a hashed field.
pub(super) fn is_hashed(direction: &Bson) -> bool {
    matches!(direction, Bson::String(s) if s == "hashed")
}

/// Whether a key pattern value asks for a geospatial field (`"2dsphere"` or `"2d"`).
pub(super) fn is_geo(direction: &Bson) -> bool {
    matches!(direction, Bson::String(s) if s == "2dsphere" || s == "2d")
}

//! Time-series collections: the `timeseries` option of `create` (`timeField`, `metaField`,
//! `granularity`, `bucketMaxSpanSeconds`, `bucketRoundingSeconds`) and `expireAfterSeconds`,
//! validated with mongod's codes, and the rules they put on writes (every measurement carries a
//! BSON date in its time field) and on the TTL monitor (measurements older than
//! `expireAfterSeconds` are deleted). docstore stores measurements as ordinary documents, one
//! per measurement: there are no buckets, so the bucketing figures are only validated, kept and
//! shown.

use crate::error::{Error, ErrorCode, Result};
use crate::value::type_name;
use bson::{doc, Bson, Document};

/// mongod's largest `bucketMaxSpanSeconds`/`bucketRoundingSeconds`: one year.
const MAX_BUCKET_SECONDS: i64 = 31_536_000;

/// mongod's largest `expireAfterSeconds` (`std::numeric_limits<int64_t>::max() / 2`).
const MAX_EXPIRE_AFTER_SECONDS: i64 = i64::MAX / 2;

/// A time-series granularity, coarsest last (`collMod` may only move it later).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Granularity {
    Seconds,
    Minutes,
    Hours,
}

impl Granularity {
    fn parse(value: &Bson, field: &str) -> Result<Granularity> {
        match value {
            Bson::String(s) if s == "seconds" => Ok(Granularity::Seconds),
            Bson::String(s) if s == "minutes" => Ok(Granularity::Minutes),
            Bson::String(s) if s == "hours" => Ok(Granularity::Hours),
            Bson::String(s) => Err(Error::bad_value(format!(
                "Enumeration value '{s}' for field '{field}' is not a valid value."
            ))),
            other => Err(wrong_type(field, other, "string")),
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Granularity::Seconds => "seconds",
            Granularity::Minutes => "minutes",
            Granularity::Hours => "hours",
        }
    }

    /// The bucket span mongod derives from the granularity (and shows in `listCollections`).
    fn max_span_seconds(self) -> i64 {
        match self {
            Granularity::Seconds => 3_600,
            Granularity::Minutes => 86_400,
            Granularity::Hours => 2_592_000,
        }
    }
}

/// A time-series collection's rules, as its stored options describe them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TimeSeries {
    pub time_field: String,
    pub meta_field: Option<String>,
    /// `None` when the collection was created with custom bucket spans.
    pub granularity: Option<Granularity>,
    pub expire_after_seconds: Option<i64>,
}

fn wrong_type(field: &str, got: &Bson, expected: &str) -> Error {
    Error::type_mismatch(format!(
        "BSON field '{field}' is the wrong type '{}', expected type '{expected}'",
        type_name(got)
    ))
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::InvalidOptions, message)
}

/// A whole number of seconds for a bucketing field, in mongod's range 1..=31536000.
fn bucket_seconds(field: &str, value: &Bson) -> Result<i64> {
    let n = match value {
        Bson::Int32(i) => *i as i64,
        Bson::Int64(i) => *i,
        Bson::Double(d) if d.is_finite() && d.fract() == 0.0 => *d as i64,
        other => return Err(wrong_type(field, other, "int")),
    };
    if !(1..=MAX_BUCKET_SECONDS).contains(&n) {
        return Err(Error::location(
            51024,
            format!(
                "BSON field '{field}' value must be >= 1 and <= {MAX_BUCKET_SECONDS}, actual value \
                 '{n}'"
            ),
        ));
    }
    Ok(n)
}

/// A top-level field name for `timeField`/`metaField`.
fn field_name(field: &str, value: &Bson) -> Result<String> {
    let Bson::String(name) = value else {
        return Err(wrong_type(&format!("timeseries.{field}"), value, "string"));
    };
    if name.contains('.') {
        return Err(invalid(format!(
            "'{field}' must be a top-level field and not contain a '.'"
        )));
    }
    if name.is_empty() || name.starts_with('$') {
        return Err(Error::bad_value(format!(
            "'{field}' must be a non-empty field name not starting with '$'"
        )));
    }
    Ok(name.clone())
}

/// `expireAfterSeconds` of `create`/`collMod`: a non-negative whole number of seconds, stored
/// as a 64-bit integer as mongod shows it.
pub(crate) fn parse_expire_after_seconds(command: &str, value: &Bson) -> Result<i64> {
    let n = match value {
        Bson::Int32(i) => *i as i64,
        Bson::Int64(i) => *i,
        Bson::Double(d) if d.is_finite() => d.trunc() as i64,
        other => {
            return Err(wrong_type(
                &format!("{command}.expireAfterSeconds"),
                other,
                "long",
            ))
        }
    };
    if n < 0 {
        return Err(invalid(format!(
            "TTL index 'expireAfterSeconds' option cannot be less than 0. Current value: {n}"
        )));
    }
    if n > MAX_EXPIRE_AFTER_SECONDS {
        return Err(invalid(format!(
            "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a \
             lower number. Current value: {n}"
        )));
    }
    Ok(n)
}

/// The `timeseries` option of `create`, validated as mongod validates it, with the defaults
/// mongod fills in (`granularity: "seconds"`, and the bucket span of the granularity), in the
/// shape `listCollections` shows.
pub(crate) fn parse_create(spec: &Bson) -> Result<Document> {
    let Bson::Document(spec) = spec else {
        return Err(wrong_type("create.timeseries", spec, "object"));
    };
    let (mut time, mut meta, mut granularity, mut span, mut rounding) =
        (None, None, None, None, None);
    for (key, value) in spec {
        match key.as_str() {
            "timeField" => time = Some(field_name("timeField", value)?),
            "metaField" => meta = Some(field_name("metaField", value)?),
            "granularity" => {
                granularity = Some(Granularity::parse(value, "timeseries.granularity")?)
            }
            "bucketMaxSpanSeconds" => {
                span = Some(bucket_seconds("timeseries.bucketMaxSpanSeconds", value)?)
            }
            "bucketRoundingSeconds" => {
                rounding = Some(bucket_seconds("timeseries.bucketRoundingSeconds", value)?)
            }
            other => {
                return Err(Error::location(
                    40415,
                    format!("BSON field 'create.timeseries.{other}' is an unknown field."),
                ))
            }
        }
    }
    let time = time.ok_or_else(|| {
        Error::location(
            40414,
            "BSON field 'create.timeseries.timeField' is missing but a required field",
        )
    })?;
    if let Some(meta) = &meta {
        if meta == "_id" {
            return Err(invalid("'metaField' cannot be \"_id\""));
        }
        if *meta == time {
            return Err(invalid("'metaField' cannot be the same as 'timeField'"));
        }
    }
    let mut out = doc! { "timeField": time };
    if let Some(meta) = meta {
        out.insert("metaField", meta);
    }
    match (granularity, span, rounding) {
        // Custom bucketing: both spans, equal, and no granularity.
        (None, Some(span), Some(rounding)) => {
            if span != rounding {
                return Err(invalid(
                    "Timeseries 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' fields must \
                     be equal",
                ));
            }
            out.insert("bucketRoundingSeconds", rounding as i32);
            out.insert("bucketMaxSpanSeconds", span as i32);
        }
        (None, Some(_), None) | (None, None, Some(_)) => {
            return Err(invalid(
                "Timeseries 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' must both be \
                 set",
            ))
        }
        (granularity, span, rounding) => {
            let granularity = granularity.unwrap_or(Granularity::Seconds);
            if rounding.is_some() {
                return Err(invalid(
                    "Timeseries 'bucketRoundingSeconds' cannot be set alongside 'granularity'",
                ));
            }
            if span.is_some_and(|s| s != granularity.max_span_seconds()) {
                return Err(invalid(format!(
                    "Timeseries 'bucketMaxSpanSeconds' is not allowed to differ from the \
                     default value for the granularity '{}'",
                    granularity.name()
                )));
            }
            out.insert("granularity", granularity.name());
            out.insert(
                "bucketMaxSpanSeconds",
                granularity.max_span_seconds() as i32,
            );
        }
    }
    Ok(out)
}

/// `collMod`'s `timeseries: {granularity}` applied to the stored `timeseries` options: the
/// granularity may only grow (mongod's rule, as buckets cannot shrink); the same one changes
/// nothing. Changing the bucket spans is refused by name.
pub(crate) fn modify(stored: &Document, change: &Bson) -> Result<Document> {
    let Bson::Document(change) = change else {
        return Err(wrong_type("collMod.timeseries", change, "object"));
    };
    let mut out = stored.clone();
    for (key, value) in change {
        match key.as_str() {
            "granularity" => {
                let new = Granularity::parse(value, "collMod.timeseries.granularity")?;
                let Some(old) = stored
                    .get("granularity")
                    .and_then(|g| Granularity::parse(g, "granularity").ok())
                else {
                    return Err(Error::not_supported(
                        "collMod 'timeseries.granularity' on a collection with custom bucket \
                         spans",
                    ));
                };
                if new < old {
                    return Err(invalid(format!(
                        "Invalid transition for timeseries.granularity. Can only transition from \
                         '{}' to '{}'.",
                        old.name(),
                        match old {
                            Granularity::Seconds => "minutes",
                            _ => "hours",
                        }
                    )));
                }
                out.insert("granularity", new.name());
                out.insert("bucketMaxSpanSeconds", new.max_span_seconds() as i32);
            }
            "bucketMaxSpanSeconds" | "bucketRoundingSeconds" => {
                return Err(Error::not_supported(format!(
                    "collMod option 'timeseries.{key}'"
                )))
            }
            other => {
                return Err(Error::location(
                    40415,
                    format!("BSON field 'collMod.timeseries.{other}' is an unknown field."),
                ))
            }
        }
    }
    Ok(out)
}

impl TimeSeries {
    /// The rules the options describe; `None` for an ordinary collection.
    pub(crate) fn from_options(options: &Document) -> Result<Option<TimeSeries>> {
        let Some(spec) = options.get("timeseries") else {
            return Ok(None);
        };
        let spec = parse_create(spec)?;
        let expire_after_seconds = match options.get("expireAfterSeconds") {
            Some(v) => Some(parse_expire_after_seconds("create", v)?),
            None => None,
        };
        Ok(Some(TimeSeries {
            time_field: spec.get_str("timeField").unwrap_or_default().to_string(),
            meta_field: spec.get_str("metaField").ok().map(str::to_string),
            granularity: spec
                .get("granularity")
                .and_then(|g| Granularity::parse(g, "granularity").ok()),
            expire_after_seconds,
        }))
    }

    /// The time of a measurement, or mongod's error 2 for one without a date there.
    pub(crate) fn check_measurement(&self, doc: &Document) -> Result<bson::DateTime> {
        match doc.get(&self.time_field) {
            Some(Bson::DateTime(t)) => Ok(*t),
            _ => Err(Error::bad_value(format!(
                "'{}' must be present and contain a valid BSON UTC datetime value",
                self.time_field
            ))),
        }
    }

    /// Whether a stored measurement has expired at `now`: its time plus `expireAfterSeconds`
    /// at or before `now`, as the TTL monitor judges a TTL index's dates.
    pub(crate) fn expired(&self, doc: &crate::stored::StoredDoc, now: bson::DateTime) -> bool {
        let Some(secs) = self.expire_after_seconds else {
            return false;
        };
        let cutoff = now
            .timestamp_millis()
            .saturating_sub(secs.saturating_mul(1000));
        matches!(
            doc.get(&self.time_field),
            Ok(Some(Bson::DateTime(t))) if t.timestamp_millis() <= cutoff
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_filled_in_as_mongod_shows_them() {
        let out =
            parse_create(&Bson::Document(doc! { "timeField": "t", "metaField": "m" })).unwrap();
        assert_eq!(
            out,
            doc! { "timeField": "t", "metaField": "m", "granularity": "seconds",
            "bucketMaxSpanSeconds": 3600 }
        );
        let out = parse_create(&Bson::Document(doc! {
            "timeField": "t", "bucketMaxSpanSeconds": 500, "bucketRoundingSeconds": 500
        }))
        .unwrap();
        assert_eq!(
            out,
            doc! { "timeField": "t", "bucketRoundingSeconds": 500, "bucketMaxSpanSeconds": 500 }
        );
    }

    #[test]
    fn invalid_specs_get_mongods_codes() {
        let code = |spec: Document| parse_create(&Bson::Document(spec)).unwrap_err().code.code();
        assert_eq!(code(doc! { "metaField": "m" }), 40414);
        assert_eq!(code(doc! { "timeField": 1 }), 14);
        assert_eq!(code(doc! { "timeField": "t", "x": 1 }), 40415);
        assert_eq!(code(doc! { "timeField": "a.b" }), 72);
        assert_eq!(code(doc! { "timeField": "t", "metaField": "t" }), 72);
        assert_eq!(code(doc! { "timeField": "t", "metaField": "_id" }), 72);
        assert_eq!(
            code(doc! { "timeField": "t", "bucketMaxSpanSeconds": 10 }),
            72
        );
        assert_eq!(
            code(doc! { "timeField": "t", "granularity": "minutes", "bucketMaxSpanSeconds": 3600 }),
            72
        );
        assert_eq!(
            code(doc! { "timeField": "t", "granularity": "seconds", "bucketRoundingSeconds": 60 }),
            72
        );
        assert_eq!(code(doc! { "timeField": "t", "granularity": "days" }), 2);
    }

    #[test]
    fn granularity_only_grows() {
        let stored =
            doc! { "timeField": "t", "granularity": "minutes", "bucketMaxSpanSeconds": 86400 };
        let grown = modify(&stored, &Bson::Document(doc! { "granularity": "hours" })).unwrap();
        assert_eq!(grown.get_str("granularity").unwrap(), "hours");
        assert_eq!(grown.get_i32("bucketMaxSpanSeconds").unwrap(), 2_592_000);
        let e = modify(&stored, &Bson::Document(doc! { "granularity": "seconds" })).unwrap_err();
        assert_eq!(e.code.code(), 72);
    }
}

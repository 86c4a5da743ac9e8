//! `$jsonSchema`: MongoDB's dialect of JSON Schema draft 4, parsed once into a tree and checked
//! against documents, both as a query operator and inside collection validators. A failed check
//! can also say why, in the shape mongod gives `errInfo.details.schemaRulesNotSatisfied`.
//!
//! As in MongoDB, each keyword applies only to values of its kind: `minimum` to numbers,
//! `properties` to objects, `items` to arrays, `pattern` to strings; a value of another kind
//! satisfies it (say `bsonType` to demand a kind).

use crate::error::{Error, ErrorCode, Result};
use crate::pattern::regex_source;
use crate::value::{compare, to_f64, type_name, type_number, type_number_for_alias, values_equal};
use bson::{doc, Bson, Document};
use std::cmp::Ordering;

/// A parsed `$jsonSchema` (or one of its sub-schemas).
#[derive(Debug, Clone)]
pub(crate) struct Schema {
    types: Option<TypeRule>,
    required: Vec<String>,
    properties: Vec<(String, Schema)>,
    pattern_properties: Vec<(String, regex::Regex, Schema)>,
    additional: Option<Additional>,
    min_properties: Option<i64>,
    max_properties: Option<i64>,
    dependencies: Vec<(String, Dependency)>,
    enumeration: Option<Vec<Bson>>,
    minimum: Option<(Bson, bool)>,
    maximum: Option<(Bson, bool)>,
    multiple_of: Option<Bson>,
    min_length: Option<i64>,
    max_length: Option<i64>,
    pattern: Option<(String, regex::Regex)>,
    items: Option<Items>,
    additional_items: Option<Additional>,
    min_items: Option<i64>,
    max_items: Option<i64>,
    unique_items: bool,
    all_of: Vec<Schema>,
    any_of: Vec<Schema>,
    one_of: Vec<Schema>,
    not: Option<Box<Schema>>,
    description: Option<String>,
    title: Option<String>,
}

/// `type` (JSON types) or `bsonType` (BSON aliases), as given and as type tests.
#[derive(Debug, Clone)]
struct TypeRule {
    keyword: &'static str,
    spec: Bson,
    /// BSON type numbers; `None` entries stand for "number" (any numeric type).
    accepted: Vec<Option<i32>>,
}

#[derive(Debug, Clone)]
enum Additional {
    Allowed(bool),
    Schema(Box<Schema>),
}

#[derive(Debug, Clone)]
enum Items {
    All(Box<Schema>),
    Tuple(Vec<Schema>),
}

#[derive(Debug, Clone)]
enum Dependency {
    Properties(Vec<String>),
    Schema(Box<Schema>),
}

fn failed(message: String) -> Error {
    Error::new(ErrorCode::FailedToParse, message)
}

fn mismatch(keyword: &str, what: &str) -> Error {
    Error::type_mismatch(format!("$jsonSchema keyword '{keyword}' must be {what}"))
}

fn non_negative(keyword: &str, value: &Bson) -> Result<i64> {
    let n = match value {
        Bson::Int32(i) => *i as i64,
        Bson::Int64(i) => *i,
        Bson::Double(d) if d.fract() == 0.0 && d.is_finite() => *d as i64,
        _ => return Err(mismatch(keyword, "a number")),
    };
    if n < 0 {
        return Err(failed(format!(
            "$jsonSchema keyword '{keyword}' must be a non-negative integer"
        )));
    }
    Ok(n)
}

fn number(keyword: &str, value: &Bson) -> Result<Bson> {
    match value {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
            Ok(value.clone())
        }
        _ => Err(mismatch(keyword, "a number")),
    }
}

fn sub_schema(keyword: &str, value: &Bson) -> Result<Schema> {
    match value {
        Bson::Document(d) => Schema::parse(d),
        _ => Err(mismatch(keyword, "an object")),
    }
}

fn schema_list(keyword: &str, value: &Bson) -> Result<Vec<Schema>> {
    let Bson::Array(items) = value else {
        return Err(mismatch(keyword, "an array"));
    };
    if items.is_empty() {
        return Err(failed(format!(
            "$jsonSchema keyword '{keyword}' must be a non-empty array"
        )));
    }
    items.iter().map(|i| sub_schema(keyword, i)).collect()
}

fn string_list(keyword: &str, value: &Bson) -> Result<Vec<String>> {
    let Bson::Array(items) = value else {
        return Err(mismatch(keyword, "an array"));
    };
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        let Bson::String(s) = item else {
            return Err(mismatch(keyword, "an array of strings"));
        };
        if out.contains(s) {
            return Err(failed(format!(
                "$jsonSchema keyword '{keyword}' array cannot contain duplicate values"
            )));
        }
        out.push(s.clone());
    }
    Ok(out)
}

fn additional(keyword: &str, value: &Bson) -> Result<Additional> {
    match value {
        Bson::Boolean(b) => Ok(Additional::Allowed(*b)),
        Bson::Document(d) => Ok(Additional::Schema(Box::new(Schema::parse(d)?))),
        _ => Err(mismatch(keyword, "either an object or a boolean")),
    }
}

fn compile(keyword: &str, pattern: &str) -> Result<regex::Regex> {
    let source = regex_source(pattern, "")
        .map_err(|c| failed(format!("invalid flag in regex options: {c}")))?;
    regex::Regex::new(&source).map_err(|e| {
        Error::bad_value(format!(
            "$jsonSchema keyword '{keyword}' regular expression /{pattern}/ is invalid or uses \
             features docstore does not support (look-around, backreferences): {e}"
        ))
    })
}

fn type_rule(keyword: &'static str, value: &Bson) -> Result<TypeRule> {
    let names: Vec<&str> = match value {
        Bson::String(s) => vec![s.as_str()],
        Bson::Array(items) => {
            let mut names = Vec::with_capacity(items.len());
            for item in items {
                let Bson::String(s) = item else {
                    return Err(mismatch(keyword, "a string or an array of strings"));
                };
                names.push(s.as_str());
            }
            if names.is_empty() {
                return Err(failed(format!(
                    "$jsonSchema keyword '{keyword}' must name at least one type"
                )));
            }
            names
        }
        _ => return Err(mismatch(keyword, "a string or an array of strings")),
    };
    let mut accepted = Vec::with_capacity(names.len());
    for name in names {
        let entry = if keyword == "type" {
            match name {
                "object" => Some(3),
                "array" => Some(4),
                "string" => Some(2),
                "boolean" => Some(8),
                "null" => Some(10),
                "number" => None,
                "integer" => {
                    return Err(Error::bad_value(
                        "JSON type 'integer' is not currently supported.",
                    ))
                }
                other => {
                    return Err(Error::bad_value(format!(
                        "Unknown type name alias: {other}"
                    )))
                }
            }
        } else if name == "number" {
            None
        } else {
            Some(
                type_number_for_alias(name)
                    .ok_or_else(|| Error::bad_value(format!("Unknown type name alias: {name}")))?,
            )
        };
        accepted.push(entry);
    }
    Ok(TypeRule {
        keyword,
        spec: value.clone(),
        accepted,
    })
}

impl TypeRule {
    fn accepts(&self, t: i32) -> bool {
        self.accepted.iter().any(|a| match a {
            Some(code) => *code == t,
            None => matches!(t, 1 | 16 | 18 | 19),
        })
    }
}

fn is_numeric(v: &Bson) -> bool {
    matches!(
        v,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_)
    )
}

/// Where failure details go: `None` when only the verdict is wanted (queries), so the check
/// stops at the first failing rule.
type Sink<'a> = Option<&'a mut Vec<Document>>;

/// A rule failed: clears the checker's `ok` and keeps `detail` in its `sink`, or, when the
/// caller wants no details, answers `false` at once.
macro_rules! fail {
    ($ok:ident, $sink:ident, $detail:expr) => {{
        $ok = false;
        match $sink.as_deref_mut() {
            Some(out) => out.push($detail),
            None => return false,
        }
    }};
}

impl Schema {
    /// Parse a `$jsonSchema` document; unknown keywords are errors, as in MongoDB.
    pub(crate) fn parse(spec: &Document) -> Result<Schema> {
        let mut s = Schema {
            types: None,
            required: Vec::new(),
            properties: Vec::new(),
            pattern_properties: Vec::new(),
            additional: None,
            min_properties: None,
            max_properties: None,
            dependencies: Vec::new(),
            enumeration: None,
            minimum: None,
            maximum: None,
            multiple_of: None,
            min_length: None,
            max_length: None,
            pattern: None,
            items: None,
            additional_items: None,
            min_items: None,
            max_items: None,
            unique_items: false,
            all_of: Vec::new(),
            any_of: Vec::new(),
            one_of: Vec::new(),
            not: None,
            description: None,
            title: None,
        };
        if spec.contains_key("type") && spec.contains_key("bsonType") {
            return Err(failed(
                "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'".into(),
            ));
        }
        for (key, value) in spec {
            match key.as_str() {
                "type" => s.types = Some(type_rule("type", value)?),
                "bsonType" => s.types = Some(type_rule("bsonType", value)?),
                "required" => {
                    s.required = string_list("required", value)?;
                    if s.required.is_empty() {
                        return Err(failed(
                            "$jsonSchema keyword 'required' cannot be an empty array".into(),
                        ));
                    }
                }
                "properties" => {
                    let Bson::Document(props) = value else {
                        return Err(mismatch("properties", "an object"));
                    };
                    for (name, sub) in props {
                        s.properties
                            .push((name.clone(), sub_schema("properties", sub)?));
                    }
                }
                "patternProperties" => {
                    let Bson::Document(props) = value else {
                        return Err(mismatch("patternProperties", "an object"));
                    };
                    for (pattern, sub) in props {
                        s.pattern_properties.push((
                            pattern.clone(),
                            compile("patternProperties", pattern)?,
                            sub_schema("patternProperties", sub)?,
                        ));
                    }
                }
                "additionalProperties" => {
                    s.additional = Some(additional("additionalProperties", value)?)
                }
                "minProperties" => s.min_properties = Some(non_negative(key, value)?),
                "maxProperties" => s.max_properties = Some(non_negative(key, value)?),
                "dependencies" => {
                    let Bson::Document(deps) = value else {
                        return Err(mismatch("dependencies", "an object"));
                    };
                    for (name, dep) in deps {
                        let dep = match dep {
                            Bson::Document(d) => Dependency::Schema(Box::new(Schema::parse(d)?)),
                            Bson::Array(_) => {
                                Dependency::Properties(string_list("dependencies", dep)?)
                            }
                            _ => {
                                return Err(mismatch(
                                    "dependencies",
                                    "an object whose values are objects or arrays of strings",
                                ))
                            }
                        };
                        s.dependencies.push((name.clone(), dep));
                    }
                }
                "enum" => {
                    let Bson::Array(values) = value else {
                        return Err(mismatch("enum", "an array"));
                    };
                    if values.is_empty() {
                        return Err(failed(
                            "$jsonSchema keyword 'enum' cannot be an empty array".into(),
                        ));
                    }
                    s.enumeration = Some(values.clone());
                }
                "minimum" => {
                    s.minimum = Some((number(key, value)?, false));
                }
                "maximum" => {
                    s.maximum = Some((number(key, value)?, false));
                }
                "exclusiveMinimum" | "exclusiveMaximum" => {
                    if !matches!(value, Bson::Boolean(_)) {
                        return Err(mismatch(key, "a boolean"));
                    }
                }
                "multipleOf" => {
                    let n = number(key, value)?;
                    if to_f64(&n).is_none_or(|f| f <= 0.0 || f.is_nan()) {
                        return Err(failed(
                            "$jsonSchema keyword 'multipleOf' must have a positive value".into(),
                        ));
                    }
                    s.multiple_of = Some(n);
                }
                "minLength" => s.min_length = Some(non_negative(key, value)?),
                "maxLength" => s.max_length = Some(non_negative(key, value)?),
                "pattern" => {
                    let Bson::String(p) = value else {
                        return Err(mismatch("pattern", "a string"));
                    };
                    s.pattern = Some((p.clone(), compile("pattern", p)?));
                }
                "items" => {
                    s.items = Some(match value {
                        Bson::Document(d) => Items::All(Box::new(Schema::parse(d)?)),
                        Bson::Array(list) => Items::Tuple(
                            list.iter()
                                .map(|i| sub_schema("items", i))
                                .collect::<Result<_>>()?,
                        ),
                        _ => return Err(mismatch("items", "an array or an object")),
                    })
                }
                "additionalItems" => {
                    s.additional_items = Some(additional("additionalItems", value)?)
                }
                "minItems" => s.min_items = Some(non_negative(key, value)?),
                "maxItems" => s.max_items = Some(non_negative(key, value)?),
                "uniqueItems" => {
                    let Bson::Boolean(b) = value else {
                        return Err(mismatch("uniqueItems", "a boolean"));
                    };
                    s.unique_items = *b;
                }
                "allOf" => s.all_of = schema_list(key, value)?,
                "anyOf" => s.any_of = schema_list(key, value)?,
                "oneOf" => s.one_of = schema_list(key, value)?,
                "not" => s.not = Some(Box::new(sub_schema("not", value)?)),
                "description" | "title" => {
                    let Bson::String(text) = value else {
                        return Err(mismatch(key, "a string"));
                    };
                    if key == "title" {
                        s.title = Some(text.clone());
                    } else {
                        s.description = Some(text.clone());
                    }
                }
                "$ref" | "$schema" | "default" | "definitions" | "format" | "id" => {
                    return Err(failed(format!(
                        "$jsonSchema keyword '{key}' is not currently supported"
                    )))
                }
                "encrypt" | "encryptMetadata" => {
                    return Err(Error::not_supported(format!(
                        "$jsonSchema keyword '{key}' (client-side field level encryption)"
                    )))
                }
                other => return Err(failed(format!("Unknown $jsonSchema keyword: {other}"))),
            }
        }
        // The exclusive flags qualify the bound they go with, which must be present.
        for (flag, bound) in [
            ("exclusiveMinimum", "minimum"),
            ("exclusiveMaximum", "maximum"),
        ] {
            if let Some(Bson::Boolean(b)) = spec.get(flag) {
                let slot = if bound == "minimum" {
                    &mut s.minimum
                } else {
                    &mut s.maximum
                };
                match slot {
                    Some((_, exclusive)) => *exclusive = *b,
                    None => {
                        return Err(failed(format!(
                            "$jsonSchema keyword '{bound}' must be a present if {flag} is present"
                        )))
                    }
                }
            }
        }
        Ok(s)
    }

    /// Whether a whole document satisfies the schema.
    pub(crate) fn matches(&self, doc: &Document) -> bool {
        self.check_object(doc, None)
    }

    /// Why a document fails the schema: mongod's `schemaRulesNotSatisfied` entries (empty when
    /// it satisfies it).
    pub(crate) fn failures(&self, doc: &Document) -> Vec<Document> {
        let mut out = Vec::new();
        self.check_object(doc, Some(&mut out));
        out
    }

    fn check_object(&self, doc: &Document, sink: Sink<'_>) -> bool {
        // A document is checked as the value it is, without copying it into a `Bson`.
        self.check_value(Value::Doc(doc), sink)
    }

    fn check(&self, value: &Bson, sink: Sink<'_>) -> bool {
        match value {
            Bson::Document(d) => self.check_value(Value::Doc(d), sink),
            other => self.check_value(Value::Other(other), sink),
        }
    }

    /// Runs every rule; with a sink, records a detail for each failing rule.
    fn check_value(&self, value: Value<'_>, mut sink: Sink<'_>) -> bool {
        let mut ok = true;
        let start = sink.as_ref().map_or(0, |s| s.len());
        if let Some(rule) = &self.types {
            if !rule.accepts(value.type_number()) {
                let v = value.to_bson();
                fail!(
                    ok,
                    sink,
                    doc! {
                        "operatorName": rule.keyword,
                        "specifiedAs": { rule.keyword: rule.spec.clone() },
                        "reason": "type did not match",
                        "consideredValue": v.clone(),
                        "consideredType": type_name(&v),
                    }
                );
            }
        }
        if let Some(values) = &self.enumeration {
            let v = value.to_bson();
            if !values.iter().any(|e| values_equal(e, &v)) {
                fail!(
                    ok,
                    sink,
                    doc! {
                        "operatorName": "enum",
                        "specifiedAs": { "enum": values.clone() },
                        "reason": "value was not found in enum",
                        "consideredValue": v,
                    }
                );
            }
        }
        match value {
            Value::Doc(d) => {
                if !self.check_document(d, sink.as_deref_mut()) {
                    ok = false;
                    if sink.is_none() {
                        return false;
                    }
                }
            }
            Value::Other(Bson::Array(items)) => {
                if !self.check_array(items, sink.as_deref_mut()) {
                    ok = false;
                    if sink.is_none() {
                        return false;
                    }
                }
            }
            Value::Other(Bson::String(s)) => {
                let len = s.chars().count() as i64;
                if let Some(min) = self.min_length.filter(|m| len < *m) {
                    fail!(
                        ok,
                        sink,
                        doc! {
                            "operatorName": "minLength",
                            "specifiedAs": { "minLength": min },
                            "reason": "specified string length was not satisfied",
                            "consideredValue": s.clone(),
                        }
                    );
                }
                if let Some(max) = self.max_length.filter(|m| len > *m) {
                    fail!(
                        ok,
                        sink,
                        doc! {
                            "operatorName": "maxLength",
                            "specifiedAs": { "maxLength": max },
                            "reason": "specified string length was not satisfied",
                            "consideredValue": s.clone(),
                        }
                    );
                }
                if let Some((source, regex)) = &self.pattern {
                    if !regex.is_match(s) {
                        fail!(
                            ok,
                            sink,
                            doc! {
                                "operatorName": "pattern",
                                "specifiedAs": { "pattern": source.clone() },
                                "reason": "regular expression did not match",
                                "consideredValue": s.clone(),
                            }
                        );
                    }
                }
            }
            Value::Other(n) if is_numeric(n) => {
                if let Some((bound, exclusive)) = &self.minimum {
                    let order = compare(n, bound);
                    if order == Ordering::Less || (*exclusive && order == Ordering::Equal) {
                        let mut spec = doc! { "minimum": bound.clone() };
                        if *exclusive {
                            spec.insert("exclusiveMinimum", true);
                        }
                        fail!(
                            ok,
                            sink,
                            doc! {
                                "operatorName": "minimum",
                                "specifiedAs": spec,
                                "reason": "comparison failed",
                                "consideredValue": n.clone(),
                            }
                        );
                    }
                }
                if let Some((bound, exclusive)) = &self.maximum {
                    let order = compare(n, bound);
                    if order == Ordering::Greater || (*exclusive && order == Ordering::Equal) {
                        let mut spec = doc! { "maximum": bound.clone() };
                        if *exclusive {
                            spec.insert("exclusiveMaximum", true);
                        }
                        fail!(
                            ok,
                            sink,
                            doc! {
                                "operatorName": "maximum",
                                "specifiedAs": spec,
                                "reason": "comparison failed",
                                "consideredValue": n.clone(),
                            }
                        );
                    }
                }
                if let Some(divisor) = &self.multiple_of {
                    let (x, d) = (
                        to_f64(n).unwrap_or(f64::NAN),
                        to_f64(divisor).unwrap_or(1.0),
                    );
                    if !(x / d).is_finite() || (x / d).fract() != 0.0 {
                        fail!(
                            ok,
                            sink,
                            doc! {
                                "operatorName": "multipleOf",
                                "specifiedAs": { "multipleOf": divisor.clone() },
                                "reason": "considered value is not a multiple of the specified value",
                                "consideredValue": n.clone(),
                            }
                        );
                    }
                }
            }
            Value::Other(_) => {}
        }
        let whole = || value.to_bson();
        if !self.all_of.is_empty() {
            let failing = self.failing_schemas(&self.all_of, &whole(), sink.is_some());
            if !failing.is_empty() {
                fail!(
                    ok,
                    sink,
                    doc! { "operatorName": "allOf", "schemasNotSatisfied": failing }
                );
            }
        }
        if !self.any_of.is_empty() {
            let v = whole();
            if !self.any_of.iter().any(|s| s.check(&v, None)) {
                let failing = self.failing_schemas(&self.any_of, &v, sink.is_some());
                fail!(
                    ok,
                    sink,
                    doc! { "operatorName": "anyOf", "schemasNotSatisfied": failing }
                );
            }
        }
        if !self.one_of.is_empty() {
            let v = whole();
            let matching: Vec<i32> = (0..self.one_of.len())
                .filter(|i| self.one_of[*i].check(&v, None))
                .map(|i| i as i32)
                .collect();
            if matching.is_empty() {
                let failing = self.failing_schemas(&self.one_of, &v, sink.is_some());
                fail!(
                    ok,
                    sink,
                    doc! { "operatorName": "oneOf", "schemasNotSatisfied": failing }
                );
            } else if matching.len() > 1 {
                fail!(
                    ok,
                    sink,
                    doc! {
                        "operatorName": "oneOf",
                        "reason": "more than one subschema matched",
                        "matchingSchemaIndexes": matching,
                    }
                );
            }
        }
        if let Some(not) = &self.not {
            if not.check(&whole(), None) {
                fail!(
                    ok,
                    sink,
                    doc! {
                        "operatorName": "not",
                        "reason": "child expression matched",
                    }
                );
            }
        }
        if !ok {
            if let Some(out) = sink {
                // mongod names the schema's own description and title in each of its failures.
                for detail in &mut out[start..] {
                    if let Some(t) = &self.title {
                        detail.insert("title", t.clone());
                    }
                    if let Some(d) = &self.description {
                        detail.insert("description", d.clone());
                    }
                }
            }
        }
        ok
    }

    /// `[{index, details}]` for the schemas `value` fails (details only when wanted).
    fn failing_schemas(&self, schemas: &[Schema], value: &Bson, detailed: bool) -> Vec<Document> {
        let mut out = Vec::new();
        for (i, schema) in schemas.iter().enumerate() {
            let mut details = Vec::new();
            let ok = if detailed {
                schema.check(value, Some(&mut details))
            } else {
                schema.check(value, None)
            };
            if !ok {
                out.push(doc! { "index": i as i32, "details": details });
                if !detailed {
                    break;
                }
            }
        }
        out
    }

    fn check_document(&self, d: &Document, mut sink: Sink<'_>) -> bool {
        let mut ok = true;
        let count = d.len() as i64;
        if let Some(min) = self.min_properties.filter(|m| count < *m) {
            fail!(
                ok,
                sink,
                doc! {
                    "operatorName": "minProperties",
                    "specifiedAs": { "minProperties": min },
                    "reason": "specified number of properties was not satisfied",
                    "numberOfProperties": count,
                }
            );
        }
        if let Some(max) = self.max_properties.filter(|m| count > *m) {
            fail!(
                ok,
                sink,
                doc! {
                    "operatorName": "maxProperties",
                    "specifiedAs": { "maxProperties": max },
                    "reason": "specified number of properties was not satisfied",
                    "numberOfProperties": count,
                }
            );
        }
        let missing: Vec<&String> = self
            .required
            .iter()
            .filter(|r| !d.contains_key(r.as_str()))
            .collect();
        if !missing.is_empty() {
            fail!(
                ok,
                sink,
                doc! {
                    "operatorName": "required",
                    "specifiedAs": { "required": self.required.clone() },
                    "missingProperties": missing.into_iter().cloned().collect::<Vec<_>>(),
                }
            );
        }
        let mut not_satisfied = Vec::new();
        for (name, schema) in &self.properties {
            if let Some(v) = d.get(name) {
                let mut details = Vec::new();
                let detailed = sink.is_some();
                let good = schema.check(v, detailed.then_some(&mut details));
                if !good {
                    if !detailed {
                        return false;
                    }
                    not_satisfied.push(doc! { "propertyName": name.clone(), "details": details });
                }
            }
        }
        if !not_satisfied.is_empty() {
            fail!(
                ok,
                sink,
                doc! { "operatorName": "properties", "propertiesNotSatisfied": not_satisfied }
            );
        }
        let mut pattern_failures = Vec::new();
        let mut extra = Vec::new();
        let mut extra_failures = Vec::new();
        for (name, v) in d {
            let mut covered = self.properties.iter().any(|(p, _)| p == name);
            for (source, regex, schema) in &self.pattern_properties {
                if regex.is_match(name) {
                    covered = true;
                    let mut details = Vec::new();
                    let detailed = sink.is_some();
                    if !schema.check(v, detailed.then_some(&mut details)) {
                        if !detailed {
                            return false;
                        }
                        pattern_failures.push(doc! {
                            "propertyName": name.clone(),
                            "regexMatched": source.clone(),
                            "details": details,
                        });
                    }
                }
            }
            if covered {
                continue;
            }
            match &self.additional {
                Some(Additional::Allowed(false)) => extra.push(name.clone()),
                Some(Additional::Schema(schema)) => {
                    let mut details = Vec::new();
                    let detailed = sink.is_some();
                    if !schema.check(v, detailed.then_some(&mut details)) {
                        if !detailed {
                            return false;
                        }
                        extra_failures
                            .push(doc! { "propertyName": name.clone(), "details": details });
                    }
                }
                _ => {}
            }
        }
        if !pattern_failures.is_empty() {
            fail!(
                ok,
                sink,
                doc! {
                    "operatorName": "patternProperties",
                    "details": pattern_failures,
                }
            );
        }
        if !extra.is_empty() {
            fail!(
                ok,
                sink,
                doc! {
                    "operatorName": "additionalProperties",
                    "specifiedAs": { "additionalProperties": false },
                    "additionalProperties": extra,
                }
            );
        }
        if !extra_failures.is_empty() {
            fail!(
                ok,
                sink,
                doc! {
                    "operatorName": "additionalProperties",
                    "reason": "at least one additional property did not match the subschema",
                    "failingProperties": extra_failures,
                }
            );
        }
        let mut failing_deps = Vec::new();
        for (name, dep) in &self.dependencies {
            if !d.contains_key(name) {
                continue;
            }
            match dep {
                Dependency::Properties(props) => {
                    let missing: Vec<String> = props
                        .iter()
                        .filter(|p| !d.contains_key(p.as_str()))
                        .cloned()
                        .collect();
                    if !missing.is_empty() {
                        if sink.is_none() {
                            return false;
                        }
                        failing_deps.push(doc! {
                            "conditionalProperty": name.clone(),
                            "missingProperties": missing,
                        });
                    }
                }
                Dependency::Schema(schema) => {
                    let mut details = Vec::new();
                    let detailed = sink.is_some();
                    if !schema.check_object(d, detailed.then_some(&mut details)) {
                        if !detailed {
                            return false;
                        }
                        failing_deps.push(doc! {
                            "conditionalProperty": name.clone(),
                            "details": details,
                        });
                    }
                }
            }
        }
        if !failing_deps.is_empty() {
            fail!(
                ok,
                sink,
                doc! { "operatorName": "dependencies", "failingDependencies": failing_deps }
            );
        }
        ok
    }

    fn check_array(&self, items: &[Bson], mut sink: Sink<'_>) -> bool {
        let mut ok = true;
        let len = items.len() as i64;
        if let Some(min) = self.min_items.filter(|m| len < *m) {
            fail!(
                ok,
                sink,
                doc! {
                    "operatorName": "minItems",
                    "specifiedAs": { "minItems": min },
                    "reason": "array did not match specified length",
                    "consideredValue": items.to_vec(),
                }
            );
        }
        if let Some(max) = self.max_items.filter(|m| len > *m) {
            fail!(
                ok,
                sink,
                doc! {
                    "operatorName": "maxItems",
                    "specifiedAs": { "maxItems": max },
                    "reason": "array did not match specified length",
                    "consideredValue": items.to_vec(),
                }
            );
        }
        if self.unique_items {
            let duplicate = items.iter().enumerate().find_map(|(i, a)| {
                items[..i]
                    .iter()
                    .any(|b| values_equal(a, b))
                    .then(|| a.clone())
            });
            if let Some(dup) = duplicate {
                fail!(
                    ok,
                    sink,
                    doc! {
                        "operatorName": "uniqueItems",
                        "specifiedAs": { "uniqueItems": true },
                        "reason": "found a duplicate item",
                        "consideredValue": items.to_vec(),
                        "duplicatedValue": dup,
                    }
                );
            }
        }
        let detailed = sink.is_some();
        match &self.items {
            Some(Items::All(schema)) => {
                for (i, item) in items.iter().enumerate() {
                    let mut details = Vec::new();
                    if !schema.check(item, detailed.then_some(&mut details)) {
                        fail!(
                            ok,
                            sink,
                            doc! {
                                "operatorName": "items",
                                "reason": "At least one item did not match the sub-schema",
                                "itemIndex": i as i32,
                                "details": details,
                            }
                        );
                        break;
                    }
                }
            }
            Some(Items::Tuple(schemas)) => {
                for (i, (item, schema)) in items.iter().zip(schemas).enumerate() {
                    let mut details = Vec::new();
                    if !schema.check(item, detailed.then_some(&mut details)) {
                        fail!(
                            ok,
                            sink,
                            doc! {
                                "operatorName": "items",
                                "reason": "At least one item did not match the sub-schema",
                                "itemIndex": i as i32,
                                "details": details,
                            }
                        );
                        break;
                    }
                }
                if items.len() > schemas.len() {
                    match &self.additional_items {
                        Some(Additional::Allowed(false)) => fail!(
                            ok,
                            sink,
                            doc! {
                                "operatorName": "additionalItems",
                                "specifiedAs": { "additionalItems": false },
                                "reason": "found additional items",
                                "additionalItems": items[schemas.len()..].to_vec(),
                            }
                        ),
                        Some(Additional::Schema(schema)) => {
                            for (i, item) in items.iter().enumerate().skip(schemas.len()) {
                                let mut details = Vec::new();
                                if !schema.check(item, detailed.then_some(&mut details)) {
                                    fail!(
                                        ok,
                                        sink,
                                        doc! {
                                            "operatorName": "additionalItems",
                                            "reason": "At least one additional item did not match the sub-schema",
                                            "itemIndex": i as i32,
                                            "details": details,
                                        }
                                    );
                                    break;
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
            None => {}
        }
        ok
    }
}

/// A value being checked: a document borrowed as it is, or any other value.
#[derive(Clone, Copy)]
enum Value<'a> {
    Doc(&'a Document),
    Other(&'a Bson),
}

impl Value<'_> {
    fn to_bson(self) -> Bson {
        match self {
            Value::Doc(d) => Bson::Document(d.clone()),
            Value::Other(v) => v.clone(),
        }
    }

    fn type_number(self) -> i32 {
        match self {
            Value::Doc(_) => 3,
            Value::Other(v) => type_number(v),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(d: Document) -> Schema {
        Schema::parse(&d).expect("valid schema")
    }

    #[test]
    fn keywords_apply_only_to_values_of_their_kind() {
        let s = schema(doc! { "properties": { "a": { "minimum": 5, "minLength": 3 } } });
        assert!(s.matches(&doc! { "a": "long" }));
        assert!(s.matches(&doc! { "a": 7 }));
        assert!(!s.matches(&doc! { "a": 4 }));
        assert!(!s.matches(&doc! { "a": "ab" }));
        assert!(s.matches(&doc! {}));
    }

    #[test]
    fn failures_name_the_rule_and_the_property() {
        let s = schema(doc! { "required": ["name"], "properties": { "n": { "bsonType": "int" } } });
        let f = s.failures(&doc! { "n": "x" });
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!(f[0].get_str("operatorName").ok(), Some("required"));
        assert_eq!(f[1].get_str("operatorName").ok(), Some("properties"));
    }

    #[test]
    fn unknown_keywords_are_refused() {
        assert!(Schema::parse(&doc! { "foo": 1 }).is_err());
        assert!(Schema::parse(&doc! { "type": "integer" }).is_err());
        assert!(Schema::parse(&doc! { "exclusiveMinimum": true }).is_err());
    }

    #[test]
    fn one_of_fails_when_two_match() {
        let s = schema(
            doc! { "properties": { "a": { "oneOf": [ { "minimum": 1 }, { "minimum": 2 } ] } } },
        );
        assert!(s.matches(&doc! { "a": 1 }));
        assert!(!s.matches(&doc! { "a": 3 }));
    }
}

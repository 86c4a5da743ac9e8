//! The pipeline stages with more than a line of logic: `$unwind`, `$lookup`, `$replaceRoot`,
//! `$bucket`, `$sample`, the top-k sort, and the argument parsing of `$skip`/`$limit`/`$count`.

use super::accumulators::{Group, OrdBson};
use super::expression::{fmt_document, fmt_double, fmt_value, type_of, Expression, Scope};
use super::{Pipeline, PipelineContext};
use crate::error::{Error, Result};
use crate::query::SortSpec;
use crate::value::{self, canonical_rank, compare, Number};
use bson::{Bson, Document};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap};

/// How `parseIntegerElementToNonNegativeLong` prints the value it rejects (`$skip: 2.5`):
/// integral doubles keep a ".0".
fn element_string(name: &str, v: &Bson) -> String {
    let shown = match v {
        Bson::Double(d) if d.fract() == 0.0 && d.abs() < 1e15 => format!("{d:.1}"),
        Bson::Double(d) => fmt_double(*d),
        other => fmt_value(other),
    };
    format!("{name}: {shown}")
}

/// The argument of `$skip`/`$limit`: a whole, non-negative number of any numeric type.
pub(crate) fn parse_non_negative(v: &Bson, name: &str, code: i32) -> Result<u64> {
    let fail = |reason: String| {
        Error::location(code, format!("invalid argument to {name} stage: {reason}"))
    };
    let n = match v {
        Bson::Int32(i) => *i as i64,
        Bson::Int64(i) => *i,
        Bson::Double(_) | Bson::Decimal128(_) => {
            let d = value::to_f64(v).unwrap_or(f64::NAN);
            if d.is_nan() {
                return Err(fail(format!(
                    "Expected an integer, but found NaN in: {}",
                    element_string(name, v)
                )));
            }
            if !(-9.223372036854776e18..9.223372036854776e18).contains(&d) {
                return Err(fail(format!(
                    "Cannot represent as a 64-bit integer: {}",
                    element_string(name, v)
                )));
            }
            if d.fract() != 0.0 {
                return Err(fail(format!(
                    "Expected an integer: {}",
                    element_string(name, v)
                )));
            }
            d as i64
        }
        other => {
            return Err(fail(format!(
                "Expected a number in: {}",
                element_string(name, other)
            )))
        }
    };
    if n < 0 {
        return Err(fail(format!(
            "Expected a non-negative number in: {}",
            element_string(name, v)
        )));
    }
    Ok(n as u64)
}

pub(crate) fn parse_count(v: &Bson) -> Result<String> {
    let Bson::String(s) = v else {
        return Err(Error::location(
            40156,
            "the count field must be a non-empty string",
        ));
    };
    if s.is_empty() {
        return Err(Error::location(
            40157,
            "the count field must be a non-empty string",
        ));
    }
    if s.starts_with('$') {
        return Err(Error::location(
            40158,
            "the count field cannot be a $-prefixed path",
        ));
    }
    if s.contains('\0') {
        return Err(Error::location(
            40159,
            "the count field cannot contain a null byte",
        ));
    }
    if s.contains('.') {
        return Err(Error::location(40160, "the count field cannot contain '.'"));
    }
    Ok(s.clone())
}

/// A field path given as a string without the `$` (`includeArrayIndex`, `as`).
fn split_field_path(path: &str) -> Result<Vec<String>> {
    if path.is_empty() {
        return Err(Error::location(
            40352,
            "FieldPath cannot be constructed with empty string",
        ));
    }
    path.split('.')
        .map(|p| {
            if p.is_empty() {
                Err(Error::location(
                    15998,
                    "FieldPath field names may not be empty strings.",
                ))
            } else if p.starts_with('$') {
                Err(Error::location(
                    16410,
                    "FieldPath field names may not start with '$'. Consider using $getField or \
                     $setField.",
                ))
            } else {
                Ok(p.to_string())
            }
        })
        .collect()
}

/// The value at a dotted path through embedded documents only (no array traversal).
fn get_nested<'a>(doc: &'a Document, path: &[String]) -> Option<&'a Bson> {
    let (first, rest) = path.split_first()?;
    let v = doc.get(first)?;
    if rest.is_empty() {
        return Some(v);
    }
    match v {
        Bson::Document(d) => get_nested(d, rest),
        _ => None,
    }
}

/// Set the value at a dotted path, creating (or replacing non-document) intermediate values.
pub(crate) fn set_nested(doc: &mut Document, path: &[String], value: Bson) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        doc.insert(first.clone(), value);
        return;
    }
    if !matches!(doc.get(first), Some(Bson::Document(_))) {
        doc.insert(first.clone(), Document::new());
    }
    if let Some(Bson::Document(child)) = doc.get_mut(first) {
        set_nested(child, rest, value);
    }
}

fn remove_nested(doc: &mut Document, path: &[String]) {
    match path {
        [] => {}
        [last] => {
            doc.remove(last);
        }
        [first, rest @ ..] => {
            if let Some(Bson::Document(child)) = doc.get_mut(first) {
                remove_nested(child, rest);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// $unwind

#[derive(Debug, Clone)]
pub(crate) struct Unwind {
    path: Vec<String>,
    index_field: Option<Vec<String>>,
    preserve: bool,
}

impl Unwind {
    pub(crate) fn parse(spec: &Bson) -> Result<Unwind> {
        let (path, index_field, preserve) = match spec {
            Bson::String(s) => (s.clone(), None, false),
            Bson::Document(d) => {
                let mut path = None;
                let mut index_field = None;
                let mut preserve = false;
                for (k, v) in d {
                    match k.as_str() {
                        "path" => match v {
                            Bson::String(s) => path = Some(s.clone()),
                            other => {
                                return Err(Error::location(
                                    28808,
                                    format!(
                                        "Expected a string as the path for $unwind stage, got {}",
                                        value::type_name(other)
                                    ),
                                ))
                            }
                        },
                        "includeArrayIndex" => match v {
                            Bson::String(s) if !s.is_empty() => {
                                if s.starts_with('$') {
                                    return Err(Error::location(
                                        28822,
                                        format!(
                                            "includeArrayIndex option to $unwind stage should not \
                                             be prefixed with a '$': {s}"
                                        ),
                                    ));
                                }
                                index_field = Some(split_field_path(s)?);
                            }
                            other => {
                                return Err(Error::location(
                                    28810,
                                    format!(
                                        "expected a non-empty string for the includeArrayIndex \
                                         option to $unwind stage, got {}",
                                        value::type_name(other)
                                    ),
                                ))
                            }
                        },
                        "preserveNullAndEmptyArrays" => match v {
                            Bson::Boolean(b) => preserve = *b,
                            other => {
                                return Err(Error::location(
                                    28809,
                                    format!(
                                        "expected a boolean for the preserveNullAndEmptyArrays \
                                         option to $unwind stage, got {}",
                                        value::type_name(other)
                                    ),
                                ))
                            }
                        },
                        _ => {
                            return Err(Error::location(
                                28811,
                                format!("unrecognized option to $unwind stage: {k}"),
                            ))
                        }
                    }
                }
                let path = path
                    .ok_or_else(|| Error::location(28812, "no path specified to $unwind stage"))?;
                (path, index_field, preserve)
            }
            other => {
                return Err(Error::location(
                    15981,
                    format!(
                        "expected either a string or an object as specification for $unwind \
                         stage, got {}",
                        value::type_name(other)
                    ),
                ))
            }
        };
        let Some(stripped) = path.strip_prefix('$') else {
            return Err(Error::location(
                28818,
                format!("path option to $unwind stage should be prefixed with a '$': {path}"),
            ));
        };
        Ok(Unwind {
            path: split_field_path(stripped)?,
            index_field,
            preserve,
        })
    }

    pub(crate) fn run(&self, docs: Vec<Document>) -> Vec<Document> {
        let mut out = Vec::with_capacity(docs.len());
        for doc in docs {
            match get_nested(&doc, &self.path) {
                Some(Bson::Array(items)) if !items.is_empty() => {
                    let items = items.clone();
                    for (i, item) in items.into_iter().enumerate() {
                        let mut d = doc.clone();
                        set_nested(&mut d, &self.path, item);
                        if let Some(index) = &self.index_field {
                            set_nested(&mut d, index, Bson::Int64(i as i64));
                        }
                        out.push(d);
                    }
                }
                Some(Bson::Array(_)) | Some(Bson::Null) | Some(Bson::Undefined) | None => {
                    if self.preserve {
                        let mut d = doc;
                        // A preserved empty array leaves no field behind.
                        if matches!(get_nested(&d, &self.path), Some(Bson::Array(_))) {
                            remove_nested(&mut d, &self.path);
                        }
                        if let Some(index) = &self.index_field {
                            set_nested(&mut d, index, Bson::Null);
                        }
                        out.push(d);
                    }
                }
                // A non-array value unwinds to itself.
                Some(_) => {
                    let mut d = doc;
                    if let Some(index) = &self.index_field {
                        set_nested(&mut d, index, Bson::Null);
                    }
                    out.push(d);
                }
            }
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// $lookup

#[derive(Debug, Clone)]
pub(crate) struct Lookup {
    from: String,
    as_path: Vec<String>,
    local: Option<Vec<String>>,
    foreign: Option<Vec<String>>,
    let_vars: Vec<(String, Expression)>,
    pipeline: Option<Vec<Document>>,
    /// The sub-pipeline parsed once, when it needs no per-document variables.
    parsed: Option<Pipeline>,
}

fn lookup_string(v: &Bson, field: &str) -> Result<String> {
    match v {
        Bson::String(s) => Ok(s.clone()),
        other => Err(Error::failed_to_parse(format!(
            "$lookup argument '{field}: {}' must be a string, is type {}",
            fmt_value(other),
            value::type_name(other)
        ))),
    }
}

impl Lookup {
    pub(crate) fn parse(spec: &Bson, vars: &Document) -> Result<Lookup> {
        let Bson::Document(d) = spec else {
            return Err(Error::failed_to_parse(format!(
                "the $lookup stage specification must be an object, but found {}",
                value::type_name(spec)
            )));
        };
        let mut from = None;
        let mut as_field = None;
        let mut local = None;
        let mut foreign = None;
        let mut let_vars = Vec::new();
        let mut has_let = false;
        let mut pipeline = None;
        for (k, v) in d {
            match k.as_str() {
                "from" => from = Some(lookup_string(v, k)?),
                "as" => as_field = Some(lookup_string(v, k)?),
                "localField" => local = Some(split_field_path(&lookup_string(v, k)?)?),
                "foreignField" => foreign = Some(split_field_path(&lookup_string(v, k)?)?),
                "let" => {
                    let Bson::Document(defs) = v else {
                        return Err(Error::failed_to_parse(format!(
                            "$lookup argument 'let' must be an object, is type {}",
                            value::type_name(v)
                        )));
                    };
                    has_let = true;
                    for (name, def) in defs {
                        super::expression::validate_variable_name(name)?;
                        let_vars.push((name.clone(), Expression::parse(def)?));
                    }
                }
                "pipeline" => {
                    let Bson::Array(items) = v else {
                        return Err(Error::failed_to_parse(
                            "'pipeline' option must be specified as an array",
                        ));
                    };
                    let stages = items
                        .iter()
                        .map(|s| match s {
                            Bson::Document(d) => Ok(d.clone()),
                            _ => Err(Error::type_mismatch(
                                "Each element of the 'pipeline' array must be an object",
                            )),
                        })
                        .collect::<Result<Vec<_>>>()?;
                    pipeline = Some(stages);
                }
                _ => {
                    return Err(Error::failed_to_parse(format!(
                        "unknown argument to $lookup: {k}"
                    )))
                }
            }
        }
        let as_field = as_field
            .ok_or_else(|| Error::failed_to_parse("must specify 'as' field for a $lookup"))?;
        let from = from.ok_or_else(|| {
            Error::failed_to_parse(format!(
                "missing 'from' option to $lookup stage specification: {}",
                fmt_document(d)
            ))
        })?;
        if local.is_some() != foreign.is_some() {
            return Err(Error::failed_to_parse(
                "$lookup requires both or neither of 'localField' and 'foreignField' to be \
                 specified",
            ));
        }
        if pipeline.is_none() {
            if has_let {
                return Err(Error::failed_to_parse(
                    "$lookup with 'let' must also specify a 'pipeline'",
                ));
            }
            if local.is_none() {
                return Err(Error::failed_to_parse(
                    "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' \
                     to be specified",
                ));
            }
        }
        // Validate the sub-pipeline now, with placeholders for the per-document variables.
        let mut parsed = None;
        if let Some(stages) = &pipeline {
            let mut sub_vars = vars.clone();
            for (name, _) in &let_vars {
                sub_vars.insert(name.clone(), Bson::Null);
            }
            let p = Pipeline::parse_with_system_vars(stages, &sub_vars)?;
            if let_vars.is_empty() {
                parsed = Some(p);
            }
        }
        Ok(Lookup {
            from,
            as_path: split_field_path(&as_field)?,
            local,
            foreign,
            let_vars,
            pipeline,
            parsed,
        })
    }

    pub(crate) fn run(
        &self,
        docs: Vec<Document>,
        vars: &Document,
        ctx: &dyn PipelineContext,
    ) -> Result<Vec<Document>> {
        let foreign_docs = ctx.collection_documents(&self.from)?;
        let index = self
            .foreign
            .as_ref()
            .map(|path| ForeignIndex::build(&foreign_docs, path));
        let mut out = Vec::with_capacity(docs.len());
        for mut doc in docs {
            let candidates: Vec<Document> = match (&index, &self.local) {
                (Some(index), Some(local)) => index
                    .matching(&local_values(&doc, local))
                    .into_iter()
                    .map(|i| foreign_docs[i].clone())
                    .collect(),
                _ => foreign_docs.clone(),
            };
            let matched = match &self.pipeline {
                None => candidates,
                Some(stages) => {
                    let mut sub_vars = vars.clone();
                    let scope = Scope::new(&doc, vars);
                    for (name, expr) in &self.let_vars {
                        // A missing value is bound as `undefined`, which compares like missing.
                        let v = expr.eval(&scope)?.unwrap_or(Bson::Undefined);
                        sub_vars.insert(name.clone(), v);
                    }
                    match &self.parsed {
                        Some(p) => p.run_with_vars(candidates, &sub_vars, ctx)?,
                        None => Pipeline::parse_with_system_vars(stages, &sub_vars)?
                            .run(candidates, ctx)?,
                    }
                }
            };
            set_nested(
                &mut doc,
                &self.as_path,
                Bson::Array(matched.into_iter().map(Bson::Document).collect()),
            );
            out.push(doc);
        }
        Ok(out)
    }
}

/// The values `$lookup` matches on for the local side: every value at the path, arrays
/// expanded into their elements; `null` when there are none.
fn local_values(doc: &Document, path: &[String]) -> Vec<Bson> {
    let mut out = Vec::new();
    collect_local(&Bson::Document(doc.clone()), path, &mut out);
    if out.is_empty() {
        out.push(Bson::Null);
    }
    out
}

fn collect_local(v: &Bson, path: &[String], out: &mut Vec<Bson>) {
    match path.split_first() {
        None => match v {
            Bson::Array(items) => out.extend(items.iter().cloned()),
            other => out.push(other.clone()),
        },
        Some((first, rest)) => match v {
            Bson::Document(d) => {
                if let Some(child) = d.get(first) {
                    collect_local(child, rest, out);
                }
            }
            Bson::Array(items) => {
                for item in items {
                    if let Bson::Document(_) = item {
                        collect_local(item, path, out);
                    }
                }
            }
            _ => {}
        },
    }
}

/// Foreign documents keyed by every value an equality query on the path would match: the
/// value, each element of an array value, and `null` for a missing field.
struct ForeignIndex {
    by_value: BTreeMap<OrdBson, Vec<usize>>,
}

impl ForeignIndex {
    fn build(docs: &[Document], path: &[String]) -> ForeignIndex {
        let mut by_value: BTreeMap<OrdBson, Vec<usize>> = BTreeMap::new();
        for (i, doc) in docs.iter().enumerate() {
            let mut keys = Vec::new();
            collect_foreign(&Bson::Document(doc.clone()), path, &mut keys);
            for k in keys {
                let slot = by_value.entry(OrdBson(k)).or_default();
                if slot.last() != Some(&i) {
                    slot.push(i);
                }
            }
        }
        ForeignIndex { by_value }
    }

    /// Indexes of the documents matching any of `values`, in collection order.
    fn matching(&self, values: &[Bson]) -> Vec<usize> {
        let mut hits: Vec<usize> = values
            .iter()
            .filter_map(|v| self.by_value.get(&OrdBson(v.clone())))
            .flatten()
            .copied()
            .collect();
        hits.sort_unstable();
        hits.dedup();
        hits
    }
}

fn collect_foreign(v: &Bson, path: &[String], out: &mut Vec<Bson>) {
    match path.split_first() {
        None => {
            if let Bson::Array(items) = v {
                out.extend(items.iter().cloned());
            }
            out.push(v.clone());
        }
        Some((first, rest)) => match v {
            Bson::Document(d) => match d.get(first) {
                Some(child) => collect_foreign(child, rest, out),
                // A missing field equals null in a query.
                None => out.push(Bson::Null),
            },
            Bson::Array(items) => {
                // Numeric path components may index into the array.
                if let Ok(pos) = first.parse::<usize>() {
                    if let Some(item) = items.get(pos) {
                        collect_foreign(item, rest, out);
                    }
                }
                for item in items {
                    if let Bson::Document(_) = item {
                        collect_foreign(item, path, out);
                    }
                }
            }
            _ => {}
        },
    }
}

// ---------------------------------------------------------------------------------------------
// $replaceRoot / $replaceWith

pub(crate) fn parse_replace_root(spec: &Bson) -> Result<Expression> {
    let Bson::Document(d) = spec else {
        return Err(Error::type_mismatch(format!(
            "BSON field '$replaceRoot' is the wrong type '{}', expected type 'object'",
            value::type_name(spec)
        )));
    };
    let mut new_root = None;
    for (k, v) in d {
        if k == "newRoot" {
            new_root = Some(Expression::parse(v)?);
        } else {
            return Err(Error::location(
                40415,
                format!("BSON field '$replaceRoot.{k}' is an unknown field."),
            ));
        }
    }
    new_root.ok_or_else(|| {
        Error::location(
            40414,
            "BSON field '$replaceRoot.newRoot' is missing but a required field",
        )
    })
}

pub(crate) fn replace_root(
    expr: &Expression,
    with: bool,
    doc: &Document,
    vars: &Document,
) -> Result<Document> {
    let v = expr.eval(&Scope::new(doc, vars))?;
    match v {
        Some(Bson::Document(d)) => Ok(d),
        other => {
            let what = if with {
                "'replacement document'"
            } else {
                "'newRoot' expression"
            };
            let shown = other.as_ref().map_or("MISSING".to_string(), fmt_value);
            Err(Error::location(
                40228,
                format!(
                    "{what} must evaluate to an object, but resulting value was: {shown}. Type \
                     of resulting value: '{}'. Input document: {}",
                    type_of(&other),
                    fmt_document(doc)
                ),
            ))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// $sortByCount, $bucket, $sample

pub(crate) fn parse_sort_by_count(spec: &Bson) -> Result<Expression> {
    match spec {
        Bson::String(s) if s.starts_with('$') => Expression::parse(spec),
        Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => {
            Expression::parse(spec)
        }
        _ => Err(Error::location(
            40147,
            "the sortByCount field must be defined as a $-prefixed path or an expression",
        )),
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    group_by: Expression,
    boundaries: Vec<Bson>,
    default: Option<Bson>,
    output: Option<Group>,
}

impl Bucket {
    pub(crate) fn parse(spec: &Bson) -> Result<Bucket> {
        let Bson::Document(d) = spec else {
            return Err(Error::location(
                40201,
                format!(
                    "Argument to $bucket stage must be an object, but found type: {}.",
                    value::type_name(spec)
                ),
            ));
        };
        let mut group_by = None;
        let mut boundaries = None;
        let mut default = None;
        let mut output = None;
        for (k, v) in d {
            match k.as_str() {
                "groupBy" => {
                    let is_expr = match v {
                        Bson::String(s) => s.starts_with('$'),
                        Bson::Document(_) => true,
                        _ => false,
                    };
                    if !is_expr {
                        return Err(Error::location(
                            40202,
                            format!(
                                "The $bucket 'groupBy' field must be defined as a $-prefixed \
                                 path or an expression, but found: {}.",
                                fmt_value(v)
                            ),
                        ));
                    }
                    group_by = Some(Expression::parse(v)?);
                }
                "boundaries" => {
                    let Bson::Array(items) = v else {
                        return Err(Error::location(
                            40200,
                            format!(
                                "The $bucket 'boundaries' field must be an array, but found \
                                 type: {}.",
                                value::type_name(v)
                            ),
                        ));
                    };
                    boundaries = Some(items.clone());
                }
                "default" => default = Some(v.clone()),
                "output" => {
                    let Bson::Document(out) = v else {
                        return Err(Error::location(
                            40196,
                            format!(
                                "The $bucket 'output' field must be an object, but found type: {}.",
                                value::type_name(v)
                            ),
                        ));
                    };
                    let mut spec = out.clone();
                    spec.insert("_id", Bson::Null);
                    output = Some(Group::parse(&Bson::Document(spec))?);
                }
                _ => {
                    return Err(Error::location(
                        40197,
                        format!("Unrecognized option to $bucket: {k}."),
                    ))
                }
            }
        }
        let (Some(group_by), Some(boundaries)) = (group_by, boundaries) else {
            return Err(Error::location(
                40198,
                "$bucket requires 'groupBy' and 'boundaries' to be specified.",
            ));
        };
        if boundaries.len() < 2 {
            return Err(Error::location(
                40192,
                format!(
                    "The $bucket 'boundaries' field must have at least 2 values, but found {} \
                     value(s).",
                    boundaries.len()
                ),
            ));
        }
        for pair in boundaries.windows(2) {
            if canonical_rank(&pair[0]) != canonical_rank(&pair[1]) {
                return Err(Error::location(
                    40193,
                    format!(
                        "All values in the the 'boundaries' option to $bucket must have the same \
                         type. Found conflicting types {} and {}.",
                        value::type_name(&pair[0]),
                        value::type_name(&pair[1])
                    ),
                ));
            }
            if compare(&pair[0], &pair[1]) != Ordering::Less {
                return Err(Error::location(
                    40194,
                    format!(
                        "The 'boundaries' option to $bucket must be sorted in ascending order, \
                         but elements {} and {} are not in ascending order",
                        fmt_value(&pair[0]),
                        fmt_value(&pair[1])
                    ),
                ));
            }
        }
        if let Some(d) = &default {
            let (lo, hi) = (&boundaries[0], &boundaries[boundaries.len() - 1]);
            let same_type = canonical_rank(d) == canonical_rank(lo);
            if same_type && compare(d, lo) != Ordering::Less && compare(d, hi) == Ordering::Less {
                return Err(Error::location(
                    40199,
                    "The $bucket 'default' field must be less than the lowest boundary or \
                     greater than or equal to the highest boundary.",
                ));
            }
        }
        Ok(Bucket {
            group_by,
            boundaries,
            default,
            output,
        })
    }

    pub(crate) fn run(&self, docs: &[Document], vars: &Document) -> Result<Vec<Document>> {
        let group = match &self.output {
            Some(g) => g.clone(),
            None => Group::count_by(Expression::Literal(Bson::Null), "count"),
        };
        let mut groups = group.run_keyed(docs, vars, |scope| {
            let v = self.group_by.eval(scope)?.unwrap_or(Bson::Null);
            let bucket = self.boundaries.windows(2).find(|w| {
                canonical_rank(&v) == canonical_rank(&w[0])
                    && compare(&v, &w[0]) != Ordering::Less
                    && compare(&v, &w[1]) == Ordering::Less
            });
            match (bucket, &self.default) {
                (Some(w), _) => Ok(w[0].clone()),
                (None, Some(d)) => Ok(d.clone()),
                // MongoDB builds $bucket from $switch, hence this error.
                (None, None) => Err(Error::location(
                    40066,
                    "$switch could not find a matching branch for an input, and no default was \
                     specified.",
                )),
            }
        })?;
        groups.sort_by(|a, b| {
            compare(
                a.get("_id").unwrap_or(&Bson::Null),
                b.get("_id").unwrap_or(&Bson::Null),
            )
        });
        Ok(groups)
    }
}

pub(crate) fn parse_sample(spec: &Bson) -> Result<usize> {
    let Bson::Document(d) = spec else {
        return Err(Error::location(
            28745,
            "the $sample stage specification must be an object",
        ));
    };
    let mut size = None;
    for (k, v) in d {
        if k != "size" {
            return Err(Error::location(
                28748,
                format!("unrecognized option to $sample: {k}"),
            ));
        }
        let n = Number::from_bson(v)
            .ok_or_else(|| Error::location(28746, "size argument to $sample must be a number"))?;
        let n = n.as_f64();
        if n < 0.0 {
            return Err(Error::location(
                28747,
                "size argument to $sample must not be negative",
            ));
        }
        size = Some(n as usize);
    }
    size.ok_or_else(|| Error::location(28749, "$sample stage must specify a size"))
}

pub(crate) fn sample(docs: Vec<Document>, n: usize) -> Vec<Document> {
    use rand::seq::SliceRandom;
    let mut docs = docs;
    let mut rng = rand::thread_rng();
    docs.shuffle(&mut rng);
    docs.truncate(n);
    docs
}

// ---------------------------------------------------------------------------------------------
// Top-k sort

/// A document in a bounded heap: ordered by the sort, then by arrival so ties stay stable.
struct Ranked<'a> {
    doc: Document,
    arrival: usize,
    spec: &'a SortSpec,
}

impl PartialEq for Ranked<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ranked<'_> {}

impl PartialOrd for Ranked<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ranked<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.spec
            .compare(&self.doc, &other.doc)
            .then(self.arrival.cmp(&other.arrival))
    }
}

/// The first `k` documents in sort order, keeping at most `k` in memory besides the input.
pub(crate) fn top_k(docs: Vec<Document>, spec: &SortSpec, k: u64) -> Vec<Document> {
    let k = usize::try_from(k).unwrap_or(usize::MAX);
    if k >= docs.len() {
        let mut docs = docs;
        docs.sort_by(|a, b| spec.compare(a, b));
        return docs;
    }
    if k == 0 {
        return Vec::new();
    }
    let mut heap: BinaryHeap<Ranked> = BinaryHeap::with_capacity(k + 1);
    for (arrival, doc) in docs.into_iter().enumerate() {
        heap.push(Ranked { doc, arrival, spec });
        if heap.len() > k {
            heap.pop();
        }
    }
    heap.into_sorted_vec().into_iter().map(|r| r.doc).collect()
}

//! The update language: operator updates, replacements, upsert seeding, positional operators.
//! Parsing validates everything mongod validates up front; applying works on a copy, so a failed
//! update leaves the stored document untouched.

mod format;
mod ops;
mod path;
mod pipeline;
mod upsert;

#[cfg(test)]
mod tests;

use crate::error::{Error, ErrorCode, Result};
use crate::query::Filter;
use crate::value;
use bson::oid::ObjectId;
use bson::{Bson, Document};
use ops::{Op, OpKind};
use std::collections::HashMap;

/// Run an update pipeline on `doc`: the original `_id` is kept (error 66 if it changed).
pub(crate) fn apply_update_pipeline(
    p: &crate::aggregation::Pipeline,
    doc: &Document,
    now: bson::DateTime,
) -> Result<Document> {
    pipeline::apply(p, doc, now)
}

/// Whether two documents are the same field for field, types included (an update that
/// produces the same document modifies nothing).
pub(crate) fn same_document(a: &Document, b: &Document) -> bool {
    ops::identical_documents(a, b)
}

/// What the update is applied in the context of.
#[derive(Debug, Clone, Default)]
pub struct ApplyContext {
    /// First array position matched by the query (for the positional `$`).
    pub matched_position: Option<usize>,
    /// The document is being inserted by an upsert (`$setOnInsert` applies).
    pub is_insert: bool,
    /// Time used by `$currentDate` (one value for a whole command).
    pub now: Option<bson::DateTime>,
}

/// A parsed update: operators, a replacement document, or an aggregation pipeline.
#[derive(Debug, Clone)]
pub struct UpdateSpec {
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Replacement(Document),
    Operators(Operators),
    Pipeline(Box<crate::aggregation::Pipeline>),
}

#[derive(Debug, Clone)]
struct Operators {
    entries: Vec<Entry>,
    /// Array filters by identifier.
    filters: HashMap<String, Filter>,
    /// Some path has `$`, `$[]` or `$[id]`, so two entries may meet at the same element.
    dynamic: bool,
}

/// One operator at one (possibly positional) path.
#[derive(Debug, Clone)]
struct Entry {
    parts: Vec<String>,
    op: Op,
}

impl UpdateSpec {
    /// `update` is the `u`/`update` field of the command; `array_filters` its `arrayFilters`.
    pub fn parse(update: &Bson, array_filters: Option<&[Document]>) -> Result<UpdateSpec> {
        Self::parse_with_vars(update, array_filters, None)
    }

    /// [`UpdateSpec::parse`] with the command's `let` variables (or the statement's `c`
    /// constants), which a pipeline-style update sees as `$$name`.
    pub(crate) fn parse_with_vars(
        update: &Bson,
        array_filters: Option<&[Document]>,
        vars: Option<&Document>,
    ) -> Result<UpdateSpec> {
        let filters = parse_array_filters(array_filters.unwrap_or(&[]))?;
        match update {
            Bson::Document(d) => {
                // mongod decides by the first field alone: `{a: 1, $set: ...}` is a replacement
                // (refused when applied) and `{$set: ..., a: 1}` has an unknown modifier `a`.
                let operator_style = d.keys().next().is_some_and(|k| k.starts_with('$'));
                let kind = if operator_style {
                    Kind::Operators(parse_operators(d, filters)?)
                } else {
                    Kind::Replacement(d.clone())
                };
                Ok(UpdateSpec { kind })
            }
            Bson::Array(stages) => {
                if array_filters.is_some_and(|f| !f.is_empty()) {
                    return Err(Error::failed_to_parse(
                        "arrayFilters may not be specified for pipeline-style updates",
                    ));
                }
                let vars = vars.cloned().unwrap_or_default();
                Ok(UpdateSpec {
                    kind: Kind::Pipeline(Box::new(crate::aggregation::Pipeline::parse_for_update(
                        stages, &vars,
                    )?)),
                })
            }
            other => Err(Error::failed_to_parse(format!(
                "Update argument must be either an object or an array, found {}",
                value::type_name(other)
            ))),
        }
    }

    pub(crate) fn is_replacement(&self) -> bool {
        matches!(self.kind, Kind::Replacement(_))
    }

    /// Apply in place; returns whether the document changed. On error `doc` is unchanged.
    pub fn apply(&self, doc: &mut Document, ctx: &ApplyContext) -> Result<bool> {
        match self.apply_to(doc, ctx)? {
            Some(updated) => {
                *doc = updated;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// The new version of `doc`, or `None` when the update leaves it as it is. A writer keeps
    /// the old version to work out which index keys changed.
    pub(crate) fn apply_to(&self, doc: &Document, ctx: &ApplyContext) -> Result<Option<Document>> {
        let updated = match &self.kind {
            Kind::Replacement(replacement) => replace(replacement, doc)?,
            Kind::Operators(ops) => ops.apply(doc, ctx)?,
            Kind::Pipeline(p) => {
                pipeline::apply(p, doc, ctx.now.unwrap_or_else(bson::DateTime::now))?
            }
        };
        Ok((!ops::identical_documents(doc, &updated)).then_some(updated))
    }

    /// The paths an operator update may change, each cut before its first positional or
    /// numeric part (`carted.$.qty` changes somewhere under `carted`), with both ends of a
    /// `$rename`; `None` when any field may change (a replacement or a pipeline). An index
    /// none of whose fields lies on or under one of these paths keeps its keys.
    pub(crate) fn touched_paths(&self) -> Option<Vec<String>> {
        let Kind::Operators(ops) = &self.kind else {
            return None;
        };
        let mut out = Vec::with_capacity(ops.entries.len());
        for entry in &ops.entries {
            out.push(static_prefix(&entry.parts)?);
            if let Op::Rename { from, .. } = &entry.op {
                out.push(static_prefix(from)?);
            }
        }
        Some(out)
    }

    /// The document an upsert inserts: equality fields of `filter` (including inside `$and`),
    /// then the update applied with `is_insert`, with `_id` generated when absent.
    pub fn upsert_document(&self, filter: &Document, ctx: &ApplyContext) -> Result<Document> {
        let ctx = ApplyContext {
            is_insert: true,
            ..ctx.clone()
        };
        let equalities = upsert::equalities(filter)?;
        let inserted = match &self.kind {
            Kind::Replacement(replacement) => {
                // A replacement takes only `_id` from the query.
                let id_only = equalities.into_iter().filter(|(k, _)| k == "_id").collect();
                replace(replacement, &upsert::seed(id_only)?)?
            }
            Kind::Operators(ops) => ops.apply(&upsert::seed(equalities)?, &ctx)?,
            // The pipeline sees the seed; `_id` is generated after it ran, as mongod does.
            Kind::Pipeline(p) => pipeline::run(
                p,
                &upsert::seed(equalities)?,
                ctx.now.unwrap_or_else(bson::DateTime::now),
            )?,
        };
        // mongod validates the new document for storage before anything else looks at it.
        if let Some(id @ (Bson::Array(_) | Bson::RegularExpression(_) | Bson::Undefined)) =
            inserted.get("_id")
        {
            return Err(Error::new(
                ErrorCode::InvalidIdField,
                format!("The '_id' value cannot be of type {}", value::type_name(id)),
            ));
        }
        Ok(with_id_first(inserted))
    }
}

/// `_id` as the first field, generated when missing.
fn with_id_first(doc: Document) -> Document {
    let mut out = Document::new();
    match doc.get("_id") {
        Some(id) => out.insert("_id", id.clone()),
        None => out.insert("_id", ObjectId::new()),
    };
    for (k, v) in doc {
        if k != "_id" {
            out.insert(k, v);
        }
    }
    out
}

/// A replacement keeps the original `_id` (first) unless it carries its own, which must be equal.
fn replace(replacement: &Document, original: &Document) -> Result<Document> {
    if let Some(field) = replacement.keys().find(|k| k.starts_with('$')) {
        return Err(Error::new(
            ErrorCode::DollarPrefixedFieldName,
            format!(
                "The dollar ($) prefixed field '{field}' in '{field}' is not allowed in the \
                 context of an update's replacement document. Consider using an aggregation \
                 pipeline with $replaceWith."
            ),
        ));
    }
    let mut updated = Document::new();
    if !replacement.contains_key("_id") {
        if let Some(id) = original.get("_id") {
            updated.insert("_id", id.clone());
        }
    }
    for (k, v) in replacement {
        updated.insert(k.clone(), v.clone());
    }
    if let (Some(old), Some(new)) = (original.get("_id"), updated.get("_id")) {
        if !same_id(old, new) {
            return Err(Error::new(
                ErrorCode::ImmutableField,
                format!(
                    "After applying the update, the (immutable) field '_id' was found to have \
                     been altered to {}",
                    format::element("_id", new)
                ),
            ));
        }
    }
    Ok(updated)
}

/// `_id` counts as unchanged when it compares equal (so `1` and `1.0` are the same key),
/// bytewise for strings whatever the update's collation (mongod checks immutable fields so).
fn same_id(old: &Bson, new: &Bson) -> bool {
    let _binary = crate::collation::enter(None);
    value::values_equal(old, new) && value::canonical_rank(old) == value::canonical_rank(new)
}

/// Validates `arrayFilters`: each filter names exactly one identifier, used once.
fn parse_array_filters(filters: &[Document]) -> Result<HashMap<String, Filter>> {
    let mut parsed = HashMap::new();
    for filter in filters {
        let identifier = filter_identifier(filter)?;
        if parsed.contains_key(&identifier) {
            return Err(Error::failed_to_parse(format!(
                "Found multiple array filters with the same top-level field name {identifier}"
            )));
        }
        let matcher = Filter::parse(filter)?;
        parsed.insert(identifier, matcher);
    }
    Ok(parsed)
}

fn filter_identifier(filter: &Document) -> Result<String> {
    let mut found: Option<String> = None;
    collect_identifiers(filter, &mut found)?;
    let Some(identifier) = found else {
        return Err(Error::failed_to_parse(
            "Cannot use an expression without a top-level field name in arrayFilters",
        ));
    };
    let mut chars = identifier.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_alphanumeric());
    if !valid {
        return Err(Error::bad_value(format!(
            "Error parsing array filter :: caused by :: The top-level field name must be an \
             alphanumeric string beginning with a lowercase letter, found '{identifier}'"
        )));
    }
    Ok(identifier)
}

fn collect_identifiers(filter: &Document, found: &mut Option<String>) -> Result<()> {
    for (key, value) in filter {
        if matches!(key.as_str(), "$and" | "$or" | "$nor") {
            if let Bson::Array(clauses) = value {
                for clause in clauses {
                    if let Bson::Document(d) = clause {
                        collect_identifiers(d, found)?;
                    }
                }
            }
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        let name = key.split('.').next().unwrap_or(key).to_string();
        match found {
            Some(existing) if *existing != name => {
                return Err(Error::failed_to_parse(format!(
                    "Error parsing array filter :: caused by :: Expected a single top-level \
                     field name, found '{existing}' and '{name}'"
                )));
            }
            Some(_) => {}
            None => *found = Some(name),
        }
    }
    Ok(())
}

/// The shape of the paths seen so far, to refuse two operators on the same path or on a path and
/// its prefix, exactly where mongod's update tree does.
enum PathNode {
    Leaf,
    Inner {
        array: bool,
        children: HashMap<String, PathNode>,
    },
}

impl PathNode {
    fn root() -> PathNode {
        PathNode::Inner {
            array: false,
            children: HashMap::new(),
        }
    }

    fn insert(&mut self, parts: &[String]) -> Result<()> {
        let dotted = parts.join(".");
        let conflict = |at: &str| {
            Error::new(
                ErrorCode::ConflictingUpdateOperators,
                format!("Updating the path '{dotted}' would create a conflict at '{at}'"),
            )
        };
        let Some((last, inner)) = parts.split_last() else {
            return Ok(());
        };
        let mut current = self;
        for (i, part) in inner.iter().enumerate() {
            let wants_array = path::array_filter_identifier(&parts[i + 1]).is_some();
            let PathNode::Inner { children, .. } = current else {
                return Err(conflict(&parts[..i].join(".")));
            };
            let child = children
                .entry(part.clone())
                .or_insert_with(|| PathNode::Inner {
                    array: wants_array,
                    children: HashMap::new(),
                });
            match child {
                PathNode::Inner { array, .. } if *array == wants_array => {}
                _ => return Err(conflict(&parts[..=i].join("."))),
            }
            current = child;
        }
        let PathNode::Inner { children, .. } = current else {
            return Err(conflict(&dotted));
        };
        if children.contains_key(last) {
            return Err(conflict(&dotted));
        }
        children.insert(last.clone(), PathNode::Leaf);
        Ok(())
    }
}

/// The checks mongod makes on every update path before it looks at the operator's argument.
fn check_path(parts: &[String], dotted: &str) -> Result<()> {
    let positional: Vec<usize> = parts
        .iter()
        .enumerate()
        .filter(|(_, p)| path::is_positional(p))
        .map(|(i, _)| i)
        .collect();
    if positional.len() > 1 {
        return Err(Error::bad_value(format!(
            "Too many positional (i.e. '$') elements found in path '{dotted}'"
        )));
    }
    if positional.first() == Some(&0) {
        return Err(Error::bad_value(format!(
            "Cannot have positional (i.e. '$') element in the first position in path '{dotted}'"
        )));
    }
    Ok(())
}

/// Array filter identifiers in a path must name a filter; `$[...]` may not come first.
fn check_identifiers(
    parts: &[String],
    dotted: &str,
    filters: &HashMap<String, Filter>,
    used: &mut Vec<String>,
) -> Result<()> {
    for (i, part) in parts.iter().enumerate() {
        let Some(identifier) = path::array_filter_identifier(part) else {
            continue;
        };
        if i == 0 {
            return Err(Error::bad_value(format!(
                "Cannot have array filter identifier (i.e. '$[<id>]') element in the first \
                 position in path '{dotted}'"
            )));
        }
        if identifier.is_empty() {
            continue;
        }
        if !filters.contains_key(identifier) {
            return Err(Error::bad_value(format!(
                "No array filter found for identifier '{identifier}' in path '{dotted}'"
            )));
        }
        used.push(identifier.to_string());
    }
    Ok(())
}

/// The dotted path of `parts` up to (not including) the first positional (`$`, `$[]`,
/// `$[id]`) or numeric part; `None` when that leaves nothing.
fn static_prefix(parts: &[String]) -> Option<String> {
    let fixed: Vec<&str> = parts
        .iter()
        .take_while(|p| {
            !(p.starts_with('$') || (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())))
        })
        .map(String::as_str)
        .collect();
    (!fixed.is_empty()).then(|| fixed.join("."))
}

fn is_dynamic(parts: &[String]) -> bool {
    parts
        .iter()
        .any(|p| path::is_positional(p) || path::array_filter_identifier(p).is_some())
}

fn parse_operators(update: &Document, filters: HashMap<String, Filter>) -> Result<Operators> {
    let mut entries = Vec::new();
    let mut tree = PathNode::root();
    let mut used = Vec::new();
    for (name, fields) in update {
        let Some(kind) = OpKind::from_name(name) else {
            return Err(Error::failed_to_parse(format!(
                "Unknown modifier: {name}. Expected a valid update modifier or pipeline-style \
                 update specified as an array"
            )));
        };
        let Bson::Document(fields) = fields else {
            return Err(Error::failed_to_parse(format!(
                "Modifiers operate on fields but we found type {} instead. For example: {{$mod: \
                 {{<field>: ...}}}} not {{{}}}",
                value::type_name(fields),
                format::element(name, fields)
            )));
        };
        for (field, arg) in fields {
            let parts = path::split(field)?;
            check_path(&parts, field)?;
            if kind == OpKind::Rename {
                // The source takes part in conflict detection like any other path.
                check_identifiers(&parts, field, &filters, &mut used)?;
                tree.insert(&parts)?;
                let entry = parse_rename(field, parts, arg)?;
                tree.insert(&entry.parts)?;
                entries.push(entry);
                continue;
            }
            let op = ops::parse_argument(kind, field, arg)?;
            check_identifiers(&parts, field, &filters, &mut used)?;
            tree.insert(&parts)?;
            entries.push(Entry { parts, op });
        }
    }
    let mut identifiers: Vec<&String> = filters.keys().collect();
    identifiers.sort();
    for identifier in identifiers {
        if !used.contains(identifier) {
            return Err(Error::failed_to_parse(format!(
                "The array filter for identifier '{identifier}' was not used in the update {}",
                format::document(update)
            )));
        }
    }
    let dynamic = entries.iter().any(|e| is_dynamic(&e.parts));
    Ok(Operators {
        entries,
        filters,
        dynamic,
    })
}

fn parse_rename(from: &str, from_parts: Vec<String>, to: &Bson) -> Result<Entry> {
    let Bson::String(to) = to else {
        return Err(Error::bad_value(format!(
            "The 'to' field for $rename must be a string: {}",
            format::element(from, to)
        )));
    };
    let to_parts = path::split(to)?;
    check_path(&to_parts, to)?;
    if to.contains('\0') {
        return Err(Error::bad_value(
            "The 'to' field for $rename cannot contain an embedded null byte",
        ));
    }
    let shown = format::element(from, &Bson::String(to.clone()));
    if from_parts == to_parts {
        return Err(Error::bad_value(format!(
            "The source and target field for $rename must differ: {shown}"
        )));
    }
    if path::is_prefix(&from_parts, &to_parts) || path::is_prefix(&to_parts, &from_parts) {
        return Err(Error::bad_value(format!(
            "The source and target field for $rename must not be on the same path: {shown}"
        )));
    }
    if is_dynamic(&from_parts) {
        return Err(Error::bad_value(format!(
            "The source field for $rename may not be dynamic: {from}"
        )));
    }
    if is_dynamic(&to_parts) {
        return Err(Error::bad_value(format!(
            "The destination field for $rename may not be dynamic: {to}"
        )));
    }
    Ok(Entry {
        parts: to_parts,
        op: Op::Rename {
            from: from_parts,
            from_dotted: from.to_string(),
        },
    })
}

impl Operators {
    /// The updated copy of `doc`.
    fn apply(&self, doc: &Document, ctx: &ApplyContext) -> Result<Document> {
        let env = ops::Env {
            id: doc
                .get("_id")
                .map(|id| format::element("_id", id))
                .unwrap_or_else(|| "no id".to_string()),
            now: ctx.now.unwrap_or_else(bson::DateTime::now),
        };
        let original_id = doc.get("_id");
        let mut root = Bson::Document(doc.clone());

        // Resolve positional parts against the document, then apply in mongod's path order.
        let mut targets: Vec<(Vec<String>, usize)> = Vec::new();
        for (index, entry) in self.entries.iter().enumerate() {
            if matches!(entry.op, Op::SetOnInsert(_)) && !ctx.is_insert {
                continue;
            }
            let mut resolved = Vec::new();
            let mut prefix = Vec::with_capacity(entry.parts.len());
            self.expand(Some(&root), &entry.parts, &mut prefix, ctx, &mut resolved)?;
            targets.extend(resolved.into_iter().map(|p| (p, index)));
        }
        targets.sort_by(|a, b| path::compare_paths(&a.0, &b.0));
        if self.dynamic {
            for pair in targets.windows(2) {
                if path::is_prefix(&pair[0].0, &pair[1].0) {
                    return Err(Error::new(
                        ErrorCode::ConflictingUpdateOperators,
                        format!("Update created a conflict at '{}'", pair[0].0.join(".")),
                    ));
                }
            }
        }

        for (target, index) in &targets {
            let entry = &self.entries[*index];
            let touches_id = match &entry.op {
                Op::Rename { from, from_dotted } => {
                    rename(&mut root, from, from_dotted, target, &env)?;
                    if from.first().map(String::as_str) == Some("_id") {
                        check_id_kept(&root, original_id, || {
                            format!(
                                "Unsetting the path '{from_dotted}' using $rename would modify \
                                 the immutable field '_id'"
                            )
                        })?;
                    }
                    target.first().map(String::as_str) == Some("_id")
                }
                op => {
                    if !ctx.is_insert {
                        check_top_level_dollar(&root, target, op)?;
                    }
                    ops::apply(&mut root, target, op, &env)?;
                    target.first().map(String::as_str) == Some("_id")
                }
            };
            if touches_id {
                check_id_kept(&root, original_id, || {
                    format!(
                        "Performing an update on the path '{}' would modify the immutable field \
                         '_id'",
                        target.join(".")
                    )
                })?;
            }
        }
        match root {
            Bson::Document(d) => Ok(d),
            _ => Err(Error::internal("updated document is not a document")),
        }
    }

    /// Every concrete path `parts` stands for: `$` becomes the matched position, `$[]` every
    /// index, `$[id]` the indexes whose element passes the array filter.
    fn expand(
        &self,
        current: Option<&Bson>,
        parts: &[String],
        prefix: &mut Vec<String>,
        ctx: &ApplyContext,
        out: &mut Vec<Vec<String>>,
    ) -> Result<()> {
        let Some((part, rest)) = parts.split_first() else {
            out.push(prefix.clone());
            return Ok(());
        };
        if path::is_positional(part) {
            let Some(position) = ctx.matched_position else {
                return Err(Error::bad_value(
                    "The positional operator did not find the match needed from the query.",
                ));
            };
            let name = position.to_string();
            let next = current.and_then(|c| path::child(c, &name));
            prefix.push(name);
            self.expand(next, rest, prefix, ctx, out)?;
            prefix.pop();
            return Ok(());
        }
        let Some(identifier) = path::array_filter_identifier(part) else {
            let next = current.and_then(|c| path::child(c, part));
            prefix.push(part.clone());
            self.expand(next, rest, prefix, ctx, out)?;
            prefix.pop();
            return Ok(());
        };
        match current {
            None => Err(Error::bad_value(format!(
                "The path '{}' must exist in the document in order to apply array updates.",
                prefix.join(".")
            ))),
            Some(Bson::Array(items)) => {
                let filter = if identifier.is_empty() {
                    None
                } else {
                    Some(self.filters.get(identifier).ok_or_else(|| {
                        Error::bad_value(format!(
                            "No array filter found for identifier '{identifier}'"
                        ))
                    })?)
                };
                for (index, item) in items.iter().enumerate() {
                    if let Some(filter) = filter {
                        let mut wrapped = Document::new();
                        wrapped.insert(identifier, item.clone());
                        if !filter.matches(&wrapped) {
                            continue;
                        }
                    }
                    prefix.push(index.to_string());
                    self.expand(Some(item), rest, prefix, ctx, out)?;
                    prefix.pop();
                }
                Ok(())
            }
            Some(other) => Err(Error::bad_value(format!(
                "Cannot apply array updates to non-array element {}",
                format::element(prefix.last().map(String::as_str).unwrap_or(""), other)
            ))),
        }
    }
}

/// An update may not store a top-level field whose name starts with `$` (nested ones are fine
/// since 5.0); DBRef fields are left to the storage rules.
fn check_top_level_dollar(root: &Bson, target: &[String], op: &Op) -> Result<()> {
    let Some(first) = target.first() else {
        return Ok(());
    };
    if !first.starts_with('$') || matches!(first.as_str(), "$ref" | "$id" | "$db") {
        return Ok(());
    }
    let writes = !matches!(
        op,
        Op::Unset | Op::Pop { .. } | Op::Pull(_) | Op::PullAll(_)
    );
    let touches_top_level = target.len() == 1 || path::existing_depth(root, target) == 0;
    if writes && touches_top_level {
        return Err(Error::new(
            ErrorCode::DollarPrefixedFieldName,
            format!(
                "The dollar ($) prefixed field '{first}' in '{first}' is not allowed in the \
                 context of an update's replacement document. Consider using an aggregation \
                 pipeline with $replaceWith."
            ),
        ));
    }
    Ok(())
}

/// Errors when the document had an `_id` and no longer has an equal one.
fn check_id_kept(
    root: &Bson,
    original: Option<&Bson>,
    message: impl FnOnce() -> String,
) -> Result<()> {
    let Some(old) = original else {
        return Ok(());
    };
    let new = match root {
        Bson::Document(d) => d.get("_id"),
        _ => None,
    };
    match new {
        Some(new) if same_id(old, new) => Ok(()),
        _ => Err(Error::new(ErrorCode::ImmutableField, message())),
    }
}

/// `$rename`: move the value at `from` to `to` (a `$set` of the destination, then an `$unset` of
/// the source). Neither path may go through an array.
fn rename(
    root: &mut Bson,
    from: &[String],
    from_dotted: &str,
    to: &[String],
    env: &ops::Env,
) -> Result<()> {
    // Find the source; traversing a scalar is an error, a missing source a no-op.
    let mut current: &Bson = root;
    for (i, part) in from.iter().enumerate() {
        let next = match current {
            Bson::Document(d) => d.get(part),
            Bson::Array(items) if path::parse_index(part).is_some() => {
                path::parse_index(part).and_then(|ix| items.get(ix))
            }
            other => {
                let name = if i == 0 { "" } else { from[i - 1].as_str() };
                return Err(Error::new(
                    ErrorCode::PathNotViable,
                    format!(
                        "cannot use the part ({name} of {from_dotted}) to traverse the element \
                         ({{{}}})",
                        format::element(name, other)
                    ),
                ));
            }
        };
        match next {
            Some(v) => current = v,
            None => return Ok(()),
        }
    }
    let moved = current.clone();

    for k in (1..from.len()).rev() {
        if let Some(Bson::Array(_)) = path::get(root, &from[..k]) {
            return Err(Error::bad_value(format!(
                "The source field cannot be an array element, '{from_dotted}' in doc with {} has \
                 an array field called '{}'",
                env.id,
                from[k - 1]
            )));
        }
    }
    let depth = path::existing_depth(root, to);
    let highest = if depth == to.len() { depth - 1 } else { depth };
    for k in (1..=highest).rev() {
        if let Some(Bson::Array(_)) = path::get(root, &to[..k]) {
            return Err(Error::bad_value(format!(
                "The destination field cannot be an array element, '{}' in doc with {} has an \
                 array field called '{}'",
                to.join("."),
                env.id,
                to[k - 1]
            )));
        }
    }

    if depth == to.len() {
        if let Some(slot) = path::get_mut(root, to) {
            if !ops::identical(slot, &moved) {
                *slot = moved;
            }
        }
    } else {
        path::create(root, to, depth, moved)?;
    }
    if let Some((last, parent)) = from.split_last() {
        if let Some(Bson::Document(d)) = path::get_mut(root, parent) {
            d.remove(last);
        }
    }
    Ok(())
}

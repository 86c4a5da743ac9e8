//! Find projections: inclusion/exclusion, dotted paths, `$slice`, `$elemMatch`, positional `.$`.
//!
//! The spec is parsed once into a tree of field actions. An inclusion projection keeps only the
//! named paths (and `_id` unless excluded); an exclusion projection drops the named paths.
//! `$slice` alone does not choose a mode (it leaves the other fields in place); `$elemMatch` and
//! `.$` count as inclusions.

use super::matcher::ElemMatchCondition;
use crate::error::{Error, Result};
use crate::stored::FieldTree;
use crate::value::to_f64;
use bson::{Bson, Document};

#[derive(Debug, Clone)]
pub(crate) struct Projection {
    root: Node,
    inclusion: bool,
    /// `{}`: the document is returned unchanged.
    identity: bool,
    /// Fields set to the text score (`{score: {$meta: "textScore"}}`), appended last.
    text_score: Vec<String>,
}

#[derive(Debug, Clone, Default)]
struct Node {
    fields: Vec<(String, Action)>,
    /// A positional `.$` sits at or below this node.
    has_positional: bool,
}

#[derive(Debug, Clone)]
enum Action {
    Include,
    Exclude,
    Slice(Slice),
    ElemMatch(ElemMatchCondition),
    Positional,
    Nested(Node),
}

/// The top-level fields a projection keeps, for one that keeps or leaves out whole top-level
/// fields and does nothing else (see [`Projection::whole_top_level_fields`]).
#[derive(Debug, PartialEq)]
pub(crate) struct TopLevelFields<'a> {
    /// The fields named with the projection's mode (without an excluded `_id`).
    names: Vec<&'a str>,
    /// Whether the named fields are the ones kept (an inclusion) or the ones left out.
    keep_named: bool,
}

impl TopLevelFields<'_> {
    /// Whether a top-level field with this key is in the result.
    pub(crate) fn keeps(&self, key: &[u8]) -> bool {
        self.names.iter().any(|n| n.as_bytes() == key) == self.keep_named
    }
}

#[derive(Debug, Clone, Copy)]
enum Slice {
    /// First n elements, or last -n when negative.
    Count(i64),
    Range {
        skip: i64,
        limit: i64,
    },
}

const POSITIONAL_MISMATCH: &str =
    "Executor error during find command :: caused by :: positional operator '.$' element mismatch";

impl Projection {
    pub(crate) fn parse(spec: &Document) -> Result<Projection> {
        let mut entries = Vec::new();
        flatten(spec, "", &mut entries)?;

        let mut root = Node::default();
        let mut mode: Option<bool> = None;
        let mut id_included: Option<bool> = None;
        let mut positional_seen = false;
        let mut text_score = Vec::new();
        for (path, value) in entries {
            if let Bson::Document(d) = value {
                if d.len() == 1 && d.get("$meta") == Some(&Bson::String("textScore".into())) {
                    validate_path(&path)?;
                    if path.contains('.') {
                        return Err(Error::not_supported("$meta projection on a dotted path"));
                    }
                    text_score.push(path);
                    continue;
                }
            }
            let (path, positional) = match path.strip_suffix(".$") {
                Some(prefix) => (prefix.to_string(), true),
                None => (path, false),
            };
            validate_path(&path)?;
            let action = if positional {
                if positional_seen {
                    return Err(Error::location(
                        31276,
                        "Cannot specify more than one positional projection per query.",
                    ));
                }
                positional_seen = true;
                if !is_inclusion_value(value) {
                    return Err(Error::location(
                        31395,
                        format!("Cannot exclude a positional projection: {path}.$"),
                    ));
                }
                Action::Positional
            } else {
                parse_action(&path, value)?
            };
            if path == "_id" {
                match action {
                    Action::Include => id_included = Some(true),
                    Action::Exclude => id_included = Some(false),
                    _ => {}
                }
            } else {
                match action {
                    Action::Include | Action::Positional | Action::ElemMatch(_) => {
                        if mode == Some(false) {
                            return Err(Error::location(
                                31253,
                                format!(
                                    "Cannot do inclusion on field {path} in exclusion projection"
                                ),
                            ));
                        }
                        mode = Some(true);
                    }
                    Action::Exclude => {
                        if mode == Some(true) {
                            return Err(Error::location(
                                31254,
                                format!(
                                    "Cannot do exclusion on field {path} in inclusion projection"
                                ),
                            ));
                        }
                        mode = Some(false);
                    }
                    _ => {}
                }
            }
            let parts: Vec<&str> = path.split('.').collect();
            insert(&mut root, &parts, &path, action, positional)?;
        }
        let inclusion = mode.unwrap_or(id_included == Some(true));
        if inclusion && !root.fields.iter().any(|(k, _)| k == "_id") {
            root.fields.push(("_id".to_string(), Action::Include));
        }
        Ok(Projection {
            identity: spec.is_empty(),
            root,
            inclusion,
            text_score,
        })
    }

    /// Whether the projection asks for `{$meta: "textScore"}`.
    pub(crate) fn needs_text_score(&self) -> bool {
        !self.text_score.is_empty()
    }

    /// [`Projection::apply`], then the text score (when the query had `$text`) set on the
    /// fields that ask for it.
    pub(crate) fn apply_scored(
        &self,
        doc: &Document,
        matched_position: Option<usize>,
        score: Option<f64>,
    ) -> Result<Document> {
        let mut out = self.apply(doc, matched_position)?;
        if let Some(score) = score {
            for field in &self.text_score {
                out.insert(field.clone(), score);
            }
        }
        Ok(out)
    }

    /// Apply to one document; `matched_position` serves the positional `.$` projection.
    pub(crate) fn apply(
        &self,
        doc: &Document,
        matched_position: Option<usize>,
    ) -> Result<Document> {
        if self.identity {
            return Ok(doc.clone());
        }
        if self.inclusion {
            include_document(&self.root, doc, matched_position, true)
        } else {
            Ok(exclude_document(&self.root, doc))
        }
    }

    /// When the projection keeps or leaves out whole top-level fields and does nothing else
    /// (`{carted: 0}`, `{_id: 0, notes: 0}`, `{title: 1, qty: 1}`): which top-level fields it
    /// keeps. Those fields are returned as they are, so a caller can copy them from the stored
    /// bytes instead of decoding and re-encoding the document.
    pub(crate) fn whole_top_level_fields(&self) -> Option<TopLevelFields<'_>> {
        if self.identity || !self.text_score.is_empty() {
            return None;
        }
        let mut names = Vec::with_capacity(self.root.fields.len());
        for (name, action) in &self.root.fields {
            match action {
                // An inclusion projection may still leave out `_id`, its only exclusion.
                Action::Exclude if !self.inclusion || name == "_id" => {
                    if !self.inclusion {
                        names.push(name.as_str());
                    }
                }
                Action::Include if self.inclusion => names.push(name.as_str()),
                _ => return None,
            }
        }
        Some(TopLevelFields {
            names,
            keep_named: self.inclusion,
        })
    }

    /// When the projection only includes plain paths (`{slug: 1, "details.issue_date": 1}`,
    /// `_id` left out or not): those paths, which a caller can copy from the stored bytes (see
    /// [`crate::stored::StoredDoc::with_tree`]) instead of decoding and re-encoding the document.
    pub(crate) fn included_paths(&self) -> Option<FieldTree> {
        if self.identity || !self.inclusion || !self.text_score.is_empty() {
            return None;
        }
        let mut paths = Vec::new();
        for (name, action) in &self.root.fields {
            match action {
                Action::Exclude if name == "_id" => {}
                action => included_paths_of(name, action, &mut paths)?,
            }
        }
        Some(FieldTree::from_paths(paths.iter().map(String::as_str)))
    }

    /// When the projection only includes plain paths: whether `_id` is among what it returns,
    /// and the other paths (`{"details.issue_date": 1}` gives `(true, ["details.issue_date"])`),
    /// for a read answered from index keys (see `collection::keyed`).
    pub(crate) fn covered_paths(&self) -> Option<(bool, Vec<String>)> {
        if self.identity || !self.inclusion || !self.text_score.is_empty() {
            return None;
        }
        let mut id = true;
        let mut paths = Vec::new();
        for (name, action) in &self.root.fields {
            match action {
                Action::Exclude if name == "_id" => id = false,
                Action::Include if name == "_id" => {}
                _ if name == "_id" => return None,
                action => included_paths_of(name, action, &mut paths)?,
            }
        }
        Some((id, paths))
    }

    /// When the projection only leaves out plain paths (`{"metadata.detail.text": 0}`, whole
    /// top-level fields among them): those paths, so a caller can copy the rest from the stored
    /// bytes (see [`crate::stored::StoredDoc::without_tree`]) instead of decoding and
    /// re-encoding the document.
    pub(crate) fn excluded_paths(&self) -> Option<FieldTree> {
        if self.identity || self.inclusion || !self.text_score.is_empty() {
            return None;
        }
        let mut paths = Vec::new();
        for (name, action) in &self.root.fields {
            excluded_paths_of(name, action, &mut paths)?;
        }
        Some(FieldTree::from_paths(paths.iter().map(String::as_str)))
    }

    /// The top-level fields an inclusion projection reads (`_id` among them unless excluded),
    /// or `None` when it keeps fields it does not name (exclusions, `{}`, `$slice` alone):
    /// applying it to a document holding only these fields gives the same result.
    pub(crate) fn top_level_fields(&self) -> Option<Vec<String>> {
        if self.identity || !self.inclusion {
            return None;
        }
        Some(
            self.root
                .fields
                .iter()
                .map(|(name, _)| name.clone())
                .collect(),
        )
    }

    /// Whether `.$` is used, so callers must pass the filter's matched array position.
    #[cfg(test)]
    pub(crate) fn needs_position(&self) -> bool {
        self.root.has_positional
    }
}

/// The dotted paths `action` at `path` includes (see [`Projection::included_paths`]); `None`
/// for any other action.
fn included_paths_of(path: &str, action: &Action, out: &mut Vec<String>) -> Option<()> {
    match action {
        Action::Include => out.push(path.to_string()),
        Action::Nested(node) if !node.has_positional => {
            for (name, action) in &node.fields {
                included_paths_of(&format!("{path}.{name}"), action, out)?;
            }
        }
        _ => return None,
    }
    Some(())
}

fn excluded_paths_of(path: &str, action: &Action, out: &mut Vec<String>) -> Option<()> {
    match action {
        Action::Exclude => out.push(path.to_string()),
        Action::Nested(node) if !node.has_positional => {
            for (name, action) in &node.fields {
                excluded_paths_of(&format!("{path}.{name}"), action, out)?;
            }
        }
        _ => return None,
    }
    Some(())
}

/// Turn nested sub-projections (`{a: {b: 1}}`) into dotted paths (`"a.b": 1`).
fn flatten<'a>(spec: &'a Document, prefix: &str, out: &mut Vec<(String, &'a Bson)>) -> Result<()> {
    for (key, value) in spec {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            Bson::Document(d) if d.is_empty() => {
                return Err(Error::location(
                    51270,
                    format!("An empty sub-projection is not a valid value. Found empty object at path {path}"),
                ))
            }
            Bson::Document(d) if !d.keys().next().is_some_and(|k| k.starts_with('$')) => {
                flatten(d, &path, out)?
            }
            _ => out.push((path, value)),
        }
    }
    Ok(())
}

fn validate_path(path: &str) -> Result<()> {
    if path.is_empty() || path.split('.').any(str::is_empty) {
        return Err(Error::location(
            15998,
            "FieldPath field names may not be empty strings.",
        ));
    }
    if path.split('.').any(|p| p.starts_with('$')) {
        return Err(Error::location(
            16410,
            format!("FieldPath field names may not start with '$'. Consider using $getField or $setField. ({path})"),
        ));
    }
    Ok(())
}

fn is_inclusion_value(value: &Bson) -> bool {
    match value {
        Bson::Boolean(b) => *b,
        other => to_f64(other).is_some_and(|n| n != 0.0),
    }
}

fn parse_action(path: &str, value: &Bson) -> Result<Action> {
    match value {
        Bson::Boolean(b) => Ok(if *b { Action::Include } else { Action::Exclude }),
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
            Ok(if is_inclusion_value(value) {
                Action::Include
            } else {
                Action::Exclude
            })
        }
        Bson::Document(d) => {
            let Some((op, arg)) = d.iter().next() else {
                return Err(Error::not_supported("computed projection fields"));
            };
            match op.as_str() {
                "$slice" => Ok(Action::Slice(parse_slice(arg)?)),
                "$elemMatch" => {
                    if path.contains('.') {
                        return Err(Error::location(
                            31275,
                            "Cannot use $elemMatch projection on a nested field.",
                        ));
                    }
                    Ok(Action::ElemMatch(ElemMatchCondition::parse(arg)?))
                }
                "$meta" => match arg {
                    Bson::String(name) => {
                        Err(Error::not_supported(format!("$meta projection of {name}")))
                    }
                    other => Err(Error::location(
                        17308,
                        format!("Unsupported argument to $meta: {other}"),
                    )),
                },
                _ => Err(Error::not_supported("computed projection fields")),
            }
        }
        _ => Err(Error::not_supported("computed projection fields")),
    }
}

fn slice_number(value: &Bson) -> Option<i64> {
    // Saturating conversion, as MongoDB clamps huge slice arguments.
    to_f64(value).filter(|n| !n.is_nan()).map(|n| n as i64)
}

fn parse_slice(arg: &Bson) -> Result<Slice> {
    match arg {
        Bson::Array(items) => {
            if items.len() != 2 {
                return Err(Error::location(
                    28724,
                    "$slice array argument must be of the form [skip, limit]",
                ));
            }
            let skip = slice_number(&items[0]).ok_or_else(|| {
                Error::location(
                    28724,
                    "$slice array argument must be of the form [skip, limit]",
                )
            })?;
            let limit = slice_number(&items[1]).ok_or_else(|| {
                Error::location(
                    28724,
                    "$slice array argument must be of the form [skip, limit]",
                )
            })?;
            if limit <= 0 {
                return Err(Error::location(28724, "$slice limit must be positive"));
            }
            Ok(Slice::Range { skip, limit })
        }
        other => slice_number(other).map(Slice::Count).ok_or_else(|| {
            Error::location(
                28667,
                "$slice only supports numbers and [skip, limit] arrays",
            )
        }),
    }
}

fn insert(
    node: &mut Node,
    parts: &[&str],
    full: &str,
    action: Action,
    positional: bool,
) -> Result<()> {
    let (head, rest) = match parts.split_first() {
        Some(split) => split,
        None => return Ok(()),
    };
    if positional {
        node.has_positional = true;
    }
    let existing = node.fields.iter_mut().find(|(k, _)| k == head);
    if rest.is_empty() {
        if existing.is_some() {
            return Err(Error::location(31250, format!("Path collision at {full}")));
        }
        node.fields.push((head.to_string(), action));
        return Ok(());
    }
    match existing {
        None => {
            let mut child = Node::default();
            insert(&mut child, rest, full, action, positional)?;
            node.fields.push((head.to_string(), Action::Nested(child)));
            Ok(())
        }
        Some((_, Action::Nested(child))) => insert(child, rest, full, action, positional),
        Some(_) => Err(Error::location(
            31249,
            format!(
                "Path collision at {full} remaining portion {}",
                rest.join(".")
            ),
        )),
    }
}

impl Node {
    fn action(&self, field: &str) -> Option<&Action> {
        self.fields.iter().find(|(k, _)| k == field).map(|(_, a)| a)
    }
}

impl Slice {
    fn apply(self, value: &Bson) -> Bson {
        let Bson::Array(items) = value else {
            return value.clone();
        };
        let len = items.len() as i64;
        let (start, end) = match self {
            Slice::Count(n) if n >= 0 => (0, n.min(len)),
            Slice::Count(n) => ((len + n).max(0), len),
            Slice::Range { skip, limit } => {
                let start = if skip >= 0 {
                    skip.min(len)
                } else {
                    (len + skip).max(0)
                };
                (start, start.saturating_add(limit).min(len))
            }
        };
        Bson::Array(items[start as usize..end as usize].to_vec())
    }
}

/// `live`: the positional operator has not yet been applied on the way down.
fn include_document(
    node: &Node,
    doc: &Document,
    position: Option<usize>,
    live: bool,
) -> Result<Document> {
    let mut out = Document::new();
    for (key, value) in doc {
        let Some(action) = node.action(key) else {
            continue;
        };
        match action {
            Action::Include => {
                out.insert(key.clone(), value.clone());
            }
            Action::Exclude => {}
            Action::Slice(slice) => {
                out.insert(key.clone(), slice.apply(value));
            }
            Action::ElemMatch(cond) => {
                if let Bson::Array(items) = value {
                    if let Some(i) = cond.first_match(items) {
                        out.insert(key.clone(), Bson::Array(vec![items[i].clone()]));
                    }
                }
            }
            Action::Positional => {
                let projected = match value {
                    Bson::Array(items) if live => Bson::Array(vec![pick(items, position)?.clone()]),
                    other => other.clone(),
                };
                out.insert(key.clone(), projected);
            }
            Action::Nested(child) => {
                if let Some(projected) = include_value(child, value, position, live)? {
                    out.insert(key.clone(), projected);
                }
            }
        }
    }
    Ok(out)
}

fn include_value(
    node: &Node,
    value: &Bson,
    position: Option<usize>,
    live: bool,
) -> Result<Option<Bson>> {
    Ok(match value {
        Bson::Document(d) => Some(Bson::Document(include_document(node, d, position, live)?)),
        Bson::Array(items) if live && node.has_positional => {
            // The positional operator applies to the first array along its path.
            let item = pick(items, position)?;
            Some(Bson::Array(
                include_value(node, item, position, false)?
                    .into_iter()
                    .collect(),
            ))
        }
        Bson::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                // Scalars inside arrays have no sub-fields to keep.
                if matches!(item, Bson::Document(_) | Bson::Array(_)) {
                    if let Some(projected) = include_value(node, item, position, live)? {
                        out.push(projected);
                    }
                }
            }
            Some(Bson::Array(out))
        }
        _ => None,
    })
}

fn pick(items: &[Bson], position: Option<usize>) -> Result<&Bson> {
    position
        .and_then(|i| items.get(i))
        .ok_or_else(|| Error::bad_value(POSITIONAL_MISMATCH))
}

fn exclude_document(node: &Node, doc: &Document) -> Document {
    let mut out = Document::new();
    for (key, value) in doc {
        match node.action(key) {
            Some(Action::Exclude) => {}
            Some(Action::Slice(slice)) => {
                out.insert(key.clone(), slice.apply(value));
            }
            Some(Action::Nested(child)) => {
                out.insert(key.clone(), exclude_value(child, value));
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    out
}

fn exclude_value(node: &Node, value: &Bson) -> Bson {
    match value {
        Bson::Document(d) => Bson::Document(exclude_document(node, d)),
        Bson::Array(items) => {
            Bson::Array(items.iter().map(|item| exclude_value(node, item)).collect())
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use bson::doc;

    fn project(spec: Document, doc: Document) -> Document {
        Projection::parse(&spec)
            .unwrap_or_else(|e| panic!("{spec} should parse: {e}"))
            .apply(&doc, None)
            .unwrap()
    }

    fn parse_error(spec: Document) -> Error {
        match Projection::parse(&spec) {
            Ok(_) => panic!("{spec} should not parse"),
            Err(e) => e,
        }
    }

    #[test]
    fn only_projections_that_keep_or_leave_out_whole_top_level_fields_are_copies() {
        let kept = |spec: Document| {
            let p = Projection::parse(&spec).unwrap();
            p.whole_top_level_fields().map(|fields| {
                ["_id", "a", "b", "carted"]
                    .into_iter()
                    .filter(|k| fields.keeps(k.as_bytes()))
                    .collect::<Vec<_>>()
                    .join(",")
            })
        };
        assert_eq!(kept(doc! {"carted": 0}), Some("_id,a,b".to_string()));
        assert_eq!(
            kept(doc! {"_id": 0, "a": false}),
            Some("b,carted".to_string())
        );
        assert_eq!(kept(doc! {"a": 1}), Some("_id,a".to_string()));
        assert_eq!(kept(doc! {"a": 1, "_id": 0}), Some("a".to_string()));
        assert_eq!(kept(doc! {"_id": 1}), Some("_id".to_string()));
        for other in [
            doc! {},
            doc! {"a.b": 0},
            doc! {"a.b": 1},
            doc! {"a": {"$slice": 2}},
            doc! {"a": 1, "b.$": 1},
            doc! {"a": {"$elemMatch": {"x": 1}}},
            doc! {"a": 0, "s": {"$meta": "textScore"}},
            doc! {"a": 1, "s": {"$meta": "textScore"}},
        ] {
            assert_eq!(kept(other.clone()), None, "{other}");
        }
    }

    #[test]
    fn empty_projection_returns_the_document_unchanged() {
        let d = doc! {"_id": 1, "a": 2};
        assert_eq!(project(doc! {}, d.clone()), d);
    }

    #[test]
    fn inclusion_keeps_named_fields_and_id_in_document_order() {
        let d = doc! {"_id": 1, "a": 1, "b": 2, "c": 3};
        assert_eq!(
            project(doc! {"c": 1, "a": true}, d.clone()),
            doc! {"_id": 1, "a": 1, "c": 3}
        );
        assert_eq!(project(doc! {"a": 1, "_id": 0}, d.clone()), doc! {"a": 1});
        assert_eq!(
            project(doc! {"a": 1.5, "z": 1_i64}, d.clone()),
            doc! {"_id": 1, "a": 1}
        );
        assert_eq!(project(doc! {"_id": 1}, d), doc! {"_id": 1});
    }

    #[test]
    fn exclusion_drops_named_fields() {
        let d = doc! {"_id": 1, "a": 1, "b": 2};
        assert_eq!(project(doc! {"a": 0}, d.clone()), doc! {"_id": 1, "b": 2});
        assert_eq!(project(doc! {"_id": 0}, d.clone()), doc! {"a": 1, "b": 2});
        assert_eq!(
            project(doc! {"a": false, "_id": 1}, d),
            doc! {"_id": 1, "b": 2}
        );
    }

    #[test]
    fn mixing_inclusion_and_exclusion_is_rejected_except_for_id() {
        let e = parse_error(doc! {"a": 1, "b": 0});
        assert_eq!(e.code, ErrorCode::Location(31254));
        assert_eq!(
            e.message,
            "Cannot do exclusion on field b in inclusion projection"
        );
        let e = parse_error(doc! {"a": 0, "b": 1});
        assert_eq!(e.code, ErrorCode::Location(31253));
        assert_eq!(
            e.message,
            "Cannot do inclusion on field b in exclusion projection"
        );
        assert!(Projection::parse(&doc! {"_id": 0, "a": 1}).is_ok());
        assert!(Projection::parse(&doc! {"_id": 1, "a": 0}).is_ok());
    }

    #[test]
    fn dotted_inclusion_reaches_into_documents_and_arrays_of_documents() {
        let d = doc! {
            "_id": 1,
            "size": {"h": 14, "w": 21, "uom": "cm"},
            "items": [{"qty": 1, "sku": "a"}, {"sku": "b"}, 7, [{"qty": 2, "x": 0}]],
            "flat": 5,
        };
        assert_eq!(
            project(
                doc! {"size.uom": 1, "items.qty": 1, "flat.x": 1, "_id": 0},
                d.clone()
            ),
            doc! {"size": {"uom": "cm"}, "items": [{"qty": 1}, {}, [{"qty": 2}]]}
        );
        // Nested sub-projections mean the same as dotted paths.
        assert_eq!(
            project(doc! {"size": {"uom": 1}, "_id": 0}, d),
            doc! {"size": {"uom": "cm"}}
        );
    }

    #[test]
    fn dotted_exclusion_reaches_into_arrays_and_keeps_scalars() {
        let d = doc! {"a": [{"b": 1, "c": 2}, 3], "d": {"b": 1, "c": 2}};
        assert_eq!(
            project(doc! {"a.b": 0, "d.c": 0}, d),
            doc! {"a": [{"c": 2}, 3], "d": {"b": 1}}
        );
    }

    #[test]
    fn slice_takes_first_last_or_a_range() {
        let d = doc! {"_id": 1, "a": [1, 2, 3, 4, 5], "b": "x"};
        assert_eq!(
            project(doc! {"a": {"$slice": 2}}, d.clone()),
            doc! {"_id": 1, "a": [1, 2], "b": "x"}
        );
        assert_eq!(
            project(doc! {"a": {"$slice": -2}}, d.clone()),
            doc! {"_id": 1, "a": [4, 5], "b": "x"}
        );
        assert_eq!(
            project(doc! {"a": {"$slice": [1, 2]}}, d.clone()),
            doc! {"_id": 1, "a": [2, 3], "b": "x"}
        );
        assert_eq!(
            project(doc! {"a": {"$slice": [-2, 5]}}, d.clone()),
            doc! {"_id": 1, "a": [4, 5], "b": "x"}
        );
        assert_eq!(
            project(doc! {"a": {"$slice": [10, 2]}}, d.clone()),
            doc! {"_id": 1, "a": [], "b": "x"}
        );
        assert_eq!(project(doc! {"a": {"$slice": -10}}, d.clone()), d.clone());
        assert_eq!(project(doc! {"b": {"$slice": 1}}, d.clone()), d.clone());
        // With inclusions, the sliced field is included too.
        assert_eq!(
            project(doc! {"a": {"$slice": 1}, "_id": 0, "c": 1}, d.clone()),
            doc! {"a": [1]}
        );
        assert_eq!(
            project(doc! {"a": {"$slice": 1}, "b": 0}, d),
            doc! {"_id": 1, "a": [1]}
        );
        assert_eq!(
            parse_error(doc! {"a": {"$slice": [1, 0]}}).code,
            ErrorCode::Location(28724)
        );
        assert_eq!(
            parse_error(doc! {"a": {"$slice": "x"}}).code,
            ErrorCode::Location(28667)
        );
    }

    #[test]
    fn slice_on_a_dotted_path_slices_inside_array_elements() {
        let d = doc! {"a": [{"b": [1, 2, 3]}, {"b": [4, 5]}]};
        assert_eq!(
            project(doc! {"a.b": {"$slice": 1}}, d),
            doc! {"a": [{"b": [1]}, {"b": [4]}]}
        );
    }

    #[test]
    fn elem_match_keeps_only_the_first_matching_element() {
        let d = doc! {
            "_id": 1,
            "zipcode": "63109",
            "students": [
                {"name": "john", "school": 102, "age": 10},
                {"name": "jess", "school": 102, "age": 11},
                {"name": "jeff", "school": 108, "age": 15},
            ],
        };
        assert_eq!(
            project(
                doc! {"students": {"$elemMatch": {"school": 102}}},
                d.clone()
            ),
            doc! {"_id": 1, "students": [{"name": "john", "school": 102, "age": 10}]}
        );
        assert_eq!(
            project(doc! {"students": {"$elemMatch": {"school": 999}}}, d),
            doc! {"_id": 1}
        );
        assert_eq!(
            project(
                doc! {"s": {"$elemMatch": {"$gt": 2}}, "_id": 0},
                doc! {"s": [1, 3, 5]}
            ),
            doc! {"s": [3]}
        );
        assert_eq!(
            parse_error(doc! {"a.b": {"$elemMatch": {"x": 1}}}).code,
            ErrorCode::Location(31275)
        );
        assert_eq!(
            parse_error(doc! {"a": 0, "b": {"$elemMatch": {"x": 1}}}).code,
            ErrorCode::Location(31253)
        );
    }

    #[test]
    fn positional_projection_keeps_the_matched_element() {
        let p = Projection::parse(&doc! {"grades.$": 1}).unwrap();
        assert!(p.needs_position());
        let d = doc! {"_id": 1, "semester": 1, "grades": [70, 87, 90]};
        assert_eq!(
            p.apply(&d, Some(1)).unwrap(),
            doc! {"_id": 1, "grades": [87]}
        );
        let e = p.apply(&d, None).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadValue);
        assert_eq!(
            e.message,
            "Executor error during find command :: caused by :: positional operator '.$' element mismatch"
        );
        assert!(p.apply(&d, Some(3)).is_err());
        // Non-array values pass through unchanged.
        assert_eq!(
            p.apply(&doc! {"_id": 2, "grades": 5}, None).unwrap(),
            doc! {"_id": 2, "grades": 5}
        );
    }

    #[test]
    fn positional_projection_applies_to_the_first_array_on_its_path() {
        let p = Projection::parse(&doc! {"items.qty.$": 1, "_id": 0}).unwrap();
        let d = doc! {"items": [{"qty": 1, "sku": "a"}, {"qty": 5, "sku": "b"}]};
        assert_eq!(p.apply(&d, Some(1)).unwrap(), doc! {"items": [{"qty": 5}]});
        assert_eq!(
            parse_error(doc! {"a.$": 1, "b.$": 1}).code,
            ErrorCode::Location(31276)
        );
    }

    #[test]
    fn unsupported_and_conflicting_specs_are_errors() {
        assert_eq!(
            parse_error(doc! {"a": "x"}).code,
            ErrorCode::CommandNotSupported
        );
        assert_eq!(
            parse_error(doc! {"a": {"$add": [1, 2]}}).code,
            ErrorCode::CommandNotSupported
        );
        let e = parse_error(doc! {"score": {"$meta": "indexKey"}});
        assert_eq!(e.code, ErrorCode::CommandNotSupported);
        assert!(e.message.contains("$meta"));
        let p = Projection::parse(&doc! {"a": 1, "score": {"$meta": "textScore"}}).unwrap();
        assert!(p.needs_text_score());
        assert_eq!(
            p.apply_scored(&doc! {"_id": 1, "a": 2, "b": 3}, None, Some(1.5))
                .unwrap(),
            doc! {"_id": 1, "a": 2, "score": 1.5}
        );
        let only = Projection::parse(&doc! {"score": {"$meta": "textScore"}}).unwrap();
        assert_eq!(
            only.apply_scored(&doc! {"_id": 1, "b": 3}, None, Some(2.0))
                .unwrap(),
            doc! {"_id": 1, "b": 3, "score": 2.0}
        );
        assert_eq!(
            parse_error(doc! {"a": 1, "a.b": 1}).code,
            ErrorCode::Location(31249)
        );
        assert_eq!(
            parse_error(doc! {"a.b": 1, "a": 1}).code,
            ErrorCode::Location(31250)
        );
        assert_eq!(parse_error(doc! {"a": {}}).code, ErrorCode::Location(51270));
        assert_eq!(parse_error(doc! {"$a": 1}).code, ErrorCode::Location(16410));
    }
}

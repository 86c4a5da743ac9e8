//! Aggregation projections: `$project` (inclusion, exclusion, computed fields, nested specs,
//! dotted paths, the `_id` rules), `$addFields`/`$set` and `$unset`, applied the way MongoDB's
//! projection executor applies them (included fields in document order, then computed fields in
//! specification order, arrays projected element by element).

use crate::error::{Error, Result};
use crate::expression::{Expression, Scope};
use bson::{Bson, Document};

#[derive(Debug, Clone)]
enum Item {
    Include,
    Exclude,
    Computed(Expression),
    Nested(Node),
}

#[derive(Debug, Clone, Default)]
struct Node {
    fields: Vec<(String, Item)>,
}

impl Node {
    fn get(&self, name: &str) -> Option<&Item> {
        self.fields.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    fn has_computed(&self) -> bool {
        self.fields.iter().any(|(_, item)| match item {
            Item::Computed(_) => true,
            Item::Nested(n) => n.has_computed(),
            _ => false,
        })
    }

    /// Insert `item` at the dotted `path`, refusing collisions as MongoDB does.
    fn insert(&mut self, path: &[&str], full: &str, item: Item, stage: &str) -> Result<()> {
        let Some((first, rest)) = path.split_first() else {
            return Ok(());
        };
        let pos = self.fields.iter().position(|(k, _)| k == first);
        if rest.is_empty() {
            match (pos, item) {
                (None, item) => self.fields.push((first.to_string(), item)),
                // A nested spec and a dotted path may describe the same parent.
                (Some(i), Item::Nested(new)) if matches!(self.fields[i].1, Item::Nested(_)) => {
                    if let Item::Nested(existing) = &mut self.fields[i].1 {
                        for (k, v) in new.fields {
                            existing.insert(&[k.as_str()], full, v, stage)?;
                        }
                    }
                }
                _ => {
                    return Err(Error::location(
                        31250,
                        format!("Invalid {stage} :: caused by :: Path collision at {full}"),
                    ))
                }
            }
            return Ok(());
        }
        let i = match pos {
            Some(i) => i,
            None => {
                self.fields
                    .push((first.to_string(), Item::Nested(Node::default())));
                self.fields.len() - 1
            }
        };
        match &mut self.fields[i].1 {
            Item::Nested(child) => child.insert(rest, full, item, stage),
            _ => Err(Error::location(
                31249,
                format!(
                    "Invalid {stage} :: caused by :: Path collision at {full} remaining portion {}",
                    rest.join(".")
                ),
            )),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Inclusion,
    Exclusion,
    AddFields,
}

/// A parsed `$project`, `$addFields`/`$set` or `$unset` specification.
#[derive(Debug, Clone)]
pub(super) struct Projection {
    mode: Mode,
    root: Node,
}

fn split_path<'a>(path: &'a str, stage: &str) -> Result<Vec<&'a str>> {
    if path.is_empty() {
        return Err(Error::location(
            40352,
            format!(
                "Invalid {stage} :: caused by :: FieldPath cannot be constructed with empty string"
            ),
        ));
    }
    let parts: Vec<&str> = path.split('.').collect();
    for p in &parts {
        if p.is_empty() {
            return Err(Error::location(
                15998,
                format!("Invalid {stage} :: caused by :: FieldPath field names may not be empty strings."),
            ));
        }
        if p.starts_with('$') {
            return Err(Error::location(
                16410,
                format!(
                    "Invalid {stage} :: caused by :: FieldPath field names may not start with '$'. \
                     Consider using $getField or $setField."
                ),
            ));
        }
    }
    Ok(parts)
}

/// Whether a document value in a spec is an operator expression rather than a nested spec.
fn is_expression_object(d: &Document) -> bool {
    d.keys().next().is_some_and(|k| k.starts_with('$'))
}

impl Projection {
    /// Parse a `$project` stage's specification.
    pub(super) fn parse_project(spec: &Document) -> Result<Projection> {
        if spec.is_empty() {
            return Err(Error::location(
                51272,
                "Invalid $project :: caused by :: projection specification must have at least \
                 one field",
            ));
        }
        let mut root = Node::default();
        let mut mode: Option<Mode> = None;
        let mut id_specified = false;
        parse_project_fields(spec, "", &mut root, &mut mode, &mut id_specified)?;
        // Only `_id: 0` (or `_id: 1`) given: that decides the mode by itself.
        let mode = mode.unwrap_or(match root.get("_id") {
            Some(Item::Exclude) => Mode::Exclusion,
            _ => Mode::Inclusion,
        });
        if mode == Mode::Inclusion && !id_specified {
            root.fields.insert(0, ("_id".to_string(), Item::Include));
        }
        if mode == Mode::Inclusion {
            // An excluded `_id` in an inclusion projection is simply not included.
            root.fields
                .retain(|(k, item)| !(k == "_id" && matches!(item, Item::Exclude)));
        }
        Ok(Projection { mode, root })
    }

    /// Parse an `$addFields` (or `$set`, named by `stage`) specification.
    pub(super) fn parse_add_fields(spec: &Document, stage: &str) -> Result<Projection> {
        let mut root = Node::default();
        parse_add_fields_into(spec, &mut root, stage)?;
        Ok(Projection {
            mode: Mode::AddFields,
            root,
        })
    }

    /// Parse an `$unset` specification: one path or an array of paths.
    pub(super) fn parse_unset(spec: &Bson) -> Result<Projection> {
        let paths: Vec<&str> = match spec {
            Bson::String(s) => vec![s.as_str()],
            Bson::Array(items) => {
                if items.is_empty() {
                    return Err(Error::location(
                        31119,
                        "$unset specification must be a string or an array with at least one \
                         field",
                    ));
                }
                items
                    .iter()
                    .map(|v| match v {
                        Bson::String(s) => Ok(s.as_str()),
                        _ => Err(Error::location(
                            31120,
                            "$unset specification must be a string or an array containing only \
                             string values",
                        )),
                    })
                    .collect::<Result<_>>()?
            }
            _ => {
                return Err(Error::location(
                    31002,
                    "$unset specification must be a string or an array",
                ))
            }
        };
        let mut root = Node::default();
        for path in paths {
            let parts = split_path(path, "$unset")?;
            root.insert(&parts, path, Item::Exclude, "$unset")?;
        }
        Ok(Projection {
            mode: Mode::Exclusion,
            root,
        })
    }

    pub(crate) fn apply(&self, doc: &Document, scope: &Scope) -> Result<Document> {
        match self.mode {
            Mode::Exclusion => Ok(exclude(&self.root, doc)),
            Mode::Inclusion => {
                let mut out = include(&self.root, doc);
                // The text score is metadata: it survives projections, as in MongoDB.
                if let Some(score) = doc.get(crate::text::SCORE_FIELD) {
                    out.insert(crate::text::SCORE_FIELD, score.clone());
                }
                apply_expressions(&self.root, &mut out, scope)?;
                Ok(out)
            }
            Mode::AddFields => {
                let mut out = doc.clone();
                apply_expressions(&self.root, &mut out, scope)?;
                Ok(out)
            }
        }
    }
}

fn parse_project_fields(
    spec: &Document,
    prefix: &str,
    node: &mut Node,
    mode: &mut Option<Mode>,
    id_specified: &mut bool,
) -> Result<()> {
    const STAGE: &str = "$project";
    for (key, value) in spec {
        let full = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        let parts = split_path(key, STAGE)?;
        let top_level_id = prefix.is_empty() && key == "_id";
        if prefix.is_empty() && (key == "_id" || key.starts_with("_id.")) {
            *id_specified = true;
        }
        let item = match value {
            Bson::Document(d) if !is_expression_object(d) => {
                if d.is_empty() {
                    return Err(Error::location(
                        51270,
                        format!(
                            "Invalid {STAGE} :: caused by :: An empty sub-projection is not a \
                             valid value. Found empty object at path {full}"
                        ),
                    ));
                }
                let mut child = Node::default();
                parse_project_fields(d, &full, &mut child, mode, id_specified)?;
                Item::Nested(child)
            }
            Bson::Boolean(_)
            | Bson::Int32(_)
            | Bson::Int64(_)
            | Bson::Double(_)
            | Bson::Decimal128(_) => {
                if crate::value::is_truthy(value) {
                    if *mode == Some(Mode::Exclusion) && !top_level_id {
                        return Err(Error::location(
                            31253,
                            format!(
                                "Invalid {STAGE} :: caused by :: Cannot do inclusion on field \
                                 {full} in exclusion projection"
                            ),
                        ));
                    }
                    if !top_level_id {
                        *mode = Some(Mode::Inclusion);
                    }
                    Item::Include
                } else {
                    if !top_level_id {
                        if *mode == Some(Mode::Inclusion) {
                            return Err(Error::location(
                                31254,
                                format!(
                                    "Invalid {STAGE} :: caused by :: Cannot do exclusion on \
                                     field {full} in inclusion projection"
                                ),
                            ));
                        }
                        *mode = Some(Mode::Exclusion);
                    }
                    Item::Exclude
                }
            }
            other => {
                if *mode == Some(Mode::Exclusion) {
                    return Err(Error::location(
                        31252,
                        format!(
                            "Invalid {STAGE} :: caused by :: Cannot use expression other than \
                             $meta in exclusion projection"
                        ),
                    ));
                }
                *mode = Some(Mode::Inclusion);
                Item::Computed(Expression::parse(other)?)
            }
        };
        node.insert(&parts, &full, item, STAGE)?;
    }
    Ok(())
}

fn parse_add_fields_into(spec: &Document, node: &mut Node, stage: &str) -> Result<()> {
    for (key, value) in spec {
        let parts = split_path(key, stage)?;
        let item = match value {
            Bson::Document(d) if !d.is_empty() && !is_expression_object(d) => {
                let mut child = Node::default();
                parse_add_fields_into(d, &mut child, stage)?;
                Item::Nested(child)
            }
            other => Item::Computed(Expression::parse(other)?),
        };
        node.insert(&parts, key, item, stage)?;
    }
    Ok(())
}

/// First phase of an inclusion projection: keep the included fields, in document order.
fn include(node: &Node, doc: &Document) -> Document {
    let mut out = Document::new();
    for (k, v) in doc {
        match node.get(k) {
            Some(Item::Include) => {
                out.insert(k.clone(), v.clone());
            }
            Some(Item::Nested(child)) => {
                if let Some(projected) = include_value(child, v) {
                    out.insert(k.clone(), projected);
                }
            }
            _ => {}
        }
    }
    out
}

fn include_value(node: &Node, v: &Bson) -> Option<Bson> {
    match v {
        Bson::Document(d) => Some(Bson::Document(include(node, d))),
        Bson::Array(items) => Some(Bson::Array(
            items
                .iter()
                .filter_map(|item| match item {
                    Bson::Document(_) | Bson::Array(_) => include_value(node, item),
                    // Scalars inside an array have no sub-fields to include.
                    _ => None,
                })
                .collect(),
        )),
        _ => None,
    }
}

/// Second phase: computed fields, in specification order, over the projected document.
fn apply_expressions(node: &Node, out: &mut Document, scope: &Scope) -> Result<()> {
    for (k, item) in &node.fields {
        match item {
            Item::Computed(expr) => match expr.eval(scope)? {
                Some(v) => {
                    out.insert(k.clone(), v);
                }
                None => {
                    out.remove(k);
                }
            },
            Item::Nested(child) if child.has_computed() => {
                let current = out.get(k).cloned();
                let v = apply_expressions_to_value(child, current, scope)?;
                out.insert(k.clone(), v);
            }
            _ => {}
        }
    }
    Ok(())
}

fn apply_expressions_to_value(node: &Node, v: Option<Bson>, scope: &Scope) -> Result<Bson> {
    match v {
        Some(Bson::Document(mut d)) => {
            apply_expressions(node, &mut d, scope)?;
            Ok(Bson::Document(d))
        }
        Some(Bson::Array(items)) => Ok(Bson::Array(
            items
                .into_iter()
                .map(|item| apply_expressions_to_value(node, Some(item), scope))
                .collect::<Result<_>>()?,
        )),
        // A scalar or missing value is replaced by a document of the computed fields
        // (`{"a.b": {$literal: 1}}` turns `{a: 1}` into `{a: {b: 1}}`).
        _ => {
            let mut d = Document::new();
            apply_expressions(node, &mut d, scope)?;
            Ok(Bson::Document(d))
        }
    }
}

fn exclude(node: &Node, doc: &Document) -> Document {
    let mut out = Document::new();
    for (k, v) in doc {
        match node.get(k) {
            Some(Item::Exclude) => {}
            Some(Item::Nested(child)) => {
                out.insert(k.clone(), exclude_value(child, v));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

fn exclude_value(node: &Node, v: &Bson) -> Bson {
    match v {
        Bson::Document(d) => Bson::Document(exclude(node, d)),
        Bson::Array(items) => Bson::Array(items.iter().map(|i| exclude_value(node, i)).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn project(spec: Document, d: Document) -> Result<Document> {
        let p = Projection::parse_project(&spec)?;
        let vars = Document::new();
        p.apply(&d, &Scope::new(&d, &vars))
    }

    fn add_fields(spec: Document, d: Document) -> Document {
        let p = Projection::parse_add_fields(&spec, "$addFields").expect("valid spec");
        let vars = Document::new();
        p.apply(&d, &Scope::new(&d, &vars)).expect("applies")
    }

    fn code(r: Result<Projection>) -> i32 {
        match r {
            Err(e) => e.code_number(),
            Ok(p) => panic!("expected an error, got {p:?}"),
        }
    }

    #[test]
    fn inclusion_keeps_listed_fields_in_document_order_and_id_by_default() {
        let d = doc! { "_id": 1, "a": 1, "b": 2, "c": 3 };
        assert_eq!(
            project(doc! { "c": 1, "a": true }, d.clone()).unwrap(),
            doc! { "_id": 1, "a": 1, "c": 3 }
        );
        assert_eq!(
            project(doc! { "_id": 0, "b": 1 }, d).unwrap(),
            doc! { "b": 2 }
        );
    }

    #[test]
    fn exclusion_removes_listed_fields() {
        let d = doc! { "_id": 1, "a": 1, "b": { "x": 1, "y": 2 } };
        assert_eq!(
            project(doc! { "a": 0, "b.y": 0 }, d.clone()).unwrap(),
            doc! { "_id": 1, "b": { "x": 1 } }
        );
        assert_eq!(
            project(doc! { "_id": 0 }, d).unwrap(),
            doc! { "a": 1, "b": { "x": 1, "y": 2 } }
        );
    }

    #[test]
    fn computed_fields_follow_included_ones() {
        let d = doc! { "_id": 1, "a": 5, "b": 2 };
        assert_eq!(
            project(
                doc! { "total": { "$add": ["$a", "$b"] }, "b": 1, "lit": "x", "src": "$a" },
                d
            )
            .unwrap(),
            doc! { "_id": 1, "b": 2, "total": 7, "lit": "x", "src": 5 }
        );
    }

    #[test]
    fn dotted_and_nested_specs_project_through_arrays() {
        let d =
            doc! { "_id": 1, "a": [ { "x": 1, "y": 2 }, 5, { "y": 3 } ], "b": { "c": 1, "d": 2 } };
        assert_eq!(
            project(doc! { "a.y": 1, "b": { "d": 1 }, "_id": 0 }, d).unwrap(),
            doc! { "a": [ { "y": 2 }, { "y": 3 } ], "b": { "d": 2 } }
        );
    }

    #[test]
    fn computed_dotted_field_on_a_scalar_replaces_it_with_a_document() {
        let d = doc! { "_id": 1, "a": 1 };
        assert_eq!(
            project(doc! { "a.b": { "$literal": 1 } }, d).unwrap(),
            doc! { "_id": 1, "a": { "b": 1 } }
        );
    }

    #[test]
    fn remove_variable_leaves_the_field_out() {
        let d = doc! { "_id": 1, "a": 1 };
        assert_eq!(
            project(doc! { "x": "$$REMOVE", "a": 1 }, d).unwrap(),
            doc! { "_id": 1, "a": 1 }
        );
    }

    #[test]
    fn mixing_inclusion_and_exclusion_is_refused_with_mongodb_codes() {
        assert_eq!(
            code(Projection::parse_project(&doc! { "a": 1, "b": 0 })),
            31254
        );
        assert_eq!(
            code(Projection::parse_project(&doc! { "b": 0, "a": 1 })),
            31253
        );
        assert_eq!(
            code(Projection::parse_project(
                &doc! { "b": 0, "c": { "$add": [1] } }
            )),
            31252
        );
        assert_eq!(code(Projection::parse_project(&doc! {})), 51272);
        assert_eq!(
            code(Projection::parse_project(&doc! { "a": 1, "a.b": 1 })),
            31249
        );
        assert_eq!(
            code(Projection::parse_project(&doc! { "a.b": 1, "a": 1 })),
            31250
        );
        assert_eq!(code(Projection::parse_project(&doc! { "a": {} })), 51270);
        assert_eq!(code(Projection::parse_project(&doc! { "$a": 1 })), 16410);
        let e = Projection::parse_project(&doc! { "a": 1, "b": 0 }).unwrap_err();
        assert_eq!(
            e.message,
            "Invalid $project :: caused by :: Cannot do exclusion on field b in inclusion projection"
        );
    }

    #[test]
    fn add_fields_sets_replaces_and_merges_into_embedded_documents() {
        let d = doc! { "_id": 1, "a": 1, "s": { "x": 1 }, "arr": [ { "v": 1 }, { "v": 2 } ] };
        assert_eq!(
            add_fields(
                doc! { "a": { "$add": ["$a", 1] }, "n": 1, "s.y": 2, "arr.w": true },
                d.clone()
            ),
            doc! {
                "_id": 1, "a": 2, "s": { "x": 1, "y": 2 },
                "arr": [ { "v": 1, "w": true }, { "v": 2, "w": true } ], "n": 1,
            }
        );
        assert_eq!(
            add_fields(doc! { "s": { "z": 3 } }, d.clone())
                .get_document("s")
                .unwrap(),
            &doc! { "x": 1, "z": 3 }
        );
        assert_eq!(add_fields(doc! { "a": "$$REMOVE" }, d).get("a"), None);
    }

    #[test]
    fn unset_removes_paths_and_validates_its_argument() {
        let p = Projection::parse_unset(&Bson::Array(vec!["a".into(), "b.c".into()])).unwrap();
        let d = doc! { "_id": 1, "a": 1, "b": { "c": 1, "d": 2 } };
        let vars = Document::new();
        assert_eq!(
            p.apply(&d, &Scope::new(&d, &vars)).unwrap(),
            doc! { "_id": 1, "b": { "d": 2 } }
        );
        assert_eq!(code(Projection::parse_unset(&Bson::Int32(1))), 31002);
        assert_eq!(
            code(Projection::parse_unset(&Bson::Array(vec![1.into()]))),
            31120
        );
        assert_eq!(code(Projection::parse_unset(&Bson::Array(vec![]))), 31119);
    }
}

//! `$graphLookup`: a breadth-first search over another collection of the same database, from
//! the `startWith` values, following `connectFromField` values to documents whose
//! `connectToField` equals them (as a `$eq` query would: array fields by any element, `null`
//! also matching a missing field), each document found once, up to `maxDepth`.

use super::*;
use crate::path::{walk_path, FieldPath, LeafArrays};
use crate::query::Filter;
use std::collections::{BTreeSet, HashSet};

#[derive(Debug, Clone)]
pub(crate) struct GraphLookup {
    from: String,
    start_with: Expression,
    connect_from: String,
    connect_to: String,
    as_path: Vec<String>,
    max_depth: Option<i64>,
    depth_field: Option<Vec<String>>,
    restrict: Option<Filter>,
}

fn string_arg(name: &str, v: &Bson) -> Result<String> {
    match v {
        Bson::String(s) => Ok(s.clone()),
        other => Err(Error::location(
            40103,
            format!(
                "expected string as argument for {name}, found: {}",
                fmt_value(other)
            ),
        )),
    }
}

/// A field path option (`connectFromField`, `as` ...): no `$` prefix, no empty parts.
fn path_arg(name: &str, v: &Bson) -> Result<String> {
    let s = string_arg(name, v)?;
    split_field_path(&s)?;
    Ok(s)
}

impl GraphLookup {
    pub(crate) fn parse(spec: &Bson) -> Result<GraphLookup> {
        let Bson::Document(d) = spec else {
            return Err(Error::failed_to_parse(format!(
                "the $graphLookup stage specification must be an object, but found {}",
                value::type_name(spec)
            )));
        };
        let (mut from, mut start_with, mut connect_from, mut connect_to, mut as_field) =
            (None, None, None, None, None);
        let mut max_depth = None;
        let mut depth_field = None;
        let mut restrict = None;
        for (k, v) in d {
            match k.as_str() {
                "from" => from = Some(string_arg(k, v)?),
                "startWith" => start_with = Some(Expression::parse(v)?),
                "connectFromField" => connect_from = Some(path_arg(k, v)?),
                "connectToField" => connect_to = Some(path_arg(k, v)?),
                "as" => as_field = Some(split_field_path(&string_arg(k, v)?)?),
                "depthField" => depth_field = Some(split_field_path(&string_arg(k, v)?)?),
                "maxDepth" => {
                    let Some(n) = Number::from_bson(v) else {
                        return Err(Error::location(
                            40100,
                            format!(
                                "maxDepth must be numeric, found type: {}",
                                value::type_name(v)
                            ),
                        ));
                    };
                    let Some(n) = n.as_i64_exact() else {
                        return Err(Error::location(
                            40102,
                            format!(
                                "maxDepth could not be represented as a long long: {}",
                                fmt_value(v)
                            ),
                        ));
                    };
                    if n < 0 {
                        return Err(Error::location(
                            40101,
                            format!("maxDepth requires a nonnegative argument, found: {n}"),
                        ));
                    }
                    max_depth = Some(n);
                }
                "restrictSearchWithMatch" => {
                    let Bson::Document(filter) = v else {
                        return Err(Error::location(
                            40185,
                            format!(
                                "restrictSearchWithMatch must be an object, found {}",
                                value::type_name(v)
                            ),
                        ));
                    };
                    restrict = Some(Filter::parse(filter)?);
                }
                other => {
                    return Err(Error::location(
                        40104,
                        format!("Unknown argument to $graphLookup: {other}"),
                    ))
                }
            }
        }
        let (Some(from), Some(start_with), Some(connect_from), Some(connect_to), Some(as_path)) =
            (from, start_with, connect_from, connect_to, as_field)
        else {
            return Err(Error::location(
                40105,
                "from, as, connectToField, connectFromField, and startWith must all be specified",
            ));
        };
        Ok(GraphLookup {
            from,
            start_with,
            connect_from,
            connect_to,
            as_path,
            max_depth,
            depth_field,
            restrict,
        })
    }

    pub(crate) fn run(
        &self,
        docs: Vec<Document>,
        vars: &Document,
        ctx: &dyn PipelineContext,
    ) -> Result<Vec<Document>> {
        let foreign: Vec<Document> = ctx
            .collection_documents(&self.from)?
            .into_iter()
            .filter(|d| self.restrict.as_ref().is_none_or(|f| f.matches(d)))
            .collect();
        // Every value a document's connectToField equals, as an equality query sees it.
        let to_path = FieldPath::new(&self.connect_to);
        let mut by_value: BTreeMap<OrdBson, Vec<usize>> = BTreeMap::new();
        for (i, d) in foreign.iter().enumerate() {
            let mut keys: BTreeSet<OrdBson> = BTreeSet::new();
            walk_path(d, &to_path, LeafArrays::Traverse, &mut |v, _| {
                keys.insert(OrdBson(v.cloned().unwrap_or(Bson::Null)));
                false
            });
            for key in keys {
                by_value.entry(key).or_default().push(i);
            }
        }
        let from_path = FieldPath::new(&self.connect_from);
        let mut out = Vec::with_capacity(docs.len());
        for mut doc in docs {
            let start = self.start_with.eval(&Scope::new(&doc, vars))?;
            let mut frontier: Vec<Bson> = match start {
                Some(Bson::Array(items)) => items,
                Some(v) => vec![v],
                None => Vec::new(),
            };
            let mut queried: BTreeSet<OrdBson> = BTreeSet::new();
            let mut found: HashSet<usize> = HashSet::new();
            let mut results = Vec::new();
            let mut depth = 0i64;
            while !frontier.is_empty() && self.max_depth.is_none_or(|m| depth <= m) {
                let mut next = Vec::new();
                for value in frontier {
                    let key = OrdBson(value);
                    if !queried.insert(key.clone()) {
                        continue;
                    }
                    for &i in by_value.get(&key).map(Vec::as_slice).unwrap_or(&[]) {
                        if !found.insert(i) {
                            continue;
                        }
                        let mut hit = foreign[i].clone();
                        walk_path(&hit, &from_path, LeafArrays::Traverse, &mut |v, _| {
                            // An array is followed element by element, not as a whole.
                            if let Some(v) = v.filter(|v| !matches!(v, Bson::Array(_))) {
                                next.push(v.clone());
                            }
                            false
                        });
                        if let Some(field) = &self.depth_field {
                            set_nested(&mut hit, field, Bson::Int64(depth));
                        }
                        results.push(Bson::Document(hit));
                    }
                }
                frontier = next;
                depth += 1;
            }
            set_nested(&mut doc, &self.as_path, Bson::Array(results));
            out.push(doc);
        }
        Ok(out)
    }
}

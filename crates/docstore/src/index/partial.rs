//! Partial indexes: which filters MongoDB 7.0 accepts as `partialFilterExpression`, and whether
//! a query implies an index's filter (so the index holds every document the query can match).

use crate::keystring::render;
use crate::value::{canonical_rank, compare, is_truthy, values_equal};
use bson::{Bson, Document};
use std::cmp::Ordering;

/// mongod's `internalPartialFilterExpressionMaxDepth` default.
const MAX_DEPTH: usize = 4;

/// Why a filter cannot be a partial filter.
#[derive(Debug, PartialEq)]
pub(crate) enum Refusal {
    /// An operator the partial filter language lacks; carries mongod's rendering of it.
    Unsupported(String),
    TooDeep,
    /// `$expr` (code 224) or `$where` (code 2): "not allowed in this context".
    NotAllowed(&'static str, i32),
}

impl Refusal {
    pub(crate) fn message(&self) -> String {
        match self {
            Refusal::Unsupported(what) => {
                format!("Expression not supported in partial index: {what}")
            }
            Refusal::TooDeep => {
                format!("partialFilterExpression depth may not exceed {MAX_DEPTH}")
            }
            Refusal::NotAllowed(op, _) => format!("{op} is not allowed in this context"),
        }
    }
}

/// mongod's `_checkValidFilterExpressions` with the 6.0+ rules: equality, `$exists: true`,
/// `$gt/$gte/$lt/$lte`, `$type`, `$in`, and `$and`/`$or` at any level.
pub(crate) fn validate(filter: &Document) -> Result<(), Refusal> {
    for key in filter.keys() {
        match key.as_str() {
            "$expr" => return Err(Refusal::NotAllowed("$expr", 224)),
            "$where" => return Err(Refusal::NotAllowed("$where", 2)),
            _ => {}
        }
    }
    // A document with one condition is that condition; with several, an $and of them.
    let level = usize::from(conditions(filter) > 1);
    validate_document(filter, level)
}

fn conditions(d: &Document) -> usize {
    d.iter()
        .map(|(k, v)| match v {
            Bson::Document(ops) if !k.starts_with('$') && is_operator_document(ops) => {
                ops.keys().filter(|op| *op != "$options").count()
            }
            _ => usize::from(k != "$comment"),
        })
        .sum()
}

fn is_operator_document(d: &Document) -> bool {
    d.keys().next().is_some_and(|k| k.starts_with('$'))
}

fn check_depth(level: usize) -> Result<(), Refusal> {
    if level + 1 > MAX_DEPTH {
        Err(Refusal::TooDeep)
    } else {
        Ok(())
    }
}

fn validate_document(d: &Document, level: usize) -> Result<(), Refusal> {
    for (key, value) in d {
        match key.as_str() {
            "$comment" => {}
            "$and" | "$or" => {
                check_depth(level)?;
                let Bson::Array(members) = value else {
                    continue;
                };
                for member in members {
                    if let Bson::Document(m) = member {
                        // A member with several conditions is itself an $and one level down.
                        if conditions(m) > 1 {
                            check_depth(level + 1)?;
                            validate_document(m, level + 2)?;
                        } else {
                            validate_document(m, level + 1)?;
                        }
                    }
                }
            }
            "$nor" => {
                return Err(Refusal::Unsupported(format!(
                    "$nor\n{}",
                    indent(&debug_members(value))
                )))
            }
            op if op.starts_with('$') => {
                return Err(Refusal::Unsupported(format!("{op} {}\n", render(value))))
            }
            field => {
                check_depth(level)?;
                validate_condition(field, value)?;
            }
        }
    }
    Ok(())
}

fn debug_members(value: &Bson) -> String {
    let mut out = String::new();
    if let Bson::Array(members) = value {
        for member in members {
            if let Bson::Document(m) = member {
                for (field, cond) in m {
                    out.push_str(&debug_condition(field, cond));
                }
            }
        }
    }
    out
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("    {l}\n")).collect()
}

fn validate_condition(field: &str, value: &Bson) -> Result<(), Refusal> {
    let Bson::Document(ops) = value else {
        return match value {
            Bson::RegularExpression(_) => Err(Refusal::Unsupported(debug_condition(field, value))),
            _ => Ok(()),
        };
    };
    if !is_operator_document(ops) {
        return Ok(());
    }
    for (op, arg) in ops {
        let supported = match op.as_str() {
            "$eq" | "$gt" | "$gte" | "$lt" | "$lte" | "$type" | "$in" => true,
            "$exists" => is_truthy(arg),
            // `$all` of plain values is an $and of equalities.
            "$all" => {
                matches!(arg, Bson::Array(items) if !items.is_empty() && items.iter().all(|i| {
                    !matches!(i, Bson::RegularExpression(_))
                        && !matches!(i, Bson::Document(d) if is_operator_document(d))
                }))
            }
            "$options" => true,
            _ => false,
        };
        if !supported {
            let mut single = Document::new();
            single.insert(op.clone(), arg.clone());
            if op == "$regex" {
                if let Some(options) = ops.get("$options") {
                    single.insert("$options", options.clone());
                }
            }
            return Err(Refusal::Unsupported(debug_condition(
                field,
                &Bson::Document(single),
            )));
        }
    }
    Ok(())
}

/// mongod's `debugString` for the common refused conditions.
fn debug_condition(field: &str, value: &Bson) -> String {
    let Bson::Document(ops) = value else {
        return match value {
            Bson::RegularExpression(r) => format!("{field} regex /{}/{}\n", r.pattern, r.options),
            v => format!("{field} $eq {}\n", render(v)),
        };
    };
    if !is_operator_document(ops) {
        return format!("{field} $eq {}\n", render(value));
    }
    let mut out = String::new();
    for (op, arg) in ops {
        let line = match op.as_str() {
            "$ne" => format!("$not\n    {field} $eq {}\n", render(arg)),
            "$nin" => format!("$not\n    {field} $in {}\n", render_list(arg)),
            "$exists" => format!("$not\n    {field} exists\n"),
            "$regex" => {
                let options = ops.get_str("$options").unwrap_or("");
                match arg {
                    Bson::RegularExpression(r) => {
                        format!("{field} regex /{}/{}\n", r.pattern, r.options)
                    }
                    other => format!(
                        "{field} regex /{}/{options}\n",
                        match other {
                            Bson::String(s) => s.clone(),
                            v => render(v),
                        }
                    ),
                }
            }
            "$options" => continue,
            "$mod" => match arg {
                Bson::Array(a) if a.len() == 2 => {
                    format!("{field} mod {} % x == {}\n", render(&a[0]), render(&a[1]))
                }
                v => format!("{field} $mod {}\n", render(v)),
            },
            "$size" => format!("{field} $size : {}\n", render(arg)),
            "$not" => format!("$not\n{}", indent(&debug_condition(field, arg))),
            other => format!("{field} {other} {}\n", render(arg)),
        };
        out.push_str(&line);
    }
    out
}

fn render_list(v: &Bson) -> String {
    match v {
        Bson::Array(items) => {
            let inner: Vec<String> = items.iter().map(render).collect();
            format!("[ {} ]", inner.join(" "))
        }
        other => render(other),
    }
}

/// One condition on one path, as the implication check understands it.
#[derive(Debug, Clone)]
enum Atom {
    Eq(Bson),
    Exists,
    Cmp(&'static str, Bson),
    /// Anything else; implied only by the identical condition.
    Other(String, Bson),
}

/// The conditions of a filter's top level (and its top-level `$and`), by path; `None` for a
/// whole-document operator such as `$or`, kept as written.
fn atoms(filter: &Document, out: &mut Vec<(Option<String>, Atom)>) {
    for (key, value) in filter {
        match key.as_str() {
            "$and" => {
                if let Bson::Array(members) = value {
                    for m in members {
                        if let Bson::Document(d) = m {
                            atoms(d, out);
                        }
                    }
                }
            }
            "$comment" => {}
            k if k.starts_with('$') => out.push((None, Atom::Other(k.to_string(), value.clone()))),
            field => match value {
                Bson::Document(ops) if is_operator_document(ops) => {
                    for (op, arg) in ops {
                        let atom = match op.as_str() {
                            "$eq" => Atom::Eq(arg.clone()),
                            "$exists" if is_truthy(arg) => Atom::Exists,
                            "$gt" => Atom::Cmp("$gt", arg.clone()),
                            "$gte" => Atom::Cmp("$gte", arg.clone()),
                            "$lt" => Atom::Cmp("$lt", arg.clone()),
                            "$lte" => Atom::Cmp("$lte", arg.clone()),
                            other => Atom::Other(other.to_string(), arg.clone()),
                        };
                        out.push((Some(field.to_string()), atom));
                    }
                }
                v => out.push((Some(field.to_string()), Atom::Eq(v.clone()))),
            },
        }
    }
}

fn same_value(a: &Bson, b: &Bson) -> bool {
    values_equal(a, b) && canonical_rank(a) == canonical_rank(b)
}

/// Whether `value` satisfies `op bound` (within the bound's type bracket, as MongoDB compares).
fn satisfies(value: &Bson, op: &str, bound: &Bson) -> bool {
    if canonical_rank(value) != canonical_rank(bound)
        || matches!(value, Bson::Null | Bson::Array(_))
    {
        return false;
    }
    let ord = compare(value, bound);
    match op {
        "$gt" => ord == Ordering::Greater,
        "$gte" => ord != Ordering::Less,
        "$lt" => ord == Ordering::Less,
        _ => ord != Ordering::Greater,
    }
}

/// Whether the query condition `q` on a path guarantees the filter condition `f` on it.
fn atom_implies(q: &Atom, f: &Atom) -> bool {
    match (q, f) {
        (Atom::Eq(a), Atom::Eq(b)) => same_value(a, b),
        (Atom::Exists, Atom::Exists) => true,
        // A non-null equality or any comparison can only match a present field.
        (Atom::Eq(v), Atom::Exists) => !matches!(v, Bson::Null),
        (Atom::Cmp(_, v), Atom::Exists) => !matches!(v, Bson::Null),
        (Atom::Eq(v), Atom::Cmp(op, bound)) => {
            !matches!(v, Bson::Array(_) | Bson::Document(_)) && satisfies(v, op, bound)
        }
        (Atom::Cmp(qop, qv), Atom::Cmp(fop, fv)) => {
            if canonical_rank(qv) != canonical_rank(fv) {
                return false;
            }
            let ord = compare(qv, fv);
            match (*qop, *fop) {
                ("$gt", "$gt") | ("$gt", "$gte") | ("$gte", "$gte") => ord != Ordering::Less,
                ("$gte", "$gt") => ord == Ordering::Greater,
                ("$lt", "$lt") | ("$lt", "$lte") | ("$lte", "$lte") => ord != Ordering::Greater,
                ("$lte", "$lt") => ord == Ordering::Less,
                _ => false,
            }
        }
        (Atom::Other(qop, qv), Atom::Other(fop, fv)) => {
            qop == fop && crate::value::compare(qv, fv) == Ordering::Equal && same_value(qv, fv)
        }
        _ => false,
    }
}

/// Whether every document matching `query` matches the partial `filter`: each top-level
/// condition of the filter must be guaranteed by some top-level condition of the query on the
/// same path (a conservative version of mongod's `isSubsetOf`).
pub(crate) fn query_implies(query: &Document, filter: &Document) -> bool {
    let mut wanted = Vec::new();
    atoms(filter, &mut wanted);
    let mut have = Vec::new();
    atoms(query, &mut have);
    wanted.iter().all(|(path, f)| {
        have.iter()
            .any(|(qpath, q)| qpath == path && atom_implies(q, f))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn supported_filters_pass_and_others_are_named() {
        for ok in [
            doc! { "a": 1 },
            doc! { "a": { "$exists": true } },
            doc! { "a": { "$gte": 1, "$lt": 5 }, "b": { "$type": "string" } },
            doc! { "$or": [{ "a": 1 }, { "b": { "$gt": 2 } }] },
            doc! { "a": { "$in": [1, 2] } },
            doc! { "$and": [{ "a": 1 }, { "b": 2 }] },
        ] {
            assert_eq!(validate(&ok), Ok(()), "{ok}");
        }
        let refused = |f: Document| match validate(&f) {
            Err(r) => r.message(),
            Ok(()) => panic!("{f} accepted"),
        };
        assert_eq!(
            refused(doc! { "a": { "$exists": false } }),
            "Expression not supported in partial index: $not\n    a exists\n"
        );
        assert_eq!(
            refused(doc! { "a": { "$ne": 1 } }),
            "Expression not supported in partial index: $not\n    a $eq 1\n"
        );
        assert_eq!(
            refused(doc! { "a": { "$regex": "x" } }),
            "Expression not supported in partial index: a regex /x/\n"
        );
        assert_eq!(
            refused(doc! { "$nor": [{ "a": 1 }] }),
            "Expression not supported in partial index: $nor\n    a $eq 1\n"
        );
        assert_eq!(
            validate(&doc! { "$expr": { "$eq": ["$a", 1] } }),
            Err(Refusal::NotAllowed("$expr", 224))
        );
        let deep = doc! { "$or": [{ "$and": [{ "$or": [{ "$and": [{ "a": 1 }, { "b": 1 }] }, { "c": 1 }] }, { "d": 1 }] }, { "e": 1 }] };
        assert_eq!(validate(&deep), Err(Refusal::TooDeep));
    }

    #[test]
    fn queries_imply_filters_they_guarantee() {
        let f = doc! { "status": "active", "email": { "$exists": true } };
        assert!(query_implies(
            &doc! { "status": "active", "email": "a@x" },
            &f
        ));
        assert!(!query_implies(&doc! { "email": "a@x" }, &f));
        assert!(!query_implies(
            &doc! { "status": "gone", "email": "a@x" },
            &f
        ));
        assert!(!query_implies(
            &doc! { "status": "active", "email": null },
            &f
        ));
        let range = doc! { "qty": { "$gt": 5 } };
        assert!(query_implies(&doc! { "qty": 7 }, &range));
        assert!(query_implies(&doc! { "qty": { "$gte": 6 } }, &range));
        assert!(!query_implies(&doc! { "qty": 5 }, &range));
        assert!(!query_implies(&doc! { "qty": "7" }, &range));
        assert!(!query_implies(&doc! { "qty": { "$gte": 5 } }, &range));
        assert!(query_implies(
            &doc! { "$and": [{ "qty": { "$gt": 5 } }, { "x": 1 }] },
            &range
        ));
    }
}

//! Seeding an upserted document from the query: the filter's equality conditions become fields,
//! as mongod's `extractEqualityMatches` and `addEqualitiesToDoc` do.

use super::path;
use crate::error::{Error, ErrorCode, Result};
use bson::{Bson, Document};

/// The equality conditions of `filter` (`field: value`, `field: {$eq: value}`, a one-element
/// `$in`, and those inside `$and` or a one-clause `$or`), as `(path, value)` pairs.
pub(super) fn equalities(filter: &Document) -> Result<Vec<(String, Bson)>> {
    let mut found: Vec<(String, Bson)> = Vec::new();
    collect(filter, &mut found)?;
    Ok(found)
}

fn collect(filter: &Document, found: &mut Vec<(String, Bson)>) -> Result<()> {
    for (key, value) in filter {
        match key.as_str() {
            "$and" => collect_clauses(value, found)?,
            // The query optimiser collapses a one-clause $or into that clause.
            "$or" => {
                if matches!(value, Bson::Array(items) if items.len() == 1) {
                    collect_clauses(value, found)?;
                }
            }
            k if k.starts_with('$') => {}
            _ => match value {
                Bson::Document(d) if is_operator_document(d) => {
                    for (op, operand) in d {
                        match (op.as_str(), operand) {
                            ("$eq", v) => add(found, key, v.clone())?,
                            // `{a: {$in: [v]}}` is rewritten to `{a: {$eq: v}}` (not for regexes).
                            ("$in", Bson::Array(items))
                                if items.len() == 1
                                    && !matches!(items[0], Bson::RegularExpression(_)) =>
                            {
                                add(found, key, items[0].clone())?;
                            }
                            _ => {}
                        }
                    }
                }
                Bson::RegularExpression(_) => {}
                v => add(found, key, v.clone())?,
            },
        }
    }
    Ok(())
}

fn collect_clauses(value: &Bson, found: &mut Vec<(String, Bson)>) -> Result<()> {
    if let Bson::Array(clauses) = value {
        for clause in clauses {
            if let Bson::Document(d) = clause {
                collect(d, found)?;
            }
        }
    }
    Ok(())
}

fn is_operator_document(d: &Document) -> bool {
    d.keys().next().is_some_and(|k| k.starts_with('$'))
}

/// Records one equality, refusing two conditions on the same path or on a path and its prefix,
/// since the document to insert would be ambiguous.
fn add(found: &mut Vec<(String, Bson)>, key: &str, value: Bson) -> Result<()> {
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.is_empty() || p.starts_with('$')) {
        // Positional or malformed paths say nothing about the document to insert.
        return Ok(());
    }
    for (existing, _) in found.iter() {
        let other: Vec<&str> = existing.split('.').collect();
        let (shorter, longer) = if other.len() <= parts.len() {
            (&other, &parts)
        } else {
            (&parts, &other)
        };
        if shorter.iter().zip(longer.iter()).all(|(a, b)| a == b) {
            let message = if shorter.len() == longer.len() {
                format!("cannot infer query fields to set, path '{key}' is matched twice")
            } else {
                format!(
                    "cannot infer query fields to set, both paths '{}' and '{}' are matched",
                    longer.join("."),
                    shorter.join(".")
                )
            };
            return Err(Error::new(ErrorCode::NotSingleValueField, message));
        }
    }
    found.push((key.to_string(), value));
    Ok(())
}

/// Builds the seed document: equality paths in path order (mongod keeps them in an ordered map),
/// dotted paths as embedded documents.
pub(super) fn seed(mut equalities: Vec<(String, Bson)>) -> Result<Document> {
    equalities.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut root = Bson::Document(Document::new());
    for (key, value) in equalities {
        let parts = path::split(&key)?;
        let depth = path::existing_depth(&root, &parts);
        if depth == parts.len() {
            if let Some(slot) = path::get_mut(&mut root, &parts) {
                *slot = value;
            }
        } else {
            path::create(&mut root, &parts, depth, value)?;
        }
    }
    match root {
        Bson::Document(d) => Ok(d),
        _ => Err(Error::internal("upsert seed is not a document")),
    }
}

//! The parsed parts of a read (filter, sort, hint, skip, limit) that `find`, `count`,
//! `distinct`, `findAndModify`, `update`/`delete` statements, `aggregate`'s leading `$match`
//! and `explain` all hand to the collection's planner.

use super::args::Args;
use crate::collection::QuerySpec;
use crate::error::{Error, Result};
use crate::query::{Filter, SortSpec};
use bson::{Bson, Document};

/// The parsed parts of a read.
pub(crate) struct ReadSpec {
    pub filter: Filter,
    pub filter_doc: Document,
    pub sort: Option<SortSpec>,
    pub sort_doc: Option<Document>,
    pub hint: Option<Bson>,
    pub skip: usize,
    pub limit: Option<usize>,
}

impl ReadSpec {
    /// Filter (from `filter_field`), `sort` and `hint` of a command; no skip or limit.
    pub(crate) fn parse(
        args: &Args<'_>,
        filter_field: &str,
        vars: Option<&Document>,
    ) -> Result<ReadSpec> {
        let filter_doc = args.document(filter_field)?.cloned().unwrap_or_default();
        let (sort, sort_doc, hint) =
            sort_and_hint(args.document("sort")?, parse_hint(args, "hint")?)?;
        Ok(ReadSpec {
            filter: parse_filter(&filter_doc, vars)?,
            filter_doc,
            sort,
            sort_doc,
            hint,
            skip: 0,
            limit: None,
        })
    }

    pub(crate) fn query_spec(&self) -> QuerySpec<'_> {
        QuerySpec {
            filter: &self.filter,
            filter_doc: &self.filter_doc,
            sort: self.sort.as_ref(),
            sort_doc: self.sort_doc.as_ref(),
            hint: self.hint.as_ref(),
            skip: self.skip,
            limit: self.limit,
            projection: None,
        }
    }
}

/// The filter of a command, its `$expr` seeing the command's `let` variables when given.
pub(super) fn parse_filter(filter_doc: &Document, vars: Option<&Document>) -> Result<Filter> {
    match vars {
        Some(vars) => Filter::parse_with_vars(filter_doc, vars),
        None => Filter::parse(filter_doc),
    }
}

/// `sort` and `hint` parsed: `sort: {$natural: ±1}` is natural order, a collection scan forward
/// or backward, which the planner takes as that hint (unless one is given) with no sort.
pub(super) fn sort_and_hint(
    sort: Option<&Document>,
    hint: Option<Bson>,
) -> Result<(Option<SortSpec>, Option<Document>, Option<Bson>)> {
    let natural = sort.filter(|s| s.len() == 1 && s.contains_key("$natural"));
    let Some(natural) = natural else {
        let (sort, sort_doc) = parse_sort(sort)?;
        return Ok((sort, sort_doc, hint));
    };
    let forward = match natural.get("$natural").and_then(crate::value::to_f64) {
        Some(1.0) => true,
        Some(-1.0) => false,
        _ => {
            return Err(Error::location(
                17301,
                "$natural sort cannot be set to a value other than -1 or 1",
            ))
        }
    };
    let hint = hint.or_else(|| {
        Some(Bson::Document(
            bson::doc! { "$natural": if forward { 1 } else { -1 } },
        ))
    });
    Ok((None, None, hint))
}

/// A non-empty `sort` parsed, with the document as given (for `explain` and the planner).
fn parse_sort(sort: Option<&Document>) -> Result<(Option<SortSpec>, Option<Document>)> {
    match sort {
        Some(s) if !s.is_empty() => Ok((Some(SortSpec::parse(s)?), Some(s.clone()))),
        _ => Ok((None, None)),
    }
}

/// `hint`: an index name or key pattern.
pub(super) fn parse_hint(args: &Args<'_>, field: &str) -> Result<Option<Bson>> {
    match args.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(h @ (Bson::String(_) | Bson::Document(_))) => Ok(Some(h.clone())),
        Some(other) => Err(Error::failed_to_parse(format!(
            "hint must be a string or an object, got {other}"
        ))),
    }
}

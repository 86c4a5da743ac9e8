//! The query language: a filter document parsed once into a tree, then matched against documents
//! with MongoDB 7.0's semantics (implicit array traversal, null versus missing, type brackets,
//! and the matched array position that the positional `$` operator uses).
//!
//! Regular expressions are [`Pattern`]s: linear-time matching, with a bounded backtracking
//! engine for look-around and backreferences.

use crate::error::{Error, Result};
use crate::expression::Expression;
use crate::geospatial::{GeoPredicate, NearQuery};
use crate::path::{walk_path, walk_value, FieldPath, LeafArrays};
use crate::pattern::{Pattern, PatternError};
use crate::value::{
    canonical_rank, compare, is_truthy, to_f64, type_number, type_number_for_alias, Number,
};
use bson::{Bson, Document};
use std::cmp::Ordering;

thread_local! {
    /// The first `$expr` evaluation error of the match running on this thread (matching is
    /// synchronous, so the slot never mixes two queries).
    static EXPR_ERROR: std::cell::RefCell<Option<Error>> = const { std::cell::RefCell::new(None) };
}

/// A parsed query filter.
#[derive(Debug, Clone)]
pub struct Filter {
    root: Node,
}

impl Filter {
    /// Parse and validate a filter (unknown operators are errors, as in MongoDB).
    pub fn parse(filter: &Document) -> Result<Filter> {
        Self::parse_with_vars(filter, &Document::new())
    }

    /// Parse with `let` variables available to `$expr` as `$$name`.
    pub(crate) fn parse_with_vars(filter: &Document, vars: &Document) -> Result<Filter> {
        let root = parse_query(filter, Level::Top, vars)?;
        let mut texts = Vec::new();
        root.text_nodes(TextPlace::Top, &mut texts)?;
        if texts.len() > 1 {
            return Err(Error::bad_value("Too many text expressions"));
        }
        let mut nears = Vec::new();
        root.near_nodes(true, &mut nears);
        if nears.len() > 1 {
            return Err(Error::bad_value("Too many geoNear expressions"));
        }
        if nears.iter().any(|(_, _, top)| !top) {
            return Err(Error::bad_value("geoNear must be top-level expr"));
        }
        if !nears.is_empty() && !texts.is_empty() {
            return Err(Error::bad_value(
                "text and geoNear not allowed in same query",
            ));
        }
        Ok(Filter { root })
    }

    /// The filter's `$near`/`$nearSphere` (at most one, at the top level): its path and query.
    pub(crate) fn near(&self) -> Option<(&str, &NearQuery)> {
        let mut nears = Vec::new();
        self.root.near_nodes(true, &mut nears);
        nears
            .into_iter()
            .next()
            .map(|(path, near, _)| (path.dotted(), near))
    }

    /// The filter with its `$near` taken as satisfied: the collection checks the distance
    /// itself, in the units of the index that answers it.
    pub(crate) fn without_near(&self) -> Filter {
        Filter {
            root: self.root.without_near(),
        }
    }

    /// The filter's `$text` condition, with `true` when it applies to every result (it is at
    /// the top level or in a top-level `$and`) and `false` when it is one branch of an `$or`.
    pub(crate) fn text(&self) -> Option<(&crate::text::TextFilter, bool)> {
        let mut texts = Vec::new();
        self.root.text_nodes(TextPlace::Top, &mut texts).ok()?;
        texts
            .into_iter()
            .next()
            .map(|(t, place)| (t, place == TextPlace::Top))
    }

    pub fn matches(&self, doc: &Document) -> bool {
        self.root.matches(doc, None)
    }

    /// `None` when the document does not match; otherwise the first array position matched by
    /// the filter (what the positional `$` operator refers to), if any.
    pub fn matches_with_position(&self, doc: &Document) -> Option<Option<usize>> {
        let mut position = None;
        if self.root.matches(doc, Some(&mut position)) {
            Some(position)
        } else {
            None
        }
    }

    /// Like [`Filter::matches_with_position`], but an `$expr` whose evaluation fails is an error
    /// for the whole query, as in MongoDB, instead of a non-match.
    pub(crate) fn try_matches_with_position(
        &self,
        doc: &Document,
    ) -> Result<Option<Option<usize>>> {
        EXPR_ERROR.with(|slot| slot.borrow_mut().take());
        let outcome = self.matches_with_position(doc);
        match EXPR_ERROR.with(|slot| slot.borrow_mut().take()) {
            Some(e) => Err(e),
            None => Ok(outcome),
        }
    }

    /// True for the empty filter `{}` (or one holding only `$comment`): callers can skip matching.
    pub(crate) fn matches_everything(&self) -> bool {
        matches!(&self.root, Node::And(children) if children.is_empty())
    }

    /// The top-level fields the filter reads (the first part of each path), or `None` when it
    /// may read any field (`$expr`, `$text`). Matching a document that holds only these fields
    /// gives the same result, and the same array position, as matching the whole document.
    pub(crate) fn top_level_fields(&self) -> Option<Vec<String>> {
        let mut fields = Vec::new();
        self.root.top_level_fields(&mut fields)?;
        Some(fields)
    }

    /// The paths the filter reads (`metadata.published`), or `None` when it may read any field
    /// (`$expr`, `$text`, `$jsonSchema`). A condition on a path reads the value there and
    /// nothing outside it, so matching a document that holds the values at these paths (an
    /// embedded document on the way holding only the fields on the paths, see
    /// `StoredDoc::select_tree_into`) gives the same result, and the same array position, as
    /// matching the whole document.
    pub(crate) fn paths(&self) -> Option<Vec<&str>> {
        let mut paths = Vec::new();
        self.root.paths(&mut paths)?;
        Some(paths)
    }
}

/// A condition on one value: `$elemMatch` bodies, `$pull` conditions, `arrayFilters`.
///
/// Follows `$pull`: a document whose first key is a field operator (`{$gte: 6}`) applies to the
/// value itself (an array value is traversed, as a filter on a field would); a regex matches
/// strings; any other document is a query that only element documents can match (`{}` matches
/// every document); any other value is equality (`1` equals `1.0`).
#[derive(Debug, Clone)]
pub(crate) struct ElementMatcher {
    kind: ElementKind,
}

#[derive(Debug, Clone)]
enum ElementKind {
    Value(ValuePred),
    Query(Box<Node>),
    Equal(Bson),
}

impl ElementMatcher {
    pub(crate) fn parse(condition: &Bson) -> Result<ElementMatcher> {
        let kind = match condition {
            Bson::Document(d)
                if d.keys()
                    .next()
                    .is_some_and(|k| is_field_operator(k) || k == "$not") =>
            {
                ElementKind::Value(parse_operators("", d)?)
            }
            Bson::Document(d) => {
                ElementKind::Query(Box::new(parse_query(d, Level::Sub, &Document::new())?))
            }
            Bson::RegularExpression(r) => ElementKind::Value(ValuePred::Cond(Cond::Regex(
                Box::new(RegexCond::new(&r.pattern, &r.options)?),
            ))),
            other => ElementKind::Equal(other.clone()),
        };
        Ok(ElementMatcher { kind })
    }

    pub(crate) fn matches(&self, value: &Bson) -> bool {
        match &self.kind {
            ElementKind::Value(pred) => pred.matches_traversing(value),
            ElementKind::Query(node) => match value {
                Bson::Document(d) => node.matches(d, None),
                _ => false,
            },
            ElementKind::Equal(expected) => compare(value, expected) == Ordering::Equal,
        }
    }
}

/// The argument of an `$elemMatch`, for the `$elemMatch` projection: finds the first matching
/// element of an array.
#[derive(Debug, Clone)]
pub(crate) struct ElemMatchCondition {
    cond: Cond,
}

impl ElemMatchCondition {
    /// `argument` is the value of `$elemMatch` (a query on element documents, or operators on
    /// the elements themselves).
    pub(crate) fn parse(argument: &Bson) -> Result<ElemMatchCondition> {
        Ok(ElemMatchCondition {
            cond: parse_elem_match(argument)?,
        })
    }

    /// The position of the first element of `items` that matches.
    pub(crate) fn first_match(&self, items: &[Bson]) -> Option<usize> {
        let mut position = None;
        if self.cond.matches_array(items, &mut position) {
            position
        } else {
            None
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The tree

#[derive(Debug, Clone)]
enum Node {
    And(Vec<Node>),
    Or(Vec<Node>),
    Nor(Vec<Node>),
    Not(Box<Node>),
    Const(bool),
    Leaf {
        path: FieldPath,
        cond: Cond,
    },
    Expr(Box<ExprMatch>),
    /// `$text`: matched against the collection's text index definition once bound.
    Text(Box<crate::text::TextFilter>),
    /// `$jsonSchema`: the whole document against a schema.
    Schema(Box<super::schema::Schema>),
}

/// Where a `$text` sits in a filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TextPlace {
    Top,
    UnderOr,
}

impl Node {
    /// Collect the `$text` nodes; `$text` under `$nor` (or a negation) is MongoDB's error.
    fn text_nodes<'a>(
        &'a self,
        place: TextPlace,
        out: &mut Vec<(&'a crate::text::TextFilter, TextPlace)>,
    ) -> Result<()> {
        match self {
            Node::Text(t) => out.push((t, place)),
            Node::And(children) => {
                for child in children {
                    child.text_nodes(place, out)?;
                }
            }
            Node::Or(children) => {
                for child in children {
                    child.text_nodes(TextPlace::UnderOr, out)?;
                }
            }
            Node::Nor(children) => {
                let mut inner = Vec::new();
                for child in children {
                    child.text_nodes(TextPlace::UnderOr, &mut inner)?;
                }
                if !inner.is_empty() {
                    return Err(Error::bad_value("text expression not allowed in nor"));
                }
            }
            Node::Not(child) => {
                let mut inner = Vec::new();
                child.text_nodes(TextPlace::UnderOr, &mut inner)?;
                if !inner.is_empty() {
                    return Err(Error::bad_value("text expression not allowed in not"));
                }
            }
            Node::Const(_) | Node::Leaf { .. } | Node::Expr(_) | Node::Schema(_) => {}
        }
        Ok(())
    }
}

impl Node {
    /// Collect the `$near` leaves, each with whether it applies to every result (`top`: not
    /// under `$or`, `$nor` or a negation).
    fn near_nodes<'a>(&'a self, top: bool, out: &mut Vec<(&'a FieldPath, &'a NearQuery, bool)>) {
        match self {
            Node::Leaf {
                path,
                cond: Cond::Near(near),
            } => out.push((path, near, top)),
            Node::And(children) => children.iter().for_each(|c| c.near_nodes(top, out)),
            Node::Or(children) | Node::Nor(children) => {
                children.iter().for_each(|c| c.near_nodes(false, out))
            }
            Node::Not(child) => child.near_nodes(false, out),
            Node::Const(_)
            | Node::Leaf { .. }
            | Node::Expr(_)
            | Node::Text(_)
            | Node::Schema(_) => {}
        }
    }

    fn without_near(&self) -> Node {
        match self {
            Node::Leaf {
                cond: Cond::Near(_),
                ..
            } => Node::Const(true),
            Node::And(children) => Node::And(children.iter().map(Node::without_near).collect()),
            other => other.clone(),
        }
    }
}

#[derive(Debug, Clone)]
struct ExprMatch {
    expr: Expression,
    vars: Document,
}

/// Operators applied to one value, before they are bound to a path: a field's operator document
/// (`{$gt: 1, $ne: 5}`) and `$elemMatch` value bodies.
#[derive(Debug, Clone)]
enum ValuePred {
    Cond(Cond),
    Not(Box<ValuePred>),
    And(Vec<ValuePred>),
    Const(bool),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CmpOp {
    Eq,
    Gt,
    Gte,
    Lt,
    Lte,
}

/// A test of a single value (`None` = missing), MongoDB's `matchesSingleElement`.
#[derive(Debug, Clone)]
enum Cond {
    Cmp(CmpOp, Bson),
    In(Box<InList>),
    Exists,
    Type(TypeSet),
    Regex(Box<RegexCond>),
    Mod {
        divisor: i64,
        remainder: i64,
    },
    Bits(Box<super::bits::BitTest>),
    Size(usize),
    ElemMatchObject(Box<Node>),
    ElemMatchValue(Box<ValuePred>),
    /// `$geoWithin` / `$geoIntersects`: tests the whole value (a legacy pair is an array).
    Geo(Box<GeoPredicate>),
    /// `$near` / `$nearSphere`: the distance limits, in the units the query implies when no
    /// index says otherwise (the collection orders by distance and measures per index).
    Near(Box<NearQuery>),
}

#[derive(Debug, Clone)]
struct InList {
    /// Sorted in MongoDB's order for binary search.
    values: Vec<Bson>,
    has_null: bool,
    regexes: Vec<RegexCond>,
}

#[derive(Debug, Clone)]
struct TypeSet {
    all_numbers: bool,
    codes: Vec<i32>,
}

#[derive(Debug, Clone)]
struct RegexCond {
    pattern: String,
    options: String,
    regex: Pattern,
}

impl Node {
    /// Adds the paths this node reads to `out`; `None` when it may read any.
    fn paths<'a>(&'a self, out: &mut Vec<&'a str>) -> Option<()> {
        match self {
            Node::And(children) | Node::Or(children) | Node::Nor(children) => {
                for child in children {
                    child.paths(out)?;
                }
            }
            Node::Not(child) => child.paths(out)?,
            Node::Const(_) => {}
            Node::Leaf { path, .. } => {
                if !out.contains(&path.dotted()) {
                    out.push(path.dotted());
                }
            }
            Node::Expr(_) | Node::Text(_) | Node::Schema(_) => return None,
        }
        Some(())
    }

    /// Adds the top-level fields this node reads to `out`; `None` when it may read any.
    fn top_level_fields(&self, out: &mut Vec<String>) -> Option<()> {
        match self {
            Node::And(children) | Node::Or(children) | Node::Nor(children) => {
                for child in children {
                    child.top_level_fields(out)?;
                }
            }
            Node::Not(child) => child.top_level_fields(out)?,
            Node::Const(_) => {}
            Node::Leaf { path, .. } => {
                let head = path.head();
                if !out.iter().any(|f| f == head) {
                    out.push(head.to_string());
                }
            }
            Node::Expr(_) | Node::Text(_) | Node::Schema(_) => return None,
        }
        Some(())
    }
}

// ---------------------------------------------------------------------------------------------
// Matching

impl Node {
    /// `position` receives the matched array position (MongoDB's elemMatchKey) when wanted.
    fn matches(&self, doc: &Document, position: Option<&mut Option<usize>>) -> bool {
        match self {
            Node::And(children) => {
                let mut position = position;
                children
                    .iter()
                    .all(|child| child.matches(doc, position.as_deref_mut()))
            }
            // Like MongoDB, $or/$nor/$not do not report positions.
            Node::Or(children) => children.iter().any(|child| child.matches(doc, None)),
            Node::Nor(children) => !children.iter().any(|child| child.matches(doc, None)),
            Node::Not(child) => !child.matches(doc, None),
            Node::Const(value) => *value,
            Node::Leaf { path, cond } => {
                let mut found = None;
                let matched = walk_path(doc, path, cond.leaf_arrays(), &mut |value, offset| {
                    let mut inner = None;
                    if cond.matches(value, &mut inner) {
                        // The outermost implicit array position wins over $elemMatch's own.
                        found = offset.or(inner);
                        true
                    } else {
                        false
                    }
                });
                if matched {
                    if let (Some(out), Some(found)) = (position, found) {
                        *out = Some(found);
                    }
                }
                matched
            }
            Node::Expr(expr) => match expr.expr.evaluate(doc, &expr.vars) {
                Ok(Some(value)) => is_truthy(&value),
                Ok(None) => false,
                Err(e) => {
                    // Matching returns a bool; the error is kept for
                    // `Filter::try_matches_with_position` to report.
                    EXPR_ERROR.with(|slot| {
                        slot.borrow_mut().get_or_insert(e);
                    });
                    false
                }
            },
            Node::Text(text) => text.matches(doc),
            Node::Schema(schema) => schema.matches(doc),
        }
    }
}

impl ValuePred {
    fn into_node(self, path: &FieldPath) -> Node {
        match self {
            ValuePred::Cond(cond) => Node::Leaf {
                path: path.clone(),
                cond,
            },
            ValuePred::Not(inner) => Node::Not(Box::new(inner.into_node(path))),
            ValuePred::And(preds) => {
                Node::And(preds.into_iter().map(|p| p.into_node(path)).collect())
            }
            ValuePred::Const(value) => Node::Const(value),
        }
    }

    /// On one value without array traversal (`$elemMatch` value bodies).
    fn matches_single(&self, value: Option<&Bson>) -> bool {
        match self {
            ValuePred::Cond(cond) => cond.matches(value, &mut None),
            ValuePred::Not(inner) => !inner.matches_single(value),
            ValuePred::And(preds) => preds.iter().all(|p| p.matches_single(value)),
            ValuePred::Const(result) => *result,
        }
    }

    /// On one value as if it were a field's value (`$pull` conditions).
    fn matches_traversing(&self, value: &Bson) -> bool {
        match self {
            ValuePred::Cond(cond) => walk_value(value, cond.leaf_arrays(), &mut |v, _| {
                cond.matches(v, &mut None)
            }),
            ValuePred::Not(inner) => !inner.matches_traversing(value),
            ValuePred::And(preds) => preds.iter().all(|p| p.matches_traversing(value)),
            ValuePred::Const(result) => *result,
        }
    }
}

impl Cond {
    fn leaf_arrays(&self) -> LeafArrays {
        match self {
            Cond::Size(_)
            | Cond::ElemMatchObject(_)
            | Cond::ElemMatchValue(_)
            | Cond::Geo(_)
            | Cond::Near(_) => LeafArrays::NoTraversal,
            _ => LeafArrays::Traverse,
        }
    }

    fn matches(&self, value: Option<&Bson>, position: &mut Option<usize>) -> bool {
        match self {
            Cond::Cmp(op, rhs) => compare_matches(*op, rhs, value),
            Cond::In(list) => list.matches(value),
            Cond::Exists => value.is_some(),
            Cond::Type(types) => value.is_some_and(|v| types.matches(v)),
            Cond::Regex(regex) => value.is_some_and(|v| regex.matches(v)),
            Cond::Mod { divisor, remainder } => value
                .and_then(mod_operand_of_value)
                .is_some_and(|x| x.checked_rem(*divisor).unwrap_or(0) == *remainder),
            Cond::Bits(test) => value.is_some_and(|v| test.matches(v)),
            Cond::Size(n) => matches!(value, Some(Bson::Array(items)) if items.len() == *n),
            Cond::Geo(predicate) => predicate.matches(value),
            Cond::Near(near) => value
                .and_then(|v| near.closest(v, near.units(false)))
                .is_some_and(|(distance, _)| near.in_range(distance)),
            Cond::ElemMatchObject(_) | Cond::ElemMatchValue(_) => match value {
                Some(Bson::Array(items)) => self.matches_array(items, position),
                _ => false,
            },
        }
    }

    /// `$elemMatch` over the elements of an array; records the matching position.
    fn matches_array(&self, items: &[Bson], position: &mut Option<usize>) -> bool {
        for (i, item) in items.iter().enumerate() {
            let hit = match self {
                Cond::ElemMatchObject(query) => match item {
                    Bson::Document(d) => query.matches(d, None),
                    // An array element is matched as a document keyed "0", "1", ...
                    Bson::Array(inner) => query.matches(&array_as_document(inner), None),
                    _ => false,
                },
                Cond::ElemMatchValue(pred) => pred.matches_single(Some(item)),
                _ => return false,
            };
            if hit {
                *position = Some(i);
                return true;
            }
        }
        false
    }
}

fn array_as_document(items: &[Bson]) -> Document {
    items
        .iter()
        .enumerate()
        .map(|(i, v)| (i.to_string(), v.clone()))
        .collect()
}

/// MongoDB's comparison rules: values only compare within one type bracket, except that null,
/// undefined and missing are equal to each other, and MinKey/MaxKey bound everything.
fn compare_matches(op: CmpOp, rhs: &Bson, value: Option<&Bson>) -> bool {
    // Missing ranks with undefined, as in MongoDB's canonical types.
    let lhs_rank = value.map_or(canonical_rank(&Bson::Undefined), canonical_rank);
    let rhs_rank = canonical_rank(rhs);
    let null_rank = canonical_rank(&Bson::Null);
    let undefined_rank = canonical_rank(&Bson::Undefined);
    if lhs_rank != rhs_rank {
        let mut pair = [lhs_rank, rhs_rank];
        pair.sort_unstable();
        if pair == [undefined_rank, null_rank] {
            return matches!(op, CmpOp::Eq | CmpOp::Lte | CmpOp::Gte);
        }
        return match rhs {
            Bson::MaxKey => matches!(op, CmpOp::Lt | CmpOp::Lte),
            Bson::MinKey => matches!(op, CmpOp::Gt | CmpOp::Gte),
            _ => false,
        };
    }
    let Some(value) = value else {
        return false;
    };
    // NaN equals NaN but is neither greater nor less than any number.
    if let (Some(x), Some(y)) = (to_f64(value), to_f64(rhs)) {
        if x.is_nan() || y.is_nan() {
            let both = x.is_nan() && y.is_nan();
            return both && matches!(op, CmpOp::Eq | CmpOp::Lte | CmpOp::Gte);
        }
    }
    let ord = compare(value, rhs);
    match op {
        CmpOp::Eq => ord == Ordering::Equal,
        CmpOp::Gt => ord == Ordering::Greater,
        CmpOp::Gte => ord != Ordering::Less,
        CmpOp::Lt => ord == Ordering::Less,
        CmpOp::Lte => ord != Ordering::Greater,
    }
}

impl InList {
    fn matches(&self, value: Option<&Bson>) -> bool {
        match value {
            None | Some(Bson::Undefined) => self.has_null,
            Some(v) => {
                // The list was sorted bytewise when parsed; under a collation equal values
                // may sit anywhere in it.
                let found = if crate::collation::active() {
                    self.values
                        .iter()
                        .any(|probe| compare(probe, v) == Ordering::Equal)
                } else {
                    self.values
                        .binary_search_by(|probe| compare(probe, v))
                        .is_ok()
                };
                found || self.regexes.iter().any(|r| r.matches(v))
            }
        }
    }
}

impl TypeSet {
    fn matches(&self, value: &Bson) -> bool {
        (self.all_numbers && Number::from_bson(value).is_some())
            || self.codes.contains(&type_number(value))
    }
}

impl RegexCond {
    fn new(pattern: &str, options: &str) -> Result<RegexCond> {
        let regex = Pattern::new(pattern, options).map_err(|e| match e {
            PatternError::Flag(c) => {
                Error::location(51108, format!("invalid flag in regex options: {c}"))
            }
            PatternError::Syntax(e) => {
                Error::bad_value(format!("Regular expression /{pattern}/ is invalid: {e}"))
            }
        })?;
        Ok(RegexCond {
            pattern: pattern.to_string(),
            options: options.to_string(),
            regex,
        })
    }

    fn matches(&self, value: &Bson) -> bool {
        match value {
            Bson::String(s) | Bson::Symbol(s) => match self.regex.is_match(s) {
                Ok(matched) => matched,
                Err(e) => {
                    // Matching returns a bool; the error is kept for
                    // `Filter::try_matches_with_position` to report.
                    EXPR_ERROR.with(|slot| {
                        slot.borrow_mut().get_or_insert(e);
                    });
                    false
                }
            },
            Bson::RegularExpression(r) => r.pattern == self.pattern && r.options == self.options,
            _ => false,
        }
    }
}

/// A document value as `$mod` sees it: integers as they are, doubles truncated when they fit in
/// an int64 (others never match).
fn mod_operand_of_value(value: &Bson) -> Option<i64> {
    match Number::from_bson(value)? {
        Number::Int(i) => Some(i as i64),
        Number::Long(i) => Some(i),
        Number::Double(d) | Number::Decimal(d) => {
            if d.is_finite() && (-9.223372036854776e18..9.223372036854776e18).contains(&d) {
                Some(d.trunc() as i64)
            } else {
                None
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    /// The whole document (also inside top-level `$and`/`$or`/`$nor`): `$expr` is allowed.
    Top,
    /// Element documents under `$elemMatch` or `$pull`.
    Sub,
}

/// Operators that take a path (`{field: {$op: ...}}`), as MongoDB's keyword table lists them.
fn is_field_operator(name: &str) -> bool {
    matches!(
        name,
        "$eq"
            | "$ne"
            | "$gt"
            | "$gte"
            | "$lt"
            | "$lte"
            | "$in"
            | "$nin"
            | "$exists"
            | "$type"
            | "$mod"
            | "$size"
            | "$regex"
            | "$options"
            | "$elemMatch"
            | "$all"
            | "$near"
            | "$nearSphere"
            | "$geoNear"
            | "$geoWithin"
            | "$geoIntersects"
            | "$within"
            | "$bitsAllSet"
            | "$bitsAllClear"
            | "$bitsAnySet"
            | "$bitsAnyClear"
    )
}

/// Operators that stand where a field name would (`{$and: [...]}`).
fn is_top_level_operator(name: &str) -> bool {
    matches!(
        name,
        "$and"
            | "$or"
            | "$nor"
            | "$expr"
            | "$comment"
            | "$where"
            | "$text"
            | "$jsonSchema"
            | "$alwaysTrue"
            | "$alwaysFalse"
            | "$ref"
            | "$id"
            | "$db"
    )
}

fn is_dbref(d: &Document, allow_incomplete: bool) -> bool {
    let (r, i, db) = (
        d.contains_key("$ref"),
        d.contains_key("$id"),
        d.contains_key("$db"),
    );
    if allow_incomplete {
        r || i || db
    } else {
        r && i
    }
}

/// A document of operators (`{$gt: 1}`) rather than a value to compare with.
fn is_operator_document(d: &Document, allow_incomplete_dbref: bool) -> bool {
    d.keys().next().is_some_and(|k| k.starts_with('$')) && !is_dbref(d, allow_incomplete_dbref)
}

fn parse_query(filter: &Document, level: Level, vars: &Document) -> Result<Node> {
    let mut children = Vec::new();
    for (key, value) in filter {
        if key.starts_with('$') {
            if let Some(node) = parse_top_level_operator(key, value, level, vars)? {
                children.push(node);
            }
            continue;
        }
        children.push(parse_field(key, value)?);
    }
    Ok(if children.len() == 1 {
        children.pop().unwrap_or(Node::And(Vec::new()))
    } else {
        Node::And(children)
    })
}

fn parse_top_level_operator(
    key: &str,
    value: &Bson,
    level: Level,
    vars: &Document,
) -> Result<Option<Node>> {
    let node = match key {
        "$and" | "$or" | "$nor" => {
            let Bson::Array(items) = value else {
                return Err(Error::bad_value(format!("{key} must be an array")));
            };
            if items.is_empty() {
                return Err(Error::bad_value("$and/$or/$nor must be a nonempty array"));
            }
            let mut children = Vec::with_capacity(items.len());
            for item in items {
                let Bson::Document(sub) = item else {
                    return Err(Error::bad_value(
                        "$or/$and/$nor entries need to be full objects",
                    ));
                };
                children.push(parse_query(sub, level, vars)?);
            }
            match key {
                "$and" => Node::And(children),
                "$or" => Node::Or(children),
                _ => Node::Nor(children),
            }
        }
        "$expr" => {
            if level == Level::Sub {
                return Err(Error::bad_value(
                    "$expr can only be applied to the top-level document",
                ));
            }
            Node::Expr(Box::new(ExprMatch {
                expr: Expression::parse(value)?,
                vars: vars.clone(),
            }))
        }
        "$comment" => return Ok(None),
        "$alwaysTrue" | "$alwaysFalse" => {
            let is_one = Number::from_bson(value).and_then(Number::as_i64_exact) == Some(1);
            if !is_one {
                return Err(Error::failed_to_parse(format!(
                    "{key} must be an integer value of 1"
                )));
            }
            Node::Const(key == "$alwaysTrue")
        }
        "$text" => {
            if level == Level::Sub {
                return Err(Error::bad_value(
                    "$text can only be applied to the top-level document",
                ));
            }
            Node::Text(Box::new(crate::text::TextFilter::new(
                crate::text::TextSearch::parse(value)?,
            )))
        }
        "$where" => {
            return Err(crate::support::refuse(
                crate::support::Kind::QueryOperator,
                key,
            ))
        }
        "$jsonSchema" => {
            let Bson::Document(spec) = value else {
                return Err(Error::type_mismatch("$jsonSchema must be an object"));
            };
            Node::Schema(Box::new(super::schema::Schema::parse(spec)?))
        }
        // DBRef fields queried directly are plain equalities.
        "$ref" | "$id" | "$db" => Node::Leaf {
            path: FieldPath::new(key),
            cond: Cond::Cmp(CmpOp::Eq, value.clone()),
        },
        "$not" => {
            return Err(Error::bad_value(
                "unknown top level operator: $not. If you are trying to negate an entire \
                 expression, use $nor.",
            ))
        }
        _ => {
            return Err(Error::bad_value(format!(
                "unknown top level operator: {key}. If you have a field name that starts with a \
                 '$' symbol, consider using $getField or $setField."
            )))
        }
    };
    Ok(Some(node))
}

/// `{field: value}`: an operator document, a regex, or equality.
fn parse_field(key: &str, value: &Bson) -> Result<Node> {
    let path = FieldPath::new(key);
    Ok(match value {
        Bson::Document(d) if is_operator_document(d, false) => {
            parse_operators(key, d)?.into_node(&path)
        }
        Bson::RegularExpression(r) => Node::Leaf {
            path,
            cond: Cond::Regex(Box::new(RegexCond::new(&r.pattern, &r.options)?)),
        },
        _ => Node::Leaf {
            path,
            cond: comparison(CmpOp::Eq, key, value)?,
        },
    })
}

/// A field's operator document, e.g. `{$gte: 1, $lt: 5}` (each operator tests separately).
fn parse_operators(name: &str, ops: &Document) -> Result<ValuePred> {
    let mut preds = Vec::with_capacity(ops.len());
    for (op, arg) in ops {
        let pred = match op.as_str() {
            "$eq" => ValuePred::Cond(comparison(CmpOp::Eq, name, arg)?),
            "$ne" => {
                if matches!(arg, Bson::RegularExpression(_)) {
                    return Err(Error::bad_value("Can't have regex as arg to $ne."));
                }
                ValuePred::Not(Box::new(ValuePred::Cond(comparison(CmpOp::Eq, name, arg)?)))
            }
            "$gt" => ValuePred::Cond(comparison(CmpOp::Gt, name, arg)?),
            "$gte" => ValuePred::Cond(comparison(CmpOp::Gte, name, arg)?),
            "$lt" => ValuePred::Cond(comparison(CmpOp::Lt, name, arg)?),
            "$lte" => ValuePred::Cond(comparison(CmpOp::Lte, name, arg)?),
            "$in" => ValuePred::Cond(Cond::In(Box::new(parse_in(arg, "$in")?))),
            "$nin" => ValuePred::Not(Box::new(ValuePred::Cond(Cond::In(Box::new(parse_in(
                arg, "$nin",
            )?))))),
            "$exists" => {
                if is_truthy(arg) {
                    ValuePred::Cond(Cond::Exists)
                } else {
                    ValuePred::Not(Box::new(ValuePred::Cond(Cond::Exists)))
                }
            }
            "$type" => ValuePred::Cond(Cond::Type(parse_type(name, arg)?)),
            "$mod" => ValuePred::Cond(parse_mod(arg)?),
            "$size" => ValuePred::Cond(parse_size(arg)?),
            "$regex" => ValuePred::Cond(Cond::Regex(Box::new(parse_regex_document(ops)?))),
            "$options" => {
                if !ops.contains_key("$regex") {
                    return Err(Error::bad_value("$options needs a $regex"));
                }
                continue;
            }
            "$elemMatch" => ValuePred::Cond(parse_elem_match(arg)?),
            "$all" => parse_all(arg)?,
            "$not" => parse_not(name, arg)?,
            "$geoWithin" | "$within" | "$geoIntersects" => {
                ValuePred::Cond(Cond::Geo(Box::new(GeoPredicate::parse(op, arg)?)))
            }
            // `$geoNear` as a query operator is mongod's old spelling of `$near`.
            "$near" | "$nearSphere" | "$geoNear" => {
                ValuePred::Cond(Cond::Near(Box::new(NearQuery::parse(op, arg, ops)?)))
            }
            // Limits of a legacy `$near`, read with it.
            "$maxDistance" | "$minDistance"
                if ["$near", "$nearSphere", "$geoNear"]
                    .iter()
                    .any(|near| ops.contains_key(*near)) =>
            {
                continue
            }
            "$bitsAllSet" | "$bitsAllClear" | "$bitsAnySet" | "$bitsAnyClear" => {
                ValuePred::Cond(Cond::Bits(Box::new(super::bits::BitTest::parse(op, arg)?)))
            }
            "$where" => return Err(Error::bad_value("$where cannot be applied to a field")),
            _ => return Err(Error::bad_value(format!("unknown operator: {op}"))),
        };
        preds.push(pred);
    }
    Ok(if preds.len() == 1 {
        preds.pop().unwrap_or(ValuePred::And(Vec::new()))
    } else {
        ValuePred::And(preds)
    })
}

fn comparison(op: CmpOp, name: &str, arg: &Bson) -> Result<Cond> {
    if matches!(arg, Bson::Undefined) {
        return Err(Error::bad_value("cannot compare to undefined"));
    }
    if op != CmpOp::Eq && matches!(arg, Bson::RegularExpression(_)) {
        return Err(Error::bad_value(format!(
            "Can't have RegEx as arg to predicate over field '{name}'."
        )));
    }
    Ok(Cond::Cmp(op, arg.clone()))
}

fn parse_in(arg: &Bson, op: &str) -> Result<InList> {
    let Bson::Array(items) = arg else {
        return Err(Error::bad_value(format!("{op} needs an array")));
    };
    let mut list = InList {
        values: Vec::with_capacity(items.len()),
        has_null: false,
        regexes: Vec::new(),
    };
    for item in items {
        match item {
            Bson::Document(d) if is_operator_document(d, false) => {
                return Err(Error::bad_value(format!("cannot nest $ under {op}")))
            }
            Bson::RegularExpression(r) => {
                list.regexes.push(RegexCond::new(&r.pattern, &r.options)?)
            }
            Bson::Undefined => {
                return Err(Error::bad_value(
                    "InMatchExpression equality cannot be undefined",
                ))
            }
            other => {
                list.has_null |= matches!(other, Bson::Null);
                list.values.push(other.clone());
            }
        }
    }
    list.values.sort_by(compare);
    list.values
        .dedup_by(|a, b| compare(a, b) == Ordering::Equal);
    Ok(list)
}

fn parse_type(name: &str, arg: &Bson) -> Result<TypeSet> {
    let mut set = TypeSet {
        all_numbers: false,
        codes: Vec::new(),
    };
    let items: &[Bson] = match arg {
        Bson::Array(items) => items,
        single => std::slice::from_ref(single),
    };
    for item in items {
        match item {
            Bson::String(alias) if alias == "number" => set.all_numbers = true,
            Bson::String(alias) => match type_number_for_alias(alias) {
                Some(code) => set.codes.push(code),
                None => {
                    return Err(Error::bad_value(format!(
                        "Unknown type name alias: {alias}"
                    )))
                }
            },
            number if Number::from_bson(number).is_some() => {
                let code = Number::from_bson(number)
                    .and_then(Number::as_i64_exact)
                    .filter(|c| matches!(c, -1 | 1..=19 | 127));
                match code {
                    Some(code) => set.codes.push(code as i32),
                    None => {
                        return Err(Error::bad_value(format!(
                            "Invalid numerical type code: {number}"
                        )))
                    }
                }
            }
            _ => {
                return Err(Error::type_mismatch(
                    "type must be represented as a number or a string",
                ))
            }
        }
    }
    if !set.all_numbers && set.codes.is_empty() {
        return Err(Error::failed_to_parse(format!(
            "{name} must match at least one type"
        )));
    }
    Ok(set)
}

/// `$mod` arguments: integers, or doubles truncated toward zero (up to ±2^63 inclusive, with
/// 2^63 wrapping to the minimum int64 as MongoDB's conversion does).
fn mod_argument(value: &Bson, which: &str) -> Result<i64> {
    let number = Number::from_bson(value)
        .ok_or_else(|| Error::bad_value(format!("malformed mod, {which} not a number")))?;
    match number {
        Number::Int(i) => Ok(i as i64),
        Number::Long(i) => Ok(i),
        Number::Double(d) | Number::Decimal(d) => {
            let invalid = |why: &str| {
                Error::bad_value(format!(
                    "malformed mod, {which} value is invalid :: caused by :: {why}"
                ))
            };
            if !d.is_finite() {
                return Err(invalid("Unable to coerce NaN/Inf to integral type"));
            }
            const TWO_63: f64 = 9.223372036854776e18;
            if !(-TWO_63..=TWO_63).contains(&d) {
                return Err(invalid("Out of bounds coercing to integral value"));
            }
            Ok(if d == TWO_63 {
                i64::MIN
            } else {
                d.trunc() as i64
            })
        }
    }
}

fn parse_mod(arg: &Bson) -> Result<Cond> {
    let Bson::Array(items) = arg else {
        return Err(Error::bad_value("malformed mod, needs to be an array"));
    };
    if items.len() < 2 {
        return Err(Error::bad_value("malformed mod, not enough elements"));
    }
    if items.len() > 2 {
        return Err(Error::bad_value("malformed mod, too many elements"));
    }
    if Number::from_bson(&items[0]).is_none() {
        return Err(Error::bad_value("malformed mod, divisor not a number"));
    }
    if Number::from_bson(&items[1]).is_none() {
        return Err(Error::bad_value("malformed mod, remainder not a number"));
    }
    let divisor = mod_argument(&items[0], "divisor")?;
    let remainder = mod_argument(&items[1], "remainder")?;
    if divisor == 0 {
        return Err(Error::bad_value("divisor cannot be 0"));
    }
    Ok(Cond::Mod { divisor, remainder })
}

fn parse_size(arg: &Bson) -> Result<Cond> {
    let size: i64 = match arg {
        Bson::Int32(i) => *i as i64,
        Bson::Int64(i) => {
            if i32::try_from(*i).is_err() {
                return Err(Error::bad_value(
                    "$size must be representable as a 32-bit integer",
                ));
            }
            *i
        }
        Bson::Double(d) => {
            if d.fract() != 0.0 || !d.is_finite() || d.abs() > i32::MAX as f64 {
                return Err(Error::bad_value("$size must be a whole number"));
            }
            *d as i64
        }
        _ => return Err(Error::bad_value("$size needs a number")),
    };
    usize::try_from(size)
        .map(Cond::Size)
        .map_err(|_| Error::bad_value("$size may not be negative"))
}

/// `$regex` with its sibling `$options` (in either order; flags may also come from a BSON regex).
fn parse_regex_document(ops: &Document) -> Result<RegexCond> {
    let mut pattern = String::new();
    let mut options = String::new();
    for (key, value) in ops {
        match key.as_str() {
            "$regex" => match value {
                Bson::String(s) => pattern = s.clone(),
                Bson::RegularExpression(r) => {
                    pattern = r.pattern.clone();
                    if !r.options.is_empty() {
                        if !options.is_empty() {
                            return Err(Error::location(
                                51074,
                                "options set in both $regex and $options",
                            ));
                        }
                        options = r.options.clone();
                    }
                }
                _ => return Err(Error::bad_value("$regex has to be a string")),
            },
            "$options" => {
                let Bson::String(s) = value else {
                    return Err(Error::bad_value("$options has to be a string"));
                };
                if !options.is_empty() {
                    return Err(Error::location(
                        51075,
                        "options set in both $regex and $options",
                    ));
                }
                options = s.clone();
            }
            _ => {}
        }
    }
    RegexCond::new(&pattern, &options)
}

fn parse_elem_match(arg: &Bson) -> Result<Cond> {
    let Bson::Document(body) = arg else {
        return Err(Error::bad_value("$elemMatch needs an Object"));
    };
    // Operators on the elements themselves, unless the body starts with a logical operator
    // (whose children name fields of element documents).
    let value_case = is_operator_document(body, true)
        && body
            .keys()
            .next()
            .is_some_and(|k| !is_top_level_operator(k));
    if value_case {
        Ok(Cond::ElemMatchValue(Box::new(parse_operators("", body)?)))
    } else {
        let query = parse_query(body, Level::Sub, &Document::new())?;
        Ok(Cond::ElemMatchObject(Box::new(query)))
    }
}

fn parse_all(arg: &Bson) -> Result<ValuePred> {
    let Bson::Array(items) = arg else {
        return Err(Error::bad_value("$all needs an array"));
    };
    let first_key = |item: &Bson| match item {
        Bson::Document(d) => d.keys().next().cloned(),
        _ => None,
    };
    let mut preds = Vec::with_capacity(items.len());
    if items.first().and_then(first_key).as_deref() == Some("$elemMatch") {
        for item in items {
            match item {
                Bson::Document(d) if first_key(item).as_deref() == Some("$elemMatch") => {
                    let body = d.get("$elemMatch").unwrap_or(&Bson::Null);
                    preds.push(ValuePred::Cond(parse_elem_match(body)?));
                }
                _ => return Err(Error::bad_value("$all/$elemMatch has to be consistent")),
            }
        }
        return Ok(ValuePred::And(preds));
    }
    for item in items {
        match item {
            Bson::RegularExpression(r) => preds.push(ValuePred::Cond(Cond::Regex(Box::new(
                RegexCond::new(&r.pattern, &r.options)?,
            )))),
            Bson::Document(_) if first_key(item).is_some_and(|k| is_field_operator(&k)) => {
                return Err(Error::bad_value("no $ expressions in $all"))
            }
            other => preds.push(ValuePred::Cond(comparison(CmpOp::Eq, "", other)?)),
        }
    }
    // `$all: []` matches nothing.
    Ok(if preds.is_empty() {
        ValuePred::Const(false)
    } else {
        ValuePred::And(preds)
    })
}

fn parse_not(name: &str, arg: &Bson) -> Result<ValuePred> {
    match arg {
        Bson::RegularExpression(r) => Ok(ValuePred::Not(Box::new(ValuePred::Cond(Cond::Regex(
            Box::new(RegexCond::new(&r.pattern, &r.options)?),
        ))))),
        Bson::Document(d) if d.is_empty() => Err(Error::bad_value("$not cannot be empty")),
        Bson::Document(d) => Ok(ValuePred::Not(Box::new(parse_operators(name, d)?))),
        _ => Err(Error::bad_value("$not needs a regex or a document")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use bson::{bson, doc, Decimal128, Regex};

    fn matches(filter: Document, doc: Document) -> bool {
        Filter::parse(&filter)
            .unwrap_or_else(|e| panic!("{filter} should parse: {e}"))
            .matches(&doc)
    }

    fn parse_error(filter: Document) -> Error {
        match Filter::parse(&filter) {
            Ok(_) => panic!("{filter} should not parse"),
            Err(e) => e,
        }
    }

    fn position(filter: Document, doc: Document) -> Option<Option<usize>> {
        Filter::parse(&filter).unwrap().matches_with_position(&doc)
    }

    fn regex(pattern: &str, options: &str) -> Bson {
        Bson::RegularExpression(Regex {
            pattern: pattern.to_string(),
            options: options.to_string(),
        })
    }

    #[test]
    fn a_filter_names_the_paths_it_reads() {
        let paths = |d: Document| {
            Filter::parse(&d)
                .unwrap()
                .paths()
                .map(|p| p.into_iter().map(str::to_string).collect::<Vec<_>>())
        };
        assert_eq!(
            paths(doc! { "$or": [{ "m.live": true }, { "m.when": { "$lte": 3 } }], "a": 1 }),
            Some(vec!["m.live".to_string(), "m.when".into(), "a".into()])
        );
        assert_eq!(
            paths(doc! { "$nor": [{ "a.b": 1 }], "a.b": { "$ne": 2 } }),
            Some(vec!["a.b".to_string()])
        );
        assert_eq!(paths(doc! {}), Some(Vec::new()));
        assert_eq!(paths(doc! { "a": 1, "$expr": { "$eq": ["$b", 1] } }), None);
    }

    #[test]
    fn empty_filter_matches_every_document() {
        let filter = Filter::parse(&doc! {}).unwrap();
        assert!(filter.matches_everything());
        assert!(filter.matches(&doc! {"a": 1}));
        assert!(!Filter::parse(&doc! {"a": 1}).unwrap().matches_everything());
    }

    #[test]
    fn equality_matches_scalars_array_elements_and_whole_arrays() {
        assert!(matches(doc! {"a": 1}, doc! {"a": 1}));
        assert!(!matches(doc! {"a": 1}, doc! {"a": 2}));
        assert!(matches(doc! {"a": 2}, doc! {"a": [1, 2, 3]}));
        assert!(matches(doc! {"a": [1, 2]}, doc! {"a": [1, 2]}));
        assert!(!matches(doc! {"a": [2, 1]}, doc! {"a": [1, 2]}));
        assert!(matches(doc! {"a": [1, 2]}, doc! {"a": [[1, 2], 3]}));
        // Only one level of arrays is looked into.
        assert!(!matches(doc! {"a": 1}, doc! {"a": [[1, 2]]}));
        assert!(matches(doc! {"a": {"b": 1}}, doc! {"a": {"b": 1}}));
        assert!(!matches(doc! {"a": {"b": 1}}, doc! {"a": {"b": 1, "c": 2}}));
    }

    #[test]
    fn numbers_are_equal_across_numeric_types() {
        let dec: Decimal128 = "5".parse().unwrap();
        assert!(matches(doc! {"a": 5}, doc! {"a": 5.0}));
        assert!(matches(doc! {"a": 5_i64}, doc! {"a": 5}));
        assert!(matches(doc! {"a": dec}, doc! {"a": 5_i64}));
        assert!(matches(doc! {"a": {"$gt": 4.5}}, doc! {"a": 5_i64}));
        assert!(matches(doc! {"a": {"$lt": 5_i64}}, doc! {"a": 4.99}));
    }

    #[test]
    fn dotted_paths_walk_embedded_documents_and_arrays() {
        let d = doc! {"items": [{"qty": 1, "tags": ["x"]}, {"qty": 5, "tags": ["y", "z"]}]};
        assert!(matches(doc! {"items.qty": 5}, d.clone()));
        assert!(!matches(doc! {"items.qty": 3}, d.clone()));
        assert!(matches(doc! {"items.tags": "z"}, d.clone()));
        assert!(matches(doc! {"items.tags": ["y", "z"]}, d.clone()));
        assert!(matches(doc! {"a.b.c": 1}, doc! {"a": {"b": {"c": 1}}}));
        assert!(matches(doc! {"a.b.c": 1}, doc! {"a": [{"b": [{"c": 1}]}]}));
    }

    #[test]
    fn numeric_path_parts_address_positions_and_fields_named_with_digits() {
        let d = doc! {"items": [{"qty": 1}, {"qty": 5}]};
        assert!(matches(doc! {"items.0.qty": 1}, d.clone()));
        assert!(!matches(doc! {"items.0.qty": 5}, d.clone()));
        assert!(matches(doc! {"items.1.qty": 5}, d.clone()));
        assert!(matches(doc! {"a.0": 7}, doc! {"a": [7, 8]}));
        assert!(matches(doc! {"a.0": 7}, doc! {"a": {"0": 7}}));
        assert!(matches(doc! {"a.0": 7}, doc! {"a": [{"0": 7}]}));
        assert!(!matches(doc! {"a.5": 7}, doc! {"a": [7, 8]}));
    }

    #[test]
    fn null_matches_null_missing_and_undefined_but_not_empty_arrays() {
        let f = doc! {"a": null};
        assert!(matches(f.clone(), doc! {"a": null}));
        assert!(matches(f.clone(), doc! {"b": 1}));
        assert!(matches(f.clone(), doc! {"a": Bson::Undefined}));
        assert!(matches(f.clone(), doc! {"a": [1, null]}));
        assert!(!matches(f.clone(), doc! {"a": []}));
        assert!(!matches(f.clone(), doc! {"a": 0}));
        assert!(matches(doc! {"a": {"$eq": null}}, doc! {}));
    }

    #[test]
    fn dotted_null_follows_mongodb_null_semantics() {
        let f = doc! {"a.b": null};
        assert!(matches(f.clone(), doc! {"a": {}}));
        assert!(matches(f.clone(), doc! {"a": 4}));
        assert!(matches(f.clone(), doc! {"a": null}));
        assert!(matches(f.clone(), doc! {}));
        assert!(matches(f.clone(), doc! {"a": [{"b": 3}, {}]}));
        assert!(!matches(f.clone(), doc! {"a": [1, "string", 4]}));
        assert!(!matches(f.clone(), doc! {"a": []}));
        assert!(!matches(f.clone(), doc! {"a": [[]]}));
        assert!(!matches(f.clone(), doc! {"a": {"b": "hi"}}));
        assert!(matches(doc! {"a.b": {"$ne": null}}, doc! {"a": [1, 2]}));
    }

    #[test]
    fn ne_and_nin_negate_over_the_whole_array() {
        assert!(!matches(doc! {"a": {"$ne": 1}}, doc! {"a": [1, 2]}));
        assert!(matches(doc! {"a": {"$ne": 3}}, doc! {"a": [1, 2]}));
        assert!(matches(doc! {"a": {"$ne": 1}}, doc! {}));
        assert!(!matches(doc! {"a": {"$ne": null}}, doc! {}));
        assert!(!matches(doc! {"a": {"$nin": [2, 5]}}, doc! {"a": [1, 2]}));
        assert!(matches(doc! {"a": {"$nin": [3, 5]}}, doc! {"a": [1, 2]}));
        assert!(!matches(doc! {"a": {"$nin": [null]}}, doc! {}));
        assert_eq!(
            parse_error(doc! {"a": {"$ne": regex("x", "")}}).message,
            "Can't have regex as arg to $ne."
        );
        assert_eq!(
            parse_error(doc! {"a": {"$nin": 1}}).message,
            "$nin needs an array"
        );
    }

    #[test]
    fn comparisons_stay_within_one_type_bracket() {
        assert!(!matches(doc! {"a": {"$gt": 1}}, doc! {"a": "abc"}));
        assert!(!matches(doc! {"a": {"$lt": "a"}}, doc! {"a": 1}));
        assert!(matches(doc! {"a": {"$gte": "b"}}, doc! {"a": "c"}));
        assert!(!matches(doc! {"a": {"$gt": null}}, doc! {"a": 1}));
        assert!(matches(doc! {"a": {"$gt": 2}}, doc! {"a": [1, 3]}));
        // Each operator tests the array separately: 1 < 2 and 3 > 2.
        assert!(matches(
            doc! {"a": {"$gt": 2, "$lt": 2}},
            doc! {"a": [1, 3]}
        ));
        assert!(matches(doc! {"a": {"$lt": [2]}}, doc! {"a": [[1], 5]}));
        let early = bson::DateTime::from_millis(1);
        let late = bson::DateTime::from_millis(2);
        assert!(matches(doc! {"d": {"$lt": late}}, doc! {"d": early}));
        assert!(!matches(doc! {"d": {"$lt": 5}}, doc! {"d": early}));
    }

    #[test]
    fn null_comparisons_include_missing_only_for_inclusive_operators() {
        assert!(matches(doc! {"a": {"$gte": null}}, doc! {}));
        assert!(matches(doc! {"a": {"$lte": null}}, doc! {"a": null}));
        assert!(!matches(doc! {"a": {"$gt": null}}, doc! {}));
        assert!(!matches(doc! {"a": {"$lt": null}}, doc! {"a": null}));
    }

    #[test]
    fn minkey_and_maxkey_bound_every_value_including_missing() {
        assert!(matches(doc! {"a": {"$gt": Bson::MinKey}}, doc! {"a": "x"}));
        assert!(matches(doc! {"a": {"$gt": Bson::MinKey}}, doc! {}));
        assert!(matches(
            doc! {"a": {"$lt": Bson::MaxKey}},
            doc! {"a": {"b": 1}}
        ));
        assert!(!matches(doc! {"a": {"$gt": Bson::MaxKey}}, doc! {"a": 1}));
        assert!(!matches(
            doc! {"a": {"$gt": Bson::MinKey}},
            doc! {"a": Bson::MinKey}
        ));
        assert!(matches(
            doc! {"a": {"$gte": Bson::MinKey}},
            doc! {"a": Bson::MinKey}
        ));
        assert!(!matches(doc! {"a": Bson::MinKey}, doc! {"a": 1}));
    }

    #[test]
    fn nan_equals_nan_but_is_not_ordered() {
        assert!(matches(doc! {"a": f64::NAN}, doc! {"a": f64::NAN}));
        assert!(matches(
            doc! {"a": {"$gte": f64::NAN}},
            doc! {"a": f64::NAN}
        ));
        assert!(!matches(doc! {"a": {"$lt": 5}}, doc! {"a": f64::NAN}));
        assert!(!matches(doc! {"a": {"$gt": f64::NAN}}, doc! {"a": 5}));
    }

    #[test]
    fn regexes_are_not_allowed_in_ordering_comparisons() {
        let e = parse_error(doc! {"a": {"$gt": regex("x", "")}});
        assert_eq!(e.code, ErrorCode::BadValue);
        assert_eq!(
            e.message,
            "Can't have RegEx as arg to predicate over field 'a'."
        );
        // $eq with a regex compares regex values.
        assert!(matches(
            doc! {"a": {"$eq": regex("x", "i")}},
            doc! {"a": regex("x", "i")}
        ));
        assert!(!matches(
            doc! {"a": {"$eq": regex("x", "")}},
            doc! {"a": "x"}
        ));
        assert_eq!(
            parse_error(doc! {"a": Bson::Undefined}).message,
            "cannot compare to undefined"
        );
    }

    #[test]
    fn in_matches_values_regexes_null_and_whole_arrays() {
        let f = doc! {"a": {"$in": [1, "x", regex("^ab", ""), null, [7, 8]]}};
        assert!(matches(f.clone(), doc! {"a": 1.0}));
        assert!(matches(f.clone(), doc! {"a": [0, "x"]}));
        assert!(matches(f.clone(), doc! {"a": "abc"}));
        assert!(matches(f.clone(), doc! {}));
        assert!(matches(f.clone(), doc! {"a": [7, 8]}));
        assert!(!matches(f.clone(), doc! {"a": [8, 7]}));
        assert!(!matches(f, doc! {"a": 2}));
        assert!(!matches(doc! {"a": {"$in": []}}, doc! {"a": 1}));
        assert_eq!(
            parse_error(doc! {"a": {"$in": 1}}).message,
            "$in needs an array"
        );
        assert_eq!(
            parse_error(doc! {"a": {"$in": [{"$gt": 1}]}}).message,
            "cannot nest $ under $in"
        );
    }

    #[test]
    fn logical_operators_combine_subqueries() {
        let d = doc! {"a": 1, "b": 2};
        assert!(matches(doc! {"$and": [{"a": 1}, {"b": 2}]}, d.clone()));
        assert!(!matches(doc! {"$and": [{"a": 1}, {"b": 3}]}, d.clone()));
        assert!(matches(doc! {"$or": [{"a": 5}, {"b": 2}]}, d.clone()));
        assert!(!matches(doc! {"$or": [{"a": 5}, {"b": 5}]}, d.clone()));
        assert!(matches(doc! {"$nor": [{"a": 5}, {"b": 5}]}, d.clone()));
        assert!(!matches(doc! {"$nor": [{"a": 1}]}, d.clone()));
        assert!(matches(doc! {"$comment": "why", "a": 1}, d));
    }

    #[test]
    fn logical_operators_reject_malformed_arguments() {
        for op in ["$and", "$or", "$nor"] {
            let e = parse_error(doc! {op: []});
            assert_eq!(e.code, ErrorCode::BadValue);
            assert_eq!(e.message, "$and/$or/$nor must be a nonempty array");
            assert_eq!(
                parse_error(doc! {op: [1]}).message,
                "$or/$and/$nor entries need to be full objects"
            );
            assert_eq!(
                parse_error(doc! {op: {"a": 1}}).message,
                format!("{op} must be an array")
            );
        }
    }

    #[test]
    fn unknown_operators_are_bad_values() {
        let e = parse_error(doc! {"$foo": 1});
        assert_eq!(e.code, ErrorCode::BadValue);
        assert!(e.message.starts_with("unknown top level operator: $foo"));
        let e = parse_error(doc! {"a": {"$foo": 1}});
        assert_eq!(e.code, ErrorCode::BadValue);
        assert_eq!(e.message, "unknown operator: $foo");
        assert_eq!(
            parse_error(doc! {"a": {"$gt": 1, "b": 2}}).message,
            "unknown operator: b"
        );
        assert!(parse_error(doc! {"$not": {"a": 1}})
            .message
            .contains("use $nor"));
    }

    #[test]
    fn unsupported_operators_are_named_in_the_error() {
        // `$where` answers BadValue, as mongod's parser does without a JavaScript engine.
        let e = parse_error(doc! {"$where": "this.a == 1"});
        assert_eq!(e.code, ErrorCode::BadValue);
        assert!(e.message.contains("$where"), "{}", e.message);
    }

    #[test]
    fn geo_operators_test_the_whole_location_and_refuse_malformed_shapes() {
        let square =
            doc! { "type": "Polygon", "coordinates": [[[0, 0], [4, 0], [4, 4], [0, 4], [0, 0]]] };
        let within = doc! { "loc": { "$geoWithin": { "$geometry": square.clone() } } };
        assert!(matches(within.clone(), doc! { "loc": [1, 1] }));
        assert!(matches(
            within.clone(),
            doc! { "loc": { "type": "Point", "coordinates": [2, 2] } }
        ));
        assert!(!matches(within.clone(), doc! { "loc": [5, 1] }));
        assert!(!matches(within.clone(), doc! { "loc": "nowhere" }));
        assert!(matches(within, doc! { "loc": [[9, 9], [1, 1]] }));
        let intersects = doc! { "loc": { "$geoIntersects": { "$geometry": square } } };
        assert!(matches(
            intersects,
            doc! { "loc": { "type": "LineString", "coordinates": [[-1, 2], [5, 2]] } }
        ));
        let near = doc! { "loc": { "$near": [0, 0], "$maxDistance": 2 } };
        assert!(matches(near.clone(), doc! { "loc": [1, 1] }));
        assert!(!matches(near, doc! { "loc": [3, 3] }));
        for bad in [
            doc! {"loc": {"$geoWithin": {}}},
            doc! {"loc": {"$geoWithin": {"$geometry": {"type": "Point", "coordinates": [0, 0]}}}},
            doc! {"loc": {"$geoIntersects": {"$box": [[0, 0], [1, 1]]}}},
            doc! {"loc": {"$near": {"$geometry": {"type": "LineString", "coordinates": [[0, 0], [1, 1]]}}}},
            doc! {"loc": {"$near": [0, 0], "$maxDistance": -1}},
            doc! {"loc": {"$maxDistance": 1}},
            doc! {"$nor": [{"loc": {"$near": [0, 0]}}]},
            doc! {"loc": {"$not": {"$near": [0, 0]}}},
        ] {
            assert_eq!(parse_error(bad.clone()).code, ErrorCode::BadValue, "{bad}");
        }
    }

    #[test]
    fn not_negates_an_operator_document_or_a_regex() {
        let f = doc! {"a": {"$not": {"$gt": 5}}};
        assert!(matches(f.clone(), doc! {"a": 3}));
        assert!(matches(f.clone(), doc! {}));
        assert!(matches(f.clone(), doc! {"a": "x"}));
        assert!(!matches(f.clone(), doc! {"a": [1, 7]}));
        assert!(matches(
            doc! {"a": {"$not": regex("^x", "")}},
            doc! {"a": "yx"}
        ));
        assert!(!matches(
            doc! {"a": {"$not": {"$regex": "^x"}}},
            doc! {"a": "xy"}
        ));
        assert_eq!(
            parse_error(doc! {"a": {"$not": 5}}).message,
            "$not needs a regex or a document"
        );
        assert_eq!(
            parse_error(doc! {"a": {"$not": {}}}).message,
            "$not cannot be empty"
        );
    }

    #[test]
    fn exists_checks_presence_along_the_path() {
        assert!(matches(doc! {"a": {"$exists": true}}, doc! {"a": null}));
        assert!(!matches(doc! {"a": {"$exists": true}}, doc! {"b": 1}));
        assert!(matches(doc! {"a": {"$exists": false}}, doc! {"b": 1}));
        assert!(matches(doc! {"a": {"$exists": 0}}, doc! {"b": 1}));
        assert!(matches(
            doc! {"a.b": {"$exists": true}},
            doc! {"a": [{"c": 1}, {"b": 2}]}
        ));
        // Below an array of scalars there is nothing, so $exists: false matches.
        assert!(matches(
            doc! {"a.b": {"$exists": false}},
            doc! {"a": [1, 2]}
        ));
        assert!(!matches(
            doc! {"a.b": {"$exists": false}},
            doc! {"a": [{"b": 1}]}
        ));
        assert!(matches(doc! {"a": {"$exists": true}}, doc! {"a": []}));
    }

    #[test]
    fn type_accepts_names_numbers_the_number_alias_and_lists() {
        assert!(matches(doc! {"a": {"$type": "string"}}, doc! {"a": "x"}));
        assert!(matches(doc! {"a": {"$type": 2}}, doc! {"a": "x"}));
        assert!(matches(doc! {"a": {"$type": 2.0}}, doc! {"a": "x"}));
        assert!(!matches(doc! {"a": {"$type": "string"}}, doc! {"a": 1}));
        assert!(matches(doc! {"a": {"$type": "number"}}, doc! {"a": 1_i64}));
        assert!(matches(
            doc! {"a": {"$type": ["bool", "int"]}},
            doc! {"a": 3}
        ));
        assert!(matches(doc! {"a": {"$type": "array"}}, doc! {"a": []}));
        assert!(matches(doc! {"a": {"$type": "int"}}, doc! {"a": ["x", 1]}));
        assert!(matches(doc! {"a": {"$type": "null"}}, doc! {"a": null}));
        assert!(!matches(doc! {"a": {"$type": "null"}}, doc! {}));
        assert!(matches(
            doc! {"a": {"$type": "minKey"}},
            doc! {"a": Bson::MinKey}
        ));
        assert!(matches(doc! {"a": {"$type": -1}}, doc! {"a": Bson::MinKey}));
        assert_eq!(
            parse_error(doc! {"a": {"$type": "nope"}}).message,
            "Unknown type name alias: nope"
        );
        assert_eq!(
            parse_error(doc! {"a": {"$type": 99}}).message,
            "Invalid numerical type code: 99"
        );
        assert_eq!(
            parse_error(doc! {"a": {"$type": []}}).code,
            ErrorCode::FailedToParse
        );
        assert_eq!(
            parse_error(doc! {"a": {"$type": {}}}).code,
            ErrorCode::TypeMismatch
        );
    }

    #[test]
    fn regex_supports_options_bson_regexes_and_regex_values() {
        assert!(matches(doc! {"a": {"$regex": "^ab"}}, doc! {"a": "abc"}));
        assert!(!matches(doc! {"a": {"$regex": "^ab"}}, doc! {"a": "ABC"}));
        assert!(matches(
            doc! {"a": {"$regex": "^ab", "$options": "i"}},
            doc! {"a": "ABC"}
        ));
        assert!(matches(
            doc! {"a": {"$options": "i", "$regex": "^ab"}},
            doc! {"a": "ABC"}
        ));
        assert!(matches(doc! {"a": regex("^ab", "i")}, doc! {"a": "ABC"}));
        assert!(matches(
            doc! {"a": {"$regex": regex("^ab", "i")}},
            doc! {"a": "ABC"}
        ));
        assert!(matches(
            doc! {"a": {"$regex": "^b", "$options": "m"}},
            doc! {"a": "a\nb"}
        ));
        assert!(!matches(doc! {"a": {"$regex": "^b"}}, doc! {"a": "a\nb"}));
        assert!(matches(
            doc! {"a": {"$regex": "a.b", "$options": "s"}},
            doc! {"a": "a\nb"}
        ));
        assert!(!matches(doc! {"a": {"$regex": "a.b"}}, doc! {"a": "a\nb"}));
        assert!(matches(
            doc! {"a": {"$regex": "a b # comment", "$options": "x"}},
            doc! {"a": "ab"}
        ));
        assert!(matches(
            doc! {"a": {"$regex": "b"}},
            doc! {"a": ["x", "abc"]}
        ));
        assert!(!matches(doc! {"a": {"$regex": "1"}}, doc! {"a": 1}));
        assert!(matches(
            doc! {"a": regex("x", "i")},
            doc! {"a": regex("x", "i")}
        ));
        assert!(!matches(
            doc! {"a": regex("x", "i")},
            doc! {"a": regex("x", "")}
        ));
    }

    #[test]
    fn regex_errors_name_the_problem() {
        let e = parse_error(doc! {"a": {"$regex": "x", "$options": "z"}});
        assert_eq!(e.code, ErrorCode::Location(51108));
        assert_eq!(e.message, "invalid flag in regex options: z");
        let e = parse_error(doc! {"a": {"$regex": "(x)\\2"}});
        assert_eq!(e.code, ErrorCode::BadValue);
        assert!(e.message.contains("(x)\\2"), "{}", e.message);
        assert_eq!(
            parse_error(doc! {"a": {"$regex": "(x"}}).code,
            ErrorCode::BadValue
        );
        assert_eq!(
            parse_error(doc! {"a": {"$options": "i"}}).message,
            "$options needs a $regex"
        );
        assert_eq!(
            parse_error(doc! {"a": {"$regex": 5}}).message,
            "$regex has to be a string"
        );
        assert_eq!(
            parse_error(doc! {"a": {"$regex": regex("x", "i"), "$options": "m"}}).code,
            ErrorCode::Location(51075)
        );
    }

    #[test]
    fn mod_truncates_and_follows_the_dividend_sign() {
        assert!(matches(doc! {"a": {"$mod": [4, 0]}}, doc! {"a": 8}));
        assert!(!matches(doc! {"a": {"$mod": [4, 0]}}, doc! {"a": 9}));
        assert!(matches(doc! {"a": {"$mod": [4, 1]}}, doc! {"a": 9.7}));
        assert!(matches(doc! {"a": {"$mod": [4.9, 1.5]}}, doc! {"a": 9_i64}));
        assert!(matches(
            doc! {"a": {"$mod": [-100, 89]}},
            doc! {"a": 123456789}
        ));
        assert!(matches(
            doc! {"a": {"$mod": [100, -89]}},
            doc! {"a": -123456789}
        ));
        assert!(!matches(doc! {"a": {"$mod": [2, 0]}}, doc! {"a": "4"}));
        assert!(matches(doc! {"a": {"$mod": [2, 0]}}, doc! {"a": [3, 4]}));
        assert!(matches(doc! {"a": {"$mod": [-1, 0]}}, doc! {"a": i64::MIN}));
    }

    #[test]
    fn mod_rejects_malformed_arguments() {
        let cases = [
            (bson!(5), "malformed mod, needs to be an array"),
            (bson!([]), "malformed mod, not enough elements"),
            (bson!([1]), "malformed mod, not enough elements"),
            (bson!([1, 2, 3]), "malformed mod, too many elements"),
            (bson!(["1", 2]), "malformed mod, divisor not a number"),
            (bson!([1, "2"]), "malformed mod, remainder not a number"),
            (bson!([0, 1]), "divisor cannot be 0"),
            (
                bson!([f64::NAN, 1]),
                "malformed mod, divisor value is invalid :: caused by :: Unable to coerce NaN/Inf to integral type",
            ),
            (
                bson!([1.0e300, 1]),
                "malformed mod, divisor value is invalid :: caused by :: Out of bounds coercing to integral value",
            ),
        ];
        for (arg, message) in cases {
            let e = parse_error(doc! {"a": {"$mod": arg}});
            assert_eq!(e.code, ErrorCode::BadValue);
            assert_eq!(e.message, message);
        }
    }

    #[test]
    fn size_matches_only_arrays_of_that_length() {
        assert!(matches(doc! {"a": {"$size": 2}}, doc! {"a": [1, 2]}));
        assert!(matches(doc! {"a": {"$size": 2.0}}, doc! {"a": [1, 2]}));
        assert!(!matches(doc! {"a": {"$size": 1}}, doc! {"a": [1, 2]}));
        assert!(!matches(doc! {"a": {"$size": 1}}, doc! {"a": "x"}));
        assert!(!matches(doc! {"a": {"$size": 0}}, doc! {}));
        assert!(matches(doc! {"a": {"$size": 0}}, doc! {"a": []}));
        // The leaf array itself is measured, not its nested arrays...
        assert!(!matches(doc! {"a": {"$size": 2}}, doc! {"a": [[1, 2]]}));
        // ...but arrays along the way are traversed.
        assert!(matches(
            doc! {"a.b": {"$size": 2}},
            doc! {"a": [{"b": [1, 2]}]}
        ));
        assert_eq!(
            parse_error(doc! {"a": {"$size": "2"}}).message,
            "$size needs a number"
        );
        assert_eq!(
            parse_error(doc! {"a": {"$size": 1.5}}).message,
            "$size must be a whole number"
        );
        assert_eq!(
            parse_error(doc! {"a": {"$size": -1}}).message,
            "$size may not be negative"
        );
    }

    #[test]
    fn all_requires_every_value() {
        let d = doc! {"tags": ["a", "b", "c"]};
        assert!(matches(doc! {"tags": {"$all": ["a", "c"]}}, d.clone()));
        assert!(!matches(doc! {"tags": {"$all": ["a", "z"]}}, d.clone()));
        assert!(matches(
            doc! {"tags": {"$all": [regex("^b", "")]}},
            d.clone()
        ));
        assert!(!matches(doc! {"tags": {"$all": []}}, d.clone()));
        assert!(matches(doc! {"tags": {"$all": ["a"]}}, doc! {"tags": "a"}));
        assert!(matches(doc! {"a": {"$all": [[1, 2]]}}, doc! {"a": [1, 2]}));
        assert_eq!(
            parse_error(doc! {"a": {"$all": 1}}).message,
            "$all needs an array"
        );
        assert_eq!(
            parse_error(doc! {"a": {"$all": [{"$gt": 1}]}}).message,
            "no $ expressions in $all"
        );
    }

    #[test]
    fn all_of_elem_match_requires_each_condition_on_some_element() {
        let d = doc! {"qty": [{"size": "M", "num": 100}, {"size": "L", "num": 50}]};
        let f = doc! {"qty": {"$all": [
            {"$elemMatch": {"size": "M", "num": {"$gt": 50}}},
            {"$elemMatch": {"num": 50}},
        ]}};
        assert!(matches(f, d.clone()));
        let f = doc! {"qty": {"$all": [
            {"$elemMatch": {"size": "M", "num": {"$gt": 50}}},
            {"$elemMatch": {"num": 10}},
        ]}};
        assert!(!matches(f, d));
        assert_eq!(
            parse_error(doc! {"a": {"$all": [{"$elemMatch": {"b": 1}}, 5]}}).message,
            "$all/$elemMatch has to be consistent"
        );
    }

    #[test]
    fn elem_match_on_documents_needs_one_element_matching_everything() {
        let d = doc! {"results": [{"product": "abc", "score": 10}, {"product": "xyz", "score": 5}]};
        assert!(matches(
            doc! {"results": {"$elemMatch": {"product": "xyz", "score": {"$gte": 5}}}},
            d.clone()
        ));
        assert!(!matches(
            doc! {"results": {"$elemMatch": {"product": "xyz", "score": {"$gte": 8}}}},
            d.clone()
        ));
        // Without $elemMatch the conditions may be met by different elements.
        assert!(matches(
            doc! {"results.product": "xyz", "results.score": {"$gte": 8}},
            d.clone()
        ));
        assert!(matches(
            doc! {"results": {"$elemMatch": {"$or": [{"score": 10}, {"score": 99}]}}},
            d
        ));
        assert!(!matches(
            doc! {"a": {"$elemMatch": {"b": 1}}},
            doc! {"a": {"b": 1}}
        ));
        assert!(!matches(doc! {"a": {"$elemMatch": {}}}, doc! {"a": [1, 2]}));
        assert!(matches(doc! {"a": {"$elemMatch": {}}}, doc! {"a": [1, {}]}));
    }

    #[test]
    fn elem_match_on_values_tests_each_element_alone() {
        let f = doc! {"results": {"$elemMatch": {"$gte": 80, "$lt": 85}}};
        assert!(matches(f.clone(), doc! {"results": [82, 90]}));
        assert!(!matches(f.clone(), doc! {"results": [79, 90]}));
        assert!(!matches(f, doc! {"results": 82}));
        assert!(!matches(
            doc! {"a": {"$elemMatch": {"$eq": 1}}},
            doc! {"a": [[1]]}
        ));
        assert!(matches(
            doc! {"a": {"$elemMatch": {"$ne": null}}},
            doc! {"a": [null, 1]}
        ));
        assert!(!matches(
            doc! {"a": {"$elemMatch": {"$ne": null}}},
            doc! {"a": [null]}
        ));
        assert!(matches(
            doc! {"a": {"$elemMatch": {"$elemMatch": {"$eq": 3}}}},
            doc! {"a": [[1], [2, 3]]}
        ));
        assert_eq!(
            parse_error(doc! {"a": {"$elemMatch": 1}}).message,
            "$elemMatch needs an Object"
        );
        assert_eq!(
            parse_error(doc! {"a": {"$elemMatch": {"$expr": {"$eq": [1, 1]}}}}).message,
            "$expr can only be applied to the top-level document"
        );
    }

    #[test]
    fn matched_position_is_the_array_index_that_satisfied_the_filter() {
        assert_eq!(
            position(doc! {"grades": {"$gte": 85}}, doc! {"grades": [80, 85, 90]}),
            Some(Some(1))
        );
        assert_eq!(
            position(
                doc! {"items.qty": 5},
                doc! {"items": [{"qty": 1}, {"qty": 5}]}
            ),
            Some(Some(1))
        );
        assert_eq!(
            position(
                doc! {"items": {"$elemMatch": {"qty": {"$gt": 1}}}},
                doc! {"items": [{"qty": 1}, {"qty": 5}]}
            ),
            Some(Some(1))
        );
        // Nested arrays report the outermost position.
        assert_eq!(
            position(doc! {"a.b": 2}, doc! {"a": [{"b": [0]}, {"b": [1, 2]}]}),
            Some(Some(1))
        );
        assert_eq!(position(doc! {"a": [1, 2]}, doc! {"a": [1, 2]}), Some(None));
        assert_eq!(position(doc! {"a": 1}, doc! {"a": 1}), Some(None));
        assert_eq!(position(doc! {"a": 3}, doc! {"a": [1, 2]}), None);
        assert_eq!(
            position(
                doc! {"_id": 1, "grades": 90},
                doc! {"_id": 1, "grades": [80, 90]}
            ),
            Some(Some(1))
        );
        // $or does not report positions, as in MongoDB.
        assert_eq!(
            position(doc! {"$or": [{"a": 2}]}, doc! {"a": [1, 2]}),
            Some(None)
        );
    }

    #[test]
    fn always_true_and_always_false_take_the_value_one() {
        assert!(matches(doc! {"$alwaysTrue": 1}, doc! {}));
        assert!(!matches(doc! {"$alwaysFalse": 1}, doc! {}));
        assert_eq!(
            parse_error(doc! {"$alwaysTrue": 2}).code,
            ErrorCode::FailedToParse
        );
    }

    #[test]
    fn dbref_documents_are_compared_as_values() {
        let d = doc! {"r": {"$ref": "c", "$id": 1}};
        assert!(matches(doc! {"r": {"$ref": "c", "$id": 1}}, d.clone()));
        assert!(!matches(doc! {"r": {"$ref": "c", "$id": 2}}, d));
    }

    #[test]
    fn element_matcher_applies_operators_to_the_value_itself() {
        let m = ElementMatcher::parse(&bson!({"$gte": 6})).unwrap();
        assert!(m.matches(&bson!(6)));
        assert!(m.matches(&bson!(7.5)));
        assert!(!m.matches(&bson!(5)));
        assert!(!m.matches(&bson!("z")));
        let m = ElementMatcher::parse(&bson!({"$in": ["a", "b"]})).unwrap();
        assert!(m.matches(&bson!("b")));
        let m = ElementMatcher::parse(&regex("^x", "")).unwrap();
        assert!(m.matches(&bson!("xy")));
        assert!(!m.matches(&bson!("yx")));
    }

    #[test]
    fn element_matcher_queries_element_documents() {
        let m = ElementMatcher::parse(&bson!({"score": 8, "item": {"$regex": "^B"}})).unwrap();
        assert!(m.matches(&bson!({"item": "B", "score": 8, "extra": 1})));
        assert!(!m.matches(&bson!({"item": "A", "score": 8})));
        assert!(!m.matches(&bson!(8)));
        let any_doc = ElementMatcher::parse(&bson!({})).unwrap();
        assert!(any_doc.matches(&bson!({"a": 1})));
        assert!(!any_doc.matches(&bson!([1])));
        let logical = ElementMatcher::parse(&bson!({"$or": [{"a": 1}, {"b": 1}]})).unwrap();
        assert!(logical.matches(&bson!({"b": 1})));
    }

    #[test]
    fn element_matcher_compares_other_values_for_equality() {
        let m = ElementMatcher::parse(&bson!(5)).unwrap();
        assert!(m.matches(&bson!(5.0)));
        assert!(!m.matches(&bson!([5])));
        let m = ElementMatcher::parse(&bson!([1, 2])).unwrap();
        assert!(m.matches(&bson!([1, 2])));
        assert!(!m.matches(&bson!(1)));
    }

    #[test]
    fn a_mixed_collection_matches_like_mongodb() {
        let docs = [
            doc! {"_id": 1, "a": 1},
            doc! {"_id": 2, "a": [1, 2, 3]},
            doc! {"_id": 3, "a": null},
            doc! {"_id": 4},
            doc! {"_id": 5, "a": "1"},
            doc! {"_id": 6, "a": {"b": 1}},
            doc! {"_id": 7, "a": [{"b": 1}, {"b": 2}]},
            doc! {"_id": 8, "a": 2.5},
            doc! {"_id": 9, "a": 3_i64},
            doc! {"_id": 10, "a": []},
            doc! {"_id": 11, "a": [[1, 2]]},
        ];
        let cases: Vec<(Document, Vec<i32>)> = vec![
            (doc! {"a": 1}, vec![1, 2]),
            (doc! {"a": {"$gt": 1}}, vec![2, 8, 9]),
            (doc! {"a": null}, vec![3, 4]),
            (doc! {"a": {"$ne": 1}}, vec![3, 4, 5, 6, 7, 8, 9, 10, 11]),
            (doc! {"a": {"$nin": [1, null]}}, vec![5, 6, 7, 8, 9, 10, 11]),
            (doc! {"a.b": {"$gte": 2}}, vec![7]),
            (doc! {"a": {"$type": "array"}}, vec![2, 7, 10, 11]),
            (doc! {"a": {"$type": "number"}}, vec![1, 2, 8, 9]),
            (doc! {"a": [1, 2]}, vec![11]),
            (doc! {"a.1": 2}, vec![2]),
            (
                doc! {"a": {"$not": {"$gt": 1}}},
                vec![1, 3, 4, 5, 6, 7, 10, 11],
            ),
            (doc! {"a": {"$mod": [2, 1]}}, vec![1, 2, 9]),
        ];
        for (filter, expected) in cases {
            let f = Filter::parse(&filter).unwrap();
            let got: Vec<i32> = docs
                .iter()
                .filter(|d| f.matches(d))
                .map(|d| d.get_i32("_id").unwrap())
                .collect();
            assert_eq!(got, expected, "filter {filter}");
        }
    }

    #[test]
    fn elem_match_condition_finds_the_first_matching_element() {
        let c = ElemMatchCondition::parse(&bson!({"school": 102})).unwrap();
        let items = vec![
            bson!({"school": 100}),
            bson!({"school": 102, "age": 10}),
            bson!({"school": 102, "age": 11}),
        ];
        assert_eq!(c.first_match(&items), Some(1));
        assert_eq!(c.first_match(&items[..1]), None);
    }
}

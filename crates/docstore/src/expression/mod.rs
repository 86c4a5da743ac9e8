//! Aggregation expressions: parsed once into a tree (field paths, variables, literals, object and
//! array expressions, operators), then evaluated per document with MongoDB 7.0 semantics.
//!
//! Evaluation returns `Ok(None)` for a *missing* value, which MongoDB keeps distinct from `null`:
//! a missing field is left out of object expressions, becomes `null` inside arrays and compares
//! below `null`.
//!
//! A top-level module rather than part of `aggregation` because queries use it too (`$expr`):
//! both `aggregation` and `query` sit above it, and it uses neither.

use crate::error::{Error, ErrorCode, Result};
use crate::printing::{fmt_document, fmt_value, nullish};
use crate::value::{self, is_truthy};
use bson::{Bson, Document};
use operators::{Arity, OpFn};

mod date_ops;
mod dates;
pub(crate) mod operators;

/// A parsed expression.
#[derive(Debug, Clone)]
pub(crate) enum Expression {
    Literal(Bson),
    /// `"$a.b"`: a path into `$$CURRENT`.
    FieldPath(Vec<String>),
    /// `"$$name.a.b"`: a variable, optionally followed by a path into it.
    Variable(String, Vec<String>),
    Object(Vec<(String, Expression)>),
    Array(Vec<Expression>),
    Operator(Box<Operator>),
}

/// Operators, either evaluated from their evaluated arguments (`Call`) or with their own
/// evaluation rules (lazy arguments, named arguments, variables).
#[derive(Debug, Clone)]
pub(crate) enum Operator {
    Call {
        func: OpFn,
        args: Vec<Expression>,
    },
    And(Vec<Expression>),
    Or(Vec<Expression>),
    IfNull(Vec<Expression>),
    Cond {
        test: Expression,
        then: Expression,
        otherwise: Expression,
    },
    Switch {
        branches: Vec<(Expression, Expression)>,
        default: Option<Expression>,
    },
    Let {
        vars: Vec<(String, Expression)>,
        body: Expression,
    },
    Map {
        input: Expression,
        name: String,
        body: Expression,
    },
    Filter {
        input: Expression,
        name: String,
        cond: Expression,
        limit: Option<Expression>,
    },
    Reduce {
        input: Expression,
        initial: Expression,
        body: Expression,
    },
    Date(date_ops::DateOp),
    Trim {
        name: &'static str,
        input: Expression,
        chars: Option<Expression>,
    },
    RegexMatch {
        input: Expression,
        regex: Expression,
        options: Option<Expression>,
    },
    Replace {
        all: bool,
        input: Expression,
        find: Expression,
        replacement: Expression,
    },
    Convert {
        input: Expression,
        to: Expression,
        on_error: Option<Expression>,
        on_null: Option<Expression>,
    },
    /// `$getField`: a field by its literal name (which may hold `.` or start with `$`);
    /// `input` is `$$CURRENT` when absent.
    GetField {
        field: String,
        input: Option<Expression>,
    },
    /// `$setField` (with `value`) and `$unsetField` (`value` absent): a copy of `input` with
    /// that one field set or removed; a `value` evaluating to missing (`$$REMOVE`) removes it.
    SetField {
        op: &'static str,
        field: String,
        input: Expression,
        value: Option<Expression>,
    },
}

/// A variable bound by `$let`, `$map`, `$filter` or `$reduce`, chained to the enclosing ones.
struct Local<'a> {
    name: &'a str,
    /// `None` when the variable was bound to a missing value.
    value: Option<&'a Bson>,
    next: Option<&'a Local<'a>>,
}

/// What an expression can see while it is evaluated.
#[derive(Clone, Copy)]
pub(crate) struct Scope<'a> {
    root: &'a Document,
    vars: &'a Document,
    locals: Option<&'a Local<'a>>,
}

impl<'a> Scope<'a> {
    pub(crate) fn new(root: &'a Document, vars: &'a Document) -> Scope<'a> {
        Scope {
            root,
            vars,
            locals: None,
        }
    }

    fn lookup(&self, name: &str) -> Result<Option<Bson>> {
        let mut local = self.locals;
        while let Some(l) = local {
            if l.name == name {
                return Ok(l.value.cloned());
            }
            local = l.next;
        }
        match name {
            "ROOT" | "CURRENT" => {
                let mut root = self.root.clone();
                crate::text::strip_score(&mut root);
                Ok(Some(Bson::Document(root)))
            }
            "REMOVE" => Ok(None),
            "NOW" => Ok(Some(
                self.vars
                    .get("NOW")
                    .cloned()
                    .unwrap_or_else(|| Bson::DateTime(bson::DateTime::now())),
            )),
            "CLUSTER_TIME" => Err(Error::not_supported("$$CLUSTER_TIME")),
            _ => match self.vars.get(name) {
                Some(v) => Ok(Some(v.clone())),
                None if is_missing_variable(self.vars, name) => Ok(None),
                None => Err(Error::location(
                    17276,
                    format!("Use of undefined variable: {name}"),
                )),
            },
        }
    }
}

impl Expression {
    pub(crate) fn parse(expr: &Bson) -> Result<Expression> {
        match expr {
            Bson::String(s) if s.starts_with('$') => parse_path(s),
            Bson::Document(d) => parse_object(d),
            Bson::Array(items) => Ok(Expression::Array(
                items.iter().map(Expression::parse).collect::<Result<_>>()?,
            )),
            other => Ok(Expression::Literal(other.clone())),
        }
    }

    /// Evaluate with `$$ROOT`/`$$CURRENT` = `root` and user variables `vars` (`$$name`).
    /// A missing value evaluates to `None`.
    pub(crate) fn evaluate(&self, root: &Document, vars: &Document) -> Result<Option<Bson>> {
        self.eval(&Scope::new(root, vars))
    }

    pub(crate) fn eval(&self, scope: &Scope) -> Result<Option<Bson>> {
        match self {
            Expression::Literal(v) => Ok(Some(v.clone())),
            Expression::FieldPath(path) => Ok(path_in_document(scope.root, path)),
            Expression::Variable(name, path) => {
                let Some(value) = scope.lookup(name)? else {
                    return Ok(None);
                };
                Ok(path_in_value(value, path))
            }
            Expression::Object(fields) => {
                let mut out = Document::new();
                for (name, expr) in fields {
                    if let Some(v) = expr.eval(scope)? {
                        out.insert(name.clone(), v);
                    }
                }
                Ok(Some(Bson::Document(out)))
            }
            Expression::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(item.eval(scope)?.unwrap_or(Bson::Null));
                }
                Ok(Some(Bson::Array(out)))
            }
            Expression::Operator(op) => op.eval(scope),
        }
    }
}

/// Follow `path` from a value: documents by field, arrays element-wise (keeping only the
/// elements where the rest of the path exists), as MongoDB's `ExpressionFieldPath` does.
pub(crate) fn path_in_value(value: Bson, path: &[String]) -> Option<Bson> {
    if path.is_empty() {
        return Some(value);
    }
    match value {
        Bson::Document(d) => path_in_document(&d, path),
        Bson::Array(items) => Some(path_in_array(&items, path)),
        _ => None,
    }
}

pub(crate) fn path_in_document(doc: &Document, path: &[String]) -> Option<Bson> {
    let (first, rest) = path.split_first()?;
    let value = doc.get(first)?;
    if rest.is_empty() {
        return Some(value.clone());
    }
    match value {
        Bson::Document(d) => path_in_document(d, rest),
        Bson::Array(items) => Some(path_in_array(items, rest)),
        _ => None,
    }
}

fn path_in_array(items: &[Bson], path: &[String]) -> Bson {
    let mut out = Vec::new();
    for item in items {
        // Nested arrays and scalars are skipped, as in MongoDB.
        if let Bson::Document(d) = item {
            if let Some(v) = path_in_document(d, path) {
                out.push(v);
            }
        }
    }
    Bson::Array(out)
}

fn parse_path(s: &str) -> Result<Expression> {
    if let Some(var) = s.strip_prefix("$$") {
        let mut parts = var.split('.');
        let name = parts.next().unwrap_or_default();
        if name.is_empty() {
            return Err(Error::location(
                16869,
                "empty variable names are not allowed",
            ));
        }
        let rest = parts
            .map(validate_path_component)
            .collect::<Result<Vec<_>>>()?;
        return Ok(Expression::Variable(name.to_string(), rest));
    }
    let path = &s[1..];
    if path.is_empty() {
        return Err(Error::location(
            16872,
            "'$' by itself is not a valid FieldPath",
        ));
    }
    Ok(Expression::FieldPath(
        path.split('.')
            .map(validate_path_component)
            .collect::<Result<_>>()?,
    ))
}

fn validate_path_component(part: &str) -> Result<String> {
    if part.is_empty() {
        return Err(Error::location(
            15998,
            "FieldPath field names may not be empty strings.",
        ));
    }
    if part.starts_with('$') {
        return Err(Error::location(
            16410,
            format!(
                "FieldPath field names may not start with '$'. Consider using $getField or \
                 $setField. ('{part}')"
            ),
        ));
    }
    Ok(part.to_string())
}

/// The key, in a variables document, listing the command `let` variables whose expression
/// evaluated to a missing value (a document cannot hold "missing"). It starts with a space, so
/// it can never be a user variable's name.
pub(crate) const MISSING_VARIABLES: &str = " missing";

fn is_missing_variable(vars: &Document, name: &str) -> bool {
    matches!(vars.get(MISSING_VARIABLES), Some(Bson::Array(names))
        if names.iter().any(|n| n.as_str() == Some(name)))
}

/// A command's `let` document with each value evaluated as an expression, as MongoDB does
/// before the command examines any document: `{$literal: "$x"}` becomes the string `"$x"`,
/// `{$add: [10, 1]}` becomes 11. The expressions see no document (field paths are missing),
/// `$$NOW`, and the variables defined before them in the same `let`.
pub(crate) fn evaluate_let(vars: &Document) -> Result<Document> {
    let empty = Document::new();
    let mut out = Document::new();
    let mut missing = Vec::new();
    for (name, value) in vars {
        validate_variable_name(name)?;
        if reads_a_document(value) {
            return Err(Error::location(
                4890500,
                "Command let Expression tried to access a field, but this is not allowed \
                 because command let expressions run before the query examines any documents.",
            ));
        }
        let expr = Expression::parse(value)?;
        match expr.evaluate(&empty, &out)? {
            Some(v) => {
                out.insert(name.clone(), v);
            }
            None => missing.push(Bson::String(name.clone())),
        }
    }
    if !missing.is_empty() {
        out.insert(MISSING_VARIABLES, missing);
    }
    Ok(out)
}

/// Whether an expression as written reads the current document: a field path (`"$a"`) or
/// `$$ROOT`/`$$CURRENT`, outside `$literal`.
fn reads_a_document(expr: &Bson) -> bool {
    match expr {
        Bson::String(s) => {
            (s.starts_with('$') && !s.starts_with("$$"))
                || ["$$ROOT", "$$CURRENT"]
                    .iter()
                    .any(|v| s == v || s.starts_with(&format!("{v}.")))
        }
        Bson::Document(d) if d.contains_key("$literal") => false,
        Bson::Document(d) => d.values().any(reads_a_document),
        Bson::Array(items) => items.iter().any(reads_a_document),
        _ => false,
    }
}

/// User variable names start with a lowercase letter or a non-ASCII character and then contain
/// only letters, digits, `_` and non-ASCII characters.
pub(crate) fn validate_variable_name(name: &str) -> Result<()> {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return Err(Error::location(
            16869,
            "empty variable names are not allowed",
        ));
    };
    if first.is_ascii() && !first.is_ascii_lowercase() {
        return Err(Error::location(
            16870,
            format!("'{name}' starts with an invalid character for a user variable name"),
        ));
    }
    if let Some(bad) = chars.find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || !c.is_ascii())) {
        return Err(Error::location(
            16871,
            format!("'{name}' contains an invalid character for a variable name: '{bad}'"),
        ));
    }
    Ok(())
}

fn parse_object(d: &Document) -> Result<Expression> {
    if let Some(first) = d.keys().next() {
        if first.starts_with('$') {
            if d.len() != 1 {
                return Err(Error::location(
                    15983,
                    format!(
                        "an expression specification must contain exactly one field, the name \
                         of the expression. Found {} fields in {}",
                        d.len(),
                        fmt_document(d)
                    ),
                ));
            }
            let (name, arg) = d.iter().next().expect("one field");
            return parse_operator(name, arg);
        }
    }
    let mut fields = Vec::with_capacity(d.len());
    for (name, value) in d {
        if name.is_empty() {
            return Err(Error::location(
                16412,
                "FieldPath field names may not be empty strings.",
            ));
        }
        if name.starts_with('$') {
            return Err(Error::location(
                16410,
                format!(
                    "FieldPath field names may not start with '$'. Consider using $getField or \
                     $setField. ('{name}')"
                ),
            ));
        }
        if name.contains('.') {
            return Err(Error::location(
                16412,
                format!(
                    "FieldPath field names may not contain '.'. Consider using $getField or \
                     $setField. ('{name}')"
                ),
            ));
        }
        fields.push((name.clone(), Expression::parse(value)?));
    }
    Ok(Expression::Object(fields))
}

/// Arguments given as an array are the argument list; anything else is the only argument.
fn parse_args(arg: &Bson) -> Result<Vec<Expression>> {
    match arg {
        Bson::Array(items) => items.iter().map(Expression::parse).collect(),
        other => Ok(vec![Expression::parse(other)?]),
    }
}

fn check_arity(name: &str, arity: Arity, n: usize) -> Result<()> {
    match arity {
        Arity::Exact(k) if n != k => Err(Error::location(
            16020,
            format!("Expression {name} takes exactly {k} arguments. {n} were passed in."),
        )),
        Arity::AtLeast(k) if n < k => Err(Error::location(
            16021,
            format!("Expression {name} takes at least {k} arguments, and {n} were passed in."),
        )),
        Arity::Range(lo, hi) if n < lo || n > hi => Err(Error::location(
            28667,
            format!(
                "Expression {name} takes at least {lo} arguments, and at most {hi}, but {n} \
                 were provided."
            ),
        )),
        _ => Ok(()),
    }
}

/// The named arguments of an operator given as an object (`$map: {input, as, in}`), refusing
/// unknown ones with the operator's own error code.
fn named_args<'a>(
    op: &str,
    arg: &'a Bson,
    allowed: &[&str],
    not_object_code: i32,
    unknown_code: i32,
) -> Result<Vec<(&'a str, &'a Bson)>> {
    let Bson::Document(d) = arg else {
        return Err(Error::location(
            not_object_code,
            format!("{op} only supports an object as its argument"),
        ));
    };
    let mut out = Vec::new();
    for (k, v) in d {
        if !allowed.contains(&k.as_str()) {
            return Err(Error::location(
                unknown_code,
                format!("Unrecognized parameter to {op}: {k}"),
            ));
        }
        out.push((k.as_str(), v));
    }
    Ok(out)
}

fn find<'a>(args: &[(&str, &'a Bson)], name: &str) -> Option<&'a Bson> {
    args.iter().find(|(k, _)| *k == name).map(|(_, v)| *v)
}

fn parse_operator(name: &str, arg: &Bson) -> Result<Expression> {
    let op = match name {
        "$literal" => return Ok(Expression::Literal(arg.clone())),
        // A document's text score travels in a hidden field of the pipeline's documents (see
        // `crate::text::SCORE_FIELD`), so reading it is reading that field.
        "$meta" => {
            return match arg {
                Bson::String(m) if m == "textScore" => Ok(Expression::FieldPath(vec![
                    crate::text::SCORE_FIELD.to_string(),
                ])),
                Bson::String(m) => Err(Error::not_supported(format!("$meta: \"{m}\""))),
                other => Err(Error::location(
                    17308,
                    format!("Unsupported argument to $meta: {other}"),
                )),
            }
        }
        "$and" => Operator::And(parse_args(arg)?),
        "$or" => Operator::Or(parse_args(arg)?),
        "$ifNull" => {
            let args = parse_args(arg)?;
            if args.len() < 2 {
                return Err(Error::location(
                    1257300,
                    format!("$ifNull needs at least two arguments, had: {}", args.len()),
                ));
            }
            Operator::IfNull(args)
        }
        "$cond" => parse_cond(arg)?,
        "$switch" => parse_switch(arg)?,
        "$let" => parse_let(arg)?,
        "$map" => {
            let args = named_args("$map", arg, &["input", "as", "in"], 16878, 16879)?;
            let input = find(&args, "input")
                .ok_or_else(|| Error::location(16880, "Missing 'input' parameter to $map"))?;
            let body = find(&args, "in")
                .ok_or_else(|| Error::location(16882, "Missing 'in' parameter to $map"))?;
            let name = bound_name(find(&args, "as"), "this")?;
            Operator::Map {
                input: Expression::parse(input)?,
                name,
                body: Expression::parse(body)?,
            }
        }
        "$filter" => {
            let args = named_args(
                "$filter",
                arg,
                &["input", "as", "cond", "limit"],
                28646,
                28647,
            )?;
            let input = find(&args, "input")
                .ok_or_else(|| Error::location(28648, "Missing 'input' parameter to $filter"))?;
            let cond = find(&args, "cond")
                .ok_or_else(|| Error::location(28650, "Missing 'cond' parameter to $filter"))?;
            let name = bound_name(find(&args, "as"), "this")?;
            Operator::Filter {
                input: Expression::parse(input)?,
                name,
                cond: Expression::parse(cond)?,
                limit: find(&args, "limit").map(Expression::parse).transpose()?,
            }
        }
        "$reduce" => {
            let args = named_args(
                "$reduce",
                arg,
                &["input", "initialValue", "in"],
                40075,
                40076,
            )?;
            let input = find(&args, "input").ok_or_else(|| {
                Error::location(40077, "$reduce requires 'input' to be specified")
            })?;
            let initial = find(&args, "initialValue").ok_or_else(|| {
                Error::location(40078, "$reduce requires 'initialValue' to be specified")
            })?;
            let body = find(&args, "in")
                .ok_or_else(|| Error::location(40079, "$reduce requires 'in' to be specified"))?;
            Operator::Reduce {
                input: Expression::parse(input)?,
                initial: Expression::parse(initial)?,
                body: Expression::parse(body)?,
            }
        }
        "$trim" | "$ltrim" | "$rtrim" => {
            let op_name: &'static str = match name {
                "$trim" => "$trim",
                "$ltrim" => "$ltrim",
                _ => "$rtrim",
            };
            let Bson::Document(_) = arg else {
                return Err(Error::location(
                    50696,
                    format!(
                        "{op_name} only supports an object as an argument, found: {}",
                        value::type_name(arg)
                    ),
                ));
            };
            let args = named_args(op_name, arg, &["input", "chars"], 50696, 50694)?;
            let input = find(&args, "input").ok_or_else(|| {
                Error::location(50695, format!("{op_name} requires an 'input' field"))
            })?;
            Operator::Trim {
                name: op_name,
                input: Expression::parse(input)?,
                chars: find(&args, "chars").map(Expression::parse).transpose()?,
            }
        }
        "$regexMatch" => {
            let Bson::Document(_) = arg else {
                return Err(Error::location(
                    51103,
                    format!(
                        "$regexMatch expects an object of named arguments but found: {}",
                        value::type_name(arg)
                    ),
                ));
            };
            let args = named_args(
                "$regexMatch",
                arg,
                &["input", "regex", "options"],
                51103,
                31024,
            )?;
            let input = find(&args, "input")
                .ok_or_else(|| Error::location(31022, "$regexMatch requires 'input' parameter"))?;
            let regex = find(&args, "regex")
                .ok_or_else(|| Error::location(31023, "$regexMatch requires 'regex' parameter"))?;
            Operator::RegexMatch {
                input: Expression::parse(input)?,
                regex: Expression::parse(regex)?,
                options: find(&args, "options").map(Expression::parse).transpose()?,
            }
        }
        "$replaceOne" | "$replaceAll" => {
            let all = name == "$replaceAll";
            let op_name = if all { "$replaceAll" } else { "$replaceOne" };
            let args = named_args(
                op_name,
                arg,
                &["input", "find", "replacement"],
                51751,
                51750,
            )?;
            let get = |field: &str| {
                find(&args, field).ok_or_else(|| {
                    Error::location(
                        51749,
                        format!("{op_name} requires '{field}' to be specified"),
                    )
                })
            };
            Operator::Replace {
                all,
                input: Expression::parse(get("input")?)?,
                find: Expression::parse(get("find")?)?,
                replacement: Expression::parse(get("replacement")?)?,
            }
        }
        "$convert" => {
            let args = named_args(
                "$convert",
                arg,
                &["input", "to", "onError", "onNull"],
                ErrorCode::FailedToParse.code(),
                ErrorCode::FailedToParse.code(),
            )
            .map_err(|e| Error::failed_to_parse(e.message))?;
            let input = find(&args, "input")
                .ok_or_else(|| Error::failed_to_parse("Missing 'input' parameter to $convert"))?;
            let to = find(&args, "to")
                .ok_or_else(|| Error::failed_to_parse("Missing 'to' parameter to $convert"))?;
            Operator::Convert {
                input: Expression::parse(input)?,
                to: Expression::parse(to)?,
                on_error: find(&args, "onError").map(Expression::parse).transpose()?,
                on_null: find(&args, "onNull").map(Expression::parse).transpose()?,
            }
        }
        "$rand" => {
            // `{$rand: {}}`: mongod takes no arguments (an empty object or array).
            let empty = match arg {
                Bson::Document(d) => d.is_empty(),
                Bson::Array(a) => a.is_empty(),
                _ => false,
            };
            if !empty {
                return Err(Error::location(
                    3040501,
                    "$rand does not currently accept arguments",
                ));
            }
            Operator::Call {
                func: operators::random,
                args: Vec::new(),
            }
        }
        "$getField" => parse_get_field(arg)?,
        "$setField" => parse_set_field("$setField", arg)?,
        "$unsetField" => parse_set_field("$unsetField", arg)?,
        _ => {
            if let Some(date_op) = date_ops::parse(name, arg)? {
                Operator::Date(date_op)
            } else if let Some((static_name, func, arity)) = operators::lookup(name) {
                let args = parse_args(arg)?;
                check_arity(static_name, arity, args.len())?;
                Operator::Call { func, args }
            } else if let Some(refusal) =
                crate::support::refusal(crate::support::Kind::Expression, name)
            {
                return Err(refusal);
            } else {
                return Err(Error::new(
                    ErrorCode::InvalidPipelineOperator,
                    format!("Unrecognized expression '{name}'"),
                ));
            }
        }
    };
    Ok(Expression::Operator(Box::new(op)))
}

/// The `field` argument of `$getField`/`$setField`/`$unsetField`: an expression that must be
/// a constant string (a `$`-prefixed name is written inside `$literal`), as mongod requires.
fn constant_field_name(op: &str, field: &Bson, codes: (i32, i32)) -> Result<String> {
    match Expression::parse(field)? {
        Expression::Literal(Bson::String(s)) => Ok(s),
        Expression::Literal(other) => Err(Error::location(
            codes.1,
            format!(
                "{op} requires 'field' to evaluate to type String, but got {}",
                value::type_name(&other)
            ),
        )),
        _ => Err(Error::location(
            codes.0,
            format!(
                "{op} requires 'field' to evaluate to a constant, but got a non-constant argument"
            ),
        )),
    }
}

/// `{$getField: "name"}` or `{$getField: {field, input}}`.
fn parse_get_field(arg: &Bson) -> Result<Operator> {
    const CODES: (i32, i32) = (5654601, 5654602);
    let (field, input) = match arg {
        Bson::Document(d) if !d.keys().next().is_some_and(|k| k.starts_with('$')) => {
            let mut field = None;
            let mut input = None;
            for (k, v) in d {
                match k.as_str() {
                    "field" => field = Some(v),
                    "input" => input = Some(Expression::parse(v)?),
                    other => {
                        return Err(Error::location(
                            3041701,
                            format!("$getField found an unknown argument: {other}"),
                        ))
                    }
                }
            }
            let field = field.ok_or_else(|| {
                Error::location(3041702, "$getField requires 'field' to be specified")
            })?;
            (constant_field_name("$getField", field, CODES)?, input)
        }
        other => (constant_field_name("$getField", other, CODES)?, None),
    };
    Ok(Operator::GetField { field, input })
}

/// `{$setField: {field, input, value}}` and `{$unsetField: {field, input}}`.
fn parse_set_field(op: &'static str, arg: &Bson) -> Result<Operator> {
    let Bson::Document(d) = arg else {
        return Err(Error::location(
            4161100,
            format!("{op} only supports an object as its argument"),
        ));
    };
    let allowed: &[&str] = if op == "$setField" {
        &["field", "input", "value"]
    } else {
        &["field", "input"]
    };
    if let Some(k) = d.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(Error::location(
            4161101,
            format!("{op} found an unknown argument: {k}"),
        ));
    }
    let required = |name: &str, code: i32| {
        d.get(name)
            .ok_or_else(|| Error::location(code, format!("{op} requires '{name}' to be specified")))
    };
    let field = constant_field_name(op, required("field", 4161102)?, (4161106, 4161107))?;
    let input = Expression::parse(required("input", 4161103)?)?;
    let value = if op == "$setField" {
        Some(Expression::parse(required("value", 4161104)?)?)
    } else {
        None
    };
    Ok(Operator::SetField {
        op,
        field,
        input,
        value,
    })
}

/// The object `$getField`/`$setField` work on; `None` when it is null or missing (they then
/// answer null).
fn field_input(op: &str, input: Option<Bson>, code: i32) -> Result<Option<Document>> {
    match input {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(None),
        Some(Bson::Document(d)) => Ok(Some(d)),
        Some(other) => Err(Error::location(
            code,
            format!(
                "{op} requires 'input' to evaluate to type Object, but got {}",
                value::type_name(&other)
            ),
        )),
    }
}

fn bound_name(as_field: Option<&Bson>, default: &str) -> Result<String> {
    match as_field {
        None => Ok(default.to_string()),
        Some(Bson::String(s)) => {
            validate_variable_name(s)?;
            Ok(s.clone())
        }
        Some(other) => Err(Error::location(
            16866,
            format!(
                "invalid parameter: expected a string for 'as', found {}",
                value::type_name(other)
            ),
        )),
    }
}

fn parse_cond(arg: &Bson) -> Result<Operator> {
    match arg {
        Bson::Document(d) => {
            let mut test = None;
            let mut then = None;
            let mut otherwise = None;
            for (k, v) in d {
                match k.as_str() {
                    "if" => test = Some(Expression::parse(v)?),
                    "then" => then = Some(Expression::parse(v)?),
                    "else" => otherwise = Some(Expression::parse(v)?),
                    _ => {
                        return Err(Error::location(
                            17083,
                            format!("Unrecognized parameter to $cond: {k}"),
                        ))
                    }
                }
            }
            Ok(Operator::Cond {
                test: test
                    .ok_or_else(|| Error::location(17080, "Missing 'if' parameter to $cond"))?,
                then: then
                    .ok_or_else(|| Error::location(17081, "Missing 'then' parameter to $cond"))?,
                otherwise: otherwise
                    .ok_or_else(|| Error::location(17082, "Missing 'else' parameter to $cond"))?,
            })
        }
        other => {
            let mut args = parse_args(other)?;
            check_arity("$cond", Arity::Exact(3), args.len())?;
            let otherwise = args.pop().expect("three arguments");
            let then = args.pop().expect("three arguments");
            let test = args.pop().expect("three arguments");
            Ok(Operator::Cond {
                test,
                then,
                otherwise,
            })
        }
    }
}

fn parse_switch(arg: &Bson) -> Result<Operator> {
    let Bson::Document(d) = arg else {
        return Err(Error::location(
            40060,
            format!(
                "$switch requires an object as an argument, found: {}",
                value::type_name(arg)
            ),
        ));
    };
    let mut branches = Vec::new();
    let mut default = None;
    for (k, v) in d {
        match k.as_str() {
            "branches" => {
                let Bson::Array(items) = v else {
                    return Err(Error::location(
                        40061,
                        format!(
                            "$switch expected an array for 'branches', found: {}",
                            value::type_name(v)
                        ),
                    ));
                };
                for item in items {
                    let Bson::Document(branch) = item else {
                        return Err(Error::location(
                            40062,
                            format!(
                                "$switch expected each branch to be an object, found: {}",
                                value::type_name(item)
                            ),
                        ));
                    };
                    let mut case = None;
                    let mut then = None;
                    for (bk, bv) in branch {
                        match bk.as_str() {
                            "case" => case = Some(Expression::parse(bv)?),
                            "then" => then = Some(Expression::parse(bv)?),
                            _ => {
                                return Err(Error::location(
                                    40063,
                                    format!("$switch found an unknown argument to a branch: {bk}"),
                                ))
                            }
                        }
                    }
                    let case = case.ok_or_else(|| {
                        Error::location(
                            40064,
                            "$switch requires each branch have a 'case' expression",
                        )
                    })?;
                    let then = then.ok_or_else(|| {
                        Error::location(
                            40065,
                            "$switch requires each branch have a 'then' expression.",
                        )
                    })?;
                    branches.push((case, then));
                }
            }
            "default" => default = Some(Expression::parse(v)?),
            _ => {
                return Err(Error::location(
                    40067,
                    format!("$switch found an unknown argument: {k}"),
                ))
            }
        }
    }
    if branches.is_empty() {
        return Err(Error::location(
            40068,
            "$switch requires at least one branch.",
        ));
    }
    Ok(Operator::Switch { branches, default })
}

fn parse_let(arg: &Bson) -> Result<Operator> {
    let Bson::Document(d) = arg else {
        return Err(Error::location(
            16874,
            "$let only supports an object as its argument",
        ));
    };
    let mut vars = None;
    let mut body = None;
    for (k, v) in d {
        match k.as_str() {
            "vars" => {
                let Bson::Document(defs) = v else {
                    return Err(Error::location(
                        10065,
                        "invalid parameter: expected an object (vars)",
                    ));
                };
                let mut parsed = Vec::new();
                for (name, def) in defs {
                    validate_variable_name(name)?;
                    parsed.push((name.clone(), Expression::parse(def)?));
                }
                vars = Some(parsed);
            }
            "in" => body = Some(Expression::parse(v)?),
            _ => {
                return Err(Error::location(
                    16875,
                    format!("Unrecognized parameter to $let: {k}"),
                ))
            }
        }
    }
    Ok(Operator::Let {
        vars: vars.ok_or_else(|| Error::location(16876, "Missing 'vars' parameter to $let"))?,
        body: body.ok_or_else(|| Error::location(16877, "Missing 'in' parameter to $let"))?,
    })
}

impl Operator {
    fn eval(&self, scope: &Scope) -> Result<Option<Bson>> {
        match self {
            Operator::Call { func, args } => {
                let mut values = Vec::with_capacity(args.len());
                for a in args {
                    values.push(a.eval(scope)?);
                }
                func(&values)
            }
            Operator::And(args) => {
                for a in args {
                    if !a.eval(scope)?.as_ref().is_some_and(is_truthy) {
                        return Ok(Some(Bson::Boolean(false)));
                    }
                }
                Ok(Some(Bson::Boolean(true)))
            }
            Operator::Or(args) => {
                for a in args {
                    if a.eval(scope)?.as_ref().is_some_and(is_truthy) {
                        return Ok(Some(Bson::Boolean(true)));
                    }
                }
                Ok(Some(Bson::Boolean(false)))
            }
            Operator::IfNull(args) => {
                let (last, rest) = args.split_last().expect("at least two arguments");
                for a in rest {
                    let v = a.eval(scope)?;
                    if !nullish(&v) {
                        return Ok(v);
                    }
                }
                last.eval(scope)
            }
            Operator::Cond {
                test,
                then,
                otherwise,
            } => {
                if test.eval(scope)?.as_ref().is_some_and(is_truthy) {
                    then.eval(scope)
                } else {
                    otherwise.eval(scope)
                }
            }
            Operator::Switch { branches, default } => {
                for (case, then) in branches {
                    if case.eval(scope)?.as_ref().is_some_and(is_truthy) {
                        return then.eval(scope);
                    }
                }
                match default {
                    Some(d) => d.eval(scope),
                    None => Err(Error::location(
                        40066,
                        "$switch could not find a matching branch for an input, and no default \
                         was specified.",
                    )),
                }
            }
            Operator::Let { vars, body } => {
                // Definitions see the enclosing scope only, not each other.
                let values = vars
                    .iter()
                    .map(|(_, e)| e.eval(scope))
                    .collect::<Result<Vec<_>>>()?;
                eval_with_locals(scope, vars.iter().map(|(n, _)| n.as_str()), &values, body)
            }
            Operator::Map { input, name, body } => {
                let input = input.eval(scope)?;
                let items = match input {
                    None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
                    Some(Bson::Array(items)) => items,
                    Some(other) => {
                        return Err(Error::location(
                            16883,
                            format!(
                                "input to $map must be an array not {}",
                                value::type_name(&other)
                            ),
                        ))
                    }
                };
                let mut out = Vec::with_capacity(items.len());
                for item in &items {
                    let local = Local {
                        name,
                        value: Some(item),
                        next: scope.locals,
                    };
                    let inner = Scope {
                        locals: Some(&local),
                        ..*scope
                    };
                    out.push(body.eval(&inner)?.unwrap_or(Bson::Null));
                }
                Ok(Some(Bson::Array(out)))
            }
            Operator::Filter {
                input,
                name,
                cond,
                limit,
            } => {
                let input = input.eval(scope)?;
                let items = match input {
                    None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
                    Some(Bson::Array(items)) => items,
                    Some(other) => {
                        return Err(Error::location(
                            28651,
                            format!(
                                "input to $filter must be an array not {}",
                                value::type_name(&other)
                            ),
                        ))
                    }
                };
                let limit = match limit {
                    None => None,
                    Some(l) => match l.eval(scope)? {
                        None | Some(Bson::Null) | Some(Bson::Undefined) => None,
                        Some(v) => {
                            let n = value::Number::from_bson(&v)
                                .and_then(|n| n.as_i64_exact())
                                .filter(|n| *n >= i32::MIN as i64 && *n <= i32::MAX as i64)
                                .ok_or_else(|| {
                                    Error::location(
                                        327391,
                                        format!(
                                            "$filter: limit must be represented as a 32-bit \
                                             integral value: {}",
                                            fmt_value(&v)
                                        ),
                                    )
                                })?;
                            if n < 1 {
                                return Err(Error::location(
                                    327392,
                                    format!(
                                        "$filter: limit must be greater than 0: {}",
                                        fmt_value(&v)
                                    ),
                                ));
                            }
                            Some(n as usize)
                        }
                    },
                };
                let mut out = Vec::new();
                for item in &items {
                    if limit.is_some_and(|l| out.len() >= l) {
                        break;
                    }
                    let local = Local {
                        name,
                        value: Some(item),
                        next: scope.locals,
                    };
                    let inner = Scope {
                        locals: Some(&local),
                        ..*scope
                    };
                    if cond.eval(&inner)?.as_ref().is_some_and(is_truthy) {
                        out.push(item.clone());
                    }
                }
                Ok(Some(Bson::Array(out)))
            }
            Operator::Reduce {
                input,
                initial,
                body,
            } => {
                let input = input.eval(scope)?;
                let items = match input {
                    None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
                    Some(Bson::Array(items)) => items,
                    Some(other) => {
                        return Err(Error::location(
                            40080,
                            format!(
                                "$reduce requires that 'input' be an array, found: {}",
                                value::type_name(&other)
                            ),
                        ))
                    }
                };
                let mut acc = initial.eval(scope)?;
                for item in &items {
                    let values = [acc.clone(), Some(item.clone())];
                    acc = eval_with_locals(scope, ["value", "this"].into_iter(), &values, body)?;
                }
                Ok(acc)
            }
            Operator::Date(op) => op.eval(scope),
            Operator::Trim { name, input, chars } => {
                let input = input.eval(scope)?;
                let chars = match chars {
                    Some(c) => Some(c.eval(scope)?),
                    None => None,
                };
                operators::trim(name, input, chars)
            }
            Operator::RegexMatch {
                input,
                regex,
                options,
            } => {
                let input = input.eval(scope)?;
                let regex = regex.eval(scope)?;
                let options = match options {
                    Some(o) => o.eval(scope)?,
                    None => None,
                };
                operators::regex_match(input, regex, options)
            }
            Operator::Replace {
                all,
                input,
                find,
                replacement,
            } => operators::replace(
                *all,
                input.eval(scope)?,
                find.eval(scope)?,
                replacement.eval(scope)?,
            ),
            Operator::Convert {
                input,
                to,
                on_error,
                on_null,
            } => {
                let input = input.eval(scope)?;
                let to = to.eval(scope)?;
                if nullish(&input) {
                    return match on_null {
                        Some(e) => e.eval(scope),
                        None => Ok(Some(Bson::Null)),
                    };
                }
                match operators::convert(input, to) {
                    Ok(v) => Ok(v),
                    Err(e) if e.code == ErrorCode::ConversionFailure => match on_error {
                        Some(handler) => handler.eval(scope),
                        None => Err(e),
                    },
                    Err(e) => Err(e),
                }
            }
            Operator::GetField { field, input } => {
                let input = match input {
                    Some(e) => e.eval(scope)?,
                    None => scope.lookup("CURRENT")?,
                };
                match field_input("$getField", input, 3041705)? {
                    None => Ok(Some(Bson::Null)),
                    Some(d) => Ok(d.get(field).cloned()),
                }
            }
            Operator::SetField {
                op,
                field,
                input,
                value,
            } => {
                let Some(mut d) = field_input(op, input.eval(scope)?, 4161105)? else {
                    return Ok(Some(Bson::Null));
                };
                let value = match value {
                    Some(e) => e.eval(scope)?,
                    None => None,
                };
                match value {
                    // Setting an existing field keeps its place, as a MutableDocument does.
                    Some(v) => {
                        d.insert(field.clone(), v);
                    }
                    None => {
                        d.remove(field);
                    }
                }
                Ok(Some(Bson::Document(d)))
            }
        }
    }
}

/// Evaluate `body` with `names` bound to `values` on top of `scope`.
fn eval_with_locals<'n>(
    scope: &Scope,
    names: impl Iterator<Item = &'n str>,
    values: &[Option<Bson>],
    body: &Expression,
) -> Result<Option<Bson>> {
    let names: Vec<&str> = names.collect();
    fn go(
        scope: &Scope,
        names: &[&str],
        values: &[Option<Bson>],
        body: &Expression,
    ) -> Result<Option<Bson>> {
        match (names.split_first(), values.split_first()) {
            (Some((name, rest_names)), Some((value, rest_values))) => {
                let local = Local {
                    name,
                    value: value.as_ref(),
                    next: scope.locals,
                };
                let inner = Scope {
                    locals: Some(&local),
                    ..*scope
                };
                go(&inner, rest_names, rest_values, body)
            }
            _ => body.eval(scope),
        }
    }
    go(scope, &names, values, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc};

    fn eval(expr: Bson, root: Document) -> Result<Option<Bson>> {
        Expression::parse(&expr)?.evaluate(&root, &doc! {})
    }

    fn ok(expr: Bson, root: Document) -> Option<Bson> {
        eval(expr, root).unwrap_or_else(|e| panic!("evaluation failed: {e}"))
    }

    fn code(expr: Bson, root: Document) -> i32 {
        match eval(expr, root) {
            Err(e) => e.code_number(),
            Ok(v) => panic!("expected an error, got {v:?}"),
        }
    }

    #[test]
    fn field_paths_read_nested_fields_and_map_through_arrays() {
        let root = doc! { "a": { "b": 5 }, "xs": [ { "v": 1 }, { "w": 2 }, 7, { "v": 3 } ] };
        assert_eq!(ok(bson!("$a.b"), root.clone()), Some(Bson::Int32(5)));
        assert_eq!(ok(bson!("$xs.v"), root.clone()), Some(bson!([1, 3])));
        assert_eq!(ok(bson!("$nope"), root.clone()), None);
        assert_eq!(ok(bson!("$a.b.c"), root), None);
    }

    #[test]
    fn root_current_and_remove_variables() {
        let root = doc! { "a": 1 };
        assert_eq!(
            ok(bson!("$$ROOT"), root.clone()),
            Some(Bson::Document(root.clone()))
        );
        assert_eq!(ok(bson!("$$CURRENT.a"), root.clone()), Some(Bson::Int32(1)));
        assert_eq!(ok(bson!("$$REMOVE"), root.clone()), None);
        assert!(matches!(ok(bson!("$$NOW"), root), Some(Bson::DateTime(_))));
    }

    #[test]
    fn user_variables_come_from_the_vars_document_and_let() {
        let e = Expression::parse(&bson!({ "$add": ["$$x", 1] })).unwrap();
        assert_eq!(
            e.evaluate(&doc! {}, &doc! { "x": 41 }).unwrap(),
            Some(Bson::Int32(42))
        );
        let e = bson!({ "$let": { "vars": { "t": { "$multiply": ["$p", 2] } }, "in": { "$add": ["$$t", 1] } } });
        assert_eq!(ok(e, doc! { "p": 5 }), Some(Bson::Int32(11)));
        assert_eq!(code(bson!("$$nope"), doc! {}), 17276);
        assert_eq!(
            code(
                bson!({ "$let": { "vars": { "Bad": 1 }, "in": 1 } }),
                doc! {}
            ),
            16870
        );
        assert_eq!(code(bson!({ "$let": { "in": 1 } }), doc! {}), 16876);
    }

    #[test]
    fn object_expressions_drop_missing_fields_and_arrays_turn_missing_into_null() {
        let root = doc! { "a": 1 };
        assert_eq!(
            ok(bson!({ "x": "$a", "y": "$nope" }), root.clone()),
            Some(bson!({ "x": 1 }))
        );
        assert_eq!(ok(bson!(["$a", "$nope"]), root), Some(bson!([1, null])));
    }

    #[test]
    fn literal_keeps_dollar_strings_and_operator_objects_verbatim() {
        assert_eq!(
            ok(bson!({ "$literal": "$a" }), doc! { "a": 1 }),
            Some(bson!("$a"))
        );
        assert_eq!(
            ok(bson!({ "$literal": { "$add": 1 } }), doc! {}),
            Some(bson!({ "$add": 1 }))
        );
    }

    #[test]
    fn unknown_operators_and_malformed_operator_objects_are_rejected() {
        assert_eq!(code(bson!({ "$foo": 1 }), doc! {}), 168);
        let e = eval(bson!({ "$foo": 1 }), doc! {}).unwrap_err();
        assert_eq!(e.message, "Unrecognized expression '$foo'");
        assert_eq!(code(bson!({ "$add": [1], "x": 2 }), doc! {}), 15983);
        assert_eq!(code(bson!({ "a": 1, "$b": 2 }), doc! {}), 16410);
        assert_eq!(code(bson!("$"), doc! {}), 16872);
        assert_eq!(code(bson!({ "$abs": [1, 2] }), doc! {}), 16020);
        assert_eq!(code(bson!({ "$function": {} }), doc! {}), 115);
    }

    #[test]
    fn cond_has_array_and_object_forms() {
        let root = doc! { "q": 5 };
        assert_eq!(
            ok(
                bson!({ "$cond": [{ "$gt": ["$q", 3] }, "big", "small"] }),
                root.clone()
            ),
            Some(bson!("big"))
        );
        assert_eq!(
            ok(
                bson!({ "$cond": { "if": { "$lt": ["$q", 3] }, "then": "big", "else": "small" } }),
                root.clone()
            ),
            Some(bson!("small"))
        );
        assert_eq!(
            code(bson!({ "$cond": { "if": true, "then": 1 } }), root.clone()),
            17082
        );
        assert_eq!(code(bson!({ "$cond": [true, 1] }), root), 16020);
    }

    #[test]
    fn if_null_returns_the_first_non_null_argument() {
        let root = doc! { "a": null, "b": 2 };
        assert_eq!(
            ok(bson!({ "$ifNull": ["$a", "$nope", "$b", 3] }), root.clone()),
            Some(Bson::Int32(2))
        );
        assert_eq!(
            ok(bson!({ "$ifNull": ["$a", "$nope"] }), root.clone()),
            None
        );
        assert_eq!(code(bson!({ "$ifNull": ["$a"] }), root), 1257300);
    }

    #[test]
    fn boolean_operators_use_aggregation_truthiness() {
        let root = doc! { "z": 0, "s": "" };
        assert_eq!(
            ok(bson!({ "$and": [1, "$s"] }), root.clone()),
            Some(Bson::Boolean(true))
        );
        assert_eq!(
            ok(bson!({ "$and": [1, "$z"] }), root.clone()),
            Some(Bson::Boolean(false))
        );
        assert_eq!(
            ok(bson!({ "$or": ["$nope", null, "$z"] }), root.clone()),
            Some(Bson::Boolean(false))
        );
        assert_eq!(
            ok(bson!({ "$not": ["$nope"] }), root.clone()),
            Some(Bson::Boolean(true))
        );
        assert_eq!(ok(bson!({ "$and": [] }), root), Some(Bson::Boolean(true)));
    }

    #[test]
    fn map_filter_and_reduce_bind_their_variables() {
        let root = doc! { "xs": [1, 2, 3, 4] };
        assert_eq!(
            ok(
                bson!({ "$map": { "input": "$xs", "as": "x", "in": { "$multiply": ["$$x", 10] } } }),
                root.clone()
            ),
            Some(bson!([10, 20, 30, 40]))
        );
        assert_eq!(
            ok(
                bson!({ "$filter": { "input": "$xs", "cond": { "$gt": ["$$this", 2] } } }),
                root.clone()
            ),
            Some(bson!([3, 4]))
        );
        assert_eq!(
            ok(
                bson!({ "$filter": { "input": "$xs", "cond": true, "limit": 1 } }),
                root.clone()
            ),
            Some(bson!([1]))
        );
        assert_eq!(
            ok(
                bson!({ "$reduce": { "input": "$xs", "initialValue": 0, "in": { "$add": ["$$value", "$$this"] } } }),
                root.clone()
            ),
            Some(Bson::Int32(10))
        );
        assert_eq!(
            ok(
                bson!({ "$map": { "input": "$nope", "in": 1 } }),
                root.clone()
            ),
            Some(Bson::Null)
        );
        assert_eq!(
            code(bson!({ "$map": { "input": 5, "in": 1 } }), root.clone()),
            16883
        );
        assert_eq!(
            code(bson!({ "$filter": { "input": 5, "cond": 1 } }), root),
            28651
        );
    }

    #[test]
    fn switch_picks_the_first_true_branch_or_the_default() {
        let e = bson!({ "$switch": {
            "branches": [
                { "case": { "$lt": ["$n", 0] }, "then": "neg" },
                { "case": { "$gt": ["$n", 0] }, "then": "pos" },
            ],
            "default": "zero",
        }});
        assert_eq!(ok(e.clone(), doc! { "n": -2 }), Some(bson!("neg")));
        assert_eq!(ok(e.clone(), doc! { "n": 2 }), Some(bson!("pos")));
        assert_eq!(ok(e, doc! { "n": 0 }), Some(bson!("zero")));
        let no_default = bson!({ "$switch": { "branches": [{ "case": false, "then": 1 }] } });
        assert_eq!(code(no_default, doc! {}), 40066);
        assert_eq!(
            code(bson!({ "$switch": { "branches": [] } }), doc! {}),
            40068
        );
    }
}

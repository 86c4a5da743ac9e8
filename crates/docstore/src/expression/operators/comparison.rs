//! Comparison and boolean operators: `$eq` … `$cmp`, `$not`.

use super::*;

pub(super) fn ordering(args: &[Option<Bson>]) -> Ordering {
    compare(comparable(&args[0]), comparable(&args[1]))
}

pub(super) fn eq(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::Boolean(ordering(args) == Ordering::Equal))
}

pub(super) fn ne(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::Boolean(ordering(args) != Ordering::Equal))
}

pub(super) fn gt(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::Boolean(ordering(args) == Ordering::Greater))
}

pub(super) fn gte(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::Boolean(ordering(args) != Ordering::Less))
}

pub(super) fn lt(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::Boolean(ordering(args) == Ordering::Less))
}

pub(super) fn lte(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::Boolean(ordering(args) != Ordering::Greater))
}

pub(super) fn cmp(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::Int32(match ordering(args) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }))
}

pub(super) fn not(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::Boolean(!args[0].as_ref().is_some_and(is_truthy)))
}

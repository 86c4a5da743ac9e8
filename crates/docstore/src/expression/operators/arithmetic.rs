//! Arithmetic: `$add` … `$trunc`, and `$sum`/`$avg`/`$min`/`$max` over their operands.

use super::*;

pub(super) fn add(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let mut total = Bson::Int32(0);
    let mut date: Option<i64> = None;
    for a in args {
        match a {
            v if nullish(v) => return null(),
            Some(Bson::DateTime(d)) => {
                if date.is_some() {
                    return Err(Error::location(
                        16612,
                        "only one date allowed in an $add expression",
                    ));
                }
                date = Some(d.timestamp_millis());
            }
            Some(v) if value::is_number(v) => {
                total = arith(value::add(&total, v, Overflow::WidenToDouble));
            }
            other => {
                return Err(Error::type_mismatch(format!(
                    "$add only supports numeric or date types, not {}",
                    type_of(other)
                )))
            }
        }
    }
    match date {
        Some(ms) => {
            let offset = Number::from_bson(&total).map(Number::as_f64).unwrap_or(0.0);
            let result = ms as f64 + offset.round();
            if !result.is_finite() || result.abs() >= 9.2e18 {
                return Err(Error::new(ErrorCode::Overflow, "date overflow"));
            }
            let exact = match Number::from_bson(&total).and_then(Number::as_i64_exact) {
                Some(i) => ms.checked_add(i),
                None => Some(result as i64),
            };
            match exact {
                Some(v) => some(Bson::DateTime(bson::DateTime::from_millis(v))),
                None => Err(Error::new(ErrorCode::Overflow, "date overflow")),
            }
        }
        None => some(total),
    }
}

pub(super) fn subtract(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let (l, r) = (&args[0], &args[1]);
    match (l, r) {
        (Some(a), Some(b)) if value::is_number(a) && value::is_number(b) => {
            some(arith(value::subtract(a, b, Overflow::WidenToDouble)))
        }
        _ if nullish(l) || nullish(r) => null(),
        (Some(Bson::DateTime(a)), Some(Bson::DateTime(b))) => some(Bson::Int64(
            a.timestamp_millis().wrapping_sub(b.timestamp_millis()),
        )),
        (Some(Bson::DateTime(a)), Some(b)) if value::is_number(b) => {
            let n = Number::from_bson(b).map(Number::as_f64).unwrap_or(0.0);
            let ms = a.timestamp_millis() as f64 - n.round();
            if !ms.is_finite() || ms.abs() >= 9.2e18 {
                return Err(Error::new(ErrorCode::Overflow, "date overflow"));
            }
            some(Bson::DateTime(bson::DateTime::from_millis(ms as i64)))
        }
        (Some(Bson::DateTime(_)), b) => Err(Error::type_mismatch(format!(
            "can't $subtract {} from Date",
            type_of(b)
        ))),
        _ => Err(Error::type_mismatch(format!(
            "can't $subtract {} from {}",
            type_of(r),
            type_of(l)
        ))),
    }
}

pub(super) fn multiply(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let mut product = Bson::Int32(1);
    for a in args {
        match a {
            v if nullish(v) => return null(),
            Some(v) if value::is_number(v) => {
                product = arith(value::multiply(&product, v, Overflow::WidenToDouble));
            }
            other => {
                return Err(Error::type_mismatch(format!(
                    "$multiply only supports numeric types, not {}",
                    type_of(other)
                )))
            }
        }
    }
    some(product)
}

pub(super) fn divide(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let (l, r) = (&args[0], &args[1]);
    match (l, r) {
        (Some(a), Some(b)) if value::is_number(a) && value::is_number(b) => {
            let (x, y) = (num(a), num(b));
            if y == 0.0 {
                return Err(Error::bad_value("can't $divide by zero"));
            }
            if is_decimal(a) || is_decimal(b) {
                some(Bson::Decimal128(value::f64_to_decimal(x / y)))
            } else {
                some(Bson::Double(x / y))
            }
        }
        _ if nullish(l) || nullish(r) => null(),
        _ => Err(Error::type_mismatch(format!(
            "$divide only supports numeric types, not {} and {}",
            type_of(l),
            type_of(r)
        ))),
    }
}

pub(super) fn num(v: &Bson) -> f64 {
    value::to_f64(v).unwrap_or(f64::NAN)
}

pub(super) fn modulo(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let (l, r) = (&args[0], &args[1]);
    match (l, r) {
        (Some(a), Some(b)) if value::is_number(a) && value::is_number(b) => {
            if num(b) == 0.0 {
                return Err(Error::location(16610, "can't $mod by zero"));
            }
            match (a, b) {
                (Bson::Decimal128(_), _) | (_, Bson::Decimal128(_)) => {
                    some(Bson::Decimal128(value::f64_to_decimal(num(a) % num(b))))
                }
                (Bson::Double(_), _) | (_, Bson::Double(_)) => some(Bson::Double(num(a) % num(b))),
                (Bson::Int32(x), Bson::Int32(y)) => {
                    some(Bson::Int32(x.checked_rem(*y).unwrap_or(0)))
                }
                _ => {
                    let x = Number::from_bson(a)
                        .and_then(Number::as_i64_exact)
                        .unwrap_or(0);
                    let y = Number::from_bson(b)
                        .and_then(Number::as_i64_exact)
                        .unwrap_or(1);
                    some(Bson::Int64(x.checked_rem(y).unwrap_or(0)))
                }
            }
        }
        _ if nullish(l) || nullish(r) => null(),
        _ => Err(Error::location(
            16611,
            format!(
                "$mod only supports numeric types, not {} and {}",
                type_of(l),
                type_of(r)
            ),
        )),
    }
}

/// The single numeric argument of `$abs`, `$floor` and friends; `None` for a nullish argument.
pub(super) fn numeric_arg<'a>(name: &str, v: &'a Option<Bson>) -> Result<Option<&'a Bson>> {
    match v {
        v if nullish(v) => Ok(None),
        Some(b) if value::is_number(b) => Ok(Some(b)),
        other => Err(Error::location(
            28765,
            format!("{name} only supports numeric types, not {}", type_of(other)),
        )),
    }
}

pub(super) fn abs(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let Some(v) = numeric_arg("$abs", &args[0])? else {
        return null();
    };
    match v {
        Bson::Int32(i) => some(match i.checked_abs() {
            Some(a) => Bson::Int32(a),
            None => Bson::Int64((*i as i64).abs()),
        }),
        Bson::Int64(i) => match i.checked_abs() {
            Some(a) => some(Bson::Int64(a)),
            None => Err(Error::location(28680, "can't take $abs of long long min")),
        },
        Bson::Decimal128(_) => some(Bson::Decimal128(value::f64_to_decimal(num(v).abs()))),
        _ => some(Bson::Double(num(v).abs())),
    }
}

pub(super) fn float_op(
    name: &str,
    args: &[Option<Bson>],
    f: fn(f64) -> f64,
) -> Result<Option<Bson>> {
    let Some(v) = numeric_arg(name, &args[0])? else {
        return null();
    };
    match v {
        Bson::Int32(_) | Bson::Int64(_) => some(v.clone()),
        Bson::Decimal128(_) => some(Bson::Decimal128(value::f64_to_decimal(f(num(v))))),
        _ => some(Bson::Double(f(num(v)))),
    }
}

pub(super) fn floor(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    float_op("$floor", args, f64::floor)
}

pub(super) fn ceil(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    float_op("$ceil", args, f64::ceil)
}

pub(super) fn math_op(
    name: &str,
    args: &[Option<Bson>],
    check: fn(f64) -> Option<&'static str>,
    f: fn(f64) -> f64,
) -> Result<Option<Bson>> {
    let Some(v) = numeric_arg(name, &args[0])? else {
        return null();
    };
    let x = num(v);
    if let Some(msg) = check(x) {
        return Err(Error::location(28766, format!("{name}'s argument {msg}")));
    }
    if is_decimal(v) {
        some(Bson::Decimal128(value::f64_to_decimal(f(x))))
    } else {
        some(Bson::Double(f(x)))
    }
}

pub(super) fn sqrt(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    math_op(
        "$sqrt",
        args,
        |x| (x < 0.0).then_some("must be greater than or equal to 0"),
        f64::sqrt,
    )
}

pub(super) fn exp(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    math_op("$exp", args, |_| None, f64::exp)
}

pub(super) fn ln(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    math_op(
        "$ln",
        args,
        |x| (x <= 0.0).then_some("must be a positive number"),
        f64::ln,
    )
}

pub(super) fn log10(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    math_op(
        "$log10",
        args,
        |x| (x <= 0.0).then_some("must be a positive number"),
        f64::log10,
    )
}

pub(super) fn pow(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let (b, e) = (&args[0], &args[1]);
    if nullish(b) || nullish(e) {
        return null();
    }
    let (Some(base), Some(exp)) = (b, e) else {
        return null();
    };
    if !value::is_number(base) {
        return Err(Error::location(
            28762,
            format!("$pow's base must be numeric, not {}", type_of(b)),
        ));
    }
    if !value::is_number(exp) {
        return Err(Error::location(
            28763,
            format!("$pow's exponent must be numeric, not {}", type_of(e)),
        ));
    }
    let (x, y) = (num(base), num(exp));
    if x == 0.0 && y < 0.0 {
        return Err(Error::location(
            28764,
            "$pow cannot take a base of 0 and a negative exponent",
        ));
    }
    if is_decimal(base) || is_decimal(exp) {
        return some(Bson::Decimal128(value::f64_to_decimal(x.powf(y))));
    }
    // Integral base and non-negative integral exponent stay integral when the result fits.
    if let (Some(bi), Some(ei)) = (
        Number::from_bson(base).filter(|n| !matches!(n, Number::Double(_))),
        Number::from_bson(exp).filter(|n| !matches!(n, Number::Double(_))),
    ) {
        let (bi, ei) = (
            bi.as_i64_exact().unwrap_or(0),
            ei.as_i64_exact().unwrap_or(0),
        );
        if ei >= 0 {
            let both_int = matches!(base, Bson::Int32(_)) && matches!(exp, Bson::Int32(_));
            if let Some(r) = u32::try_from(ei).ok().and_then(|e| bi.checked_pow(e)) {
                if both_int && i32::try_from(r).is_ok() {
                    return some(Bson::Int32(r as i32));
                }
                return some(Bson::Int64(r));
            }
        }
    }
    some(Bson::Double(x.powf(y)))
}

pub(super) fn round(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    round_like("$round", args, true)
}

pub(super) fn trunc(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    round_like("$trunc", args, false)
}

/// `$round` (half to even, on the value's decimal digits) and `$trunc`, with an optional
/// place in [-20, 100].
pub(super) fn round_like(
    name: &str,
    args: &[Option<Bson>],
    half_even: bool,
) -> Result<Option<Bson>> {
    let place = match args.get(1) {
        None => 0,
        Some(p) if nullish(p) => return null(),
        Some(Some(p)) => {
            let n = Number::from_bson(p)
                .and_then(Number::as_i64_exact)
                .ok_or_else(|| {
                    Error::location(
                        51082,
                        format!(
                            "precision argument to  {name} must be a integral value, got: {}",
                            fmt_value(p)
                        ),
                    )
                })?;
            if !(-20..=100).contains(&n) {
                return Err(Error::location(
                    51083,
                    format!(
                        "cannot apply {name} with precision value {n} value must be in [-20, 100]"
                    ),
                ));
            }
            n as i32
        }
        Some(None) => return null(),
    };
    let v = match &args[0] {
        v if nullish(v) => return null(),
        Some(v) if value::is_number(v) => v,
        other => {
            return Err(Error::location(
                51081,
                format!("{name} only supports numeric types, not {}", type_of(other)),
            ))
        }
    };
    match v {
        Bson::Int32(_) | Bson::Int64(_) if place >= 0 => some(v.clone()),
        Bson::Int32(i) => some(
            i32::try_from(round_integer(*i as i64, place, half_even)).map_or_else(
                |_| Bson::Int64(round_integer(*i as i64, place, half_even)),
                Bson::Int32,
            ),
        ),
        Bson::Int64(i) => some(Bson::Int64(round_integer(*i, place, half_even))),
        Bson::Decimal128(_) => some(Bson::Decimal128(value::f64_to_decimal(
            round_decimal_digits(num(v), place, half_even),
        ))),
        _ => some(Bson::Double(round_decimal_digits(num(v), place, half_even))),
    }
}

pub(super) fn round_integer(i: i64, place: i32, half_even: bool) -> i64 {
    let Some(factor) = 10i64.checked_pow(place.unsigned_abs()) else {
        return 0;
    };
    let q = i / factor;
    let r = i % factor;
    if !half_even {
        return q * factor;
    }
    let twice = (r.abs() as i128) * 2;
    let up = match twice.cmp(&(factor as i128)) {
        Ordering::Greater => true,
        Ordering::Less => false,
        Ordering::Equal => q % 2 != 0,
    };
    let q = if up { q + i.signum() } else { q };
    q.saturating_mul(factor)
}

/// Round through the value's 15 significant decimal digits, as MongoDB does by way of
/// Decimal128, so that 2.675 rounds to 2.68 rather than the binary 2.67.
pub(super) fn round_decimal_digits(x: f64, place: i32, half_even: bool) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let text = format!("{:.14e}", x.abs());
    let Some((mantissa, exponent)) = text.split_once('e') else {
        return x;
    };
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: Vec<u8> = mantissa
        .bytes()
        .filter(u8::is_ascii_digit)
        .map(|b| b - b'0')
        .collect();
    // Number of digits kept: those before the decimal point plus `place` after it.
    let keep = exponent + 1 + place;
    if keep >= digits.len() as i32 {
        return x;
    }
    let sign = if x < 0.0 { -1.0 } else { 1.0 };
    if keep < 0 {
        return 0.0 * sign;
    }
    let keep = keep as usize;
    let mut kept: Vec<u8> = digits[..keep].to_vec();
    if half_even {
        let first_dropped = digits[keep];
        let rest_nonzero = digits[keep + 1..].iter().any(|d| *d != 0);
        let last_kept_odd = kept.last().is_some_and(|d| d % 2 == 1);
        let up = first_dropped > 5 || (first_dropped == 5 && (rest_nonzero || last_kept_odd));
        if up {
            // Propagate the carry; a carry out of the first digit adds a leading 1.
            let mut i = kept.len();
            loop {
                if i == 0 {
                    kept.insert(0, 1);
                    return sign * assemble(&kept, exponent + 1, place);
                }
                i -= 1;
                if kept[i] == 9 {
                    kept[i] = 0;
                } else {
                    kept[i] += 1;
                    break;
                }
            }
        }
    }
    sign * assemble(&kept, exponent, place)
}

pub(super) fn assemble(digits: &[u8], exponent: i32, place: i32) -> f64 {
    if digits.is_empty() {
        return 0.0;
    }
    let mantissa: String = digits.iter().map(|d| char::from(b'0' + d)).collect();
    // digits represent d0.d1d2... × 10^exponent, kept up to 10^-place.
    let scale = exponent - (digits.len() as i32 - 1);
    let _ = place;
    format!("{mantissa}e{scale}").parse().unwrap_or(0.0)
}

/// The operands of `$sum`/`$avg`/`$min`/`$max` as expressions: the elements of a single array
/// argument, or the arguments themselves.
pub(super) fn operands(args: &[Option<Bson>]) -> Vec<Bson> {
    match args {
        [Some(Bson::Array(items))] => items.clone(),
        _ => args.iter().flatten().cloned().collect(),
    }
}

/// Sum of the numeric values, ignoring everything else (`$sum`'s rule).
pub(crate) fn sum_numbers<'a>(values: impl Iterator<Item = &'a Bson>) -> Bson {
    let mut total = Bson::Int32(0);
    for v in values {
        if value::is_number(v) {
            total = arith(value::add(&total, v, Overflow::WidenToDouble));
        }
    }
    total
}

/// Average of the numeric values, `null` when there are none.
pub(crate) fn average<'a>(values: impl Iterator<Item = &'a Bson>) -> Bson {
    let mut count = 0usize;
    let mut total = Bson::Int32(0);
    for v in values {
        if value::is_number(v) {
            count += 1;
            total = arith(value::add(&total, v, Overflow::WidenToDouble));
        }
    }
    if count == 0 {
        return Bson::Null;
    }
    let avg = num(&total) / count as f64;
    if is_decimal(&total) {
        Bson::Decimal128(value::f64_to_decimal(avg))
    } else {
        Bson::Double(avg)
    }
}

pub(super) fn sum(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(sum_numbers(operands(args).iter()))
}

pub(super) fn avg(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(average(operands(args).iter()))
}

pub(super) fn extreme(args: &[Option<Bson>], want: Ordering) -> Result<Option<Bson>> {
    let mut best: Option<Bson> = None;
    for v in operands(args) {
        if matches!(v, Bson::Null | Bson::Undefined) {
            continue;
        }
        if best.as_ref().is_none_or(|b| compare(&v, b) == want) {
            best = Some(v);
        }
    }
    some(best.unwrap_or(Bson::Null))
}

pub(super) fn min(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    extreme(args, Ordering::Less)
}

pub(super) fn max(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    extreme(args, Ordering::Greater)
}

/// `$rand`: a double in [0, 1), drawn anew at each evaluation (each document), as mongod's.
pub(crate) fn random(_: &[Option<Bson>]) -> Result<Option<Bson>> {
    Ok(Some(Bson::Double(rand::random::<f64>())))
}

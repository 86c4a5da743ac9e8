//! `$bucketAuto`: documents sorted by `groupBy` and cut into at most `buckets` groups of about
//! equal size (equal values never split across two), each reported as `{_id: {min, max}, ...}`
//! with its accumulators; with `granularity`, the boundaries are rounded to a preferred number
//! series (Renard R5–R80, 1-2-5, E6–E192) or to powers of two, as mongod rounds them.

use super::*;
use std::cell::Cell;

#[derive(Debug, Clone)]
pub(crate) struct BucketAuto {
    group_by: Expression,
    buckets: usize,
    output: Group,
    granularity: Option<Granularity>,
}

/// A rounding scheme for bucket boundaries.
#[derive(Debug, Clone, Copy)]
enum Granularity {
    /// A preferred number series: its values between 1 and 10 (or 10.3), scaled by ten so that
    /// they are whole numbers, as in mongod's tables; powers of ten scale them.
    Series(&'static [f64]),
    PowersOf2,
}

const R5: &[f64] = &[10.0, 16.0, 25.0, 40.0, 63.0];
const R10: &[f64] = &[
    100.0, 125.0, 160.0, 200.0, 250.0, 315.0, 400.0, 500.0, 630.0, 800.0,
];
const R20: &[f64] = &[
    100.0, 112.0, 125.0, 140.0, 160.0, 180.0, 200.0, 224.0, 250.0, 280.0, 315.0, 355.0, 400.0,
    450.0, 500.0, 560.0, 630.0, 710.0, 800.0, 900.0,
];
const R40: &[f64] = &[
    100.0, 106.0, 112.0, 118.0, 125.0, 132.0, 140.0, 150.0, 160.0, 170.0, 180.0, 190.0, 200.0,
    212.0, 224.0, 236.0, 250.0, 265.0, 280.0, 300.0, 315.0, 355.0, 375.0, 400.0, 425.0, 450.0,
    475.0, 500.0, 530.0, 560.0, 600.0, 630.0, 670.0, 710.0, 750.0, 800.0, 850.0, 900.0, 950.0,
];
const R80: &[f64] = &[
    103.0, 109.0, 115.0, 122.0, 128.0, 136.0, 145.0, 155.0, 165.0, 175.0, 185.0, 195.0, 206.0,
    218.0, 230.0, 243.0, 258.0, 272.0, 290.0, 307.0, 325.0, 345.0, 365.0, 387.0, 412.0, 437.0,
    462.0, 487.0, 515.0, 545.0, 575.0, 615.0, 650.0, 690.0, 730.0, 775.0, 825.0, 875.0, 925.0,
    975.0,
];
const ONE_TWO_FIVE: &[f64] = &[10.0, 20.0, 50.0];
const E6: &[f64] = &[10.0, 15.0, 22.0, 33.0, 47.0, 68.0];
const E12: &[f64] = &[
    10.0, 12.0, 15.0, 18.0, 22.0, 27.0, 33.0, 39.0, 47.0, 56.0, 68.0, 82.0,
];
const E24: &[f64] = &[
    10.0, 11.0, 12.0, 13.0, 15.0, 16.0, 18.0, 20.0, 22.0, 24.0, 27.0, 30.0, 33.0, 36.0, 39.0, 43.0,
    47.0, 51.0, 56.0, 62.0, 68.0, 75.0, 82.0, 91.0,
];
const E48: &[f64] = &[
    100.0, 105.0, 110.0, 115.0, 121.0, 127.0, 133.0, 140.0, 147.0, 154.0, 162.0, 169.0, 178.0,
    187.0, 196.0, 205.0, 215.0, 226.0, 237.0, 249.0, 261.0, 274.0, 287.0, 301.0, 316.0, 332.0,
    348.0, 365.0, 383.0, 402.0, 422.0, 442.0, 464.0, 487.0, 511.0, 536.0, 562.0, 590.0, 619.0,
    649.0, 681.0, 715.0, 750.0, 787.0, 825.0, 866.0, 909.0, 953.0,
];
const E96: &[f64] = &[
    100.0, 102.0, 105.0, 107.0, 110.0, 113.0, 115.0, 118.0, 121.0, 124.0, 127.0, 130.0, 133.0,
    137.0, 140.0, 143.0, 147.0, 150.0, 154.0, 158.0, 162.0, 165.0, 169.0, 174.0, 178.0, 182.0,
    187.0, 191.0, 196.0, 200.0, 205.0, 210.0, 215.0, 221.0, 226.0, 232.0, 237.0, 243.0, 249.0,
    255.0, 261.0, 267.0, 274.0, 280.0, 287.0, 294.0, 301.0, 309.0, 316.0, 324.0, 332.0, 340.0,
    348.0, 357.0, 365.0, 374.0, 383.0, 392.0, 402.0, 412.0, 422.0, 432.0, 442.0, 453.0, 464.0,
    475.0, 487.0, 499.0, 511.0, 523.0, 536.0, 549.0, 562.0, 576.0, 590.0, 604.0, 619.0, 634.0,
    649.0, 665.0, 681.0, 698.0, 715.0, 732.0, 750.0, 768.0, 787.0, 806.0, 825.0, 845.0, 866.0,
    887.0, 909.0, 931.0, 953.0, 976.0,
];
const E192: &[f64] = &[
    100.0, 101.0, 102.0, 104.0, 105.0, 106.0, 107.0, 109.0, 110.0, 111.0, 113.0, 114.0, 115.0,
    117.0, 118.0, 120.0, 121.0, 123.0, 124.0, 126.0, 127.0, 129.0, 130.0, 132.0, 133.0, 135.0,
    137.0, 138.0, 140.0, 142.0, 143.0, 145.0, 147.0, 149.0, 150.0, 152.0, 154.0, 156.0, 158.0,
    160.0, 162.0, 164.0, 165.0, 167.0, 169.0, 172.0, 174.0, 176.0, 178.0, 180.0, 182.0, 184.0,
    187.0, 189.0, 191.0, 193.0, 196.0, 198.0, 200.0, 203.0, 205.0, 208.0, 210.0, 213.0, 215.0,
    218.0, 221.0, 223.0, 226.0, 229.0, 232.0, 234.0, 237.0, 240.0, 243.0, 246.0, 249.0, 252.0,
    255.0, 258.0, 261.0, 264.0, 267.0, 271.0, 274.0, 277.0, 280.0, 284.0, 287.0, 291.0, 294.0,
    298.0, 301.0, 305.0, 309.0, 312.0, 316.0, 320.0, 324.0, 328.0, 332.0, 336.0, 340.0, 344.0,
    348.0, 352.0, 357.0, 361.0, 365.0, 370.0, 374.0, 379.0, 383.0, 388.0, 392.0, 397.0, 402.0,
    407.0, 412.0, 417.0, 422.0, 427.0, 432.0, 437.0, 442.0, 448.0, 453.0, 459.0, 464.0, 470.0,
    475.0, 481.0, 487.0, 493.0, 499.0, 505.0, 511.0, 517.0, 523.0, 530.0, 536.0, 542.0, 549.0,
    556.0, 562.0, 569.0, 576.0, 583.0, 590.0, 597.0, 604.0, 612.0, 619.0, 626.0, 634.0, 642.0,
    649.0, 657.0, 665.0, 673.0, 681.0, 690.0, 698.0, 706.0, 715.0, 723.0, 732.0, 741.0, 750.0,
    759.0, 768.0, 777.0, 787.0, 796.0, 806.0, 816.0, 825.0, 835.0, 845.0, 856.0, 866.0, 876.0,
    887.0, 898.0, 909.0, 920.0, 931.0, 942.0, 953.0, 965.0, 976.0, 988.0,
];

impl Granularity {
    fn parse(name: &str) -> Result<Granularity> {
        Ok(Granularity::Series(match name {
            "R5" => R5,
            "R10" => R10,
            "R20" => R20,
            "R40" => R40,
            "R80" => R80,
            "1-2-5" => ONE_TWO_FIVE,
            "E6" => E6,
            "E12" => E12,
            "E24" => E24,
            "E48" => E48,
            "E96" => E96,
            "E192" => E192,
            "POWERSOF2" => return Ok(Granularity::PowersOf2),
            other => {
                return Err(Error::location(
                    40257,
                    format!("Unknown rounding granularity '{other}'"),
                ))
            }
        }))
    }

    /// The smallest boundary strictly greater than `v` (zero stays zero).
    fn round_up(self, v: &Bson) -> Result<Bson> {
        let x = roundable(v)?;
        if x == 0.0 {
            return Ok(v.clone());
        }
        Ok(match self {
            Granularity::PowersOf2 => pow2_like(v, next_power_of_two_above(x)),
            Granularity::Series(series) => {
                let (first, last) = (series[0], series[series.len() - 1]);
                let mut m = 1.0;
                while x >= last * m {
                    m *= 10.0;
                }
                while x < first * m {
                    let previous_min = first * m;
                    m /= 10.0;
                    if x >= last * m {
                        return Ok(Bson::Double(previous_min));
                    }
                }
                let up = series
                    .iter()
                    .map(|s| s * m)
                    .find(|s| x < *s)
                    .unwrap_or(last * m);
                Bson::Double(up)
            }
        })
    }

    /// The largest boundary strictly less than `v` (zero stays zero).
    fn round_down(self, v: &Bson) -> Result<Bson> {
        let x = roundable(v)?;
        if x == 0.0 {
            return Ok(v.clone());
        }
        Ok(match self {
            Granularity::PowersOf2 => pow2_like(v, previous_power_of_two_below(x)),
            Granularity::Series(series) => {
                let (first, last) = (series[0], series[series.len() - 1]);
                let mut m = 1.0;
                while x <= first * m {
                    m /= 10.0;
                }
                while x > last * m {
                    let previous_max = last * m;
                    m *= 10.0;
                    if x <= first * m {
                        return Ok(Bson::Double(previous_max));
                    }
                }
                let down = series
                    .iter()
                    .map(|s| s * m)
                    .take_while(|s| *s < x)
                    .last()
                    .unwrap_or(first * m);
                Bson::Double(down)
            }
        })
    }
}

/// A value a rounder accepts: a number, not NaN, not negative.
fn roundable(v: &Bson) -> Result<f64> {
    let Some(x) = value::to_f64(v).filter(|_| value::is_number(v)) else {
        return Err(Error::location(
            40262,
            format!(
                "A granularity rounder can only round numeric values, but found type: {}",
                value::type_name(v)
            ),
        ));
    };
    if x.is_nan() {
        return Err(Error::location(
            40263,
            "A granularity rounder cannot round NaN",
        ));
    }
    if x < 0.0 {
        return Err(Error::location(
            40268,
            "A granularity rounder can only round non-negative numbers",
        ));
    }
    Ok(x)
}

fn next_power_of_two_above(x: f64) -> f64 {
    let mut p = 2f64.powi(x.log2().floor() as i32);
    while p <= x {
        p *= 2.0;
    }
    while p / 2.0 > x {
        p /= 2.0;
    }
    p
}

fn previous_power_of_two_below(x: f64) -> f64 {
    let mut p = 2f64.powi(x.log2().ceil() as i32);
    while p >= x {
        p /= 2.0;
    }
    while p * 2.0 < x {
        p *= 2.0;
    }
    p
}

/// A power of two in the input's numeric type, as mongod keeps integers integral.
fn pow2_like(input: &Bson, p: f64) -> Bson {
    match input {
        Bson::Int32(_) if p <= i32::MAX as f64 && p.fract() == 0.0 => Bson::Int32(p as i32),
        Bson::Int32(_) | Bson::Int64(_) if p <= i64::MAX as f64 && p.fract() == 0.0 => {
            Bson::Int64(p as i64)
        }
        _ => Bson::Double(p),
    }
}

impl BucketAuto {
    pub(crate) fn parse(spec: &Bson) -> Result<BucketAuto> {
        let Bson::Document(d) = spec else {
            return Err(Error::location(
                40240,
                format!(
                    "The argument to $bucketAuto must be an object, but found type: {}",
                    value::type_name(spec)
                ),
            ));
        };
        let (mut group_by, mut buckets, mut output, mut granularity) = (None, None, None, None);
        for (k, v) in d {
            match k.as_str() {
                "groupBy" => {
                    let is_expr = match v {
                        Bson::String(s) => s.starts_with('$'),
                        Bson::Document(d) => d.keys().next().is_some_and(|k| k.starts_with('$')),
                        _ => false,
                    };
                    if !is_expr {
                        return Err(Error::location(
                            40239,
                            format!(
                                "The $bucketAuto 'groupBy' field must be defined as a $-prefixed \
                                 path or an expression object, but found: {}",
                                fmt_value(v)
                            ),
                        ));
                    }
                    group_by = Some(Expression::parse(v)?);
                }
                "buckets" => {
                    let Some(n) = Number::from_bson(v) else {
                        return Err(Error::location(
                            40241,
                            format!(
                                "The $bucketAuto 'buckets' field must be a numeric value, but \
                                 found type: {}",
                                value::type_name(v)
                            ),
                        ));
                    };
                    let n = n
                        .as_i64_exact()
                        .and_then(|n| i32::try_from(n).ok())
                        .ok_or_else(|| {
                            Error::location(
                                40242,
                                format!(
                                    "The $bucketAuto 'buckets' field must be representable as a \
                                     32-bit integer, but found {}",
                                    fmt_value(v)
                                ),
                            )
                        })?;
                    if n <= 0 {
                        return Err(Error::location(
                            40243,
                            format!(
                                "The $bucketAuto 'buckets' field must be greater than 0, but \
                                 found: {n}"
                            ),
                        ));
                    }
                    buckets = Some(n as usize);
                }
                "output" => {
                    let Bson::Document(out) = v else {
                        return Err(Error::location(
                            40244,
                            format!(
                                "The $bucketAuto 'output' field must be an object, but found \
                                 type: {}",
                                value::type_name(v)
                            ),
                        ));
                    };
                    let mut spec = out.clone();
                    spec.insert("_id", Bson::Null);
                    output = Some(Group::parse(&Bson::Document(spec))?);
                }
                "granularity" => {
                    let Bson::String(name) = v else {
                        return Err(Error::location(
                            40261,
                            format!(
                                "The $bucketAuto 'granularity' field must be a string, but found \
                                 type: {}",
                                value::type_name(v)
                            ),
                        ));
                    };
                    granularity = Some(Granularity::parse(name)?);
                }
                other => {
                    return Err(Error::location(
                        40245,
                        format!("Unrecognized option to $bucketAuto: {other}"),
                    ))
                }
            }
        }
        let (Some(group_by), Some(buckets)) = (group_by, buckets) else {
            return Err(Error::location(
                40246,
                "$bucketAuto requires 'groupBy' and 'buckets' to be specified",
            ));
        };
        Ok(BucketAuto {
            group_by,
            buckets,
            output: output
                .unwrap_or_else(|| Group::count_by(Expression::Literal(Bson::Null), "count")),
            granularity,
        })
    }

    pub(crate) fn run(&self, docs: Vec<Document>, vars: &Document) -> Result<Vec<Document>> {
        if docs.is_empty() {
            return Ok(Vec::new());
        }
        let mut keyed = Vec::with_capacity(docs.len());
        for doc in docs {
            // A missing value groups as null, as in `$group`.
            let key = self
                .group_by
                .eval(&Scope::new(&doc, vars))?
                .unwrap_or(Bson::Null);
            if self.granularity.is_some() {
                if !value::is_number(&key) {
                    return Err(Error::location(
                        40258,
                        format!(
                            "$bucketAuto can specify a 'granularity' with numeric boundaries \
                             only, but found a value with type: {}",
                            value::type_name(&key)
                        ),
                    ));
                }
                if value::to_f64(&key).is_some_and(f64::is_nan) {
                    return Err(Error::location(
                        40259,
                        "$bucketAuto can specify a 'granularity' with numeric boundaries only, \
                         but found a value that is NaN",
                    ));
                }
            }
            keyed.push((key, doc));
        }
        // Stable: equal values keep their input order inside a bucket.
        keyed.sort_by(|a, b| compare(&a.0, &b.0));
        let n = keyed.len();
        let approx = ((n as f64 / self.buckets as f64).round() as usize).max(1);
        // Each bucket: [first index, end index) into `keyed`, min and max boundaries.
        let mut spans: Vec<(usize, usize, Bson, Bson)> = Vec::new();
        let mut i = 0;
        while i < n && spans.len() < self.buckets {
            let start = i;
            let last_bucket = spans.len() + 1 == self.buckets;
            let mut end = if last_bucket {
                n
            } else {
                (start + approx).min(n)
            };
            let mut max = keyed[end - 1].0.clone();
            if !last_bucket {
                match self.granularity {
                    Some(g) => {
                        let boundary = g.round_up(&max)?;
                        while end < n && compare(&keyed[end].0, &boundary) == Ordering::Less {
                            end += 1;
                        }
                        if end < n {
                            max = boundary;
                        }
                    }
                    None => {
                        while end < n && compare(&keyed[end].0, &max) == Ordering::Equal {
                            end += 1;
                        }
                    }
                }
            }
            let mut min = keyed[start].0.clone();
            if let Some(previous) = spans.last_mut() {
                match self.granularity {
                    Some(g) => {
                        // A first bucket ending at zero: its max becomes this one's min, rounded.
                        if value::to_f64(&previous.3) == Some(0.0) {
                            previous.3 = g.round_down(&min)?;
                        }
                        min = previous.3.clone();
                    }
                    None => previous.3 = min.clone(),
                }
            }
            spans.push((start, end, min, max));
            i = end;
        }
        if let Some(g) = self.granularity {
            if let Some(first) = spans.first_mut() {
                first.2 = g.round_down(&first.2)?;
            }
            if let Some(last) = spans.last_mut() {
                last.3 = g.round_up(&last.3)?;
            }
        }
        // Each document's bucket number, in sorted order, for the accumulators.
        let mut bucket_of = Vec::with_capacity(n);
        for (b, (start, end, _, _)) in spans.iter().enumerate() {
            bucket_of.extend(std::iter::repeat_n(b, end - start));
        }
        let sorted: Vec<Document> = keyed.into_iter().map(|(_, d)| d).collect();
        // `run_keyed` asks for the key of each document once, in order.
        let next = Cell::new(0usize);
        let groups = self.output.run_keyed(&sorted, vars, |_| {
            let i = next.get();
            next.set(i + 1);
            Ok(Bson::Int64(bucket_of.get(i).copied().unwrap_or(0) as i64))
        })?;
        let mut out = Vec::with_capacity(groups.len());
        for (mut group, (_, _, min, max)) in groups.into_iter().zip(spans) {
            group.remove("_id");
            let mut d = Document::new();
            d.insert("_id", bson::doc! { "min": min, "max": max });
            d.extend(group);
            out.push(d);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preferred_numbers_round_strictly_up_and_down() {
        let r5 = Granularity::parse("R5").unwrap();
        assert_eq!(r5.round_up(&Bson::Int32(100)).unwrap(), Bson::Double(160.0));
        assert_eq!(
            r5.round_down(&Bson::Int32(100)).unwrap(),
            Bson::Double(63.0)
        );
        assert_eq!(r5.round_up(&Bson::Double(0.8)).unwrap(), Bson::Double(1.0));
        let e6 = Granularity::parse("E6").unwrap();
        assert_eq!(
            e6.round_down(&Bson::Double(0.8)).unwrap(),
            Bson::Double(0.68)
        );
        let p2 = Granularity::parse("POWERSOF2").unwrap();
        assert_eq!(p2.round_up(&Bson::Int32(4)).unwrap(), Bson::Int32(8));
        assert_eq!(p2.round_down(&Bson::Int32(5)).unwrap(), Bson::Int32(4));
        assert_eq!(
            p2.round_down(&Bson::Double(0.3)).unwrap(),
            Bson::Double(0.25)
        );
    }
}

//! The admin product form's fields (as `admin::form` specs) and how a submitted form is checked
//! and turned into a [`NewProduct`]: every field's rules and messages, each product type's own
//! fields, shipping weight and size, dates and tags. The handlers are in `super::products`.

use bson::oid::ObjectId;

use crate::admin::form::{self, split_list as list, FieldSpec, Input, MergeAs, Submitted};
use crate::catalog::model::midnight_utc;
use crate::catalog::products::{
    AlbumDetails, BookDetails, Details, Dimensions, FilmDetails, NewProduct, ProductType, Shipping,
};
use crate::catalog::typed_slug;
use crate::domain::{Money, Sku, Slug};
use crate::web::field_errors::FieldErrors;

const MAX_DESCRIPTION: usize = 5_000;

/// The fields every product has.
pub(super) const COMMON_FIELDS: &[FieldSpec] = &[
    FieldSpec::new("title", "Title", Input::Text).required("Enter a title."),
    FieldSpec::new("slug", "Slug", Input::Text)
        .help("Lowercase words joined by dashes; empty: made from the title."),
    FieldSpec::new("sku", "SKU", Input::Text),
    FieldSpec::new("description", "Description", Input::Textarea)
        .max_chars(MAX_DESCRIPTION)
        .merge(MergeAs::Lines),
    FieldSpec::new("tags", "Tags", Input::Text)
        .help("Separated by commas; /tags/… pages list products and blog posts sharing a tag.")
        .merge(MergeAs::Set),
    FieldSpec::new("list_price", "List price ($)", Input::Text),
    FieldSpec::new("retail_price", "Retail price ($)", Input::Text)
        .help("Savings are worked out from the two prices."),
];

/// The create form's opening stock (the edit page adjusts stock with its own form).
pub(super) const QTY_FIELD: FieldSpec = FieldSpec::new("qty", "Units in stock", Input::Number);

/// Shipping weight and package size; empty inputs count as 0 (not yet measured).
pub(super) const SHIPPING_FIELDS: &[FieldSpec] = &[
    FieldSpec::new("shipping_weight", "Weight (g)", Input::Number)
        .help("Whole grams; checkout charges shipping by weight."),
    FieldSpec::new("shipping_width", "Width (cm)", Input::Decimal),
    FieldSpec::new("shipping_height", "Height (cm)", Input::Decimal),
    FieldSpec::new("shipping_depth", "Depth (cm)", Input::Decimal),
];

/// The edit form's inputs that are not drawn from specs (the category picker, the featured
/// checkbox, the status select), for the merge of a save that lost a race.
pub(super) const PICKED_FIELDS: &[FieldSpec] = &[
    FieldSpec::new("categories", "Categories", Input::Text),
    FieldSpec::new("featured", "Featured on the home page", Input::Text),
    FieldSpec::new("status", "Status", Input::Text),
];

/// Heaviest accepted shipping weight: a tonne, in grams.
const MAX_WEIGHT_GRAMS: i64 = 1_000_000;
/// Largest accepted side of a package, in centimetres.
const MAX_SIDE_CM: f64 = 10_000.0;

const GENRES: FieldSpec =
    FieldSpec::new("genre", "Genres", Input::Text).help("Separated by commas.");

const ALBUM_FIELDS: &[FieldSpec] = &[
    FieldSpec::new("artist", "Artist", Input::Text).required("Enter the artist."),
    FieldSpec::new("label", "Label", Input::Text).required("Enter the label."),
    FieldSpec::new("issue_date", "Release date", Input::Date).help("YYYY-MM-DD"),
    GENRES,
    FieldSpec::new("tracks", "Track list", Input::Textarea)
        .help("One track per line.")
        .max_chars(MAX_DESCRIPTION),
];

const FILM_FIELDS: &[FieldSpec] = &[
    FieldSpec::new("director", "Directors", Input::Text).help("Separated by commas."),
    FieldSpec::new("writer", "Writers", Input::Text).help("Separated by commas."),
    FieldSpec::new("actor", "Cast", Input::Text).help("Separated by commas."),
    GENRES,
    FieldSpec::new("issue_date", "Release date", Input::Date).help("YYYY-MM-DD"),
    FieldSpec::new("rating", "Rating", Input::Text),
    FieldSpec::new("aspect_ratio", "Aspect ratio", Input::Text),
    FieldSpec::new("runtime", "Running time (minutes)", Input::Number),
];

const BOOK_FIELDS: &[FieldSpec] = &[
    FieldSpec::new("author", "Authors", Input::Text).help("Separated by commas."),
    FieldSpec::new("publisher", "Publisher", Input::Text).required("Enter the publisher."),
    FieldSpec::new("pages", "Pages", Input::Number),
    FieldSpec::new("isbn", "ISBN", Input::Text),
    FieldSpec::new("issue_date", "Publication date", Input::Date).help("YYYY-MM-DD"),
    GENRES,
];

pub(super) fn type_fields(kind: ProductType) -> &'static [FieldSpec] {
    match kind {
        ProductType::Album => ALBUM_FIELDS,
        ProductType::Film => FILM_FIELDS,
        ProductType::Book => BOOK_FIELDS,
    }
}

pub(super) fn parse_date(value: &str) -> Option<bson::DateTime> {
    let mut parts = value.split('-');
    let y: i32 = parts.next()?.parse().ok()?;
    let m: u32 = parts.next()?.parse().ok()?;
    let d: u32 = parts.next()?.parse().ok()?;
    if parts.next().is_some() || !(1000..=9999).contains(&y) {
        return None;
    }
    midnight_utc(y, m, d)
}

/// Whole grams, at least 0; empty is 0.
pub(super) fn parse_grams(value: &str) -> Option<i64> {
    if value.is_empty() {
        return Some(0);
    }
    if !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse::<i64>().ok().filter(|g| *g <= MAX_WEIGHT_GRAMS)
}

/// Centimetres as digits with at most two decimals (`12`, `14.25`), at least 0; empty is 0.
/// Written out by hand because `f64::from_str` also takes `inf`, `NaN` and `1e9`.
pub(super) fn parse_centimetres(value: &str) -> Option<f64> {
    if value.is_empty() {
        return Some(0.0);
    }
    let (whole, fraction) = value.split_once('.').unwrap_or((value, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    // `1.` splits into `1` and an empty fraction, so a trailing dot is refused on its own.
    if whole.is_empty()
        || !digits(whole)
        || !digits(fraction)
        || fraction.len() > 2
        || value.ends_with('.')
    {
        return None;
    }
    value.parse::<f64>().ok().filter(|cm| *cm <= MAX_SIDE_CM)
}

/// The shipping group of the form.
pub(super) fn parse_shipping(form: &Submitted, errors: &mut FieldErrors) -> Shipping {
    let weight = parse_grams(form.get("shipping_weight")).unwrap_or_else(|| {
        errors.add(
            "shipping_weight",
            "Enter the weight in whole grams (0 or more), e.g. 350.",
        );
        0
    });
    let mut side = |name: &'static str, what: &str| {
        parse_centimetres(form.get(name)).unwrap_or_else(|| {
            errors.add(
                name,
                format!("Enter the {what} in centimetres (0 or more), e.g. 12.5."),
            );
            0.0
        })
    };
    let dimensions = Dimensions {
        width: side("shipping_width", "width"),
        height: side("shipping_height", "height"),
        depth: side("shipping_depth", "depth"),
    };
    Shipping { weight, dimensions }
}

/// Check and convert a submitted form; field errors say what to fix.
pub(super) fn parse_product(
    kind: ProductType,
    form: &Submitted,
    creating: bool,
) -> Result<NewProduct, FieldErrors> {
    let mut errors = FieldErrors::default();
    form::check(
        COMMON_FIELDS.iter().chain(type_fields(kind)),
        form,
        &mut errors,
    );
    let title = form.get("title").to_string();
    let slug = Slug::parse(&typed_slug(form.get("slug"), &title))
        .map_err(|_| {
            errors.add(
                "slug",
                "Use lowercase letters and digits (of any alphabet) and single dashes, e.g. kind-of-blue.",
            )
        })
        .ok();
    let sku: Option<Sku> = form.parse(
        "sku",
        &mut errors,
        "Enter a SKU of letters, digits and dashes.",
    );
    let mut price = |name: &'static str| match Money::parse(form.get(name)) {
        Ok(amount) if amount.cents() <= 100_000_000 => amount,
        _ => {
            errors.add(name, "Enter a price in dollars, e.g. 12.99.");
            Money::ZERO
        }
    };
    let list_price = price("list_price");
    let retail_price = price("retail_price");
    if retail_price > list_price {
        errors.add(
            "retail_price",
            "The retail price cannot be above the list price.",
        );
    }
    let qty = if creating {
        match form.get("qty").parse::<i64>() {
            Ok(n) if (0..=1_000_000).contains(&n) => n,
            _ => {
                errors.add("qty", "Enter the units in stock (0 or more).");
                0
            }
        }
    } else {
        0
    };
    let mut categories = Vec::new();
    for id in form.all("categories") {
        match ObjectId::parse_str(id) {
            Ok(id) => categories.push(id),
            Err(_) => errors.add("categories", "Choose categories from the list."),
        }
    }
    let issue_date = parse_date(form.get("issue_date")).unwrap_or_else(|| {
        errors.add("issue_date", "Enter a date as YYYY-MM-DD.");
        bson::DateTime::from_millis(0)
    });
    let genre = list(form.get("genre"), ',');
    let shipping = parse_shipping(form, &mut errors);
    let details = match kind {
        ProductType::Album => Details::Album(AlbumDetails {
            title: title.clone(),
            artist: form.get("artist").to_string(),
            genre,
            tracks: list(form.get("tracks"), '\n'),
            issue_date,
            label: form.get("label").to_string(),
        }),
        ProductType::Film => {
            let rating = form.get("rating").to_string();
            let aspect_ratio = form.get("aspect_ratio").to_string();
            let runtime = match form.get("runtime").parse::<i32>() {
                Ok(n) if (1..=10_000).contains(&n) => n,
                _ => {
                    errors.add("runtime", "Enter the running time in minutes.");
                    0
                }
            };
            let director = list(form.get("director"), ',');
            if director.is_empty() {
                errors.add("director", "Enter at least one director.");
            }
            Details::Film(FilmDetails {
                title: title.clone(),
                director,
                writer: list(form.get("writer"), ','),
                actor: list(form.get("actor"), ','),
                genre,
                issue_date,
                rating,
                aspect_ratio,
                runtime,
            })
        }
        ProductType::Book => {
            let pages = match form.get("pages").parse::<i32>() {
                Ok(n) if (1..=100_000).contains(&n) => n,
                _ => {
                    errors.add("pages", "Enter the number of pages.");
                    0
                }
            };
            let author = list(form.get("author"), ',');
            if author.is_empty() {
                errors.add("author", "Enter at least one author.");
            }
            Details::Book(BookDetails {
                author,
                publisher: form.get("publisher").to_string(),
                pages,
                isbn: form.get("isbn").to_string(),
                issue_date,
                genre,
            })
        }
    };
    if let Err(why) = crate::content::model::parse_tags(form.get("tags")) {
        errors.add("tags", why);
    }
    // Both are there whenever no field was refused.
    let (Some(sku), Some(slug)) = (sku, slug) else {
        return Err(errors);
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(NewProduct {
        sku,
        slug,
        title,
        description: form.get("description").to_string(),
        list_price,
        retail_price,
        categories,
        details,
        qty,
        featured: form.get("featured") == "1",
        shipping,
    })
}

/// The form's tags, normalised like content tags (`content::model::parse_tags`), sorted.
/// [`parse_product`] refused the form when they did not parse, so here they do.
pub(super) fn tags_of(form: &Submitted) -> Vec<String> {
    let mut tags = crate::content::model::parse_tags(form.get("tags")).unwrap_or_default();
    tags.sort();
    tags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_must_be_real_calendar_days() {
        assert!(parse_date("1959-08-17").is_some());
        assert!(parse_date("2024-02-29").is_some());
        assert!(parse_date("2023-02-29").is_none());
        assert!(parse_date("1959-13-01").is_none());
        assert!(parse_date("yesterday").is_none());
        assert!(parse_date("").is_none());
    }

    #[test]
    fn shipping_weight_is_whole_grams_and_sides_are_plain_decimals() {
        assert_eq!(parse_grams(""), Some(0));
        assert_eq!(parse_grams("350"), Some(350));
        assert_eq!(parse_grams("-5"), None);
        assert_eq!(parse_grams("abc"), None);
        assert_eq!(parse_grams("1.5"), None);
        assert_eq!(parse_grams("99999999999999999999"), None);
        assert_eq!(parse_centimetres(""), Some(0.0));
        assert_eq!(parse_centimetres("14.25"), Some(14.25));
        assert_eq!(parse_centimetres("3"), Some(3.0));
        for bad in [
            "-1", "1.", ".5", "1.234", "inf", "NaN", "1e3", "1,5", "20000",
        ] {
            assert_eq!(parse_centimetres(bad), None, "{bad}");
        }
    }
}

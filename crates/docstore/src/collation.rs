//! Collations: MongoDB's `collation` documents parsed into ICU collators (ICU4X, with its
//! compiled CLDR data), the comparison of strings under the collation in force, and the
//! order-preserving comparison keys that collated indexes store.
//!
//! A command's collation applies to every string comparison it makes: query operators (not
//! `$regex`, which stays binary as in mongod), sorts, `$group` and `distinct` equality, and the
//! update operators that compare. Rather than thread a collator through the matcher, the sort,
//! the expression evaluator and the update engine (all synchronous and deep), a command installs
//! its collation for the thread it runs on with [`enter`], as the string order that
//! `value::compare` consults for every pair of strings. With no collation in force that is one
//! thread-local flag test before the bytewise comparison.

use crate::error::{Error, ErrorCode, Result};
use crate::keystring;
use bson::{Bson, Document};
use icu_collator::options::{AlternateHandling, CaseLevel, CollatorOptions, MaxVariable, Strength};
use icu_collator::preferences::{CollationCaseFirst, CollationNumericOrdering};
use icu_collator::{CollatorBorrowed, CollatorPreferences};
use parking_lot::Mutex;
use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// The ICU version mongod 7.0 reports in every resolved collation.
const ICU_VERSION: &str = "57.1";

/// The locales MongoDB 7.0 documents ("Collation Locales and Default Parameters"), as ICU
/// locale IDs. Anything else is refused as mongod refuses a locale ICU has no collation for.
const LOCALES: &[&str] = &[
    "af",
    "sq",
    "am",
    "ar",
    "hy",
    "as",
    "az",
    "bn",
    "be",
    "bs",
    "bs_Cyrl",
    "bg",
    "my",
    "ca",
    "chr",
    "zh",
    "zh_Hant",
    "hr",
    "cs",
    "da",
    "nl",
    "dz",
    "en",
    "en_US",
    "en_US_POSIX",
    "eo",
    "et",
    "ee",
    "fo",
    "fil",
    "fi",
    "fi_FI",
    "fr",
    "fr_CA",
    "gl",
    "ka",
    "de",
    "de_AT",
    "el",
    "gu",
    "ha",
    "haw",
    "he",
    "hi",
    "hu",
    "is",
    "ig",
    "smn",
    "id",
    "ga",
    "it",
    "ja",
    "kl",
    "kn",
    "kk",
    "km",
    "kok",
    "ko",
    "ky",
    "lkt",
    "lo",
    "lv",
    "ln",
    "lt",
    "dsb",
    "lb",
    "mk",
    "ms",
    "ml",
    "mt",
    "mr",
    "mn",
    "ne",
    "se",
    "nb",
    "nn",
    "or",
    "om",
    "ps",
    "fa",
    "fa_AF",
    "pl",
    "pt",
    "pa",
    "ro",
    "ru",
    "sr",
    "sr_Latn",
    "si",
    "sk",
    "sl",
    "es",
    "sw",
    "sv",
    "ta",
    "te",
    "th",
    "bo",
    "to",
    "tr",
    "uk",
    "hsb",
    "ur",
    "ug",
    "vi",
    "wae",
    "cy",
    "yi",
    "yo",
    "zu",
];

/// The `@collation=` variants MongoDB documents, with the BCP 47 `co` value ICU4X knows them
/// by. `search` (and `searchjl`) are documented too, but ICU4X ships no search tailorings, so
/// they are refused by name instead of silently sorting as the standard collation.
const VARIANTS: &[(&str, &str)] = &[
    ("phonebook", "phonebk"),
    ("traditional", "trad"),
    ("compat", "compat"),
    ("pinyin", "pinyin"),
    ("stroke", "stroke"),
    ("unihan", "unihan"),
    ("zhuyin", "zhuyin"),
    ("big5han", "big5han"),
    ("gb2312han", "gb2312"),
    ("eor", "eor"),
    ("dictionary", "dict"),
    ("phonetic", "phonetic"),
    ("standard", "standard"),
    ("reformed", "reformed"),
];

/// A non-simple collation: its resolved specification (every field, as `listIndexes` and
/// `listCollections` show it) and the collator built from it.
pub(crate) struct Collation {
    spec: Document,
    collator: CollatorBorrowed<'static>,
}

impl std::fmt::Debug for Collation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Collation({})", keystring::render_document(&self.spec))
    }
}

impl PartialEq for Collation {
    fn eq(&self, other: &Self) -> bool {
        self.spec == other.spec
    }
}

fn invalid(field: &str, spec: &Document) -> Error {
    Error::bad_value(format!(
        "Field '{field}' is invalid in: {}",
        keystring::render_document(spec)
    ))
}

fn wrong_type(field: &str, expected: &str, spec: &Document) -> Error {
    Error::type_mismatch(format!(
        "Field '{field}' must be of type {expected} in: {}",
        keystring::render_document(spec)
    ))
}

/// mongod's answer to a value outside a field's choices.
fn not_one_of(field: &str, choices: &str, got: &Bson) -> Error {
    Error::failed_to_parse(format!(
        "Field '{field}' must be {choices}. Got: {}",
        keystring::render(got)
    ))
}

/// What one command's `collation` field asks for.
#[derive(Clone)]
pub(crate) enum Requested {
    /// No `collation` (or `collation: {}`): the collection's default applies.
    Default,
    /// `{locale: "simple"}`: binary comparison, whatever the collection's default.
    Simple,
    Collation(Arc<Collation>),
}

impl Requested {
    /// The collation in force for a command on a collection whose default is `default`.
    pub(crate) fn or_default(self, default: Option<Arc<Collation>>) -> Option<Arc<Collation>> {
        match self {
            Requested::Default => default,
            Requested::Simple => None,
            Requested::Collation(c) => Some(c),
        }
    }
}

/// Parse a command's or index's `collation` field.
pub(crate) fn parse(value: Option<&Bson>) -> Result<Requested> {
    match value {
        None | Some(Bson::Null) => Ok(Requested::Default),
        Some(Bson::Document(d)) if d.is_empty() => Ok(Requested::Default),
        Some(Bson::Document(d)) => Collation::parse(d),
        Some(other) => Err(Error::type_mismatch(format!(
            "collation must be an object, not {}",
            crate::value::type_name(other)
        ))),
    }
}

/// The default collation a collection's options hold (`None`: simple).
pub(crate) fn of_options(options: &Document) -> Option<Arc<Collation>> {
    match options.get_document("collation") {
        // Stored options were validated when the collection was created.
        Ok(d) => match Collation::parse(d) {
            Ok(Requested::Collation(c)) => Some(c),
            _ => None,
        },
        Err(_) => None,
    }
}

/// How many collators [`cache`] keeps at most.
const CACHE_LIMIT: usize = 1024;

/// Collators already built, by the specification as given: building one loads its tailoring, and
/// the same few collations come with every command.
fn cache() -> &'static Mutex<HashMap<String, Arc<Collation>>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<Collation>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

impl Collation {
    fn parse(spec: &Document) -> Result<Requested> {
        let locale = match spec.get("locale") {
            Some(Bson::String(s)) => s.as_str(),
            Some(_) => return Err(wrong_type("locale", "string", spec)),
            None => return Err(Error::failed_to_parse("Required field 'locale' missing")),
        };
        let cache_key = keystring::render_document(spec);
        if let Some(found) = cache().lock().get(&cache_key) {
            return Ok(Requested::Collation(found.clone()));
        }
        let mut case_level = false;
        let mut case_first = None;
        let mut strength = 3;
        let mut numeric = false;
        let mut alternate = None;
        let mut max_variable = None;
        let mut normalization = false;
        let mut backwards = None;
        for (field, value) in spec {
            let flag = |v: &Bson| match v {
                Bson::Boolean(b) => Ok(*b),
                _ => Err(wrong_type(field, "bool", spec)),
            };
            let text = |v: &'_ Bson| match v {
                Bson::String(s) => Ok(s.clone()),
                _ => Err(wrong_type(field, "string", spec)),
            };
            match field.as_str() {
                "locale" => {}
                "caseLevel" => case_level = flag(value)?,
                "caseFirst" => {
                    case_first = Some(match text(value)?.as_str() {
                        "upper" => CollationCaseFirst::Upper,
                        "lower" => CollationCaseFirst::Lower,
                        "off" => CollationCaseFirst::False,
                        _ => return Err(not_one_of(field, "'upper', 'lower', or 'off'", value)),
                    })
                }
                "strength" => {
                    strength = match crate::value::Number::from_bson(value)
                        .and_then(crate::value::Number::as_i64_exact)
                    {
                        Some(n @ 1..=5) => n,
                        Some(_) => return Err(not_one_of(field, "an integer 1 through 5", value)),
                        None => return Err(wrong_type(field, "numeric", spec)),
                    }
                }
                "numericOrdering" => numeric = flag(value)?,
                "alternate" => {
                    alternate = Some(match text(value)?.as_str() {
                        "non-ignorable" => AlternateHandling::NonIgnorable,
                        "shifted" => AlternateHandling::Shifted,
                        _ => return Err(not_one_of(field, "'non-ignorable' or 'shifted'", value)),
                    })
                }
                "maxVariable" => {
                    max_variable = Some(match text(value)?.as_str() {
                        "punct" => MaxVariable::Punctuation,
                        "space" => MaxVariable::Space,
                        _ => return Err(not_one_of(field, "'punct' or 'space'", value)),
                    })
                }
                // ICU4X always normalizes (normalization: true). With `false`, ICU skips the
                // normalization check, which changes results only for text not in FCD form
                // (where ICU's own documentation calls them unreliable); docstore gives the
                // normalized answer either way and shows the field as given.
                "normalization" => normalization = flag(value)?,
                "backwards" => backwards = Some(flag(value)?),
                "version" => {
                    if text(value)? != ICU_VERSION {
                        return Err(invalid("version", spec));
                    }
                }
                other => {
                    return Err(Error::failed_to_parse(format!(
                        "Collation spec contains unknown field: {other}"
                    )))
                }
            }
        }
        if locale == "simple" {
            if spec.len() > 1 {
                return Err(Error::new(
                    ErrorCode::FailedToParse,
                    format!(
                        "If locale=simple, no other fields should be present in: {}",
                        keystring::render_document(spec)
                    ),
                ));
            }
            return Ok(Requested::Simple);
        }
        if let Some((_, variant @ ("search" | "searchjl"))) = locale.split_once("@collation=") {
            return Err(Error::bad_value(format!(
                "collation variant '{variant}' (locale '{locale}') is not supported by \
                 docstore: its collation library ships no search tailorings"
            )));
        }
        let bcp47 = icu_locale(locale).ok_or_else(|| invalid("locale", spec))?;
        let parsed: icu_locale_core::Locale = bcp47.parse().map_err(|_| invalid("locale", spec))?;
        let mut prefs = CollatorPreferences::from(&parsed);
        if let Some(c) = case_first {
            prefs.case_first = Some(c);
        }
        prefs.numeric_ordering = Some(if numeric {
            CollationNumericOrdering::True
        } else {
            CollationNumericOrdering::False
        });
        let mut options = CollatorOptions::default();
        options.strength = Some(match strength {
            1 => Strength::Primary,
            2 => Strength::Secondary,
            3 => Strength::Tertiary,
            4 => Strength::Quaternary,
            _ => Strength::Identical,
        });
        options.case_level = Some(if case_level {
            CaseLevel::On
        } else {
            CaseLevel::Off
        });
        options.alternate_handling = alternate;
        options.max_variable = max_variable;
        let collator = CollatorBorrowed::try_new(prefs, options).map_err(|e| {
            Error::bad_value(format!(
                "Field 'locale' is invalid in: {} ({e})",
                keystring::render_document(spec)
            ))
        })?;
        let resolved = collator.resolved_options();
        // ICU4X cannot set the backward secondary level: it comes from the locale, and only
        // French Canadian turns it on. Asking for the other value is refused rather than
        // ignored.
        let locale_backwards = locale.starts_with("fr_CA");
        if backwards.is_some_and(|b| b != locale_backwards) {
            return Err(Error::bad_value(format!(
                "collation option 'backwards: {}' for locale '{locale}' is not supported by \
                 docstore (its collation library takes backwards from the locale only)",
                !locale_backwards
            )));
        }
        let case_first = match resolved.case_first {
            CollationCaseFirst::Upper => "upper",
            CollationCaseFirst::Lower => "lower",
            _ => "off",
        };
        let alternate = match resolved.alternate_handling {
            AlternateHandling::Shifted => "shifted",
            _ => "non-ignorable",
        };
        let max_variable = match resolved.max_variable {
            MaxVariable::Space => "space",
            _ => "punct",
        };
        let full = bson::doc! {
            "locale": locale,
            "caseLevel": case_level,
            "caseFirst": case_first,
            "strength": strength as i32,
            "numericOrdering": numeric,
            "alternate": alternate,
            "maxVariable": max_variable,
            "normalization": normalization,
            "backwards": locale_backwards,
            "version": ICU_VERSION,
        };
        let collation = Arc::new(Collation {
            spec: full,
            collator,
        });
        let mut cache = cache().lock();
        // Specs differing only in field order are distinct entries: keep the map bounded.
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(cache_key, collation.clone());
        Ok(Requested::Collation(collation))
    }

    /// The resolved specification, every field present.
    pub(crate) fn spec(&self) -> &Document {
        &self.spec
    }

    pub(crate) fn compare(&self, a: &str, b: &str) -> Ordering {
        self.collator.compare(a, b)
    }

    /// A string whose bytes order as the collation orders `s` (the ICU sort key, each byte
    /// written as the character of that code point: UTF-8 keeps byte order and is prefix-free,
    /// so these strings compare bytewise exactly as the sort keys do). Strings equal under the
    /// collation get the same key, so a unique index refuses them.
    pub(crate) fn key_string(&self, s: &str) -> String {
        let mut key: Vec<u8> = Vec::with_capacity(s.len() * 2);
        let Ok(()) = self.collator.write_sort_key_to(s, &mut key);
        key.into_iter().map(char::from).collect()
    }

    /// `v` with every string (inside documents and arrays too, but not field names) replaced
    /// by its [`Collation::key_string`]: what a collated index stores and what its bounds are
    /// built from.
    pub(crate) fn key_value(&self, v: &Bson) -> Bson {
        match v {
            Bson::String(s) => Bson::String(self.key_string(s)),
            Bson::Document(d) => Bson::Document(
                d.iter()
                    .map(|(k, v)| (k.clone(), self.key_value(v)))
                    .collect(),
            ),
            Bson::Array(items) => Bson::Array(items.iter().map(|v| self.key_value(v)).collect()),
            other => other.clone(),
        }
    }
}

/// MongoDB's ICU locale ID (`de`, `zh_Hant`, `de@collation=phonebook`) as a BCP 47 tag, or
/// `None` when MongoDB does not document it.
fn icu_locale(locale: &str) -> Option<String> {
    let (base, variant) = match locale.split_once('@') {
        Some((base, keyword)) => (base, Some(keyword.strip_prefix("collation=")?)),
        None => (locale, None),
    };
    if !LOCALES.contains(&base) {
        return None;
    }
    let mut tag = match base {
        // ICU's POSIX variant of US English sorts as the root ("computer") order in ICU4X.
        "en_US_POSIX" => "en-US-u-va-posix".to_string(),
        other => other.replace('_', "-"),
    };
    if let Some(variant) = variant {
        let co = VARIANTS.iter().find(|(name, _)| *name == variant)?.1;
        if tag.contains("-u-") {
            tag.push_str("-co-");
        } else {
            tag.push_str("-u-co-");
        }
        tag.push_str(co);
    }
    Some(tag)
}

thread_local! {
    /// The collation in force on this thread (the planner needs it whole, for index keys;
    /// `value` holds it as the thread's string order).
    static CURRENT: RefCell<Option<Arc<Collation>>> = const { RefCell::new(None) };
}

impl crate::value::StringOrder for Collation {
    fn compare_strings(&self, a: &str, b: &str) -> Ordering {
        self.compare(a, b)
    }
}

/// Puts back the collation that was in force when [`enter`] was called.
pub(crate) struct Scope {
    previous: Option<Arc<Collation>>,
}

impl Drop for Scope {
    fn drop(&mut self) {
        let previous = self.previous.take();
        install(previous);
    }
}

fn install(collation: Option<Arc<Collation>>) -> Option<Arc<Collation>> {
    let order = collation
        .clone()
        .map(|c| c as Arc<dyn crate::value::StringOrder>);
    crate::value::set_string_order(order);
    CURRENT.with(|c| std::mem::replace(&mut *c.borrow_mut(), collation))
}

/// Make `collation` the one in force on this thread until the returned guard drops. Callers
/// keep the guard within synchronous code: a task moved to another thread would leave it
/// behind.
#[must_use = "the collation is in force only while the guard lives"]
pub(crate) fn enter(collation: Option<Arc<Collation>>) -> Scope {
    Scope {
        previous: install(collation),
    }
}

/// Whether a collation is in force on this thread.
pub(crate) fn active() -> bool {
    crate::value::has_string_order()
}

/// The collation in force on this thread.
pub(crate) fn current() -> Option<Arc<Collation>> {
    if !active() {
        return None;
    }
    CURRENT.with(|c| c.borrow().clone())
}

/// Whether two collations (`None`: simple) are the same.
pub(crate) fn same(a: Option<&Arc<Collation>>, b: Option<&Arc<Collation>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn collation(spec: Document) -> Arc<Collation> {
        match parse(Some(&Bson::Document(spec))).expect("valid") {
            Requested::Collation(c) => c,
            _ => panic!("simple"),
        }
    }

    #[test]
    fn strength_two_ignores_case_and_strength_one_ignores_accents() {
        let two = collation(doc! {"locale": "en", "strength": 2});
        assert_eq!(two.compare("ABC", "abc"), Ordering::Equal);
        assert_ne!(two.compare("café", "cafe"), Ordering::Equal);
        let one = collation(doc! {"locale": "en", "strength": 1});
        assert_eq!(one.compare("Café", "cafe"), Ordering::Equal);
    }

    #[test]
    fn key_strings_order_as_the_collation_does() {
        let c = collation(doc! {"locale": "en", "numericOrdering": true});
        let words = [
            "2", "10", "apple", "Apple", "banana", "Éclair", "eclair", "",
        ];
        for a in words {
            for b in words {
                assert_eq!(
                    c.key_string(a).as_bytes().cmp(c.key_string(b).as_bytes()),
                    c.compare(a, b),
                    "{a} vs {b}"
                );
            }
        }
    }

    #[test]
    fn the_resolved_specification_names_every_field() {
        let c = collation(doc! {"locale": "fr_CA"});
        assert_eq!(
            c.spec(),
            &doc! {
                "locale": "fr_CA", "caseLevel": false, "caseFirst": "off", "strength": 3,
                "numericOrdering": false, "alternate": "non-ignorable", "maxVariable": "punct",
                "normalization": false, "backwards": true, "version": "57.1",
            }
        );
    }

    #[test]
    fn every_documented_locale_and_variant_builds_a_collator() {
        for locale in LOCALES {
            collation(doc! {"locale": *locale});
        }
        for (variant, _) in VARIANTS {
            collation(doc! {"locale": format!("zh@collation={variant}")});
        }
        let search = parse(Some(&Bson::Document(
            doc! {"locale": "de@collation=search"},
        )));
        assert!(search.is_err_and(|e| e.message.contains("search")));
    }

    #[test]
    fn unknown_locales_and_simple_with_options_are_refused() {
        assert!(parse(Some(&Bson::Document(doc! {"locale": "xx"}))).is_err());
        assert!(parse(Some(&Bson::Document(
            doc! {"locale": "simple", "strength": 2}
        )))
        .is_err());
        assert!(parse(Some(&Bson::Document(doc! {"locale": "en", "strength": 0}))).is_err());
        assert!(matches!(
            parse(Some(&Bson::Document(doc! {"locale": "simple"}))),
            Ok(Requested::Simple)
        ));
    }

    #[test]
    fn a_scope_puts_back_the_previous_collation() {
        use crate::value::compare_strings;
        assert_eq!(compare_strings("a", "B"), Ordering::Greater);
        {
            let _scope = enter(Some(collation(doc! {"locale": "en"})));
            assert_eq!(compare_strings("a", "B"), Ordering::Less);
            {
                let _binary = enter(None);
                assert_eq!(compare_strings("a", "B"), Ordering::Greater);
            }
            assert_eq!(compare_strings("a", "B"), Ordering::Less);
        }
        assert_eq!(compare_strings("a", "B"), Ordering::Greater);
    }
}

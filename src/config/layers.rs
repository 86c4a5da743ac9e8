//! How a setting's value is found and read: the layers (built-in defaults, config file,
//! `BAZAAR_SECTION__KEY` variables), the kinds of value a key takes (whole numbers in a range,
//! durations, true/false, text parsed by a function), and the `section!` macro that declares a
//! section's keys once — name, type, kind, documentation — and generates the section's struct,
//! its reader and its entry in the list of known keys.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use super::ConfigError;

/// One declared setting: its full name (`section.key`) and the one-line documentation the README's
/// settings table shows.
#[derive(Debug, Clone, Copy)]
pub(super) struct Key {
    pub(super) name: &'static str,
    // Read by the test that keeps the README's table in step with the declarations.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) doc: &'static str,
}

/// Where a raw value came from, so an error can point at it.
#[derive(Debug, Clone)]
pub(super) enum Origin {
    File(String),
    Env(String),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(path) => write!(f, "in {path}"),
            Origin::Env(var) => write!(f, "from {var}"),
        }
    }
}

/// A value as a layer gave it, before its key's kind reads it.
#[derive(Debug, Clone)]
pub(super) enum RawValue {
    Toml(toml::Value),
    Env(String),
}

/// Values by `section.key`, later layers replacing earlier ones; only declared keys get in.
pub(super) struct Layers {
    known: &'static [&'static [Key]],
    values: BTreeMap<String, (RawValue, Origin)>,
}

const ENV_PREFIX: &str = "BAZAAR_";

impl Layers {
    /// Empty layers accepting the keys of `known` (one slice per section).
    pub(super) fn new(known: &'static [&'static [Key]]) -> Layers {
        Layers {
            known,
            values: BTreeMap::new(),
        }
    }

    fn is_known(&self, name: &str) -> bool {
        self.known
            .iter()
            .flat_map(|s| s.iter())
            .any(|k| k.name == name)
    }

    fn known_keys(&self) -> String {
        self.known
            .iter()
            .flat_map(|s| s.iter())
            .map(|k| k.name)
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub(super) fn add_toml(&mut self, text: &str, origin: &str) -> Result<(), ConfigError> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::File {
                path: origin.to_string(),
                message: e.to_string(),
            })?;
        for (section, entries) in table {
            let toml::Value::Table(entries) = entries else {
                return Err(ConfigError::UnknownKey {
                    key: section,
                    origin: format!("in {origin}"),
                    known: self.known_keys(),
                });
            };
            for (key, value) in entries {
                let name = format!("{section}.{key}");
                let origin = Origin::File(origin.to_string());
                if !self.is_known(&name) {
                    return Err(ConfigError::UnknownKey {
                        key: name,
                        origin: origin.to_string(),
                        known: self.known_keys(),
                    });
                }
                self.values.insert(name, (RawValue::Toml(value), origin));
            }
        }
        Ok(())
    }

    pub(super) fn add_env(
        &mut self,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<(), ConfigError> {
        for (var, value) in env {
            let Some(rest) = var.strip_prefix(ENV_PREFIX) else {
                continue;
            };
            // Only SECTION__KEY names are settings; BAZAAR_CONFIG and the like are not.
            let Some((section, key)) = rest.split_once("__") else {
                continue;
            };
            let name = format!(
                "{}.{}",
                section.to_ascii_lowercase(),
                key.to_ascii_lowercase()
            );
            let origin = Origin::Env(var.clone());
            if !self.is_known(&name) {
                return Err(ConfigError::UnknownKey {
                    key: name,
                    origin: origin.to_string(),
                    known: self.known_keys(),
                });
            }
            self.values.insert(name, (RawValue::Env(value), origin));
        }
        Ok(())
    }

    fn raw(&self, name: &str) -> Result<(&RawValue, &Origin), ConfigError> {
        self.values
            .get(name)
            .map(|(value, origin)| (value, origin))
            .ok_or_else(|| ConfigError::InvalidValue {
                key: name.to_string(),
                origin: "the built-in defaults".to_string(),
                message: "missing".to_string(),
            })
    }

    /// The value of `name` as `kind` reads it; an error names the key, its layer and what is
    /// accepted.
    pub(super) fn get<K: Kind>(&self, name: &str, kind: &K) -> Result<K::Out, ConfigError> {
        let (value, origin) = self.raw(name)?;
        kind.read(value)
            .map_err(|message| ConfigError::InvalidValue {
                key: name.to_string(),
                origin: origin.to_string(),
                message,
            })
    }

    /// An error about `name`'s value found by a check spanning several keys, pointing at the
    /// layer `name` came from.
    pub(super) fn invalid(&self, name: &str, message: impl Into<String>) -> ConfigError {
        let origin = match self.raw(name) {
            Ok((_, origin)) => origin.to_string(),
            Err(_) => "the built-in defaults".to_string(),
        };
        ConfigError::InvalidValue {
            key: name.to_string(),
            origin,
            message: message.into(),
        }
    }
}

/// What a key accepts and what it becomes; `read`'s error says what is accepted.
pub(super) trait Kind {
    type Out;
    fn read(&self, value: &RawValue) -> Result<Self::Out, String>;
}

/// A whole number from `min` to `max`, converted (to a narrower integer, a duration, bytes…).
pub(super) struct Whole<T> {
    min: i64,
    max: i64,
    convert: fn(i64) -> Option<T>,
}

/// A whole number from `min` to `max`, as the field's integer type.
pub(super) fn whole<T: TryFrom<i64>>(min: i64, max: i64) -> Whole<T> {
    Whole {
        min,
        max,
        convert: |n| T::try_from(n).ok(),
    }
}

/// A whole number of seconds from `min` to `max`.
pub(super) fn secs(min: i64, max: i64) -> Whole<Duration> {
    Whole {
        min,
        max,
        convert: |n| u64::try_from(n).ok().map(Duration::from_secs),
    }
}

/// A whole number of milliseconds from `min` to `max`.
pub(super) fn millis(min: i64, max: i64) -> Whole<Duration> {
    Whole {
        min,
        max,
        convert: |n| u64::try_from(n).ok().map(Duration::from_millis),
    }
}

/// A whole number from `min` to `max` in a unit the setting names (MiB, megapixels), converted
/// to the unit the code counts in.
pub(super) fn scaled<T>(min: i64, max: i64, convert: fn(i64) -> Option<T>) -> Whole<T> {
    Whole { min, max, convert }
}

impl<T> Kind for Whole<T> {
    type Out = T;
    fn read(&self, value: &RawValue) -> Result<T, String> {
        let n = match value {
            RawValue::Toml(toml::Value::Integer(n)) => *n,
            RawValue::Env(s) => s
                .trim()
                .parse::<i64>()
                .map_err(|_| format!("expected a whole number, got {s:?}"))?,
            RawValue::Toml(other) => {
                return Err(format!("expected a whole number, got {}", other.type_str()))
            }
        };
        let range = || {
            format!(
                "expected a number from {} to {}, got {n}",
                self.min, self.max
            )
        };
        if n < self.min || n > self.max {
            return Err(range());
        }
        // The range is declared to fit the field's type; should it not, the key is refused
        // rather than the number wrapped.
        (self.convert)(n).ok_or_else(range)
    }
}

/// `true` or `false` (from the environment also `1`/`0`, `yes`/`no`, `on`/`off`).
pub(super) struct Flag;

impl Kind for Flag {
    type Out = bool;
    fn read(&self, value: &RawValue) -> Result<bool, String> {
        match value {
            RawValue::Toml(toml::Value::Boolean(b)) => Ok(*b),
            RawValue::Env(s) => match s.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" => Ok(true),
                "false" | "0" | "no" | "off" => Ok(false),
                _ => Err(format!("expected true or false, got {s:?}")),
            },
            RawValue::Toml(other) => {
                Err(format!("expected true or false, got {}", other.type_str()))
            }
        }
    }
}

fn string(value: &RawValue) -> Result<&str, String> {
    match value {
        RawValue::Toml(toml::Value::String(s)) | RawValue::Env(s) => Ok(s),
        RawValue::Toml(other) => Err(format!("expected a string, got {}", other.type_str())),
    }
}

/// A string, parsed by a function whose error says what is accepted.
pub(super) struct Text<T>(fn(&str) -> Result<T, String>);

/// A string as `parse` reads it (given exactly as written; `parse` trims if it wants to).
pub(super) fn text<T>(parse: fn(&str) -> Result<T, String>) -> Text<T> {
    Text(parse)
}

/// Any string, kept as written.
pub(super) fn any_text() -> Text<String> {
    Text(|s| Ok(s.to_string()))
}

impl<T> Kind for Text<T> {
    type Out = T;
    fn read(&self, value: &RawValue) -> Result<T, String> {
        (self.0)(string(value)?)
    }
}

/// A string where empty (after trimming) means "not set"; a set one is trimmed and parsed.
pub(super) struct OptionalText<T>(fn(&str) -> Result<T, String>);

/// An optional string as `parse` reads it once trimmed.
pub(super) fn optional_text<T>(parse: fn(&str) -> Result<T, String>) -> OptionalText<T> {
    OptionalText(parse)
}

/// An optional string, kept trimmed.
pub(super) fn any_optional_text() -> OptionalText<String> {
    OptionalText(|s| Ok(s.to_string()))
}

impl<T> Kind for OptionalText<T> {
    type Out = Option<T>;
    fn read(&self, value: &RawValue) -> Result<Option<T>, String> {
        match string(value)?.trim() {
            "" => Ok(None),
            s => (self.0)(s).map(Some),
        }
    }
}

/// Declares one section of settings, each key once, and generates:
/// - the section's struct, each key's field documented with the key's one-line documentation;
/// - `KEYS`, the section's entries in the known-key list (and so in the README's table);
/// - `read`, which reads every key from the layers with its kind.
///
/// ```text
/// section! {
///     #[derive(Debug, Clone)]
///     pub struct CartSettings in "cart" {
///         pub max_units: i64 = "max_units", whole(1, 100_000),
///             "units one cart may hold, all lines together";
///     }
/// }
/// ```
///
/// A section whose fields combine several keys (the mail transport from the `smtp_*` keys)
/// declares those keys under `inputs (layers) { … }` — each read into a local variable of its
/// name — and computes its other fields under `derived { … }` from them (`layers` names the
/// layers, for errors).
macro_rules! section {
    (
        $(#[$meta:meta])*
        $vis:vis struct $Name:ident in $section:literal {
            $(
                $(#[$fmeta:meta])*
                pub $field:ident : $ty:ty = $key:literal, $kind:expr, $doc:literal;
            )*
        }
        $(
            inputs ($layers:ident) {
                $( $input:ident : $ity:ty = $ikey:literal, $ikind:expr, $idoc:literal; )*
            }
            derived {
                $( $(#[$dmeta:meta])* pub $dfield:ident : $dty:ty = $dexpr:expr; )*
            }
        )?
    ) => {
        $(#[$meta])*
        $vis struct $Name {
            $(
                #[doc = $doc]
                $(#[$fmeta])*
                pub $field: $ty,
            )*
            $($(
                $(#[$dmeta])*
                pub $dfield: $dty,
            )*)?
        }

        impl $Name {
            /// This section's keys, in the order the README's table lists them.
            const KEYS: &'static [$crate::config::layers::Key] = &[
                $($(
                    $crate::config::layers::Key {
                        name: concat!($section, ".", $ikey),
                        doc: $idoc,
                    },
                )*)?
                $(
                    $crate::config::layers::Key {
                        name: concat!($section, ".", $key),
                        doc: $doc,
                    },
                )*
            ];

            fn read(
                layers: &$crate::config::layers::Layers,
            ) -> Result<$Name, $crate::config::ConfigError> {
                $(
                    // Unused by sections whose derived fields need no error (`disk_faults`).
                    #[allow(unused_variables)]
                    let $layers = layers;
                    $( let $input: $ity = $layers.get(concat!($section, ".", $ikey), &$ikind)?; )*
                )?
                Ok($Name {
                    $( $field: layers.get(concat!($section, ".", $key), &$kind)?, )*
                    $($( $dfield: $dexpr, )*)?
                })
            }
        }
    };
}
pub(super) use section;

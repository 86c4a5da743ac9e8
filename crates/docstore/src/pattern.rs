//! Regular expressions with MongoDB's (PCRE's) syntax. Most patterns compile on the `regex`
//! crate, whose matching time is linear in the input; a pattern that needs PCRE features that
//! crate lacks (look-around such as `^(?!system\.)`, backreferences, atomic groups) falls back to
//! `fancy-regex`, a backtracking engine run under a step limit. A match that hits the limit is
//! an error naming the pattern (as PCRE's match limit is in mongod), never a silent non-match.

use crate::error::{Error, ErrorCode, Result};

/// How many backtracking steps one match may take before it is refused: enough for any
/// reasonable pattern, small enough that a pathological one on a long string stops within
/// milliseconds instead of holding a store worker.
const BACKTRACK_LIMIT: usize = 1_000_000;

/// A compiled pattern.
#[derive(Debug, Clone)]
pub(crate) enum Pattern {
    /// Linear-time matching: every pattern the `regex` crate accepts.
    Linear(regex::Regex),
    /// Backtracking, for look-around and backreferences.
    Backtracking(Box<fancy_regex::Regex>),
}

impl Pattern {
    /// Compile `pattern` with MongoDB options (`i m s x u`). `Err` is either the first option
    /// letter that is not allowed (`Ok(Err(c))`) or the compiler's message.
    pub(crate) fn new(pattern: &str, options: &str) -> std::result::Result<Pattern, PatternError> {
        let source = regex_source(pattern, options).map_err(PatternError::Flag)?;
        match regex::Regex::new(&source) {
            Ok(linear) => Ok(Pattern::Linear(linear)),
            Err(linear_error) => fancy_regex::RegexBuilder::new(&source)
                .backtrack_limit(BACKTRACK_LIMIT)
                .build()
                .map(|b| Pattern::Backtracking(Box::new(b)))
                // The linear engine's message is the clearer one for plain syntax errors.
                .map_err(|_| PatternError::Syntax(linear_error.to_string())),
        }
    }

    /// Whether the pattern matches somewhere in `text`; `Err` when a backtracking match ran
    /// out of steps.
    pub(crate) fn is_match(&self, text: &str) -> Result<bool> {
        match self {
            Pattern::Linear(re) => Ok(re.is_match(text)),
            Pattern::Backtracking(re) => re.is_match(text).map_err(|e| {
                Error::new(
                    ErrorCode::BadValue,
                    format!(
                        "Regular expression /{}/ took too long to match (backtracking limit): {e}",
                        re.as_str()
                    ),
                )
            }),
        }
    }
}

/// Why a pattern did not compile.
#[derive(Debug)]
pub(crate) enum PatternError {
    /// An option letter MongoDB does not allow.
    Flag(char),
    /// The pattern itself, with the compiler's message.
    Syntax(String),
}

/// A MongoDB pattern with its options (`i m s x`, and `u` which is always on) as a source with
/// inline flags (both engines read the same syntax); `Err` names the first option letter that is
/// not allowed.
pub(crate) fn regex_source(pattern: &str, options: &str) -> std::result::Result<String, char> {
    let mut flags = String::new();
    for c in options.chars() {
        match c {
            'i' | 'm' | 's' | 'x' => flags.push(c),
            // Unicode matching is always on in both engines.
            'u' => {}
            other => return Err(other),
        }
    }
    Ok(if flags.is_empty() {
        pattern.to_string()
    } else {
        format!("(?{flags}){pattern}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_patterns_run_on_the_linear_engine() {
        let p = Pattern::new("^ab+c$", "i").unwrap();
        assert!(matches!(p, Pattern::Linear(_)));
        assert!(p.is_match("ABBC").unwrap());
    }

    #[test]
    fn look_around_and_backreferences_fall_back_to_backtracking() {
        let p = Pattern::new(r"^(?!system\.)", "").unwrap();
        assert!(matches!(p, Pattern::Backtracking(_)));
        assert!(p.is_match("users").unwrap());
        assert!(!p.is_match("system.views").unwrap());
        let p = Pattern::new(r"^(\w+) \1$", "").unwrap();
        assert!(p.is_match("hey hey").unwrap());
        assert!(!p.is_match("hey you").unwrap());
    }

    #[test]
    fn a_pathological_backtracking_match_is_an_error_not_a_non_match() {
        let p = Pattern::new(r"^(a|aa)+(\1)*$", "").unwrap();
        let text = format!("{}b", "a".repeat(60));
        let err = p.is_match(&text).unwrap_err();
        assert_eq!(err.code_number(), ErrorCode::BadValue.code());
    }

    #[test]
    fn syntax_errors_and_bad_flags_are_reported() {
        assert!(matches!(
            Pattern::new("a(", ""),
            Err(PatternError::Syntax(_))
        ));
        assert!(matches!(
            Pattern::new("a", "q"),
            Err(PatternError::Flag('q'))
        ));
    }
}

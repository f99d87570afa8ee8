//! Every rule, in code order: the one list that ties a `Rule` to its registry entry. Each entry
//! (code, name, default severity, summary, docs) lives beside the rule's implementation; this
//! list only names where. Groups (like ruff): KG0xx parsing, KG1xx PyTorch fallbacks, KG2xx
//! bypass and obfuscation, KG3xx tampering/forging/introspection/sandbox, KG4xx caching, phase
//! detection, threads and streams, KG5xx precision, KG6xx embedded C++/CUDA and Triton, KG7xx
//! structure, KG9xx suppressions.
//!
//! To add a rule: write its `RuleMeta` const next to its check, add a line below (keep code
//! order), then regenerate docs/rules.md:
//! `KERNELGATE_BLESS=1 cargo test -p kernelgate --test it lint::docs`.

use crate::rule::RuleMeta;

/// Declares the `Rule` enum (one variant per code, so a mistyped code does not compile), its
/// code, and `RULES`, the registry entries in code order.
macro_rules! rules {
    ($($code:ident => $meta:path,)*) => {
        /// A lint rule. `Rule::KG401.meta()` is its registry entry.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Rule {
            $($code,)*
        }

        impl Rule {
            /// Every rule, in code order.
            pub const ALL: &'static [Rule] = &[$(Rule::$code,)*];

            /// The code, e.g. `"KG401"`.
            pub const fn code(self) -> &'static str {
                match self {
                    $(Rule::$code => stringify!($code),)*
                }
            }

            /// The registry entry.
            pub const fn meta(self) -> &'static RuleMeta {
                match self {
                    $(Rule::$code => &$meta,)*
                }
            }

            /// The rule with this code (case-insensitive).
            pub fn from_code(code: &str) -> Option<Rule> {
                Rule::ALL.iter().copied().find(|r| r.code().eq_ignore_ascii_case(code))
            }
        }

        /// The registry entries, in code order.
        pub static RULES: &[RuleMeta] = &[$($meta,)*];
    };
}

rules! {
    KG000 => crate::file_rules::KG000,
    KG101 => crate::python::rules::torch_fallback::KG101,
    KG102 => crate::python::rules::torch_fallback::KG102,
    KG103 => crate::python::rules::torch_fallback::KG103,
    KG104 => crate::python::rules::torch_fallback::KG104,
    KG201 => crate::python::rules::bypass::KG201,
    KG202 => crate::python::rules::bypass::KG202,
    KG203 => crate::python::rules::bypass::KG203,
    KG204 => crate::python::rules::bypass::KG204,
    KG301 => crate::python::rules::tampering::KG301,
    KG302 => crate::python::rules::tampering::KG302,
    KG303 => crate::python::rules::tampering::KG303,
    KG304 => crate::python::rules::sandbox::KG304,
    KG305 => crate::python::rules::sandbox::KG305,
    KG306 => crate::python::rules::sandbox::KG306,
    KG307 => crate::python::rules::hooks::KG307,
    KG401 => crate::python::rules::output_cache::KG401,
    KG402 => crate::python::rules::phase_detection::KG402,
    KG403 => crate::python::rules::concurrency::KG403,
    KG404 => crate::python::rules::concurrency::KG404,
    KG405 => crate::python::rules::lazy_tensor::KG405,
    KG406 => crate::python::rules::memoized_forward::KG406,
    KG407 => crate::python::rules::input_mutation::KG407,
    KG501 => crate::python::rules::precision::KG501,
    KG502 => crate::python::rules::precision::KG502,
    KG601 => crate::cpp::rules::torch_op::KG601,
    KG602 => crate::cpp::rules::torch_op::KG602,
    KG603 => crate::cpp::rules::concurrency::KG603,
    KG604 => crate::cpp::rules::tampering::KG604,
    KG605 => crate::cpp::rules::concurrency::KG605,
    KG606 => crate::cpp::rules::caching::KG606,
    KG607 => crate::cpp::rules::caching::KG607,
    KG608 => crate::cpp::rules::input_mutation::KG608,
    KG609 => crate::cpp::rules::input_mutation::KG609,
    KG610 => crate::cpp::rules::precision::KG610,
    KG611 => crate::cpp::rules::decoy::KG611,
    KG612 => crate::cpp::rules::decoy::KG612,
    KG613 => crate::cpp::rules::tampering::KG613,
    KG614 => crate::cpp::rules::tampering::KG614,
    KG615 => crate::cpp::rules::sources::KG615,
    KG616 => crate::cpp::rules::sources::KG616,
    KG617 => crate::cpp::rules::hooks::KG617,
    KG620 => crate::triton::KG620,
    KG621 => crate::triton::KG621,
    KG622 => crate::triton::KG622,
    KG630 => crate::cpp::device_store::KG630,
    KG701 => crate::python::rules::structure::KG701,
    KG702 => crate::python::rules::structure::KG702,
    KG703 => crate::python::rules::structure::KG703,
    KG900 => crate::file_rules::KG900,
    KG901 => crate::file_rules::KG901,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_entry_carries_its_rules_code() {
        for r in Rule::ALL {
            assert_eq!(r.meta().code, r.code());
            assert_eq!(Rule::from_code(&r.code().to_ascii_lowercase()), Some(*r));
        }
        assert_eq!(RULES.len(), Rule::ALL.len());
    }

    #[test]
    fn codes_are_unique_sorted_and_documented() {
        let codes: Vec<&str> = RULES.iter().map(|r| r.code).collect();
        let mut sorted = codes.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(codes, sorted, "rule codes must be unique and in order");
        for r in RULES {
            assert!(r.code.len() == 5 && r.code.starts_with("KG"), "{}", r.code);
            assert!(
                !r.summary.is_empty()
                    && !r.doc.is_empty()
                    && !r.error_when.is_empty()
                    && !r.warn_when.is_empty()
                    && !r.bad.is_empty()
                    && !r.good.is_empty(),
                "{}",
                r.code
            );
            assert!(
                r.name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '-' || c.is_ascii_digit()),
                "{}",
                r.name
            );
        }
    }
}

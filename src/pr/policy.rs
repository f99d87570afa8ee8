//! Policy: which observations fail the check, which only warn, and what acknowledges a warning.
//! Configured in `[policy]` of `kernelgate.toml`; documented in `docs/policy.md`.

use kernelgate_model::{Condition, Config, Severity};
use kernelgate_report::{
    BaselineKind, ComparisonVerdict, KernelRow, OutcomeKind, PolicyInfo, Verdict,
};

use kernelgate_model::directive::acknowledgements;

/// Observation codes the policy can route to fail / warn. Flags raised by the pipeline use the
/// same codes, so `allow=excessive_speedup` acknowledges exactly that flag.
pub mod code {
    pub const LINT_ERROR: &str = "lint_error";
    pub const LINT_WARNING: &str = "lint_warning";
    pub const UNMAPPED: &str = "unmapped";
    pub const REGRESSION: &str = "regression";
    pub const EXCESSIVE_SPEEDUP: &str = "excessive_speedup";
    pub const IMPLAUSIBLE_TIME: &str = "implausible_time";
    pub const ESCAPED_WORK: &str = "escaped_work";
    pub const REFERENCE_CHANGED: &str = "reference_changed";
    pub const BASELINE_MISMATCH: &str = "baseline_mismatch";
    pub const RUNTIME_WARNING: &str = "runtime_warning";
    pub const NO_SPEEDUP: &str = "no_speedup";
    pub const INCORRECT: &str = "incorrect";
    pub const CRASH: &str = "crash";
    pub const LOW_CUSTOM_SHARE: &str = "low_custom_share";
    pub const PARTIAL_REPLACEMENT: &str = "partial_replacement";
}

/// The policy condition an outcome falls under (the model's `Condition` names).
pub fn outcome_code(kind: OutcomeKind) -> Option<&'static str> {
    Some(match kind {
        OutcomeKind::Correct
        | OutcomeKind::NotRun
        | OutcomeKind::Skipped
        | OutcomeKind::Infrastructure => return None,
        OutcomeKind::Incorrect | OutcomeKind::Hack => code::INCORRECT,
        OutcomeKind::CompileError => "compile_error",
        OutcomeKind::Timeout => "timeout",
        OutcomeKind::EscapedWork => code::ESCAPED_WORK,
        OutcomeKind::RuntimeError
        | OutcomeKind::Crash
        | OutcomeKind::OutOfMemory
        | OutcomeKind::Other => code::CRASH,
    })
}

/// Codes that a reviewer may acknowledge (PR label or allow directive with a reason).
const ACKNOWLEDGEABLE: [&str; 2] = [code::EXCESSIVE_SPEEDUP, code::IMPLAUSIBLE_TIME];

#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Codes that fail the check: the model's `Condition` names (`incorrect`, `crash`, ...).
    pub fail_on: Vec<String>,
    /// Codes that only warn.
    pub warn_on: Vec<String>,
    /// Relative slowdown vs the base version beyond which a significant regression counts
    /// (0.02 = 2 %).
    pub regression_threshold: f64,
    /// Speedup over eager PyTorch above which a result is called excessive.
    pub excessive_speedup: f64,
    /// PR labels that acknowledge excessive-speedup and implausible-time warnings.
    pub ack_labels: Vec<String>,
    /// Op-audit custom share (0..1) below which `low_custom_share` is raised.
    pub custom_share_floor: f64,
    /// Custom share below which `partial_replacement` is raised.
    pub custom_share_warn: f64,
}

/// The label that acknowledges an excessive speedup unless `--ack-label` names others.
pub const DEFAULT_ACK_LABEL: &str = "kernelgate:ack-speedup";

impl Default for Policy {
    fn default() -> Self {
        Policy::from_config(&Config::default(), &[])
    }
}

impl Policy {
    /// `[policy] fail_on / warn_on`, `[timing] threshold_pct / excessive_speedup` from the
    /// repository config. A changed reference, a stale baseline and runtime warnings always warn.
    pub fn from_config(cfg: &Config, ack_labels: &[String]) -> Policy {
        let codes = |cs: &[Condition]| {
            cs.iter()
                .map(|c| c.as_str().to_string())
                .collect::<Vec<_>>()
        };
        let mut warn_on = codes(&cfg.policy.warn_on);
        for always in [
            code::REFERENCE_CHANGED,
            code::BASELINE_MISMATCH,
            code::RUNTIME_WARNING,
        ] {
            warn_on.push(always.to_string());
        }
        Policy {
            fail_on: codes(&cfg.policy.fail_on),
            warn_on,
            regression_threshold: cfg.timing.threshold_pct / 100.0,
            excessive_speedup: cfg.timing.excessive_speedup,
            custom_share_floor: cfg.policy.custom_share_floor_pct / 100.0,
            custom_share_warn: cfg.policy.custom_share_warn_pct / 100.0,
            ack_labels: if ack_labels.is_empty() {
                vec![DEFAULT_ACK_LABEL.to_string()]
            } else {
                ack_labels.to_vec()
            },
        }
    }

    /// What the policy does with an observation code (fail wins over warn).
    pub fn action(&self, code: &str) -> Verdict {
        if self.fail_on.iter().any(|c| c == code) {
            Verdict::Fail
        } else if self.warn_on.iter().any(|c| c == code) {
            Verdict::Warn
        } else {
            Verdict::Pass
        }
    }

    pub fn info(&self, acks: &[String]) -> PolicyInfo {
        PolicyInfo {
            fail_on: self.fail_on.clone(),
            warn_on: self.warn_on.clone(),
            regression_threshold: Some(self.regression_threshold),
            acknowledged: acks.to_vec(),
        }
    }
}

/// Acknowledgements that apply to one kernel: PR labels plus allow directives in its source.
#[derive(Debug, Clone, Default)]
pub struct Acks {
    /// Labels on the PR (all of them; the policy picks its ack labels).
    pub labels: Vec<String>,
}

/// Sets `row.verdict` and `row.reasons` from everything already on the row (findings, outcome,
/// comparisons, flags). `source` is the kernel's text, for allow directives.
pub fn judge(row: &mut KernelRow, policy: &Policy, acks: &Acks, source: &str) {
    let mut verdict = Verdict::Pass;
    let mut reasons: Vec<String> = Vec::new();
    let raise = |code: &str, reason: String, verdict: &mut Verdict, reasons: &mut Vec<String>| {
        let action = policy.action(code);
        if action != Verdict::Pass {
            *verdict = worst(*verdict, action);
            reasons.push(format!("{}: {reason}", action.as_str()));
        }
    };

    let errors = row
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error && f.line > 0)
        .count();
    let warnings = row
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Warning && f.line > 0)
        .count();
    if errors > 0 {
        let rules = rule_list(row, Severity::Error);
        raise(
            code::LINT_ERROR,
            format!("{errors} lint error(s) ({rules})"),
            &mut verdict,
            &mut reasons,
        );
    }
    if warnings > 0 {
        let rules = rule_list(row, Severity::Warning);
        raise(
            code::LINT_WARNING,
            format!("{warnings} lint warning(s) ({rules})"),
            &mut verdict,
            &mut reasons,
        );
    }

    match row.outcome.kind {
        OutcomeKind::Correct | OutcomeKind::NotRun => {}
        // Not the candidate's doing: the row is neutral unless something else fails it.
        OutcomeKind::Infrastructure => reasons.push(format!(
            "neutral: {} (the machine or kernelgate failed before the kernel ran, after one \
             automatic retry; re-run the check)",
            row.outcome.message
        )),
        OutcomeKind::Skipped => {
            if row.problem.is_empty() {
                raise(
                    code::UNMAPPED,
                    row.outcome.message.clone(),
                    &mut verdict,
                    &mut reasons,
                );
            }
        }
        kind => {
            let msg = if row.outcome.message.is_empty() {
                kind.as_str().to_string()
            } else {
                row.outcome.message.clone()
            };
            let code = outcome_code(kind).unwrap_or(code::CRASH);
            raise(
                code,
                format!("{}: {msg}", kind.as_str()),
                &mut verdict,
                &mut reasons,
            );
        }
    }
    // Runtime findings (no line): the harness's own checks beyond the outcome.
    for f in row.findings.iter().filter(|f| f.line == 0) {
        let code = if f.severity == Severity::Error {
            code::INCORRECT
        } else {
            code::RUNTIME_WARNING
        };
        raise(
            code,
            format!("{} ({})", f.message, f.rule),
            &mut verdict,
            &mut reasons,
        );
    }

    if let Some(cmp) = &row.vs_base {
        let slowdown = cmp.ratio - 1.0;
        if cmp.verdict == ComparisonVerdict::Slower && slowdown > policy.regression_threshold {
            raise(
                code::REGRESSION,
                format!(
                    "{:.1}% slower than the base version (threshold {:.1}%)",
                    slowdown * 100.0,
                    policy.regression_threshold * 100.0
                ),
                &mut verdict,
                &mut reasons,
            );
        }
    }

    // Without a live base-vs-head run, main's accepted timing of the kernel stands in for it.
    if let (None, Some(cmp)) = (&row.vs_base, &row.vs_baseline) {
        let slowdown = cmp.ratio - 1.0;
        if cmp.verdict == ComparisonVerdict::Slower
            && slowdown > policy.regression_threshold
            && cmp
                .against
                .as_ref()
                .is_some_and(|a| a.kind == BaselineKind::MainKernel)
        {
            raise(
                code::REGRESSION,
                format!(
                    "{:.1}% slower than main's accepted timing of this kernel (threshold {:.1}%)",
                    slowdown * 100.0,
                    policy.regression_threshold * 100.0
                ),
                &mut verdict,
                &mut reasons,
            );
        }
    }

    if let (true, Some(s)) = (row.is_correct(), row.speedup_eager) {
        if s.value <= 1.0 {
            raise(
                code::NO_SPEEDUP,
                format!("not faster than eager PyTorch ({:.2}x)", s.value),
                &mut verdict,
                &mut reasons,
            );
        }
    }

    if let Some(s) = row.speedup_eager {
        if row.is_correct()
            && s.value > policy.excessive_speedup
            && !row.flags.iter().any(|f| f.code == code::EXCESSIVE_SPEEDUP)
        {
            row.flags.push(kernelgate_report::Flag {
                code: code::EXCESSIVE_SPEEDUP.to_string(),
                severity: Severity::Warning,
                message: format!(
                    "{:.1}x faster than eager PyTorch (above {:.0}x): check for a reward hack",
                    s.value, policy.excessive_speedup
                ),
            });
        }
    }

    if row.is_correct() {
        if let Some(flag) = audit_flag(row, policy) {
            row.flags.retain(|f| f.code != flag.code);
            row.flags.push(flag);
        }
    }

    let allows = acknowledgements(source);
    let label = acks.labels.iter().find(|l| policy.ack_labels.contains(l));
    for flag in row.flags.clone() {
        if ACKNOWLEDGEABLE.contains(&flag.code.as_str()) {
            if let Some((line, reason)) = allows
                .iter()
                .find(|a| a.condition.as_str() == flag.code)
                .map(|a| (a.line, &a.reason))
            {
                match reason {
                    Some(reason) => {
                        reasons.push(format!("acknowledged {} (allow directive, line {line}): {reason}", flag.code));
                        continue;
                    }
                    None => reasons.push(format!(
                        "allow={} on line {line} has no reason and is ignored; add `reason=\"...\"`",
                        flag.code
                    )),
                }
            } else if let Some(label) = label {
                reasons.push(format!("acknowledged {} by PR label `{label}`", flag.code));
                continue;
            }
        }
        raise(&flag.code, flag.message.clone(), &mut verdict, &mut reasons);
    }

    // Not run for a neutral reason (no GPU, deleted, the runner's own failure) and nothing else
    // against it: skipped, as the header counts it.
    if verdict == Verdict::Pass
        && matches!(
            row.outcome.kind,
            OutcomeKind::Skipped | OutcomeKind::Infrastructure
        )
    {
        verdict = Verdict::Skipped;
    }
    row.verdict = verdict;
    row.reasons = reasons;
}

/// The op audit's flag: the custom share below the floor (`low_custom_share`) or below the
/// warning threshold (`partial_replacement`), naming what PyTorch still does and any extension
/// call whose work does not count.
fn audit_flag(row: &KernelRow, policy: &Policy) -> Option<kernelgate_report::Flag> {
    let audit = row.audit.as_ref()?;
    let share = audit.custom_share?;
    let code = if share < policy.custom_share_floor {
        code::LOW_CUSTOM_SHARE
    } else if share < policy.custom_share_warn {
        code::PARTIAL_REPLACEMENT
    } else {
        return None;
    };
    let threshold = if code == code::LOW_CUSTOM_SHARE {
        format!(
            "below the floor of {:.0}%",
            policy.custom_share_floor * 100.0
        )
    } else {
        format!("below {:.0}%", policy.custom_share_warn * 100.0)
    };
    let mut message = format!(
        "custom code does {} of the forward's work ({threshold}); PyTorch still does: {}",
        audit.share_label(),
        audit.describe_left(4)
    );
    let ineffective = audit.describe_ineffective();
    if !ineffective.is_empty() {
        message.push_str(&format!(
            "; extension calls that do not count: {ineffective}"
        ));
    }
    if audit.extension_calls.is_empty() && code == code::LOW_CUSTOM_SHARE {
        message.push_str("; the extension was never called");
    }
    Some(kernelgate_report::Flag {
        code: code.to_string(),
        severity: if policy.action(code) == Verdict::Fail {
            Severity::Error
        } else {
            Severity::Warning
        },
        message,
    })
}

fn worst(a: Verdict, b: Verdict) -> Verdict {
    let rank = |v: Verdict| match v {
        Verdict::Pass | Verdict::Skipped => 0,
        Verdict::Warn => 1,
        Verdict::Fail => 2,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

fn rule_list(row: &KernelRow, severity: Severity) -> String {
    let mut rules: Vec<&str> = row
        .findings
        .iter()
        .filter(|f| f.severity == severity)
        .map(|f| f.rule.as_str())
        .collect();
    rules.sort();
    rules.dedup();
    rules.join(", ")
}

/// Exit code for an overall verdict: 0 pass/warn, 1 fail.
pub fn exit_code(verdict: Verdict) -> i32 {
    i32::from(verdict == Verdict::Fail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernelgate_model::{Backend, Precision};
    use kernelgate_report::{Change, Interval, OutcomeSummary};

    fn correct_row(speedup: f64) -> KernelRow {
        let mut r = KernelRow::new(
            "k.py",
            "level1/3_ReLU",
            Backend::Cpp,
            Precision::Fp32,
            Change::Added,
            OutcomeSummary::new(OutcomeKind::Correct, ""),
        );
        r.speedup_eager = Some(Interval::point(speedup));
        r
    }

    #[test]
    fn no_speedup_counts_only_when_configured() {
        let mut r = correct_row(0.8);
        judge(&mut r, &Policy::default(), &Acks::default(), "");
        assert_eq!(r.verdict, Verdict::Pass, "off by default: {:?}", r.reasons);
        let mut cfg = Config::default();
        cfg.policy.warn_on.push(Condition::NoSpeedup);
        let mut r = correct_row(0.8);
        judge(
            &mut r,
            &Policy::from_config(&cfg, &[]),
            &Acks::default(),
            "",
        );
        assert_eq!(r.verdict, Verdict::Warn);
        assert!(r.reasons[0].contains("0.80x"), "{:?}", r.reasons);
    }

    #[test]
    fn a_condition_in_both_lists_fails_and_exit_codes_follow() {
        let mut cfg = Config::default();
        cfg.policy.fail_on.push(Condition::ExcessiveSpeedup);
        let mut r = correct_row(40.0);
        judge(
            &mut r,
            &Policy::from_config(&cfg, &[]),
            &Acks::default(),
            "",
        );
        assert_eq!(r.verdict, Verdict::Fail);
        assert_eq!(
            (
                exit_code(Verdict::Pass),
                exit_code(Verdict::Warn),
                exit_code(Verdict::Fail)
            ),
            (0, 0, 1)
        );
    }
}

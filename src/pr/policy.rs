//! Policy: which observations fail the check, which only warn, and what acknowledges a warning.
//! Configured in `[policy]` of `kernelgate.toml`; documented in `docs/policy.md`.

use kernelgate_model::{Condition, Config, Severity};
use kernelgate_report::{
    BaselineKind, ComparisonVerdict, KernelRow, OutcomeKind, PolicyInfo, Verdict,
};

use kernelgate_model::directive::acknowledgements;

/// The policy condition an outcome falls under.
pub fn outcome_condition(kind: OutcomeKind) -> Option<Condition> {
    Some(match kind {
        OutcomeKind::Correct
        | OutcomeKind::NotRun
        | OutcomeKind::Skipped
        | OutcomeKind::Infrastructure => return None,
        OutcomeKind::Incorrect | OutcomeKind::Hack => Condition::Incorrect,
        OutcomeKind::CompileError => Condition::CompileError,
        OutcomeKind::Timeout => Condition::Timeout,
        OutcomeKind::EscapedWork => Condition::EscapedWork,
        OutcomeKind::RuntimeError
        | OutcomeKind::Crash
        | OutcomeKind::OutOfMemory
        | OutcomeKind::Other => Condition::Crash,
    })
}

#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Conditions that fail the check.
    pub fail_on: Vec<Condition>,
    /// Conditions that only warn (besides [`Condition::ALWAYS_WARN`]).
    pub warn_on: Vec<Condition>,
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
        Policy {
            fail_on: cfg.policy.fail_on.clone(),
            warn_on: cfg.policy.warn_on.clone(),
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

    /// What the policy does with a condition (fail wins over warn).
    pub fn action(&self, condition: Condition) -> Verdict {
        if self.fail_on.contains(&condition) {
            Verdict::Fail
        } else if condition.always_warns() || self.warn_on.contains(&condition) {
            Verdict::Warn
        } else {
            Verdict::Pass
        }
    }

    pub fn info(&self, acks: &[String]) -> PolicyInfo {
        let name = |c: Condition| c.as_str().to_string();
        PolicyInfo {
            fail_on: self.fail_on.iter().copied().map(name).collect(),
            warn_on: (self.warn_on.iter().copied())
                .chain(Condition::ALWAYS_WARN)
                .map(name)
                .collect(),
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

/// A verdict being reached: the worst action so far and one sentence per reason.
struct Judgement<'a> {
    policy: &'a Policy,
    verdict: Verdict,
    reasons: Vec<String>,
}

impl Judgement<'_> {
    /// Applies the policy's action for `condition`; a condition it ignores leaves no reason.
    fn raise(&mut self, condition: Condition, reason: String) {
        let action = self.policy.action(condition);
        if action != Verdict::Pass {
            self.verdict = worst(self.verdict, action);
            self.reasons.push(format!("{}: {reason}", action.as_str()));
        }
    }
}

/// Sets `row.verdict` and `row.reasons` from everything already on the row (findings, outcome,
/// comparisons, flags). `source` is the kernel's text, for allow directives.
pub fn judge(row: &mut KernelRow, policy: &Policy, acks: &Acks, source: &str) {
    let mut j = Judgement {
        policy,
        verdict: Verdict::Pass,
        reasons: Vec::new(),
    };
    judge_findings(&mut j, row);
    judge_outcome(&mut j, row);
    judge_timing(&mut j, row);
    raise_flags(row, policy);
    judge_flags(&mut j, row, acks, source);
    // Not run for a neutral reason (no GPU, deleted, the runner's own failure) and nothing else
    // against it: skipped, as the header counts it.
    if j.verdict == Verdict::Pass
        && matches!(
            row.outcome.kind,
            OutcomeKind::Skipped | OutcomeKind::Infrastructure
        )
    {
        j.verdict = Verdict::Skipped;
    }
    row.verdict = j.verdict;
    row.reasons = j.reasons;
}

/// Lint findings (those with a line).
fn judge_findings(j: &mut Judgement<'_>, row: &KernelRow) {
    let count = |severity| {
        row.findings
            .iter()
            .filter(|f| f.severity == severity && !f.is_runtime())
            .count()
    };
    let (errors, warnings) = (count(Severity::Error), count(Severity::Warning));
    if errors > 0 {
        let rules = rule_list(row, Severity::Error);
        j.raise(
            Condition::LintError,
            format!("{errors} lint error(s) ({rules})"),
        );
    }
    if warnings > 0 {
        let rules = rule_list(row, Severity::Warning);
        j.raise(
            Condition::LintWarning,
            format!("{warnings} lint warning(s) ({rules})"),
        );
    }
}

/// The outcome, then the harness's runtime findings (no line): its checks beyond the outcome.
fn judge_outcome(j: &mut Judgement<'_>, row: &KernelRow) {
    match row.outcome.kind {
        OutcomeKind::Correct | OutcomeKind::NotRun => {}
        // Not the candidate's doing: the row is neutral unless something else fails it.
        OutcomeKind::Infrastructure => j.reasons.push(format!(
            "neutral: {} (the machine or kernelgate failed before the kernel ran, after one \
             automatic retry; re-run the check)",
            row.outcome.message
        )),
        OutcomeKind::Skipped => {
            if row.problem.is_empty() {
                j.raise(Condition::Unmapped, row.outcome.message.clone());
            }
        }
        kind => {
            let msg = if row.outcome.message.is_empty() {
                kind.as_str().to_string()
            } else {
                row.outcome.message.clone()
            };
            let condition = outcome_condition(kind).unwrap_or(Condition::Crash);
            j.raise(condition, format!("{}: {msg}", kind.as_str()));
        }
    }
    // What the run observed about the problem is no kernel's verdict (the report keeps it
    // once per problem: `Report::take_problem_observations`).
    for f in row
        .findings
        .iter()
        .filter(|f| f.is_runtime() && !f.is_about_problem())
    {
        let condition = if f.severity == Severity::Error {
            Condition::Incorrect
        } else {
            Condition::RuntimeWarning
        };
        j.raise(condition, format!("{} ({})", f.message, f.rule));
    }
}

/// Regressions (against the base version, else main's accepted timing) and no speedup.
fn judge_timing(j: &mut Judgement<'_>, row: &KernelRow) {
    let threshold = j.policy.regression_threshold;
    let regressed = |cmp: &kernelgate_report::ComparisonSummary| {
        cmp.verdict == ComparisonVerdict::Slower && cmp.ratio - 1.0 > threshold
    };
    if let Some(cmp) = row.vs_base.as_ref().filter(|c| regressed(c)) {
        j.raise(
            Condition::Regression,
            format!(
                "{:.1}% slower than the base version (threshold {:.1}%)",
                (cmp.ratio - 1.0) * 100.0,
                threshold * 100.0
            ),
        );
    }
    // Without a live base-vs-head run, main's accepted timing of the kernel stands in for it.
    if let (None, Some(cmp)) = (&row.vs_base, &row.vs_baseline) {
        let main_kernel = cmp
            .against
            .as_ref()
            .is_some_and(|a| a.kind == BaselineKind::MainKernel);
        if regressed(cmp) && main_kernel {
            j.raise(
                Condition::Regression,
                format!(
                    "{:.1}% slower than main's accepted timing of this kernel (threshold {:.1}%)",
                    (cmp.ratio - 1.0) * 100.0,
                    threshold * 100.0
                ),
            );
        }
    }
    if let (true, Some(s)) = (row.is_correct(), row.speedup_eager) {
        if s.value <= 1.0 {
            j.raise(
                Condition::NoSpeedup,
                format!("not faster than eager PyTorch ({:.2}x)", s.value),
            );
        }
    }
}

/// The flags the policy itself raises on a correct row: an excessive speedup, the op audit's.
fn raise_flags(row: &mut KernelRow, policy: &Policy) {
    let excessive = Condition::ExcessiveSpeedup;
    if let Some(s) = row.speedup_eager {
        if row.is_correct()
            && s.value > policy.excessive_speedup
            && !row.flags.iter().any(|f| f.code == excessive)
        {
            row.flags.push(kernelgate_report::Flag {
                code: excessive,
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
}

/// Every flag, unless a reviewer acknowledged it (an allow directive with a reason, else an
/// acknowledging PR label).
fn judge_flags(j: &mut Judgement<'_>, row: &KernelRow, acks: &Acks, source: &str) {
    let allows = acknowledgements(source);
    let label = acks.labels.iter().find(|l| j.policy.ack_labels.contains(l));
    for flag in row.flags.iter().filter(|f| !f.code.about_problem()) {
        let condition = flag.code;
        if Condition::ACKNOWLEDGEABLE.contains(&condition) {
            if let Some(ack) = allows.iter().find(|a| a.condition == condition) {
                let line = ack.line;
                match &ack.reason {
                    Some(reason) => {
                        j.reasons.push(format!(
                            "acknowledged {} (allow directive, line {line}): {reason}",
                            flag.code
                        ));
                        continue;
                    }
                    None => j.reasons.push(format!(
                        "allow={} on line {line} has no reason and is ignored; add `reason=\"...\"`",
                        flag.code
                    )),
                }
            } else if let Some(label) = label {
                j.reasons
                    .push(format!("acknowledged {} by PR label `{label}`", flag.code));
                continue;
            }
        }
        j.raise(condition, flag.message.clone());
    }
}

/// The op audit's flag: the custom share below the floor (`low_custom_share`) or below the
/// warning threshold (`partial_replacement`), naming what PyTorch still does and any extension
/// call whose work does not count.
fn audit_flag(row: &KernelRow, policy: &Policy) -> Option<kernelgate_report::Flag> {
    let audit = row.audit.as_ref()?;
    let share = audit.custom_share?;
    let condition = if share < policy.custom_share_floor {
        Condition::LowCustomShare
    } else if share < policy.custom_share_warn {
        Condition::PartialReplacement
    } else {
        return None;
    };
    let threshold = if condition == Condition::LowCustomShare {
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
    if audit.extension_calls.is_empty() && condition == Condition::LowCustomShare {
        message.push_str("; the extension was never called");
    }
    Some(kernelgate_report::Flag {
        code: condition,
        severity: if policy.action(condition) == Verdict::Fail {
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

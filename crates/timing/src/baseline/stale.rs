//! A live series against a stored baseline: the comparison, and whether the baseline is stale.

use super::{BaselineEntry, KbEntry};
use crate::compare::{compare, Verdict};
use crate::stats::SeriesStats;

/// Whether a live reference time still agrees with its stored baseline.
#[derive(Debug, Clone, PartialEq)]
pub enum Staleness {
    Fresh {
        ratio: f64,
    },
    /// The live time differs beyond noise and threshold; `ratio` = live / stored.
    Stale {
        ratio: f64,
        ci95: (f64, f64),
        message: String,
    },
}

/// A live series against a stored one: `ratio` = live / stored median, `ci95` its interval,
/// `verdict` by the same rule as live comparisons (never `Slower` without significance).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VsStored {
    pub ratio: f64,
    pub ci95: (f64, f64),
    pub verdict: Verdict,
}

/// Live samples against a stored entry. With stored samples this is [`compare`] (rank test and
/// bootstrap interval of the ratio of medians, stored side as base). Without (imported from
/// KernelBench's format) only the live side has a spread: a difference counts when the live
/// median's 95% interval lies wholly beyond the threshold.
pub fn compare_with_entry(
    live_ms: &[f64],
    stored: &BaselineEntry,
    threshold_pct: f64,
) -> Result<VsStored, crate::TimingError> {
    if stored.samples_ms.len() >= 2 {
        let c = compare(&stored.samples_ms, live_ms, threshold_pct)?;
        return Ok(VsStored {
            ratio: c.ratio,
            ci95: c.ci95,
            verdict: c.verdict,
        });
    }
    let m = stored.stats.median;
    band_verdict(live_ms, m, m, m, threshold_pct)
}

/// Live samples against a KernelBench entry, which has a mean and a (population) standard
/// deviation but no samples: a difference counts only when the live median's 95% interval lies
/// wholly outside the stored mean widened by the threshold or by two standard deviations,
/// whichever is wider (their means carry the outliers their medians would not).
pub fn compare_with_kb(
    live_ms: &[f64],
    kb: &KbEntry,
    threshold_pct: f64,
) -> Result<VsStored, crate::TimingError> {
    band_verdict(
        live_ms,
        kb.mean,
        kb.mean - 2.0 * kb.std,
        kb.mean + 2.0 * kb.std,
        threshold_pct,
    )
}

/// `center` is the stored time; `[lo, hi]` its noise band before the threshold is applied.
fn band_verdict(
    live_ms: &[f64],
    center: f64,
    lo: f64,
    hi: f64,
    threshold_pct: f64,
) -> Result<VsStored, crate::TimingError> {
    if !(threshold_pct.is_finite() && threshold_pct >= 0.0) {
        return Err(crate::TimingError::BadThreshold(threshold_pct));
    }
    let live = SeriesStats::from_samples(live_ms)?;
    if center <= 0.0 || live.median <= 0.0 {
        return Err(crate::TimingError::NonPositiveMedian);
    }
    let t = 1.0 + threshold_pct / 100.0;
    let (band_lo, band_hi) = ((center / t).min(lo), (center * t).max(hi));
    let (l, h) = live.ci95_median;
    let verdict = if l > band_hi {
        Verdict::Slower
    } else if h < band_lo {
        Verdict::Faster
    } else {
        Verdict::Unchanged
    };
    Ok(VsStored {
        ratio: live.median / center,
        ci95: (l / center, h / center),
        verdict,
    })
}

/// Compare live reference samples with the stored entry at `threshold_pct`: stale when the
/// difference is significant and beyond the threshold (the same rule as verdicts, so noise
/// never marks a baseline stale).
pub fn stale_check(
    live_ms: &[f64],
    stored: &BaselineEntry,
    threshold_pct: f64,
) -> Result<Staleness, crate::TimingError> {
    let v = compare_with_entry(live_ms, stored, threshold_pct)?;
    Ok(staleness(
        v,
        &stored.problem,
        &format!("its baseline from {}", stored.hardware),
    ))
}

/// [`stale_check`] against a KernelBench-format entry ([`compare_with_kb`]); `problem` is
/// `level1/19_ReLU`.
pub fn stale_check_kb(
    live_ms: &[f64],
    kb: &KbEntry,
    problem: &str,
    threshold_pct: f64,
) -> Result<Staleness, crate::TimingError> {
    let v = compare_with_kb(live_ms, kb, threshold_pct)?;
    Ok(staleness(
        v,
        problem,
        &format!(
            "its KernelBench-format baseline from {} (mean {} ms, std {} ms)",
            kb.hardware, kb.mean, kb.std
        ),
    ))
}

fn staleness(v: VsStored, problem: &str, against: &str) -> Staleness {
    if v.verdict == Verdict::Unchanged {
        return Staleness::Fresh { ratio: v.ratio };
    }
    Staleness::Stale {
        ratio: v.ratio,
        ci95: v.ci95,
        message: format!(
            "the live reference of {problem} takes {:+.1}% (95% CI {:+.1}% to {:+.1}%) against {against}: \
             the runner changed (clocks, thermals, other load) or the baseline is stale; refresh it with \
             `kernelgate baseline --problem {problem}`",
            (v.ratio - 1.0) * 100.0,
            (v.ci95.0 - 1.0) * 100.0,
            (v.ci95.1 - 1.0) * 100.0,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baseline::fixtures::{entry, key};

    #[test]
    fn staleness() {
        let stored: Vec<f64> = (0..40).map(|i| 1.0 + (i % 5) as f64 * 0.001).collect();
        let e = entry("level1/19_ReLU.py", "aaa", key("2.11.0"), stored.clone());
        assert!(matches!(
            stale_check(&stored, &e, 2.0).unwrap(),
            Staleness::Fresh { .. }
        ));
        let slower: Vec<f64> = stored.iter().map(|x| x * 1.08).collect();
        match stale_check(&slower, &e, 2.0).unwrap() {
            Staleness::Stale { ratio, message, .. } => {
                assert!((ratio - 1.08).abs() < 1e-9);
                assert!(
                    message.contains("+8.0%")
                        && message.contains("kernelgate baseline --problem level1/19_ReLU.py"),
                    "{message}"
                );
            }
            x => panic!("{x:?}"),
        }
        // Without stored samples (imported from KernelBench): the median CI decides.
        let mut bare = e.clone();
        bare.samples_ms.clear();
        assert!(matches!(
            stale_check(&slower, &bare, 2.0).unwrap(),
            Staleness::Stale { .. }
        ));
        assert!(matches!(
            stale_check(&stored, &bare, 2.0).unwrap(),
            Staleness::Fresh { .. }
        ));
    }

    fn around(center: f64, n: usize) -> Vec<f64> {
        // A tight symmetric spread of +-0.2% around `center`.
        (0..n)
            .map(|i| center * (1.0 + ((i % 5) as f64 - 2.0) * 0.001))
            .collect()
    }

    #[test]
    fn kernelbench_entries_compare_by_their_noise_band() {
        let kb = |mean: f64, std: f64| KbEntry {
            mean,
            std,
            min: mean,
            max: mean,
            num_trials: 100,
            hardware: "NVIDIA H200".into(),
            device: "cuda:0".into(),
        };
        let tight = kb(2.66, 0.0199);
        let v = |live: f64, e: &KbEntry| compare_with_kb(&around(live, 40), e, 2.0).unwrap();
        assert_eq!(v(2.66, &tight).verdict, Verdict::Unchanged);
        // 1.5% away: within the 2% threshold.
        assert_eq!(v(2.66 * 1.015, &tight).verdict, Verdict::Unchanged);
        let slow = v(2.66 * 1.09, &tight);
        assert_eq!(slow.verdict, Verdict::Slower);
        assert!(
            (slow.ratio - 1.09).abs() < 1e-9 && slow.ci95.0 > 1.0,
            "{slow:?}"
        );
        assert_eq!(v(2.66 / 1.09, &tight).verdict, Verdict::Faster);
        // A noisy stored entry (std 8% of the mean) widens the band beyond the threshold.
        let noisy = kb(2.66, 0.21);
        assert_eq!(v(2.66 * 1.09, &noisy).verdict, Verdict::Unchanged);
        assert_eq!(v(2.66 * 1.25, &noisy).verdict, Verdict::Slower);
        // A noisy live series (median CI wider than the gap) is never called different.
        let mut wide: Vec<f64> = (0..12).map(|i| 2.66 * (0.8 + 0.05 * i as f64)).collect();
        wide.push(2.66 * 1.09);
        assert_eq!(
            compare_with_kb(&wide, &tight, 2.0).unwrap().verdict,
            Verdict::Unchanged
        );
        match stale_check_kb(&around(2.66 * 1.09, 40), &tight, "level1/19_ReLU", 2.0).unwrap() {
            Staleness::Stale { message, .. } => assert!(
                message.contains("+9.0%")
                    && message.contains("KernelBench-format")
                    && message.contains("kernelgate baseline --problem level1/19_ReLU"),
                "{message}"
            ),
            x => panic!("{x:?}"),
        }
        assert!(matches!(
            stale_check_kb(&around(2.66, 40), &tight, "level1/19_ReLU", 2.0).unwrap(),
            Staleness::Fresh { .. }
        ));
        assert!(compare_with_kb(&around(1.0, 5), &kb(0.0, 0.0), 2.0).is_err());
    }

    #[test]
    fn live_against_stored_samples_uses_the_rank_test() {
        let e = entry("level1/19_ReLU.py", "aaa", key("2.11.0"), around(1.0, 40));
        let v = |live: Vec<f64>| compare_with_entry(&live, &e, 2.0).unwrap();
        assert_eq!(v(around(1.0, 40)).verdict, Verdict::Unchanged);
        let slow = v(around(1.12, 40));
        assert_eq!(slow.verdict, Verdict::Slower);
        assert!((slow.ratio - 1.12).abs() < 1e-9);
        assert_eq!(v(around(0.8, 40)).verdict, Verdict::Faster);
        // 1% slower, significant but under the threshold.
        assert_eq!(v(around(1.01, 40)).verdict, Verdict::Unchanged);
        // A median 12% slower, but so noisy that it overlaps the stored series: never `Slower`.
        let noisy = v(vec![0.99, 1.12, 1.5, 0.998, 1.3]);
        assert!(noisy.ratio > 1.1, "{noisy:?}");
        assert_eq!(noisy.verdict, Verdict::Unchanged);
    }
}

//! Comparing two series: the ratio of medians, its confidence interval, a rank test and a
//! verdict that never says "slower" on noise.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::stats::SeriesStats;
use crate::TimingError;

/// Resamples for the percentile bootstrap; 2000 puts the Monte-Carlo error of a 2.5% quantile
/// well below the noise of any GPU timing.
const BOOTSTRAP_RESAMPLES: usize = 2000;
/// Fixed seed: the same samples always give the same interval (reproducible verdicts).
const BOOTSTRAP_SEED: u64 = 0x6b65_726e_656c_6761;
/// Significance level of the rank test.
pub const ALPHA: f64 = 0.05;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Faster,
    Slower,
    Unchanged,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Unchanged => "unchanged",
        }
    }
}

/// `head` against `base`. `ratio` > 1 means head is slower.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// median(head) / median(base).
    pub ratio: f64,
    /// 95% percentile-bootstrap interval of the ratio of medians (fixed seed).
    pub ci95: (f64, f64),
    /// Two-sided Mann-Whitney U p-value (normal approximation with tie correction).
    pub p_value: f64,
    pub verdict: Verdict,
    pub threshold_pct: f64,
    pub base: SeriesStats,
    pub head: SeriesStats,
}

impl Comparison {
    /// When base is the reference and head the candidate: reference / candidate with its interval.
    pub fn speedup(&self) -> (f64, (f64, f64)) {
        (1.0 / self.ratio, (1.0 / self.ci95.1, 1.0 / self.ci95.0))
    }

    /// Change of head relative to base in percent (+12.0 = 12% slower).
    pub fn change_pct(&self) -> f64 {
        (self.ratio - 1.0) * 100.0
    }
}

/// Compare two timing series at `threshold_pct` (e.g. 2.0).
///
/// Slower only when the change is statistically significant (rank test at [`ALPHA`] AND the
/// whole interval of the ratio above 1) AND practically relevant (the ratio of medians above
/// `1 + threshold`); faster symmetrically. Anything else, including a real but smaller change,
/// is `Unchanged`. Requiring the whole interval beyond the threshold instead would miss most
/// changes just above it (an injected 3% slowdown at a 2% threshold was caught in 47% of
/// comparisons on the H200), while noise alone still cannot move the median ratio by 2%.
pub fn compare(base: &[f64], head: &[f64], threshold_pct: f64) -> Result<Comparison, TimingError> {
    let bs = SeriesStats::from_samples(base)?;
    let hs = SeriesStats::from_samples(head)?;
    if bs.median <= 0.0 || hs.median <= 0.0 {
        return Err(TimingError::NonPositiveMedian);
    }
    if !(threshold_pct.is_finite() && threshold_pct >= 0.0) {
        return Err(TimingError::BadThreshold(threshold_pct));
    }
    let ratio = hs.median / bs.median;
    let ci95 = bootstrap_ratio_ci(base, head);
    let p_value = mann_whitney_p(base, head);
    let t = threshold_pct / 100.0;
    let significant = p_value < ALPHA;
    let verdict = if significant && ci95.0 > 1.0 && ratio > 1.0 + t {
        Verdict::Slower
    } else if significant && ci95.1 < 1.0 && ratio < 1.0 / (1.0 + t) {
        Verdict::Faster
    } else {
        Verdict::Unchanged
    };
    Ok(Comparison {
        ratio,
        ci95,
        p_value,
        verdict,
        threshold_pct,
        base: bs,
        head: hs,
    })
}

fn bootstrap_ratio_ci(base: &[f64], head: &[f64]) -> (f64, f64) {
    let mut rng = StdRng::seed_from_u64(BOOTSTRAP_SEED);
    let mut rb = vec![0.0; base.len()];
    let mut rh = vec![0.0; head.len()];
    let mut ratios = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    for _ in 0..BOOTSTRAP_RESAMPLES {
        for x in rb.iter_mut() {
            *x = base[rng.gen_range(0..base.len())];
        }
        for x in rh.iter_mut() {
            *x = head[rng.gen_range(0..head.len())];
        }
        ratios.push(fast_median(&mut rh) / fast_median(&mut rb));
    }
    ratios.sort_by(f64::total_cmp);
    let q = |p: f64| crate::stats::quantile_sorted(&ratios, p);
    (q(0.025), q(0.975))
}

/// Median by selection (reorders `v`); same value as [`median`].
fn fast_median(v: &mut [f64]) -> f64 {
    let n = v.len();
    let mid = n / 2;
    let (_, m, _) = v.select_nth_unstable_by(mid, f64::total_cmp);
    let m = *m;
    if n % 2 == 1 {
        m
    } else {
        let lower = v[..mid].iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lower + m) / 2.0
    }
}

/// Two-sided Mann-Whitney U test, normal approximation with tie and continuity corrections.
/// (statrs' exact test is wrong when n1 <= n2, so this is written out and tested against a
/// hand computation.)
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> f64 {
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = all.len();
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let avg_rank = (i + j) as f64 / 2.0 + 1.0;
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        rank_sum_a += all[i..=j].iter().filter(|e| e.1).count() as f64 * avg_rank;
        i = j + 1;
    }
    let u1 = rank_sum_a - n1 * (n1 + 1.0) / 2.0;
    let mu = n1 * n2 / 2.0;
    let nt = n1 + n2;
    let var = n1 * n2 / 12.0 * ((nt + 1.0) - tie_term / (nt * (nt - 1.0)));
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((u1 - mu).abs() - 0.5).max(0.0) / var.sqrt();
    (erfc(z / std::f64::consts::SQRT_2)).min(1.0)
}

/// Complementary error function (Numerical Recipes' Chebyshev fit, |rel err| < 1.2e-7).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.26551223
            + t * (1.00002368
                + t * (0.37409196
                    + t * (0.09678418
                        + t * (-0.18628806
                            + t * (0.27886807
                                + t * (-1.13520398
                                    + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))))
            .exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::median;

    /// Deterministic noisy series: median `m`, multiplicative Gaussian noise of `cv` (Box-Muller).
    fn series(rng: &mut StdRng, n: usize, m: f64, cv: f64) -> Vec<f64> {
        (0..n)
            .map(|_| {
                let (u1, u2): (f64, f64) = (rng.gen_range(f64::EPSILON..1.0), rng.gen());
                let g = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                m * (1.0 + cv * g)
            })
            .collect()
    }

    #[test]
    fn mann_whitney_matches_hand_computation() {
        // python3 -c "
        // from statistics import NormalDist as N
        // a=[1.1,2.3,3.0,4.2,5.5]; b=[3.0,6.1,7.4,8.0,9.9,10.2]
        // (ranks by hand: a -> 1,2,3.5,5,6 ; ties: one pair)
        // u=1+2+3.5+5+6-15; n1,n2=5,6; mu=15; var=n1*n2/12*((12)-(8-2)/(11*10))
        // z=(abs(u-mu)-0.5)/var**0.5; print(u, 2*(1-N().cdf(z)))"
        // -> 2.5 0.028100063557317645
        let a = [1.1, 2.3, 3.0, 4.2, 5.5];
        let b = [3.0, 6.1, 7.4, 8.0, 9.9, 10.2];
        let p = mann_whitney_p(&a, &b);
        assert!((p - P_HAND).abs() < 1e-6, "p = {p}");
        // Symmetric in its arguments.
        assert!((mann_whitney_p(&b, &a) - p).abs() < 1e-12);
    }
    const P_HAND: f64 = 0.028_100_063_557_317_645;

    #[test]
    fn identical_series_are_unchanged() {
        let x = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 1.0];
        let c = compare(&x, &x, 2.0).unwrap();
        assert_eq!(c.verdict, Verdict::Unchanged);
        assert!((c.ratio - 1.0).abs() < 1e-12);
        assert!(c.p_value > 0.9);
        assert!(c.ci95.0 <= 1.0 && c.ci95.1 >= 1.0);
    }

    #[test]
    fn clear_slowdown_and_speedup() {
        let mut rng = StdRng::seed_from_u64(1);
        let base = series(&mut rng, 40, 1.0, 0.005);
        let head = series(&mut rng, 40, 1.10, 0.005);
        let c = compare(&base, &head, 2.0).unwrap();
        assert_eq!(c.verdict, Verdict::Slower);
        assert!(c.ci95.0 > 1.02 && c.ci95.0 < 1.1 && c.ci95.1 > 1.09);
        let c = compare(&head, &base, 2.0).unwrap();
        assert_eq!(c.verdict, Verdict::Faster);
        let (s, (lo, hi)) = c.speedup();
        assert!(s > 1.05 && lo < s && s < hi, "{s} {lo} {hi}");
    }

    #[test]
    fn significant_change_below_threshold_is_unchanged() {
        // A precise 1% slowdown: significant, but inside the 2% threshold.
        let mut rng = StdRng::seed_from_u64(2);
        let base = series(&mut rng, 200, 1.0, 0.002);
        let head = series(&mut rng, 200, 1.01, 0.002);
        let c = compare(&base, &head, 2.0).unwrap();
        assert!(c.p_value < 1e-6);
        assert_eq!(c.verdict, Verdict::Unchanged);
        // ... and Slower at a 0.5% threshold.
        assert_eq!(compare(&base, &head, 0.5).unwrap().verdict, Verdict::Slower);
    }

    #[test]
    fn large_but_noisy_change_is_not_slower() {
        // 5% median shift, but 3 samples of 20% noise: the CI straddles the threshold.
        let c = compare(&[1.0, 1.2, 0.8], &[1.05, 1.25, 0.85], 2.0).unwrap();
        assert_eq!(c.verdict, Verdict::Unchanged);
    }

    #[test]
    fn aa_false_alarms_and_detection_of_three_percent() {
        // Noise only: at most 1% of comparisons may say anything but Unchanged.
        let mut rng = StdRng::seed_from_u64(42);
        let runs = 300;
        let mut alarms = 0;
        let mut detected = 0;
        for _ in 0..runs {
            let a = series(&mut rng, 50, 1.0, 0.01);
            let b = series(&mut rng, 50, 1.0, 0.01);
            if compare(&a, &b, 2.0).unwrap().verdict != Verdict::Unchanged {
                alarms += 1;
            }
            let slow = series(&mut rng, 50, 1.03, 0.01);
            let base = series(&mut rng, 50, 1.0, 0.01);
            if compare(&base, &slow, 2.0).unwrap().verdict == Verdict::Slower {
                detected += 1;
            }
        }
        assert!(alarms * 100 <= runs, "false alarms {alarms}/{runs}");
        assert!(detected * 100 >= 95 * runs, "detected {detected}/{runs}");
    }

    #[test]
    fn deterministic_interval() {
        let mut rng = StdRng::seed_from_u64(3);
        let a = series(&mut rng, 30, 2.0, 0.02);
        let b = series(&mut rng, 30, 2.1, 0.02);
        assert_eq!(compare(&a, &b, 2.0).unwrap(), compare(&a, &b, 2.0).unwrap());
    }

    #[test]
    fn fast_median_agrees() {
        let mut v = vec![5.0, 1.0, 4.0, 2.0, 3.0, 6.0];
        assert_eq!(fast_median(&mut v.clone()), median(&v));
        v.pop();
        assert_eq!(fast_median(&mut v.clone()), 3.0);
    }

    #[test]
    fn errors() {
        assert!(compare(&[], &[1.0], 2.0).is_err());
        assert!(compare(&[0.0], &[1.0], 2.0).is_err());
        assert!(compare(&[1.0], &[1.0], -1.0).is_err());
    }
}

//! Summary statistics of one series of timings (milliseconds).

use serde::{Deserialize, Serialize};

use crate::TimingError;

/// Summary of one timed series. Quartiles use linear interpolation between order statistics
/// (numpy's default, `statistics.quantiles(method="inclusive")`); `std` is the sample standard
/// deviation (n-1), as KernelBench's `np.std` is not: see [`SeriesStats::std_population`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SeriesStats {
    pub n: usize,
    pub median: f64,
    pub q1: f64,
    pub q3: f64,
    pub iqr: f64,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub std: f64,
    /// Distribution-free 95% confidence interval of the median from order statistics.
    pub ci95_median: (f64, f64),
}

impl SeriesStats {
    /// Statistics of `samples`; errors on an empty series or a non-finite value.
    pub fn from_samples(samples: &[f64]) -> Result<Self, TimingError> {
        if samples.is_empty() {
            return Err(TimingError::EmptySeries);
        }
        if let Some(bad) = samples.iter().find(|x| !x.is_finite()) {
            return Err(TimingError::NonFinite(*bad));
        }
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let mean = s.iter().sum::<f64>() / n as f64;
        let std = if n > 1 {
            (s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        let q1 = quantile_sorted(&s, 0.25);
        let q3 = quantile_sorted(&s, 0.75);
        let (lo, hi) = median_ci_ranks(n, 0.95);
        Ok(SeriesStats {
            n,
            median: quantile_sorted(&s, 0.5),
            q1,
            q3,
            iqr: q3 - q1,
            min: s[0],
            max: s[n - 1],
            mean,
            std,
            ci95_median: (s[lo], s[hi]),
        })
    }

    /// Population standard deviation (what KernelBench's `np.std` reports).
    pub fn std_population(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            self.std * (((self.n - 1) as f64) / self.n as f64).sqrt()
        }
    }

    /// Half-width of the median's 95% CI relative to the median, in percent (the adaptive
    /// sampler's stopping rule).
    pub fn ci_half_width_pct(&self) -> f64 {
        if self.median <= 0.0 {
            return f64::INFINITY;
        }
        (self.ci95_median.1 - self.ci95_median.0) / 2.0 / self.median * 100.0
    }

    /// Robust coefficient of variation in percent: 0.7413 × IQR / median, which equals the
    /// coefficient of variation for normally distributed times but is not driven by a few
    /// outliers (one preempted call among a hundred). What `kernelgate baseline` checks.
    pub fn robust_cv_pct(&self) -> f64 {
        if self.median == 0.0 {
            0.0
        } else {
            0.7413 * self.iqr / self.median * 100.0
        }
    }

    /// Coefficient of variation (std / mean) in percent.
    pub fn cv_pct(&self) -> f64 {
        if self.mean == 0.0 {
            0.0
        } else {
            self.std / self.mean * 100.0
        }
    }
}

/// Median of a series (NaN-free input assumed; empty gives NaN).
pub fn median(samples: &[f64]) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    quantile_sorted(&s, 0.5)
}

/// Linear-interpolation quantile of sorted data (type 7).
pub(crate) fn quantile_sorted(s: &[f64], p: f64) -> f64 {
    let h = (s.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    s[lo] + (h - lo as f64) * (s[hi] - s[lo])
}

/// Zero-based indices `(l, u)` into the sorted sample such that `[x_l, x_u]` covers the median
/// with probability at least `level` (exact binomial(n, 1/2)); for tiny n that is min..max.
pub fn median_ci_ranks(n: usize, level: f64) -> (usize, usize) {
    if n == 0 {
        return (0, 0);
    }
    let alpha_half = (1.0 - level) / 2.0;
    // Largest k (1-based lower rank) with P(B <= k-1) <= alpha/2, B ~ Bin(n, 1/2). The pmf is
    // stepped in log space (pmf(j+1) = pmf(j) (n-j)/(j+1)): linear in n, so the sampler can ask
    // every round.
    let mut ln_pmf = -(n as f64) * std::f64::consts::LN_2;
    let mut cdf = 0.0;
    let mut k = 0usize; // number of ranks below the interval
    for j in 0..n {
        cdf += ln_pmf.exp();
        if cdf > alpha_half {
            break;
        }
        k = j + 1;
        ln_pmf += ((n - j) as f64).ln() - ((j + 1) as f64).ln();
    }
    let lower = k.max(1); // 1-based
    let upper = n + 1 - lower;
    (lower - 1, upper - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stepped pmf gives the ranks of the direct binomial sum (the former computation).
    #[test]
    fn median_ci_ranks_match_the_direct_binomial_sum() {
        let ln_fact = |n: usize| (2..=n).map(|i| (i as f64).ln()).sum::<f64>();
        for n in 1..400 {
            let mut cdf = 0.0;
            let mut k = 0;
            for j in 0..n {
                cdf +=
                    (ln_fact(n) - ln_fact(j) - ln_fact(n - j) - n as f64 * std::f64::consts::LN_2)
                        .exp();
                if cdf > 0.025 {
                    break;
                }
                k = j + 1;
            }
            let lower = k.max(1);
            assert_eq!(median_ci_ranks(n, 0.95), (lower - 1, n - lower), "n = {n}");
        }
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1e-12)
    }

    #[test]
    fn matches_python_statistics() {
        // Values from:
        // python3 -c "import statistics as s; x=[3.1,2.9,3.05,3.3,2.95,3.0,3.2,2.85,3.15,3.02];
        //   print(s.median(x), s.mean(x), s.stdev(x), s.quantiles(x, n=4, method='inclusive'))"
        // -> 3.035 3.052 0.1387884080974424 [2.9625000000000004, 3.035, 3.1374999999999997]
        let x = [3.1, 2.9, 3.05, 3.3, 2.95, 3.0, 3.2, 2.85, 3.15, 3.02];
        let st = SeriesStats::from_samples(&x).unwrap();
        assert_eq!(st.n, 10);
        assert!(close(st.median, 3.035, 1e-12));
        assert!(close(st.mean, 3.052, 1e-12));
        assert!(close(st.std, 0.1387884080974424, 1e-12));
        assert!(close(st.q1, 2.9625, 1e-12));
        assert!(close(st.q3, 3.1375, 1e-12));
        assert!(close(st.iqr, 0.175, 1e-9));
        assert_eq!((st.min, st.max), (2.85, 3.3));
        // n=10: exact binomial ranks 2..9 (P = 0.9785): sorted[1] = 2.9, sorted[8] = 3.2.
        assert_eq!(st.ci95_median, (2.9, 3.2));
    }

    #[test]
    fn median_ci_ranks_match_exact_binomial() {
        // python3 -c "from math import comb
        // def r(n):
        //   c=0;k=0
        //   for j in range(n):
        //     c+=comb(n,j)/2**n
        //     if c>0.025: break
        //     k=j+1
        //   l=max(k,1); return (l-1, n-l)
        // print([r(n) for n in (5,6,10,20,50,100,1000)])"
        // -> [(0, 4), (0, 5), (1, 8), (5, 14), (17, 32), (39, 60), (468, 531)]
        let want = [
            (5, (0, 4)),
            (6, (0, 5)),
            (10, (1, 8)),
            (20, (5, 14)),
            (50, (17, 32)),
            (100, (39, 60)),
            (1000, (468, 531)),
        ];
        for (n, r) in want {
            assert_eq!(median_ci_ranks(n, 0.95), r, "n = {n}");
        }
    }

    #[test]
    fn rejects_empty_and_nan() {
        assert!(matches!(
            SeriesStats::from_samples(&[]),
            Err(TimingError::EmptySeries)
        ));
        assert!(matches!(
            SeriesStats::from_samples(&[1.0, f64::NAN]),
            Err(TimingError::NonFinite(_))
        ));
    }

    #[test]
    fn population_std_matches_numpy() {
        // python3 -c "import statistics as s; print(s.pstdev([1.0,2.0,3.0,4.0]))" -> 1.118033988749895
        let st = SeriesStats::from_samples(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert!(close(st.std_population(), 1.118033988749895, 1e-12));
        assert!(close(st.cv_pct(), 1.2909944487358056 / 2.5 * 100.0, 1e-9));
        assert!(close(
            st.robust_cv_pct(),
            0.7413 * st.iqr / st.median * 100.0,
            1e-12
        ));
    }
}

//! Drift detection: a change-point test over a series' last commits.
//!
//! The rule: over the last `window` usable points (timed and correct), find the split that best
//! separates earlier from later times (the largest standardised Mann-Whitney statistic over every
//! split with at least `min_segment` points on each side); its p-value is a permutation test of
//! that maximum (the same search on shuffled series, a fixed seed, so a verdict is reproducible).
//! A drift is reported when p ≤ `alpha` and the medians of the two sides differ by at least
//! `min_change_pct`: significant and large enough to matter. A step in one run is not a drift:
//! it needs `min_segment` commits after it.

use crate::record::Record;
use crate::series::{Series, SeriesKey};
use serde::Serialize;

/// The thresholds of the drift rule (docs/history.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DriftRule {
    pub window: usize,
    pub min_segment: usize,
    pub min_change_pct: f64,
    pub alpha: f64,
    pub permutations: usize,
}

impl Default for DriftRule {
    fn default() -> Self {
        DriftRule {
            window: 30,
            min_segment: 4,
            min_change_pct: 5.0,
            alpha: 0.001,
            permutations: 1999,
        }
    }
}

/// A series whose time moved.
#[derive(Debug, Clone, Serialize)]
pub struct Drift {
    pub key: SeriesKey,
    pub hardware: String,
    /// The first commit after the change.
    pub commit: String,
    pub date: String,
    pub subject: String,
    /// The median of the points before and after the change (ms).
    pub before_ms: f64,
    pub after_ms: f64,
    /// after / before − 1, in percent (+: slower).
    pub change_pct: f64,
    pub p_value: f64,
    /// Points before and after the change within the window.
    pub points_before: usize,
    pub points_after: usize,
    /// The runner's software changed at that commit (`torch 2.11.0 → 2.12.0`), when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
}

impl Drift {
    pub fn slower(&self) -> bool {
        self.change_pct > 0.0
    }

    /// One line: `level1/19_ReLU.py kernels/x.py on NVIDIA_H200 fp32: 10.2% slower since abc1234`.
    pub fn describe(&self) -> String {
        format!(
            "{} `{}` on {}: {:.1}% {} since {} ({:.4} → {:.4} ms, p = {:.4}, {} commits after){}",
            self.key.problem,
            self.key.name,
            self.hardware,
            self.change_pct.abs(),
            if self.slower() { "slower" } else { "faster" },
            short(&self.commit),
            self.before_ms,
            self.after_ms,
            self.p_value,
            self.points_after,
            self.environment
                .as_ref()
                .map(|e| format!("; the runner changed there: {e}"))
                .unwrap_or_default()
        )
    }
}

/// The first 7 characters of a commit id.
pub fn short(sha: &str) -> &str {
    &sha[..sha.len().min(7)]
}

/// The drift of `series` under `rule`, if any.
pub fn detect(series: &Series, rule: &DriftRule) -> Option<Drift> {
    let usable: Vec<&Record> = series.points.iter().filter(|r| r.usable()).collect();
    let points = &usable[usable.len().saturating_sub(rule.window)..];
    let n = points.len();
    let seg = rule.min_segment.max(2);
    if n < 2 * seg {
        return None;
    }
    let times: Vec<f64> = points
        .iter()
        .map(|r| r.median_ms.unwrap_or(f64::NAN))
        .collect();
    let ranks = ranks(&times);
    let (split, observed) = best_split(&ranks, seg);
    let mut rng = SplitMix(0x6b65_726e_656c_6761);
    let mut shuffled = ranks.clone();
    let mut as_large = 0usize;
    for _ in 0..rule.permutations {
        rng.shuffle(&mut shuffled);
        if best_split(&shuffled, seg).1 >= observed - 1e-12 {
            as_large += 1;
        }
    }
    let p_value = (as_large + 1) as f64 / (rule.permutations + 1) as f64;
    let before_ms = median(&times[..split]);
    let after_ms = median(&times[split..]);
    let change_pct = (after_ms / before_ms - 1.0) * 100.0;
    if p_value > rule.alpha || change_pct.abs() < rule.min_change_pct {
        return None;
    }
    let at = points[split];
    let prev = points[split - 1];
    let mut env = Vec::new();
    for (name, a, b) in [
        ("torch", &prev.torch, &at.torch),
        ("driver", &prev.driver, &at.driver),
        ("CUDA", &prev.cuda, &at.cuda),
    ] {
        if a != b {
            env.push(format!("{name} {a} → {b}"));
        }
    }
    Some(Drift {
        key: series.key.clone(),
        hardware: series.key.hardware(),
        commit: at.commit.clone(),
        date: at.date.clone(),
        subject: at.subject.clone(),
        before_ms,
        after_ms,
        change_pct,
        p_value,
        points_before: split,
        points_after: n - split,
        environment: (!env.is_empty()).then(|| env.join(", ")),
    })
}

/// Every drift among `series`, slowest-changing first.
pub fn detect_all(series: &[Series], rule: &DriftRule) -> Vec<Drift> {
    let mut out: Vec<Drift> = series.iter().filter_map(|s| detect(s, rule)).collect();
    out.sort_by(|a, b| b.change_pct.total_cmp(&a.change_pct));
    out
}

/// Mid-ranks (ties share their mean rank), 1-based.
fn ranks(x: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..x.len()).collect();
    idx.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    let mut r = vec![0.0; x.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && x[idx[j + 1]] == x[idx[i]] {
            j += 1;
        }
        let mean = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            r[k] = mean;
        }
        i = j + 1;
    }
    r
}

/// The split (index of the first "after" point) with the largest |z| of the rank-sum statistic.
fn best_split(ranks: &[f64], seg: usize) -> (usize, f64) {
    let n = ranks.len();
    let nf = n as f64;
    let total: f64 = ranks.iter().sum();
    let mut before = 0.0;
    let mut best = (seg, f64::NEG_INFINITY);
    for (k, r) in ranks.iter().enumerate().take(n - seg) {
        before += r;
        let k = k + 1;
        if k < seg {
            continue;
        }
        let m = (n - k) as f64;
        let after = total - before;
        let expected = m * (nf + 1.0) / 2.0;
        let var = k as f64 * m * (nf + 1.0) / 12.0;
        let z = ((after - expected) / var.sqrt()).abs();
        if z > best.1 {
            best = (k, z);
        }
    }
    best
}

fn median(x: &[f64]) -> f64 {
    let mut v = x.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// A small deterministic generator (SplitMix64) for the permutations.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn shuffle(&mut self, v: &mut [f64]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::record::{Record, SeriesKind};
    use kernelgate_model::Precision;

    fn series(times: &[f64]) -> Series {
        let points: Vec<Record> = times
            .iter()
            .enumerate()
            .map(|(i, &t)| Record {
                commit: format!("{i:040}"),
                date: format!("2026-10-01T00:{:02}:00Z", i % 60),
                subject: String::new(),
                device: "NVIDIA H200".into(),
                precision: Precision::Fp32,
                driver: "580".into(),
                cuda: "13.0".into(),
                torch: if i < 35 { "2.11.0" } else { "2.12.0" }.into(),
                problem: "level1/19_ReLU.py".into(),
                kind: SeriesKind::Kernel,
                name: "kernels/k.py".into(),
                median_ms: Some(t),
                ci_ms: None,
                correct: true,
                verdict: None,
                custom_share: None,
                speedup_eager: None,
                efficiency: None,
            })
            .collect();
        let key = crate::series::SeriesKey::of(&points[0]);
        Series { key, points }
    }

    /// A seeded standard normal (SplitMix64 and Box-Muller).
    fn normal(rng: &mut SplitMix) -> f64 {
        let u = ((rng.next() >> 11) as f64 / (1u64 << 53) as f64).max(1e-12);
        let v = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    fn noisy(rng: &mut SplitMix, n: usize, noise: f64, step_at: Option<usize>) -> Vec<f64> {
        (0..n)
            .map(|i| {
                let step = if step_at.is_some_and(|s| i >= s) {
                    1.10
                } else {
                    1.0
                };
                0.02 * step * (1.0 + noise * normal(rng))
            })
            .collect()
    }

    #[test]
    fn a_ten_percent_step_is_found_at_its_commit_and_a_a_histories_raise_nothing() {
        let rule = DriftRule::default();
        let mut rng = SplitMix(42);
        let (mut found, mut exact, mut false_alarms) = (0, 0, 0);
        for _ in 0..100 {
            let d = detect(&series(&noisy(&mut rng, 50, 0.01, Some(35))), &rule);
            if let Some(d) = d {
                found += 1;
                if d.commit == format!("{:040}", 35) {
                    exact += 1;
                    assert_eq!(d.environment.as_deref(), Some("torch 2.11.0 → 2.12.0"));
                }
                assert!((5.0..15.0).contains(&d.change_pct), "{}", d.change_pct);
            }
            if detect(&series(&noisy(&mut rng, 50, 0.01, None)), &rule).is_some() {
                false_alarms += 1;
            }
        }
        eprintln!("steps found {found}/100, at the exact commit {exact}/100, A/A alarms {false_alarms}/100");
        // 1% noise: every step found, nearly always at its exact commit; no A/A alarm.
        assert_eq!(found, 100);
        assert!(exact >= 95, "{exact} of 100 at the exact commit");
        assert_eq!(false_alarms, 0);
    }

    #[test]
    fn a_step_smaller_than_the_minimum_change_or_too_recent_is_not_a_drift() {
        let rule = DriftRule::default();
        let mut rng = SplitMix(7);
        // 3% up, clearly significant, but below the 5% that matters.
        let small: Vec<f64> = noisy(&mut rng, 50, 0.002, None)
            .iter()
            .enumerate()
            .map(|(i, t)| if i >= 30 { t * 1.03 } else { *t })
            .collect();
        assert!(detect(&series(&small), &rule).is_none());
        // A 10% step in the last 3 commits: fewer than min_segment after it.
        let recent = noisy(&mut rng, 50, 0.01, Some(47));
        assert!(detect(&series(&recent), &rule).is_none());
        // Incorrect points are not part of the series.
        let mut s = series(&noisy(&mut rng, 50, 0.01, None));
        for p in s.points.iter_mut().skip(30) {
            p.median_ms = p.median_ms.map(|m| m * 2.0);
            p.correct = false;
        }
        assert!(detect(&s, &rule).is_none());
    }

    #[test]
    fn ties_share_their_mean_rank() {
        assert_eq!(ranks(&[3.0, 1.0, 3.0, 2.0]), vec![3.5, 1.0, 3.5, 2.0]);
    }

    #[test]
    fn the_best_split_of_a_clean_step_is_the_step() {
        let r = ranks(&[1.0, 1.1, 0.9, 1.0, 1.05, 2.0, 2.1, 1.9, 2.05, 2.0]);
        assert_eq!(best_split(&r, 3).0, 5);
    }
}

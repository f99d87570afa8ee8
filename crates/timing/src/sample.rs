//! One timed call as the harness reports it, and the "work escaped the timed stream" check.

use kernelgate_model::{Finding, Severity};
use serde::{Deserialize, Serialize};

use crate::stats::median;

/// One timed call. `ms`: end event minus start event on the timed stream (CPU: monotonic clock).
/// `trailing_sync_ms`: how long a whole-context synchronise took *after* the end event had
/// completed, i.e. work still running elsewhere on the GPU. `wall_ms`: host clock around the call
/// up to that synchronise.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub ms: f64,
    #[serde(default)]
    pub trailing_sync_ms: f64,
    #[serde(default)]
    pub wall_ms: f64,
    /// The output of this call was checked against the reference on the call's own content.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub verified: bool,
    /// The judge's clock around the call, for a model in a worker: from sending the call to
    /// reading the reply (the round trip and the output copy included). `ms` comes from the
    /// worker and counts only where it agrees with this (`kg_judge.clock_findings`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_ms: Option<f64>,
    /// What the worker reported, where the judge's clock raised `ms` above it
    /// (`kg_judge.judge_the_times`): kept so the report shows both figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_ms: Option<f64>,
    /// GPU work of this call that ran after its reply, seen by the judge's probes
    /// (`kg_judge.GapWatch`) and already added to `ms` and `judge_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_reply_ms: Option<f64>,
    /// How long the judge's first probe after the reply waited for the GPU (a context switch,
    /// plus work left running); the part beyond the reference worker's is in `after_reply_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_wait_ms: Option<f64>,
}

impl Sample {
    /// A call whose events read `ms` with nothing after them: no trailing work, the host clock
    /// agreeing, unchecked, no judge's clock (what a simulated series is made of).
    pub fn event(ms: f64) -> Sample {
        Sample {
            ms,
            trailing_sync_ms: 0.0,
            wall_ms: ms,
            verified: false,
            judge_ms: None,
            worker_ms: None,
            after_reply_ms: None,
            first_wait_ms: None,
        }
    }
}

/// A series of timed calls the harness reports (its key in the result's `samples`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Series {
    /// The live PyTorch reference, interleaved with the candidate.
    Reference,
    Candidate,
    /// The PR's base version of the kernel, interleaved with the candidate.
    Base,
    /// The candidate on the content of its previous call.
    CandidateRepeated,
    /// The reference timed alone before the candidate's module was imported.
    ReferenceBeforeImport,
    /// A copy of the first input through `Tensor.clone` captured before the import, timed in
    /// the same rounds as the reference: before the import, and interleaved after it.
    ControlBeforeImport,
    Control,
    /// The reference (and the control) timed alone again, the same way, after the candidate's
    /// timed calls: what the candidate's code did to the reference shows here too; what merely
    /// running between the candidate's calls does to a launch-bound reference does not.
    ReferenceAfterCalls,
    ControlAfterCalls,
    /// The cost of refilling the inputs between timed calls (outside the timed region).
    InputRefill,
    /// A series this build does not know (a newer harness): kept out of every check.
    #[serde(other)]
    Other,
}

impl Series {
    /// The series' key in the harness's result.
    pub fn as_str(self) -> &'static str {
        match self {
            Series::Reference => "reference",
            Series::Candidate => "candidate",
            Series::Base => "base",
            Series::CandidateRepeated => "candidate_repeated",
            Series::ReferenceBeforeImport => "reference_before_import",
            Series::ControlBeforeImport => "control_before_import",
            Series::Control => "control",
            Series::ReferenceAfterCalls => "reference_after_calls",
            Series::ControlAfterCalls => "control_after_calls",
            Series::InputRefill => "input_refill",
            Series::Other => "other",
        }
    }
}

impl std::fmt::Display for Series {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

pub fn event_ms(samples: &[Sample]) -> Vec<f64> {
    samples.iter().map(|s| s.ms).collect()
}

/// Absolute trailing-sync threshold. Measured on the H200 (docs/timing.md): honest calls show a
/// median trailing synchronisation of 3.4-7.4 us (spikes to 18 us in at most 12% of calls); a
/// side-stream hack on a 36 us kernel shows 16.5 us median, on longer kernels the whole kernel.
pub const ESCAPED_ABS_MS: f64 = 0.010;
/// Relative part: escaped work under 1% of the kernel's time cannot move a verdict at a 2% threshold.
pub const ESCAPED_REL: f64 = 0.01;
/// Share of calls that must show trailing work: the median call, so occasional host or driver
/// spikes (seen in up to 12% of honest calls) are not a hack, while hacks show it in ~all calls.
pub const ESCAPED_SHARE: f64 = 0.5;

pub const RULE_ESCAPED: &str = "timing/work-outside-timed-stream";

/// A failing finding when work regularly outlives the end event (side streams, threads,
/// graph launches on other streams); `None` for honest timings and for CPU samples.
pub fn escaped_work(file: &str, samples: &[Sample]) -> Option<Finding> {
    if samples.is_empty() {
        return None;
    }
    let med_ms = median(&event_ms(samples));
    let threshold = ESCAPED_ABS_MS.max(ESCAPED_REL * med_ms);
    let trailing: Vec<f64> = samples.iter().map(|s| s.trailing_sync_ms).collect();
    let over = trailing.iter().filter(|&&t| t > threshold).count();
    if (over as f64) < ESCAPED_SHARE * samples.len() as f64 {
        return None;
    }
    let med_trailing = median(&trailing);
    let med_wall = median(&samples.iter().map(|s| s.wall_ms).collect::<Vec<_>>());
    Some(Finding::runtime(file.to_string(), RULE_ESCAPED, Severity::Error, format!(
            "work outside the timed stream: {over} of {} timed calls left GPU work running after the end event \
             (median {med_trailing:.3} ms of trailing synchronisation against {med_ms:.3} ms measured on the stream, \
             wall {med_wall:.3} ms; threshold {threshold:.3} ms). Launch every kernel on \
             torch.cuda.current_stream() or join side streams before returning.",
            samples.len()
        )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(ms: f64, t: f64) -> Sample {
        Sample {
            ms,
            trailing_sync_ms: t,
            wall_ms: ms + t + 0.01,
            verified: false,
            judge_ms: None,
            worker_ms: None,
            after_reply_ms: None,
            first_wait_ms: None,
        }
    }

    #[test]
    fn the_judges_charge_for_work_after_the_reply_is_kept_in_the_report() {
        let json = r#"{"ms": 1.5, "judge_ms": 1.7, "after_reply_ms": 0.5, "first_wait_ms": 0.17}"#;
        let sample: Sample = serde_json::from_str(json).unwrap();
        assert_eq!(sample.after_reply_ms, Some(0.5));
        let back = serde_json::to_value(sample).unwrap();
        assert_eq!(back["after_reply_ms"], 0.5);
        assert_eq!(back["first_wait_ms"], 0.17);
        // A call the judge did not probe (the CPU) says nothing.
        let cpu: Sample = serde_json::from_str(r#"{"ms": 1.0}"#).unwrap();
        assert!(serde_json::to_value(cpu)
            .unwrap()
            .get("after_reply_ms")
            .is_none());
    }

    #[test]
    fn honest_samples_pass() {
        let v: Vec<_> = (0..50).map(|i| s(1.0 + i as f64 * 1e-4, 0.004)).collect();
        assert!(escaped_work("k.py", &v).is_none());
        // Spikes in a minority of calls (H200: up to 12% of honest calls) do not make a hack.
        let mut v = v;
        for x in v.iter_mut().take(20) {
            x.trailing_sync_ms = 2.0;
        }
        assert!(escaped_work("k.py", &v).is_none());
    }

    #[test]
    fn side_stream_pattern_is_flagged() {
        // DESIGN.md section 2: 0.10 ms on the events, 1.48 ms trailing.
        let v: Vec<_> = (0..30).map(|_| s(0.10, 1.48)).collect();
        let f = escaped_work("kernels/x.py", &v).expect("flagged");
        assert_eq!(f.rule, RULE_ESCAPED);
        assert_eq!(f.severity, Severity::Error);
        assert_eq!(f.file, "kernels/x.py");
        assert!(f.message.contains("1.480 ms"), "{}", f.message);
        assert!(f.message.contains("30 of 30"), "{}", f.message);
    }

    #[test]
    fn relative_threshold_for_long_kernels() {
        // 0.08 ms trailing on a 100 ms kernel: below 1%, not flagged; on a 1 ms kernel: flagged.
        let long: Vec<_> = (0..20).map(|_| s(100.0, 0.08)).collect();
        assert!(escaped_work("k.py", &long).is_none());
        let short: Vec<_> = (0..20).map(|_| s(1.0, 0.08)).collect();
        assert!(escaped_work("k.py", &short).is_some());
    }

    #[test]
    fn h200_measurements() {
        // Medians measured on the H200 (scripts/gpu-timing.sh): honest 36 us ReLU, 7.4 us
        // trailing on a 507 us kernel; side-stream hack on the 36 us ReLU: 5.5 us on the events,
        // 16.5 us trailing.
        let honest: Vec<_> = (0..30).map(|_| s(0.0361, 0.0034)).collect();
        assert!(escaped_work("k.py", &honest).is_none());
        let honest_long: Vec<_> = (0..30).map(|_| s(0.5069, 0.0074)).collect();
        assert!(escaped_work("k.py", &honest_long).is_none());
        let hack: Vec<_> = (0..30).map(|_| s(0.0055, 0.0165)).collect();
        assert!(escaped_work("k.py", &hack).is_some());
    }

    #[test]
    fn cpu_samples_never_flagged() {
        let v: Vec<_> = (0..10).map(|_| s(3.0, 0.0)).collect();
        assert!(escaped_work("k.py", &v).is_none());
        assert!(escaped_work("k.py", &[]).is_none());
    }
}

#[cfg(test)]
mod series_tests {
    use super::Series;
    use std::collections::BTreeMap;

    #[test]
    fn series_keys_are_the_harness_names_and_unknown_ones_are_kept_apart() {
        let m: BTreeMap<Series, Vec<u8>> = serde_json::from_str(
            r#"{"candidate": [1], "reference_before_import": [2], "from_a_newer_harness": [3]}"#,
        )
        .unwrap();
        assert_eq!(m[&Series::Candidate], vec![1]);
        assert_eq!(m[&Series::ReferenceBeforeImport], vec![2]);
        assert_eq!(m[&Series::Other], vec![3]);
        for s in [Series::Candidate, Series::ControlAfterCalls, Series::Base] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
    }
}

//! The timing summary of a job: the series compared (candidate against reference and base),
//! the integrity checks on them, and the physical floor of the problem's work on its GPU.

use crate::conclude::{RULE_HARNESS_HOOKED, RULE_TORCH_PATCHED};
use crate::job::JobSpec;
use crate::outcome::{Floor, ProblemWork, TimingResult};

use std::collections::BTreeMap;

use kernelgate_model::config::L2Mode;
use kernelgate_model::{Finding, RanOn};
use kernelgate_timing::Series;

/// The physical floor of `work` on the GPU named in `device`: its datasheet peaks, the bandwidth
/// raised to `measured_gbs` when that is higher. `None` on the CPU (no datasheet; a measured CPU
/// bandwidth would not be a bound with caches this size), for a GPU without datasheet numbers,
/// without counted work, or when nothing is left to bound (warm L2 and no counted FLOPs).
pub fn physical_floor(
    device: Option<&RanOn>,
    work: Option<&ProblemWork>,
    measured_gbs: Option<f64>,
    l2: L2Mode,
) -> Option<Floor> {
    let gpu = device?.gpu_name()?;
    let work = work?;
    let measured_gbs = measured_gbs.filter(|b| b.is_finite() && *b > 0.0);
    let spec = kernelgate_timing::DeviceSpec::lookup(gpu)?.with_measured_bandwidth(measured_gbs);
    // Warm L2 keeps small inputs in cache between calls: memory bandwidth bounds nothing there.
    let bandwidth_gbs = match l2 {
        L2Mode::Cold => spec.bandwidth_gbs,
        L2Mode::Warm => 0.0,
    };
    let bytes = (work.input_bytes + work.output_bytes) as f64;
    let flops = work.flops.unwrap_or(0) as f64;
    let memory_ms = kernelgate_timing::floor_ms(bytes, 0.0, bandwidth_gbs, 0.0);
    let compute_ms = kernelgate_timing::floor_ms(0.0, flops, 0.0, spec.peak_tflops);
    let floor_ms = memory_ms.max(compute_ms);
    if !(floor_ms > 0.0 && floor_ms.is_finite()) {
        return None;
    }
    Some(Floor {
        floor_ms,
        bound: if memory_ms >= compute_ms {
            "memory"
        } else {
            "compute"
        }
        .into(),
        gpu: gpu.to_string(),
        bandwidth_gbs,
        measured_bandwidth_gbs: measured_gbs,
        peak_tflops: spec.peak_tflops,
    })
}

/// The candidate's efficiency against `floor`'s device: its bandwidth (raised to the measured
/// one, dropped in warm L2) and its peak for `precision`.
pub fn efficiency(
    floor: &Floor,
    work: &ProblemWork,
    precision: kernelgate_model::Precision,
    time_ms: f64,
) -> Option<kernelgate_model::Efficiency> {
    let spec = kernelgate_timing::DeviceSpec::lookup(&floor.gpu)?;
    kernelgate_timing::efficiency(
        (work.input_bytes + work.output_bytes) as f64,
        work.flops.unwrap_or(0) as f64,
        floor.bandwidth_gbs,
        spec.peak_tflops_for(precision),
        precision,
        time_ms,
    )
}

pub(crate) fn summarise_timing(
    samples: BTreeMap<Series, Vec<kernelgate_timing::Sample>>,
    spec: &JobSpec,
    file: &str,
    on_gpu: bool,
    findings: &mut Vec<Finding>,
) -> TimingResult {
    let threshold = spec
        .timing
        .as_ref()
        .map(|t| t.threshold_pct)
        .unwrap_or(kernelgate_timing::DEFAULT_THRESHOLD_PCT);
    let ms = |k: Series| {
        samples
            .get(&k)
            .map(|v| kernelgate_timing::sample::event_ms(v))
    };
    let candidate = ms(Series::Candidate);
    let against = |base: Option<Vec<f64>>| match (base, &candidate) {
        (Some(b), Some(c)) => kernelgate_timing::compare(&b, c, threshold).ok(),
        _ => None,
    };
    let mut vs_reference = against(ms(Series::Reference));
    let vs_base = against(ms(Series::Base));
    if let Some(c) = samples.get(&Series::Candidate) {
        findings.extend(kernelgate_timing::escaped_work(file, c));
    }
    use kernelgate_timing::integrity::{self as ig, ReferenceWitness};
    if let (Some(c), Some(r)) = (
        samples.get(&Series::Candidate),
        samples.get(&Series::CandidateRepeated),
    ) {
        findings.extend(ig::input_reuse(file, c, r, on_gpu));
    }
    let mut reference_check = None;
    if let (Some(alone), Some(interleaved)) = (
        samples.get(&Series::ReferenceBeforeImport),
        samples.get(&Series::Reference),
    ) {
        // The harness's witness of a changed PyTorch: what a tampering verdict rests on.
        let patched = findings
            .iter()
            .find(|f| f.rule == RULE_TORCH_PATCHED || f.rule == RULE_HARNESS_HOOKED)
            .map(|f| f.message.clone());
        let w = ReferenceWitness {
            patched: patched.as_deref(),
            alone,
            control_alone: samples.get(&Series::ControlBeforeImport).map(Vec::as_slice),
            interleaved,
            control: samples.get(&Series::Control).map(Vec::as_slice),
            after: samples.get(&Series::ReferenceAfterCalls).map(Vec::as_slice),
            control_after: samples.get(&Series::ControlAfterCalls).map(Vec::as_slice),
        };
        let slower = ig::reference_tampered(file, &w, on_gpu);
        if let Some(alone) = ig::speedup_reference(&w, slower.as_ref()) {
            let alone = kernelgate_timing::sample::event_ms(alone);
            vs_reference = against(Some(alone)).or(vs_reference);
        }
        findings.extend(slower);
        reference_check = Some(ig::reference_check(&w));
    }
    TimingResult {
        samples,
        vs_reference,
        vs_base,
        floor: None,
        efficiency: None,
        reference_check,
    }
}

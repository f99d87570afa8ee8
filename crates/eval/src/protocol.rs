//! The contract between the CLI and the harness's Python runner: the job the runner reads from
//! stdin and the result it writes. Mirrored field for field by the dataclasses of
//! `crates/harness/python/kg_protocol.py` (`Job`, `Timing`, `Sandbox`; `Result`); both carry
//! [`HARNESS_PROTOCOL`] and the runner refuses a job of another version, or one with a field
//! missing or unknown, as the CLI refuses a result with a field it does not know.
//! Every default is decided here, once: the runner reads what it is given.

use std::collections::BTreeMap;

use kernelgate_model::config::L2Mode;
use kernelgate_model::{Precision, Severity};
use serde::{Deserialize, Serialize};

use crate::outcome::{Outcome, ProblemWork};

/// The job protocol this CLI speaks; the harness extension reports its own as `PROTOCOL`.
pub const HARNESS_PROTOCOL: u32 = 3;

/// One job for the runner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Job {
    pub protocol: u32,
    /// Random per job: names the runner's private modules.
    pub job_id: String,
    /// Absolute paths.
    pub problem: String,
    pub kernel: String,
    pub base_kernel: Option<String>,
    /// Where the base kernel builds or finds its build (`TORCH_EXTENSIONS_DIR` while it is
    /// imported): its own directory, apart from the candidate's.
    pub base_extensions_dir: Option<String>,
    /// The base's build is already in `base_extensions_dir`, which this process may only read:
    /// the runner loads the built libraries and compiles nothing.
    pub base_prebuilt: bool,
    /// The candidate's build is already in `TORCH_EXTENSIONS_DIR`, an entry of the build store
    /// this process may only read: the runner loads the built libraries and compiles nothing.
    pub prebuilt: bool,
    /// `auto`, `cpu` or `cuda` (the visible GPU is chosen by `CUDA_VISIBLE_DEVICES`).
    pub device: kernelgate_model::Device,
    /// The kernel builds a CPU-only extension: it runs on the CPU whatever the device.
    pub cpu_backend: bool,
    pub precision: Precision,
    /// atol = rtol of the correctness check ([`Precision::tolerance`]).
    pub tolerance: f64,
    pub trials: u32,
    pub seed: u64,
    pub shifted_trials: u32,
    pub inputs_on_device: bool,
    pub count_flops: bool,
    pub audit: bool,
    pub build_only: bool,
    pub timing: Option<JobTiming>,
    /// Filled in by the launcher (`child::spawn`).
    pub result_path: String,
    pub progress_path: String,
    /// What the sandbox grants, for the runner's audit hook; `None` before the launch.
    pub sandbox: Option<SandboxGrant>,
    /// When the job was handed over (Unix seconds): the runner's `process_start` phase.
    pub spawn_unix: Option<f64>,
}

/// The timing part of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobTiming {
    pub warmup: u32,
    pub min_samples: u32,
    pub max_samples: u32,
    pub budget_s: f64,
    pub ci_target_pct: f64,
    pub l2: L2Mode,
    /// Input sets the timed calls rotate through (the memory budget may keep fewer).
    pub input_sets: u32,
}

/// The sandbox's lists as the runner's audit hook checks them (`sandbox::Policy`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxGrant {
    pub read_exec: Vec<String>,
    pub read_files: Vec<String>,
    pub read_write: Vec<String>,
    pub denied_syscalls: BTreeMap<String, i64>,
    /// Denied by the runner from the candidate's import on (`sandbox::DENIED_FROM_CANDIDATE`).
    pub denied_from_candidate: BTreeMap<String, i64>,
    /// The level the launcher reached (`full`, `partial`, `off`).
    pub level: String,
}

/// What the runner writes back (authenticated by the launcher): `Runner.result` of
/// `crates/harness/python/runner.py`. A field this side does not know is refused (a CLI and a
/// harness from different builds), never dropped. Defaults cover the early answers (the runner's
/// to a job it cannot read, the extension's `error_json`): outcome, findings, phases and timing.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunnerResult {
    pub outcome: Outcome,
    #[serde(default)]
    pub findings: Vec<RawFinding>,
    #[serde(default)]
    pub phases: Vec<(String, f64)>,
    /// The seed the runner used: the job's.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Correctness trials the runner ran (all of them when they passed; up to the failing one).
    #[serde(default)]
    pub trials_run: Option<u32>,
    #[serde(default)]
    pub device: Option<kernelgate_model::RanOn>,
    #[serde(default)]
    pub torch: Option<String>,
    /// `kg_timing.machine`, asked before the candidate's import.
    #[serde(default)]
    pub machine: Option<crate::Machine>,
    #[serde(default)]
    pub timing: Option<BTreeMap<kernelgate_timing::Series, Vec<kernelgate_timing::Sample>>>,
    /// The problem's work, counted on the reference (timing jobs only).
    #[serde(default)]
    pub work: Option<ProblemWork>,
    /// Copy bandwidth measured on the GPU, GB/s (CUDA with a cold L2 only).
    #[serde(default)]
    pub bandwidth_gbs: Option<f64>,
    /// The op audit, read apart: a malformed audit is a warning, never a lost result.
    #[serde(default)]
    pub audit: Option<serde_json::Value>,
    #[serde(default)]
    pub memory: Option<kernelgate_model::MemoryUse>,
    /// The precision audit (absent from harnesses that make none).
    #[serde(default)]
    pub precision_audit: Option<kernelgate_model::PrecisionAudit>,
    /// What the candidate's import built or loaded in torch's build directory.
    #[serde(default)]
    pub extensions: Vec<crate::ExtensionBuild>,
    #[serde(default)]
    pub extensions_dir: Option<String>,
    /// The precompiled-header entry the child's C++ builds were offered (`kernelgate pch`).
    #[serde(default)]
    pub precompiled_header: Option<String>,
}

/// A runtime finding as the runner reports it (`eval/` is prefixed to its rule).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFinding {
    pub rule: String,
    pub severity: Severity,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    pub(crate) fn sample_job() -> Job {
        Job {
            protocol: HARNESS_PROTOCOL,
            job_id: "00ff".into(),
            problem: "/p.py".into(),
            kernel: "/k.py".into(),
            base_kernel: None,
            base_extensions_dir: None,
            base_prebuilt: false,
            prebuilt: false,
            device: kernelgate_model::Device::Cpu,
            cpu_backend: false,
            precision: Precision::Bf16,
            tolerance: Precision::Bf16.tolerance(),
            trials: 5,
            seed: 42,
            shifted_trials: 1,
            inputs_on_device: true,
            count_flops: false,
            audit: true,
            build_only: false,
            timing: Some(JobTiming {
                warmup: 3,
                min_samples: 10,
                max_samples: 200,
                budget_s: 10.0,
                ci_target_pct: 1.0,
                l2: L2Mode::Cold,
                input_sets: 3,
            }),
            result_path: "/r".into(),
            progress_path: "/q".into(),
            sandbox: None,
            spawn_unix: None,
        }
    }

    #[test]
    fn a_job_round_trips_and_names_its_precision_as_the_runner_reads_it() {
        let job = sample_job();
        let v = serde_json::to_value(&job).unwrap();
        assert_eq!(v["precision"], "bf16");
        assert_eq!(v["timing"]["l2"], "cold");
        assert_eq!(v["tolerance"], 1e-2);
        let back: Job = serde_json::from_value(v).unwrap();
        assert_eq!(back, job);
    }

    /// What `Runner.result` writes for a CPU job that passed, key for key.
    const PASSED_ON_CPU: &str = r#"{"outcome": {"kind": "passed", "trials": 2},
        "findings": [{"rule": "nondeterministic", "severity": "warning", "message": "m"}],
        "phases": [["import", 1.5], ["total", 3.0]], "seed": 42, "device": "cpu",
        "torch": "2.5.1+cpu", "machine": {"gpu": "cpu", "cuda": "none", "torch": "2.5.1+cpu"},
        "trials_run": 2, "timing": null, "work": null, "bandwidth_gbs": null, "audit": null,
        "memory": {"budget": null, "host_peak_bytes": 1024}, "precision_audit": null,
        "extensions": [], "extensions_dir": "/ext", "precompiled_header": null}"#;

    #[test]
    fn the_runners_result_is_read_field_for_field_and_an_unknown_one_refused() {
        let r: RunnerResult = serde_json::from_str(PASSED_ON_CPU).unwrap();
        assert_eq!((r.seed, r.trials_run), (Some(42), Some(2)));
        assert_eq!(r.findings[0].rule, "nondeterministic");
        let mut v: serde_json::Value = serde_json::from_str(PASSED_ON_CPU).unwrap();
        v["trials_ran"] = 2.into();
        let e = serde_json::from_value::<RunnerResult>(v)
            .unwrap_err()
            .to_string();
        assert!(e.contains("trials_ran"), "{e}");
        let mut v: serde_json::Value = serde_json::from_str(PASSED_ON_CPU).unwrap();
        v["findings"][0]["line"] = 3.into();
        assert!(serde_json::from_value::<RunnerResult>(v).is_err());
        // The runner's answer to a job it cannot read.
        let early = r#"{"outcome": {"kind": "harness_error", "message": "m"}, "findings": [],
            "phases": [], "timing": null}"#;
        assert!(serde_json::from_str::<RunnerResult>(early)
            .unwrap()
            .seed
            .is_none());
    }

    #[test]
    fn an_unknown_field_is_refused() {
        let mut v = serde_json::to_value(sample_job()).unwrap();
        v["trails"] = 5.into();
        let e = serde_json::from_value::<Job>(v).unwrap_err().to_string();
        assert!(e.contains("trails"), "{e}");
    }

    /// The field names a serde type reads, as its derive lists them (the `fields` it hands to
    /// `deserialize_struct`): what the Python dataclasses are checked against.
    fn serde_fields<T: serde::de::DeserializeOwned>() -> Vec<&'static str> {
        use serde::de::{value::Error, Error as _, Visitor};
        struct Names(Option<&'static [&'static str]>);
        impl<'de> serde::Deserializer<'de> for &mut Names {
            type Error = Error;
            fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
                Err(Error::custom("not a struct"))
            }
            fn deserialize_struct<V: Visitor<'de>>(
                self,
                _: &'static str,
                fields: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, Error> {
                self.0 = Some(fields);
                Err(Error::custom("names read"))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
                byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
                identifier ignored_any
            }
        }
        let mut names = Names(None);
        let _ = T::deserialize(&mut names);
        let mut v = names.0.expect("a struct").to_vec();
        v.sort_unstable();
        v
    }

    /// The dataclasses of `kg_protocol.py` and these types name the same fields, both ways: a
    /// field one side adds and the other lacks fails here, not in a run (the CLI refuses a
    /// result field it does not know; a result field it knows but the runner never sends would
    /// otherwise stay silently at its default).
    #[test]
    fn the_runners_dataclasses_and_these_types_name_the_same_fields() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../harness/python/kg_protocol.py");
        let script = "import dataclasses, importlib.util, json, sys\n\
             spec = importlib.util.spec_from_file_location('kg_protocol', sys.argv[1])\n\
             m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n\
             print(json.dumps({c: sorted(f.name for f in dataclasses.fields(getattr(m, c)))\n\
                               for c in ['Job', 'Timing', 'Sandbox', 'Result']}))";
        let out = std::process::Command::new(crate::find_python(Path::new(".")))
            .arg("-c")
            .arg(script)
            .arg(&src)
            .output()
            .expect("a Python to read kg_protocol.py with");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let python: BTreeMap<String, Vec<String>> = serde_json::from_slice(&out.stdout).unwrap();
        for (class, rust) in [
            ("Job", serde_fields::<Job>()),
            ("Timing", serde_fields::<JobTiming>()),
            ("Sandbox", serde_fields::<SandboxGrant>()),
            ("Result", serde_fields::<RunnerResult>()),
        ] {
            assert_eq!(
                python[class], rust,
                "kg_protocol.{class} against its Rust type"
            );
        }
    }
}

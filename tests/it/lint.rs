//! `kernelgate lint` end to end: every hack fixture yields exactly its (rule, line) set, every
//! honest fixture and the bundled kernels are clean, and the formats, exit codes, suppressions,
//! severity overrides and generated docs behave.

use crate::common::{root, AUDIT_DEFENDS};

use std::process::Command;

fn kernelgate(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kernelgate"))
        .current_dir(root())
        .args(args)
        .output()
        .expect("run kernelgate");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn lint_json(path: &str, extra: &[&str]) -> (i32, serde_json::Value) {
    let mut args = vec!["lint", "--format", "json", path];
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = kernelgate(&args);
    let v = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{path}: bad json ({e}): {stdout}\n{stderr}"));
    (code, v)
}

/// Python-side findings only (lint-cpp's KG6xx have their own table in tests/it/lint_cpp.rs).
fn rule_lines(v: &serde_json::Value) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_string(),
                f["line"].as_u64().unwrap(),
            )
        })
        .filter(|(r, _)| !r.starts_with("KG6"))
        .collect();
    out.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    out
}

const HACKS: &[(&str, &[(&str, u64)])] = &[
    ("hacks/torch_op_alias.py", &[("KG101", 21), ("KG101", 22)]),
    ("hacks/torch_op_getattr.py", &[("KG101", 22)]),
    ("hacks/nn_layer.py", &[("KG102", 24), ("KG102", 25)]),
    ("hacks/matmul_operator.py", &[("KG103", 19)]),
    ("hacks/tensor_method.py", &[("KG104", 19)]),
    ("hacks/try_except.py", &[("KG201", 19), ("KG101", 22)]),
    ("hacks/pass_forward.py", &[("KG202", 22)]),
    ("hacks/return_input.py", &[("KG202", 18)]),
    (
        "hacks/inherit_reference.py",
        &[("KG101", 19), ("KG203", 22)],
    ),
    ("hacks/use_reference.py", &[("KG203", 21)]),
    (
        "hacks/dynamic_code.py",
        &[("KG204", 19), ("KG204", 20), ("KG204", 25)],
    ),
    (
        "hacks/timer_tamper.py",
        &[("KG301", 17), ("KG301", 18), ("KG301", 19)],
    ),
    (
        "hacks/validation_tamper.py",
        &[("KG302", 17), ("KG302", 18)],
    ),
    ("hacks/monkey_patch.py", &[("KG303", 17)]),
    (
        "hacks/introspection.py",
        &[("KG304", 15), ("KG304", 21), ("KG304", 22)],
    ),
    (
        "hacks/forged_output.py",
        &[("KG305", 22), ("KG305", 23), ("KG305", 24)],
    ),
    (
        "hacks/sandbox.py",
        &[("KG306", 15), ("KG306", 16), ("KG306", 19), ("KG306", 20)],
    ),
    (
        "hacks/output_cache.py",
        &[("KG401", 22), ("KG401", 23), ("KG401", 25)],
    ),
    (
        "hacks/shape_cache.py",
        &[("KG401", 23), ("KG401", 24), ("KG401", 25)],
    ),
    (
        "hacks/phase_detection.py",
        &[("KG402", 26), ("KG402", 28), ("KG407", 29)],
    ),
    ("hacks/side_stream.py", &[("KG403", 20), ("KG403", 23)]),
    ("hacks/threads.py", &[("KG404", 15), ("KG404", 16)]),
    (
        "hacks/lazy_tensor.py",
        &[("KG405", 17), ("KG405", 19), ("KG405", 25)],
    ),
    ("hacks/memoized.py", &[("KG406", 22)]),
    (
        "hacks/precision_downgrade.py",
        &[("KG501", 19), ("KG501", 20), ("KG501", 21)],
    ),
    ("hacks/tf32.py", &[("KG502", 16), ("KG502", 17)]),
    ("hacks/changed_work.py", &[("KG701", 16), ("KG701", 24)]),
    ("hacks/no_kernel.py", &[("KG702", 5), ("KG104", 7)]),
    ("hacks/missing_modelnew.py", &[("KG703", 1)]),
    ("hacks/parse_error.py", &[("KG000", 17)]),
    (
        "hacks/suppression_without_reason.py",
        &[("KG103", 19), ("KG900", 19)],
    ),
    ("hacks/unknown_suppression.py", &[("KG901", 19)]),
    (
        "hacks/stored_torch_op.py",
        &[
            ("KG101", 17),
            ("KG101", 18),
            ("KG303", 18),
            ("KG101", 24),
            ("KG101", 25),
        ],
    ),
    ("hacks/reference_via_type.py", &[("KG203", 17)]),
    (
        "hacks/star_and_operator.py",
        &[("KG101", 20), ("KG103", 23), ("KG101", 24)],
    ),
    (
        "hacks/module_state_cache.py",
        &[
            ("KG401", 23),
            ("KG402", 23),
            ("KG401", 24),
            ("KG401", 25),
            ("KG401", 26),
        ],
    ),
    ("hacks/stored_output.py", &[("KG202", 22)]),
    ("hacks/getattr_method.py", &[("KG104", 19)]),
    (
        "hacks/inplace_and_dunder_methods.py",
        &[("KG104", 24), ("KG104", 25)],
    ),
    (
        "hacks/torch_dict_and_vf.py",
        &[("KG101", 20), ("KG101", 21)],
    ),
    (
        "hacks/content_key_cache.py",
        &[("KG104", 19), ("KG401", 20), ("KG401", 24)],
    ),
    ("hacks/memoized_output.py", &[("KG401", 22)]),
    (
        "hacks/weakref_cache.py",
        &[("KG401", 15), ("KG401", 22), ("KG401", 24)],
    ),
    ("hacks/shape_cache_get.py", &[("KG401", 21), ("KG401", 25)]),
    (
        "hacks/env_phase_at_import.py",
        &[("KG402", 23), ("KG402", 23)],
    ),
    (
        "hacks/half_types_and_default_dtype.py",
        &[("KG501", 16), ("KG501", 21), ("KG501", 22)],
    ),
    (
        "hacks/tf32_flags_and_env.py",
        &[("KG502", 17), ("KG502", 18), ("KG502", 23)],
    ),
    (
        "hacks/forged_output_indirect.py",
        &[("KG305", 22), ("KG305", 23), ("KG305", 24)],
    ),
    ("hacks/reference_alias.py", &[("KG203", 25)]),
    (
        "hacks/layer_subclass.py",
        &[("KG102", 28), ("KG102", 29), ("KG102", 29)],
    ),
    (
        "hacks/stored_op_wrappers.py",
        &[("KG101", 20), ("KG101", 21), ("KG101", 25)],
    ),
    (
        "hacks/live_through_values.py",
        &[("KG104", 16), ("KG104", 20), ("KG104", 24)],
    ),
    (
        "hacks/decorated_forward.py",
        &[("KG101", 21), ("KG101", 27)],
    ),
    ("hacks/hidden_counters.py", &[("KG402", 26), ("KG402", 26)]),
    ("hacks/clock_phase.py", &[("KG402", 25)]),
    ("hacks/load_library.py", &[("KG306", 16)]),
    (
        "hacks/tensor_operators.py",
        &[
            ("KG104", 24),
            ("KG104", 25),
            ("KG104", 26),
            ("KG104", 26),
            ("KG104", 28),
            ("KG104", 28),
        ],
    ),
    ("hacks/numpy_on_host.py", &[("KG104", 21)]),
    ("hacks/identity_reuse.py", &[("KG401", 25), ("KG401", 25)]),
    ("hacks/compute_once.py", &[("KG401", 24)]),
    ("hacks/modelnew_patched.py", &[("KG101", 18)]),
    ("hacks/class_swap.py", &[("KG203", 23), ("KG203", 28)]),
    ("hacks/half_indirect.py", &[("KG501", 18), ("KG501", 20)]),
    // Graphs replay on the current stream (a KG403 warning); replaying without copying the
    // new input into the captured buffer returns the first call's result (KG401).
    (
        "hacks/graph_replay.py",
        &[("KG403", 34), ("KG403", 35), ("KG401", 37)],
    ),
    ("hacks/process_spawn.py", &[("KG306", 20)]),
    (
        "hacks/input_mutation.py",
        &[
            ("KG407", 21),
            ("KG407", 22),
            ("KG407", 23),
            ("KG407", 24),
            ("KG407", 25),
        ],
    ),
    ("hacks/batched_calls.py", &[("KG401", 23), ("KG202", 25)]),
    (
        "hacks/stored_results_file.py",
        &[("KG401", 21), ("KG401", 23)],
    ),
    ("hacks/reseed.py", &[("KG402", 19)]),
    ("hacks/cupy_library.py", &[("KG101", 20)]),
    (
        "hacks/setattr_by_dunder.py",
        &[("KG502", 16), ("KG301", 17)],
    ),
    ("hacks/class_counter.py", &[("KG402", 23)]),
    ("hacks/closure_counter.py", &[("KG402", 42)]),
    (
        "hacks/more_tensor_methods.py",
        &[("KG104", 20), ("KG104", 20)],
    ),
    (
        "hacks/main_guard_forced.py",
        &[("KG201", 36), ("KG305", 39), ("KG305", 43), ("KG305", 44)],
    ),
    (
        "hacks/torch_op_as_value.py",
        &[("KG101", 18), ("KG101", 20), ("KG104", 21)],
    ),
    (
        "hacks/indirect_attribute_access.py",
        &[("KG104", 17), ("KG101", 23), ("KG101", 24)],
    ),
    (
        "hacks/stack_and_allocator_introspection.py",
        &[("KG304", 24), ("KG304", 25)],
    ),
    ("hacks/cuda_python_runtime.py", &[("KG306", 15)]),
    ("hacks/lazy_type_call.py", &[("KG405", 16)]),
    ("hacks/return_input_after_kernel.py", &[("KG407", 18)]),
    (
        "hacks/host_apply_and_functional.py",
        &[("KG104", 20), ("KG101", 21)],
    ),
    ("hacks/instance_forward.py", &[("KG101", 24), ("KG101", 27)]),
    ("hacks/constant_output.py", &[("KG202", 20)]),
    ("hacks/counter_helpers.py", &[("KG402", 33), ("KG402", 33)]),
    ("hacks/load_code_from_file.py", &[("KG204", 18)]),
    (
        "hacks/harness_hooks.py",
        &[
            ("KG405", 4),
            ("KG307", 21),
            ("KG307", 25),
            ("KG307", 30),
            ("KG405", 33),
            ("KG405", 34),
            ("KG307", 39),
            ("KG307", 40),
            ("KG307", 41),
            ("KG307", 47),
        ],
    ),
    // The kernel sits behind a switch `__init__` fixes to False: forward never launches it.
    (
        "hacks/decoy_constructor_flag.py",
        &[("KG702", 29), ("KG101", 30)],
    ),
    // The extension runs but its result is thrown away: a decoy, so the torch op blocks.
    ("hacks/discarded_kernel_result.py", &[("KG101", 21)]),
    // `apply` bound to a module-level name, every call resolved: the Function runs torch.relu
    // and the extension is never called.
    (
        "hacks/apply_alias_decoy.py",
        &[("KG101", 30), ("KG102", 42)],
    ),
];

/// Hack fixtures whose rules are warnings by design (a signal for review, not a proof).
const WARNING_HACKS: &[&str] = &[
    "cpp/hack_dataptr_only.py",
    "cpp/hack_return_empty.py",
    "cpp/hack_unwritten_output.py",
    "hacks/changed_work.py",
    "hacks/memoized.py",
    "hacks/unknown_suppression.py",
];

/// Every hack fixture (Python, C++, Triton) blocks, except the documented [`AUDIT_DEFENDS`].
#[test]
fn every_hack_fixture_keeps_an_error_unless_the_audit_defends_it() {
    let mut files = Vec::new();
    for (dir, prefix) in [("hacks", ""), ("cpp", "hack_"), ("triton", "hack_")] {
        for e in std::fs::read_dir(root().join("tests/fixtures/lint").join(dir)).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().to_string();
            if name.starts_with(prefix) && name.ends_with(".py") {
                files.push(format!("{dir}/{name}"));
            }
        }
    }
    files.sort();
    let mut no_error = Vec::new();
    for f in &files {
        let (code, v) = lint_json(&format!("tests/fixtures/lint/{f}"), &[]);
        let errors = v["summary"]["errors"].as_u64().unwrap();
        assert_eq!(code, if errors > 0 { 1 } else { 0 }, "{f}: exit code");
        if errors == 0 {
            // The audit-defended ones still warn about the PyTorch work.
            assert!(v["summary"]["warnings"].as_u64().unwrap() > 0, "{f}: {v:#}");
            no_error.push(f.as_str());
        }
    }
    let mut expected: Vec<&str> = AUDIT_DEFENDS.iter().chain(WARNING_HACKS).copied().collect();
    expected.sort();
    assert_eq!(no_error, expected, "hack fixtures without an error");
    // The audit-defended ones are exactly torch-op warnings next to custom code.
    for f in AUDIT_DEFENDS {
        let (_, v) = lint_json(&format!("tests/fixtures/lint/{f}"), &[]);
        for finding in v["findings"].as_array().unwrap() {
            let rule = finding["rule"].as_str().unwrap();
            if kernelgate_lint::TORCH_OP_RULES.contains(&rule) {
                let msg = finding["message"].as_str().unwrap();
                assert!(
                    msg.contains("partial replacement") || msg.contains("not proven"),
                    "{f}: {msg}"
                );
            }
        }
    }
}

/// Partial replacement (KernelBench's few-shot `model_new_ex_mnist2.py` keeps `nn.Conv2d`; a
/// level-2 kernel keeps cuDNN's convolution; torch glue on a reduced result; a Triton kernel
/// next to a kept `nn.Linear`): warnings that name the custom code, no error.
#[test]
fn partial_replacement_warns_and_does_not_block() {
    let (code, v) = lint_json("tests/fixtures/lint/partial", &[]);
    assert_eq!(code, 0, "{v:#}");
    let findings = v["findings"].as_array().unwrap();
    assert_eq!(v["summary"]["errors"], 0, "{v:#}");
    let per_file = |name: &str| -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = findings
            .iter()
            .filter(|f| f["file"].as_str().unwrap().ends_with(name))
            .map(|f| {
                assert_eq!(f["severity"], "warning", "{f}");
                let msg = f["message"].as_str().unwrap();
                if f["rule"] == "KG403" {
                    assert!(msg.contains("replays on the current stream"), "{msg}");
                } else {
                    assert!(msg.contains("partial replacement"), "{msg}");
                }
                (
                    f["rule"].as_str().unwrap().to_string(),
                    f["line"].as_u64().unwrap(),
                )
            })
            .collect();
        out.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
        out
    };
    let w = |r: &str, l: u64| (r.to_string(), l);
    assert_eq!(
        per_file("kernelbench_mnist_partial.py"),
        vec![
            w("KG102", 54),
            w("KG101", 55),
            w("KG102", 56),
            w("KG101", 57),
            w("KG102", 59),
            w("KG102", 60),
            w("KG102", 61),
        ]
    );
    assert_eq!(per_file("conv_fused_epilogue.py"), vec![w("KG102", 42)]);
    assert_eq!(
        per_file("row_norms_glue.py"),
        vec![w("KG601", 32), w("KG104", 43)]
    );
    assert_eq!(per_file("triton_kept_linear.py"), vec![w("KG102", 24)]);
    // `apply` bound to a module-level name and held by the module: followed, so the kernel
    // provably runs next to the kept convolution.
    assert_eq!(per_file("apply_alias_attribute.py"), vec![w("KG102", 46)]);
    // The kernel runs only inside custom modules held by containers, through an autograd
    // Function: reached, so the kept convolution inside the Sequential is partial replacement.
    assert_eq!(per_file("module_containers.py"), vec![w("KG102", 63)]);
    // Captured once, the input copied in before each replay: the graph warns, nothing blocks.
    assert_eq!(
        per_file("cuda_graph_replay.py"),
        vec![w("KG403", 41), w("KG403", 42)]
    );
}

/// Honest kernels whose custom code or branch the analysis reaches only through something it
/// cannot resolve: an indirection (a factory's result, a container, a wrapper, a local, a
/// `torch.ops` op registered in C++, a kernel handed on as a value in C++) or a dtype test it
/// cannot decide. Each rule whose claim is therefore unproven is a warning; none blocks.
const UNPROVEN: &[(&str, &[&str])] = &[
    ("bias_branch_inplace.py", &["KG104", "KG407"]),
    ("cpp_half_branch_either.py", &["KG610"]),
    ("cpp_half_branch_element_size.py", &["KG610"]),
    ("cpp_half_branch_predicate.py", &["KG610"]),
    ("cpp_launch_fn_pointer.py", &["KG611"]),
    ("cpp_launch_kernel_cast.py", &["KG611"]),
    ("cpp_launch_lambda.py", &["KG611"]),
    ("cpp_launch_template.py", &["KG611"]),
    ("half_alloc_rebound_input.py", &["KG501"]),
    ("partial_apply_from_factory.py", &["KG102"]),
    ("partial_container_table.py", &["KG102"]),
    ("partial_decorator_wrapped.py", &["KG102"]),
    ("partial_local_callable.py", &["KG102"]),
    ("partial_registry_decorator.py", &["KG102"]),
    ("partial_torch_ops_cpp_library.py", &["KG102"]),
    ("triton_constexpr_out_dtype.py", &["KG621"]),
];

#[test]
fn unproven_claims_warn_and_say_what_the_analysis_could_not_resolve() {
    let dir = root().join("tests/fixtures/lint/unproven");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".py"))
        .collect();
    on_disk.sort();
    let listed: Vec<String> = UNPROVEN.iter().map(|(f, _)| f.to_string()).collect();
    assert_eq!(on_disk, listed);
    let (code, v) = lint_json("tests/fixtures/lint/unproven", &[]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["summary"]["errors"], 0, "{v:#}");
    for (file, rules) in UNPROVEN {
        let mine: Vec<&serde_json::Value> = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["file"].as_str().unwrap().ends_with(&format!("/{file}")))
            .collect();
        let mut got: Vec<&str> = mine.iter().map(|f| f["rule"].as_str().unwrap()).collect();
        got.sort();
        got.dedup();
        assert_eq!(&got, rules, "{file}");
        for f in mine {
            let msg = f["message"].as_str().unwrap();
            assert!(
                msg.contains("(a warning, not proven: ") || msg.contains("partial replacement"),
                "{file}: {msg}"
            );
        }
    }
}

fn lint_src(src: &str) -> Vec<(String, u32, kernelgate_lint::Severity)> {
    kernelgate_lint::lint_file("x.py", src, &Default::default())
        .unwrap()
        .into_iter()
        .filter(|f| !f.rule.starts_with("KG6"))
        .map(|f| (f.rule, f.line, f.severity))
        .collect()
}

/// Registrations in PyTorch's namespaces and process-wide hooks block; a custom op in the
/// candidate's own namespace, a mode entered and exited, and a namespace the lint cannot read
/// (a warning) do not.
#[test]
fn harness_hooks_block_and_own_namespaces_stay_clean() {
    use kernelgate_lint::Severity::{Error, Warning};
    let head = "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\next = load_inline(name='e', cpp_sources='', cuda_sources='__global__ void k(float* y) { y[0] = 1.f; }', functions=['run'])\n";
    let tail = "class ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.run(x)\n";
    let kg307 = |body: &str| -> Vec<(u32, kernelgate_lint::Severity)> {
        lint_src(&format!("{head}{body}{tail}"))
            .into_iter()
            .filter(|f| f.0 == "KG307")
            .map(|f| (f.1, f.2))
            .collect()
    };
    assert_eq!(
        kg307("torch.library.define('aten::relu2(Tensor x) -> Tensor')\n"),
        vec![(5, Error)]
    );
    assert_eq!(
        kg307("NS = 'at' + 'en'\nlib = torch.library.Library(NS, 'FRAGMENT')\n"),
        vec![(6, Error)]
    );
    assert_eq!(
        kg307("def ns():\n    return 'aten'\nlib = torch.library.Library(ns(), 'IMPL')\n"),
        vec![(7, Warning)]
    );
    assert_eq!(
        kg307("torch.library.register_fake('prims::add')(lambda a, b: a)\n"),
        vec![(5, Error)]
    );
    assert_eq!(
        kg307("torch._C._cuda_attach_out_of_memory_observer(print)\n"),
        vec![(5, Error)]
    );
    assert_eq!(
        kg307("torch.cuda.memory._set_allocator_settings('expandable_segments:True')\n"),
        vec![(5, Error)]
    );
    assert_eq!(
        kg307("torch._C._set_dispatch_mode(None)\n"),
        vec![(5, Error)]
    );
    assert_eq!(kg307("from torch.nn.modules.module import register_module_forward_pre_hook as h\nh(lambda m, i: i)\n"), vec![(5, Error)]);
    // A mode entered and exited again, and own namespaces, are not hooks.
    let own = "from torch.overrides import TorchFunctionMode\nclass M(TorchFunctionMode):\n    pass\nm = M()\nm.__enter__()\nm.__exit__(None, None, None)\nlib = torch.library.Library('mylib', 'DEF')\nlib.define('f(Tensor x) -> Tensor')\ntorch.library.custom_op('mylib::g', mutates_args=())(lambda x: ext.run(x))\ntorch.library.register_kernel('mylib::g', 'cuda', lambda x: ext.run(x))\n";
    assert_eq!(kg307(own), vec![]);
    assert_eq!(kg307("from torch.overrides import TorchFunctionMode\nclass M(TorchFunctionMode):\n    pass\nM().__enter__()\n"), vec![(8, Error)]);
}

/// A switch to the stream that is already current is no switch; the default stream warns; a
/// stream held from `__init__`, a local that may hold another stream, or a created side stream
/// is not proven current and blocks.
#[test]
fn stream_switches_to_the_current_stream_are_no_switch() {
    use kernelgate_lint::Severity::{Error, Warning};
    let head = "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\next = load_inline(name='e', cpp_sources='', cuda_sources='__global__ void k(float* y) { y[0] = 1.f; }', functions=['run'])\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.s = torch.cuda.current_stream()\n    def forward(self, x, flag=None):\n";
    let with = |body: &str| lint_src(&format!("{head}{body}"));
    let kg403 = |v: Vec<(String, u32, kernelgate_lint::Severity)>| -> Vec<(u32, kernelgate_lint::Severity)> {
        v.into_iter().filter(|f| f.0 == "KG403").map(|f| (f.1, f.2)).collect()
    };
    assert_eq!(kg403(with("        with torch.cuda.stream(torch.cuda.current_stream()):\n            return ext.run(x)\n")), vec![]);
    assert_eq!(kg403(with("        s = torch.cuda.current_stream()\n        with torch.cuda.stream(s):\n            return ext.run(x)\n")), vec![]);
    assert_eq!(kg403(with("        with torch.cuda.stream(torch.cuda.default_stream()):\n            return ext.run(x)\n")), vec![(10, Warning)]);
    // Taken in `__init__`: the harness may time on another stream by the time forward runs.
    assert_eq!(
        kg403(with(
            "        with torch.cuda.stream(self.s):\n            return ext.run(x)\n"
        )),
        vec![(10, Error)]
    );
    // `s` may be a new stream.
    assert_eq!(kg403(with("        s = torch.cuda.current_stream()\n        if flag:\n            s = torch.cuda.Stream()\n        with torch.cuda.stream(s):\n            return ext.run(x)\n")), vec![(12, Error), (13, Error)]);
    // A graph replays on the current stream; a graph captured on a side stream still blocks.
    let graph = "        g = torch.cuda.CUDAGraph()\n        with torch.cuda.graph(g):\n            y = ext.run(x)\n        g.replay()\n        return y\n";
    assert_eq!(kg403(with(graph)), vec![(10, Warning), (11, Warning)]);
    let side = "        side = torch.cuda.Stream()\n        with torch.cuda.stream(side):\n            g = torch.cuda.CUDAGraph()\n            with torch.cuda.graph(g):\n                y = ext.run(x)\n            g.replay()\n        return y\n";
    assert_eq!(
        kg403(with(side)),
        vec![(10, Error), (11, Error), (12, Warning), (13, Warning)]
    );
}

/// Without a working custom kernel the same torch ops block: no kernel at all (KG702), or a
/// kernel whose call `forward` never makes.
#[test]
fn torch_ops_block_without_custom_code() {
    let src = std::fs::read_to_string(
        root().join("tests/fixtures/lint/partial/kernelbench_mnist_partial.py"),
    )
    .unwrap();
    // The same model, the custom ReLU replaced by PyTorch's.
    let swapped = src.replace("self.relu.relu_cuda(", "torch.relu(");
    let found = kernelgate_lint::lint_file("x.py", &swapped, &Default::default()).unwrap();
    let errors: Vec<&str> = found
        .iter()
        .filter(|f| f.severity == kernelgate_lint::Severity::Error)
        .map(|f| f.rule.as_str())
        .collect();
    assert!(
        errors.contains(&"KG102") && errors.contains(&"KG101"),
        "{found:?}"
    );
    // The container fixture with its Function computing in PyTorch: nothing custom is reached.
    let src =
        std::fs::read_to_string(root().join("tests/fixtures/lint/partial/module_containers.py"))
            .unwrap()
            .replace(
                "return fused.relu_scale(x.contiguous(), s)",
                "return torch.relu(x) * s",
            );
    let found = kernelgate_lint::lint_file("x.py", &src, &Default::default()).unwrap();
    let errors: Vec<(&str, u32)> = found
        .iter()
        .filter(|f| f.severity == kernelgate_lint::Severity::Error)
        .map(|f| (f.rule.as_str(), f.line))
        .collect();
    assert_eq!(errors, vec![("KG101", 39), ("KG102", 63)], "{found:?}");
    let (code, v) = lint_json("tests/fixtures/lint/hacks/nn_layer.py", &[]);
    assert_eq!(code, 1, "{v:#}");
    assert!(v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["severity"] == "error"));
}

/// The problem's `get_init_inputs()` decides `if self.bias is not None:`: with the mapping the
/// honest fixture is clean; without it the bias branch is live and its torch op a warning.
#[test]
fn problem_constants_decide_dead_branches() {
    let path = "tests/fixtures/lint/honest/conv_dead_branches.py";
    let (code, v) = lint_json(path, &[]);
    assert_eq!((code, &v["findings"]), (0, &serde_json::json!([])), "{v:#}");
    let src = std::fs::read_to_string(root().join(path)).unwrap();
    let unmapped = kernelgate_lint::lint_file("x.py", &src, &Default::default()).unwrap();
    let rules: Vec<(&str, u32)> = unmapped.iter().map(|f| (f.rule.as_str(), f.line)).collect();
    // `out + self.bias...`; the CPU and fp16 fallbacks stay dead without the problem.
    assert_eq!(rules, vec![("KG104", 74)], "{unmapped:?}");
    assert!(unmapped
        .iter()
        .all(|f| f.severity == kernelgate_lint::Severity::Warning));
    // With a problem that passes bias=True the branch is live.
    let problem = std::fs::read_to_string(root().join("KernelBench/level1/9_Conv2d.py"))
        .unwrap()
        .replace(
            "return [in_channels, out_channels, kernel_size]",
            "return [in_channels, out_channels, kernel_size, 1, 0, True]",
        );
    let opts = kernelgate_lint::LintOptions {
        problem_source: Some(problem),
        ..Default::default()
    };
    let with_bias = kernelgate_lint::lint_file("x.py", &src, &opts).unwrap();
    assert_eq!(
        with_bias
            .iter()
            .map(|f| (f.rule.as_str(), f.line))
            .collect::<Vec<_>>(),
        vec![("KG104", 74)]
    );
}

/// The problem's constants decide more than `if self.bias is not None:`: keyword-only defaults
/// (`bias=False`), and an `if` whose taken branch returns makes what follows dead (the
/// `torch.mean`/`torch.sum` fallbacks for dims the problem never reduces). The same fixture on
/// a problem that reduces dim 0 runs the fallback.
#[test]
fn taken_branches_that_return_make_the_rest_dead() {
    let path = "tests/fixtures/lint/honest/sum_reduction_dims.py";
    let src = std::fs::read_to_string(root().join(path)).unwrap();
    let problem =
        std::fs::read_to_string(root().join("KernelBench/level1/6_Sum_reduction.py")).unwrap();
    let lint = |problem: String| -> Vec<(String, u32, kernelgate_lint::Severity)> {
        let opts = kernelgate_lint::LintOptions {
            problem_source: Some(problem),
            ..Default::default()
        };
        kernelgate_lint::lint_file("x.py", &src, &opts)
            .unwrap()
            .into_iter()
            .map(|f| (f.rule, f.line, f.severity))
            .collect()
    };
    assert_eq!(lint(problem.clone()), vec![]);
    use kernelgate_lint::Severity::Error;
    // Reducing dim 0, the kernel's branch is the dead one: forward runs only PyTorch.
    let dim0 = problem.replace("reduce_dim = 1", "reduce_dim = 0");
    assert_eq!(
        lint(dim0),
        vec![
            ("KG702".to_string(), 49, Error),
            ("KG101".to_string(), 54, Error)
        ]
    );
    let biased = problem.replace("return [reduce_dim]", "return [reduce_dim, 2]");
    // Two positional arguments for one positional parameter: nothing is known, all is live.
    assert_eq!(
        lint(biased)
            .iter()
            .map(|f| (f.0.as_str(), f.1))
            .collect::<Vec<_>>(),
        vec![("KG104", 51), ("KG101", 54), ("KG101", 55)]
    );
}

/// A kernel behind a constructor switch the problem fixes to False is a decoy: KG702 and the
/// torch op block. The same switch turned on by `get_init_inputs()` runs the kernel.
#[test]
fn a_kernel_behind_a_switch_the_problem_turns_off_is_a_decoy() {
    use kernelgate_lint::Severity::{Error, Warning};
    let src =
        std::fs::read_to_string(root().join("tests/fixtures/lint/hacks/decoy_constructor_flag.py"))
            .unwrap()
            .replace(
                "def __init__(self):",
                "def __init__(self, use_custom=False):",
            )
            .replace("self.use_custom = False", "self.use_custom = use_custom");
    let lint = |init: &str| -> Vec<(String, u32, kernelgate_lint::Severity)> {
        let opts = kernelgate_lint::LintOptions {
            problem_source: Some(format!("def get_init_inputs():\n    return [{init}]\n")),
            ..Default::default()
        };
        kernelgate_lint::lint_file("x.py", &src, &opts)
            .unwrap()
            .into_iter()
            .filter(|f| !f.rule.starts_with("KG6"))
            .map(|f| (f.rule, f.line, f.severity))
            .collect()
    };
    let e = |r: &str, l: u32, s| (r.to_string(), l, s);
    assert_eq!(lint(""), vec![e("KG702", 29, Error), e("KG101", 30, Error)]);
    // On, the kernel's branch returns: the fallback after it is dead too.
    assert_eq!(lint("True"), vec![]);
    // Unmapped, the argument is unknown: both branches are live, partial replacement.
    let unmapped = kernelgate_lint::lint_file("x.py", &src, &Default::default()).unwrap();
    assert_eq!(
        unmapped
            .iter()
            .map(|f| (f.rule.as_str(), f.severity))
            .collect::<Vec<_>>(),
        vec![("KG101", Warning)]
    );
}

/// Adjacent Python string literals are one string before any text check of the embedded
/// source: ruff's parser keeps them as parts of one literal and the extraction joins them, so a
/// token split across literals (`"cub" "lasSgemm"`, `"...row.col" ".f32.tf32..."`) is still seen.
#[test]
fn adjacent_python_literals_are_joined_before_the_embedded_checks() {
    let src = "from torch.utils.cpp_extension import load_inline\nimport torch.nn as nn\nsrc = (\n    '__global__ void k(float* y) { y[0] = 1.f; }\\n'\n    'void run(float* a) { cub' 'lasSgemm(h, a); }\\n'\n    'asm volatile(\"mma.sync.aligned.m16n8k8.row.col' '.f32.tf32.tf32.f32 {%0}, {%1}, {%2}, {%3};\");\\n'\n)\next = load_inline(name='e', cpp_sources='', cuda_sources=src, functions=['run'])\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.run(x)\n";
    let found = kernelgate_lint::lint_file("x.py", src, &Default::default()).unwrap();
    let rules: Vec<(&str, u32)> = found.iter().map(|f| (f.rule.as_str(), f.line)).collect();
    // No single literal holds `cublas` or the whole MMA instruction: only the joined text does.
    assert!(rules.contains(&("KG602", 5)), "{found:?}");
    assert!(rules.contains(&("KG610", 6)), "{found:?}");
    assert!(
        found
            .iter()
            .any(|f| f.rule == "KG610" && f.message.contains("f32")),
        "{found:?}"
    );
}

#[test]
fn every_hack_fixture_has_exactly_its_findings() {
    let mut failures = Vec::new();
    for (file, expected) in HACKS {
        let path = format!("tests/fixtures/lint/{file}");
        let (code, v) = lint_json(&path, &[]);
        let got = rule_lines(&v);
        let mut want: Vec<(String, u64)> =
            expected.iter().map(|(r, l)| (r.to_string(), *l)).collect();
        want.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
        if got != want {
            failures.push(format!("{file}: expected {want:?}, got {got:?}"));
        }
        let has_error = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["severity"] == "error");
        assert_eq!(code, if has_error { 1 } else { 0 }, "{file}: exit code");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_hack_fixture_is_in_the_table_and_every_rule_has_a_fixture() {
    let dir = root().join("tests/fixtures/lint/hacks");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| format!("hacks/{}", e.unwrap().file_name().to_string_lossy()))
        .filter(|n| n.ends_with(".py"))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = HACKS.iter().map(|(f, _)| f.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed);
    for rule in kernelgate_lint::rules()
        .iter()
        .filter(|r| !r.code.starts_with("KG6"))
    {
        assert!(
            HACKS
                .iter()
                .any(|(_, fs)| fs.iter().any(|(r, _)| *r == rule.code)),
            "no hack fixture exercises {}",
            rule.code
        );
    }
}

#[test]
fn malicious_by_construction_hacks_are_errors() {
    for file in [
        "try_except",
        "inherit_reference",
        "dynamic_code",
        "timer_tamper",
        "validation_tamper",
        "forged_output",
        "sandbox",
        "output_cache",
        "introspection",
        "side_stream",
        "threads",
        "lazy_tensor",
        "memoized_output",
        "weakref_cache",
        "identity_reuse",
        "compute_once",
        "batched_calls",
        "input_mutation",
        "class_swap",
        "reference_alias",
        "forged_output_indirect",
        "process_spawn",
        "load_library",
        "env_phase_at_import",
        "hidden_counters",
        "stored_results_file",
        "setattr_by_dunder",
        "class_counter",
        "closure_counter",
        "stack_and_allocator_introspection",
        "cuda_python_runtime",
        "lazy_type_call",
        "harness_hooks",
    ] {
        let (code, v) = lint_json(&format!("tests/fixtures/lint/hacks/{file}.py"), &[]);
        assert_eq!(code, 1, "{file}");
        assert!(v["summary"]["errors"].as_u64().unwrap() >= 1, "{file}");
    }
}

#[test]
fn honest_fixtures_are_clean() {
    let dir = root().join("tests/fixtures/lint/honest");
    // Python files only: `snapshots/` beside them holds what each reads as (lint_snapshots.rs).
    let count = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "py")
        })
        .count();
    assert!(count >= 6, "want at least 6 honest fixtures, found {count}");
    let (code, v) = lint_json("tests/fixtures/lint/honest", &[]);
    assert_eq!(v["findings"], serde_json::json!([]), "{v:#}");
    assert_eq!(v["summary"]["files"].as_u64().unwrap() as usize, count);
    assert_eq!(code, 0);
}

#[test]
fn bundled_kernels_are_clean() {
    let (code, stdout, stderr) = kernelgate(&["lint", "--format", "json"]);
    let v: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("{stdout}{stderr}"));
    assert!(
        v["summary"]["files"].as_u64().unwrap() >= 1,
        "no bundled kernels found: {v}"
    );
    assert_eq!(v["findings"], serde_json::json!([]), "{v:#}");
    assert_eq!(code, 0);
}

#[test]
fn precision_flag_and_directive_decide_downgrades() {
    let hack = "tests/fixtures/lint/hacks/precision_downgrade.py";
    let (code, v) = lint_json(hack, &["--precision", "fp16"]);
    assert_eq!((code, rule_lines(&v)), (0, vec![]));
    let (_, v) = lint_json(hack, &["--precision", "bf16"]);
    assert_eq!(rule_lines(&v), vec![]);
    // The fp16 honest fixture says so in its directive; without it the same code is a downgrade.
    let src = std::fs::read_to_string(root().join("tests/fixtures/lint/honest/fp16_half_math.py"))
        .unwrap();
    let stripped: String = src.lines().skip(1).map(|l| format!("{l}\n")).collect();
    let found = kernelgate_lint::lint_file("x.py", &stripped, &Default::default()).unwrap();
    assert!(found.iter().any(|f| f.rule == "KG501"), "{found:?}");
}

#[test]
fn human_format_shows_snippet_and_caret() {
    let (code, stdout, _) = kernelgate(&["lint", "tests/fixtures/lint/hacks/matmul_operator.py"]);
    assert_eq!(code, 1);
    let lines: Vec<&str> = stdout.lines().collect();
    let head = lines
        .iter()
        .position(|l| l.starts_with("error[KG103]"))
        .expect(&stdout);
    assert!(
        lines[head + 1].ends_with("tests/fixtures/lint/hacks/matmul_operator.py:19:27"),
        "{stdout}"
    );
    assert_eq!(lines[head + 3], "19 |         return ext.relu(a @ b)");
    assert_eq!(lines[head + 4], "   |                           ^");
    assert!(stdout.contains("1 file linted: 1 error, 0 warnings"));
}

#[test]
fn github_and_sarif_formats() {
    let (code, stdout, _) = kernelgate(&[
        "lint",
        "--format",
        "github",
        "tests/fixtures/lint/hacks/matmul_operator.py",
    ]);
    assert_eq!(code, 1);
    assert_eq!(
        stdout.trim(),
        "::error file=tests/fixtures/lint/hacks/matmul_operator.py,line=19,col=27,endLine=19,endColumn=27,title=KG103::`@` multiplies tensors with PyTorch's matmul instead of your kernel"
    );
    let (_, stdout, _) = kernelgate(&[
        "lint",
        "--format",
        "sarif",
        "tests/fixtures/lint/hacks/threads.py",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["version"], "2.1.0");
    let results = v["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["ruleId"], "KG404");
    assert_eq!(
        results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        "tests/fixtures/lint/hacks/threads.py"
    );
    assert_eq!(
        results[0]["locations"][0]["physicalLocation"]["region"]["startLine"],
        15
    );
}

#[test]
fn severity_overrides_come_from_kernelgate_toml() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("kernelgate.toml");
    std::fs::write(
        &cfg,
        "[lint]\nseverity = { KG103 = \"warning\", KG404 = \"off\" }\n",
    )
    .unwrap();
    let cfg_s = cfg.to_str().unwrap();
    let (code, v) = lint_json(
        "tests/fixtures/lint/hacks/matmul_operator.py",
        &["--config", cfg_s],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["findings"][0]["severity"], "warning");
    let (code, v) = lint_json("tests/fixtures/lint/hacks/threads.py", &["--config", cfg_s]);
    assert_eq!((code, v["findings"].as_array().unwrap().len()), (0, 0));
}

#[test]
fn usage_and_io_errors_exit_2() {
    let (code, _, stderr) = kernelgate(&["lint", "tests/fixtures/lint/does_not_exist.py"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("does_not_exist.py"), "{stderr}");
    let (code, _, _) = kernelgate(&["lint", "--format", "yaml"]);
    assert_eq!(code, 2);
}

#[test]
fn rule_command_prints_docs() {
    let (code, stdout, _) = kernelgate(&["rule", "kg201"]);
    assert_eq!(code, 0);
    assert!(
        stdout.starts_with("KG201 (try-except-fallback) [error]"),
        "{stdout}"
    );
    assert!(stdout.contains("Bad:") && stdout.contains("Good:"));
    let (code, stdout, _) = kernelgate(&["rule", "--all"]);
    assert_eq!(code, 0);
    assert_eq!(stdout.lines().count(), kernelgate_lint::rules().len());
    let (code, _, _) = kernelgate(&["rule", "KG999"]);
    assert_eq!(code, 2);
}

#[test]
fn docs_rules_md_is_up_to_date() {
    let path = root().join("docs/rules.md");
    let want = kernelgate_lint::docs::markdown();
    if std::env::var_os("KERNELGATE_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(have == want, "docs/rules.md is stale: run `KERNELGATE_BLESS=1 cargo test -p kernelgate --test it lint::docs` (or `kernelgate rule --all --markdown > docs/rules.md`)");
}

//! Change detection on real git repositories built in temp dirs.

use crate::common::{git, write};

use kernelgate::git::{Git, GitError};
use kernelgate::pr::changes::{detect, ChangeSet, FileStatus, KernelStatus};
use kernelgate::pr::layout::Layout;
use kernelgate::pr::plan::Plan;
use kernelgate::pr::shard::Shard;
use std::path::Path;

fn commit(dir: &Path, msg: &str) -> String {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", msg]);
    git(dir, &["rev-parse", "HEAD"])
}

fn problem(name: &str) -> String {
    format!(
        "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    \"\"\"{name}\"\"\"\n    def __init__(self):\n        super().__init__()\n\n    def forward(self, x):\n        return torch.relu(x)\n\nbatch_size = 16\ndim = 64\n\ndef get_inputs():\n    return [torch.randn(batch_size, dim)]\n\ndef get_init_inputs():\n    return []\n"
    )
}

/// A long kernel body so a small edit still reads as a rename to git.
fn kernel(tag: &str) -> String {
    let mut s = String::from("import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n\n");
    for i in 0..20 {
        s.push_str(&format!("# helper line {i} of kernel {tag}\n"));
    }
    s.push_str(&format!("TAG = \"{tag}\"\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"));
    s
}

/// main: problems A-E, kernels for A, B (two), C; then a feature branch.
fn base_repo() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q", "-b", "main"]);
    for p in ["1_A", "2_B", "3_C", "4_D", "5_E"] {
        write(d, &format!("KernelBench/level1/{p}.py"), &problem(p));
    }
    write(d, "kernels/level1/1_A.py", &kernel("a"));
    write(d, "kernels/level1/2_B.py", &kernel("b"));
    write(d, "kernels/level1/2_B/other.py", &kernel("b2"));
    write(d, "kernels/level1/3_C.py", &kernel("c"));
    write(d, "results/timing/H200/baseline_time_torch.json", "{}\n");
    write(d, "README.md", "kernels\n");
    let base = commit(d, "base");
    git(d, &["checkout", "-q", "-b", "feature"]);
    (dir, base)
}

fn detect_in(d: &Path, base: &str, all: bool) -> Result<ChangeSet, GitError> {
    detect(
        &Git::open(d).unwrap(),
        &Layout::default(),
        base,
        "HEAD",
        all,
    )
}

fn status_of<'a>(cs: &'a ChangeSet, path: &str) -> &'a kernelgate::pr::changes::KernelChange {
    cs.kernels
        .iter()
        .find(|k| k.path == path)
        .unwrap_or_else(|| panic!("{path} not in plan: {:#?}", cs.kernels))
}

#[test]
fn adds_edits_renames_and_deletions() {
    let (dir, _) = base_repo();
    let d = dir.path();
    write(d, "kernels/level1/1_A.py", &kernel("a-faster"));
    std::fs::create_dir_all(d.join("kernels/level1/3_C")).unwrap();
    git(
        d,
        &["mv", "kernels/level1/3_C.py", "kernels/level1/3_C/tiled.py"],
    );
    std::fs::remove_file(d.join("kernels/level1/2_B/other.py")).unwrap();
    write(d, "kernels/level1/4_D.py", &kernel("d"));
    write(d, "README.md", "kernels, edited\n");
    commit(d, "head");

    let cs = detect_in(d, "main", false).unwrap();
    let paths: Vec<&str> = cs.kernels.iter().map(|k| k.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "kernels/level1/1_A.py",
            "kernels/level1/3_C/tiled.py",
            "kernels/level1/4_D.py"
        ]
    );

    let a = status_of(&cs, "kernels/level1/1_A.py");
    assert_eq!(a.status, KernelStatus::Modified);
    assert_eq!(a.base_path.as_deref(), Some("kernels/level1/1_A.py"));
    assert_eq!(a.problem.as_deref(), Some("level1/1_A"));

    let c = status_of(&cs, "kernels/level1/3_C/tiled.py");
    assert_eq!(c.status, KernelStatus::Renamed);
    assert_eq!(c.base_path.as_deref(), Some("kernels/level1/3_C.py"));
    assert_eq!(c.problem.as_deref(), Some("level1/3_C"));

    let dk = status_of(&cs, "kernels/level1/4_D.py");
    assert_eq!(
        (dk.status, dk.base_path.as_deref()),
        (KernelStatus::Added, None)
    );
    assert!(cs
        .kernels
        .iter()
        .all(|k| !k.problem_changed && k.mapping_error.is_none()));

    assert_eq!(cs.deleted_kernels, ["kernels/level1/2_B/other.py"]);
    assert!(cs.references.is_empty());
    assert!(!cs.config_changed);
    assert!(cs.results.is_empty());
}

#[test]
fn changed_reference_reevaluates_its_kernels_and_invalidates_its_baseline() {
    let (dir, _) = base_repo();
    let d = dir.path();
    let slower = problem("2_B").replace("torch.relu(x)", "torch.relu(x).clone()");
    write(d, "KernelBench/level1/2_B.py", &slower);
    commit(d, "slow down the reference");

    let cs = detect_in(d, "main", false).unwrap();
    let paths: Vec<&str> = cs.kernels.iter().map(|k| k.path.as_str()).collect();
    assert_eq!(
        paths,
        ["kernels/level1/2_B.py", "kernels/level1/2_B/other.py"]
    );
    for k in &cs.kernels {
        assert_eq!(k.status, KernelStatus::ProblemChanged);
        assert!(k.problem_changed);
        assert_eq!(k.base_path, None, "unchanged kernels need no A/B run");
    }
    assert_eq!(cs.references.len(), 1);
    let r = &cs.references[0];
    assert_eq!(
        (r.problem.as_str(), r.status),
        ("level1/2_B", FileStatus::Modified)
    );
    assert!(
        r.diff
            .starts_with("--- a/KernelBench/level1/2_B.py\n+++ b/KernelBench/level1/2_B.py\n"),
        "{}",
        r.diff
    );
    assert!(
        r.diff
            .contains("\n-        return torch.relu(x)\n+        return torch.relu(x).clone()\n"),
        "{}",
        r.diff
    );
    assert_eq!(
        cs.invalid_baselines().into_iter().collect::<Vec<_>>(),
        ["level1/2_B"]
    );
}

#[test]
fn edited_kernel_of_a_changed_problem_keeps_its_status_and_is_flagged() {
    let (dir, _) = base_repo();
    let d = dir.path();
    write(
        d,
        "KernelBench/level1/1_A.py",
        &problem("1_A").replace("dim = 64", "dim = 128"),
    );
    write(d, "kernels/level1/1_A.py", &kernel("a2"));
    commit(d, "both");
    let cs = detect_in(d, "main", false).unwrap();
    assert_eq!(cs.kernels.len(), 1);
    let a = &cs.kernels[0];
    assert_eq!(
        (a.status, a.problem_changed),
        (KernelStatus::Modified, true)
    );
}

#[test]
fn config_and_results_changes_are_reported() {
    let (dir, _) = base_repo();
    let d = dir.path();
    write(d, "kernelgate.toml", "[timing]\nthreshold_pct = 5.0\n");
    write(
        d,
        "results/timing/H200/baseline_time_torch.json",
        "{\"level1\": {}}\n",
    );
    commit(d, "config");
    let cs = detect_in(d, "main", false).unwrap();
    assert!(cs.kernels.is_empty());
    assert!(cs.config_changed);
    assert_eq!(cs.results, ["results/timing/H200/baseline_time_torch.json"]);
}

#[test]
fn compares_with_the_merge_base_not_the_moving_base_branch() {
    let (dir, _) = base_repo();
    let d = dir.path();
    write(d, "kernels/level1/4_D.py", &kernel("d"));
    commit(d, "feature adds D");
    git(d, &["checkout", "-q", "main"]);
    write(d, "kernels/level1/1_A.py", &kernel("a-on-main"));
    commit(d, "main moves on");
    git(d, &["checkout", "-q", "feature"]);
    let cs = detect_in(d, "main", false).unwrap();
    let paths: Vec<&str> = cs.kernels.iter().map(|k| k.path.as_str()).collect();
    assert_eq!(
        paths,
        ["kernels/level1/4_D.py"],
        "main's own change to 1_A is not the PR's"
    );
    assert_ne!(cs.merge_base, cs.base);
}

#[test]
fn all_takes_every_kernel() {
    let (dir, _) = base_repo();
    let d = dir.path();
    write(d, "kernels/level1/4_D.py", &kernel("d"));
    commit(d, "add D");
    let cs = detect_in(d, "main", true).unwrap();
    let got: Vec<(&str, KernelStatus)> = cs
        .kernels
        .iter()
        .map(|k| (k.path.as_str(), k.status))
        .collect();
    assert_eq!(
        got,
        [
            ("kernels/level1/1_A.py", KernelStatus::Unchanged),
            ("kernels/level1/2_B.py", KernelStatus::Unchanged),
            ("kernels/level1/2_B/other.py", KernelStatus::Unchanged),
            ("kernels/level1/3_C.py", KernelStatus::Unchanged),
            ("kernels/level1/4_D.py", KernelStatus::Added),
        ]
    );
}

#[test]
fn unmapped_and_unknown_problem_kernels_carry_an_error_naming_the_fix() {
    let (dir, _) = base_repo();
    let d = dir.path();
    write(d, "kernels/misc/fast.py", &kernel("x"));
    write(d, "kernels/level1/9_Missing.py", &kernel("y"));
    write(
        d,
        "kernels/mine.py",
        &format!(
            "# kernelgate: problem=level1/5_E backend=cpp\n{}",
            kernel("z")
        ),
    );
    commit(d, "odd kernels");
    let cs = detect_in(d, "main", false).unwrap();
    let misc = status_of(&cs, "kernels/misc/fast.py");
    assert_eq!(misc.problem, None);
    let err = misc.mapping_error.as_deref().unwrap();
    assert!(
        err.starts_with("kernels/misc/fast.py:") && err.contains("# kernelgate: problem="),
        "{err}"
    );
    // The model's message, as `kernelgate kernels` prints it: the key and the fix.
    let missing = status_of(&cs, "kernels/level1/9_Missing.py");
    let err = missing.mapping_error.as_deref().unwrap();
    assert!(
        err.contains("unknown problem `level1/9_Missing`") && err.contains("help:"),
        "{err}"
    );
    let mine = status_of(&cs, "kernels/mine.py");
    assert_eq!(
        (mine.problem.as_deref(), mine.mapping_error.as_deref()),
        (Some("level1/5_E"), None)
    );
}

#[test]
fn missing_base_commit_says_how_to_fetch_it() {
    let (dir, base) = base_repo();
    let d = dir.path();
    write(d, "kernels/level1/4_D.py", &kernel("d"));
    commit(d, "add D");

    let bogus = "0123456789abcdef0123456789abcdef01234567";
    let err = detect_in(d, bogus, false).unwrap_err();
    assert!(matches!(err, GitError::MissingCommit { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains(bogus)
            && msg.contains("fetch-depth: 0")
            && msg.contains(&format!("git fetch origin {bogus}")),
        "{msg}"
    );

    // A real shallow clone (what actions/checkout gives by default) lacks the base commit.
    let shallow = tempfile::tempdir().unwrap();
    let url = format!("file://{}", d.display());
    git(
        shallow.path(),
        &[
            "clone", "-q", "--depth", "1", "--branch", "feature", &url, "c",
        ],
    );
    let err = detect_in(&shallow.path().join("c"), &base, false).unwrap_err();
    assert!(err.to_string().contains("fetch-depth: 0"), "{err}");
}

#[test]
fn not_a_repository_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = Git::open(dir.path()).unwrap_err();
    assert!(
        err.to_string().contains("not inside a git repository"),
        "{err}"
    );
}

#[test]
fn plan_materialises_base_versions_and_shards_partition_it() {
    let (dir, _) = base_repo();
    let d = dir.path();
    write(d, "kernels/level1/1_A.py", &kernel("a-new"));
    write(d, "kernels/level1/4_D.py", &kernel("d"));
    write(d, "kernels/level1/5_E.py", &kernel("e"));
    std::fs::create_dir_all(d.join("kernels/level1/3_C")).unwrap();
    git(
        d,
        &["mv", "kernels/level1/3_C.py", "kernels/level1/3_C/v2.py"],
    );
    commit(d, "head");
    let git_repo = Git::open(d).unwrap();
    let layout = Layout::default();
    let cs = detect(&git_repo, &layout, "main", "HEAD", false).unwrap();

    let plan = Plan::build(&git_repo, &layout, cs.clone(), None).unwrap();
    assert_eq!(plan.jobs.len(), 4);
    let a = plan
        .jobs
        .iter()
        .find(|j| j.path() == "kernels/level1/1_A.py")
        .unwrap();
    assert_eq!(
        a.kernel_file,
        git_repo.root().join("kernels/level1/1_A.py"),
        "head read from the worktree"
    );
    let base_file = a.base_file.as_ref().unwrap();
    assert!(
        base_file.ends_with("kernels/level1/1_A.py"),
        "same file name as the kernel: {base_file:?}"
    );
    assert!(std::fs::read_to_string(base_file)
        .unwrap()
        .contains("TAG = \"a\""));
    assert!(a
        .problem_file
        .as_ref()
        .unwrap()
        .ends_with("KernelBench/level1/1_A.py"));
    let c = plan
        .jobs
        .iter()
        .find(|j| j.path() == "kernels/level1/3_C/v2.py")
        .unwrap();
    assert!(std::fs::read_to_string(c.base_file.as_ref().unwrap())
        .unwrap()
        .contains("TAG = \"c\""));

    let mut union: Vec<String> = Vec::new();
    for i in 1..=3 {
        let p = Plan::build(
            &git_repo,
            &layout,
            cs.clone(),
            Some(Shard { index: i, count: 3 }),
        )
        .unwrap();
        assert!(!p.jobs.is_empty() && p.jobs.len() <= 2);
        union.extend(p.jobs.iter().map(|j| j.path().to_string()));
    }
    union.sort();
    let all: Vec<String> = plan.jobs.iter().map(|j| j.path().to_string()).collect();
    assert_eq!(union, all, "shards partition the plan");
}

#[test]
fn head_other_than_the_checkout_is_read_from_git() {
    let (dir, _) = base_repo();
    let d = dir.path();
    write(d, "kernels/level1/1_A.py", &kernel("a-head"));
    let head = commit(d, "head");
    git(d, &["checkout", "-q", "main"]);
    let git_repo = Git::open(d).unwrap();
    let layout = Layout::default();
    let cs = detect(&git_repo, &layout, "main", &head, false).unwrap();
    let plan = Plan::build(&git_repo, &layout, cs, None).unwrap();
    let job = &plan.jobs[0];
    assert_ne!(job.kernel_file, d.join("kernels/level1/1_A.py"));
    assert!(
        job.source.contains("a-head")
            && std::fs::read_to_string(&job.kernel_file)
                .unwrap()
                .contains("a-head")
    );
}

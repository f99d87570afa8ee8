//! Every lint fixture's findings as `kernelgate lint` prints them, kept beside the fixture
//! (`tests/fixtures/lint/<family>/snapshots/<file>.snap`, as ruff keeps a snapshot beside each
//! rule's fixture). A change to a rule shows as a diff of what users read: rule, line, message,
//! excerpt. Update with `INSTA_UPDATE=always cargo test --test it lint_snapshots` (or
//! `cargo insta review`) and read the diff before committing it.
//!
//! The (rule, line) tables in `lint.rs` and `lint_cpp.rs` stay: they state what each fixture
//! must yield; the snapshots pin how it reads.

use crate::common::root;
use kernelgate::ops::lint::{lint, RepoLintOptions};
use kernelgate_model::Config;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const FAMILIES: &[&str] = &["hacks", "cpp", "triton", "partial", "honest", "unproven"];

fn fixtures(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "py"))
        .collect();
    files.sort();
    files
}

/// The text `kernelgate lint <fixture>` prints, without colour.
fn rendered(repo: &Path, config: &Config, rel: &Path) -> String {
    let run = lint(
        repo,
        config,
        &RepoLintOptions {
            paths: vec![rel.to_path_buf()],
            ..RepoLintOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("{}: {e:#}", rel.display()));
    let text = kernelgate_lint::output::human(&run.findings, |f| run.source(f), false);
    if text.is_empty() {
        "(no findings)\n".to_string()
    } else {
        text
    }
}

#[test]
fn every_lint_fixture_reads_as_its_snapshot() {
    let repo = root();
    let config = Config::load(&repo, None).expect("the checkout's configuration");
    let mut linted = 0;
    for family in FAMILIES {
        let dir = repo.join("tests/fixtures/lint").join(family);
        let snapshots = dir.join("snapshots");
        let mut expected = BTreeSet::new();
        for file in fixtures(&dir) {
            let rel = file.strip_prefix(&repo).unwrap().to_path_buf();
            let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
            let text = rendered(&repo, &config, &rel);
            insta::with_settings!({
                snapshot_path => &snapshots,
                prepend_module_to_snapshot => false,
                omit_expression => true,
                description => rel.display().to_string(),
            }, {
                insta::assert_snapshot!(stem.clone(), text);
            });
            expected.insert(format!("{stem}.snap"));
            linted += 1;
        }
        // A snapshot whose fixture was renamed or removed would never be checked again.
        let orphans: Vec<String> = std::fs::read_dir(&snapshots)
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".snap") && !expected.contains(n))
                    .collect()
            })
            .unwrap_or_default();
        assert!(
            orphans.is_empty(),
            "{}: snapshots without a fixture: {orphans:?} (delete them)",
            snapshots.display()
        );
    }
    assert!(linted >= 150, "only {linted} fixtures found");
}

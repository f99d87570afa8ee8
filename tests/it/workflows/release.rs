//! The release workflow: both architectures, least privilege, assets never replaced.

use super::*;

#[test]
fn the_release_workflow_builds_both_architectures_with_least_privilege() {
    let wf = load(&root().join(".github/workflows/release.yml"));
    let tags: Vec<&str> = wf["on"]["push"]["tags"]
        .as_vec()
        .expect("runs on pushed tags")
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    assert_eq!(tags, ["v*"]);
    assert!(
        wf["on"]["pull_request"].is_badvalue() && wf["on"]["pull_request_target"].is_badvalue(),
        "a release never runs for a pull request"
    );
    assert_eq!(
        map_keys(&wf["permissions"]).len(),
        0,
        "no permission at the top: each job asks for its own"
    );
    let jobs = &wf["jobs"];
    let perms = |job: &str| -> Vec<(String, String)> {
        jobs[job]["permissions"]
            .as_hash()
            .unwrap_or_else(|| panic!("job {job} names its permissions"))
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().unwrap().to_owned(),
                    v.as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let read = vec![("contents".to_owned(), "read".to_owned())];
    assert_eq!(perms("wheels"), read);
    assert_eq!(perms("binaries"), read);
    assert_eq!(
        perms("pypi"),
        [("id-token".to_owned(), "write".to_owned())],
        "trusted publishing needs the OIDC token and nothing else"
    );
    assert_eq!(
        perms("github-release"),
        [("contents".to_owned(), "write".to_owned())]
    );
    // Build provenance: one job with the OIDC token and the attestations scope only, attesting
    // every wheel and binary the release then publishes (issue 31).
    assert_eq!(
        perms("attest"),
        [
            ("id-token".to_owned(), "write".to_owned()),
            ("attestations".to_owned(), "write".to_owned())
        ]
    );
    let needs = |job: &str| -> Vec<&str> {
        jobs[job]["needs"]
            .as_vec()
            .unwrap()
            .iter()
            .filter_map(Yaml::as_str)
            .collect()
    };
    assert_eq!(needs("attest"), ["wheels", "binaries"]);
    assert!(
        needs("github-release").contains(&"attest"),
        "assets are published only after they are attested"
    );
    let attest = jobs["attest"]["steps"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/attest-build-provenance@"))
        })
        .expect("the attest job runs actions/attest-build-provenance");
    let subjects: Vec<&str> = attest["with"]["subject-path"]
        .as_str()
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(subjects, ["assets/*.whl", "assets/*.tar.gz"]);

    let matrix_values = |job: &str, key: &str| -> Vec<String> {
        jobs[job]["strategy"]["matrix"]["include"]
            .as_vec()
            .unwrap()
            .iter()
            .map(|m| m[key].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(matrix_values("wheels", "arch"), ["x86_64", "aarch64"]);
    assert_eq!(
        matrix_values("binaries", "target"),
        ["x86_64-unknown-linux-musl", "aarch64-unknown-linux-musl"]
    );

    let text = read_text(".github/workflows/release.yml");
    for needle in [
        "PyO3/maturin-action@",
        "pypa/gh-action-pypi-publish@",
        "manylinux: \"2_28\"",
        "bash scripts/stage-wheel-cli.sh release",
        "sha256sum",
        "SHA256SUMS",
    ] {
        assert!(text.contains(needle), "release.yml lacks {needle}");
    }
    // The asset name the action downloads is the one the release uploads.
    let action = read_text("action.yml");
    assert!(action.contains(r#"asset="kernelgate-v$KG_VERSION-$target.tar.gz""#));
    assert!(text.contains(r#"asset="kernelgate-$TAG-$TARGET.tar.gz""#));
    // Every checkout keeps no credentials.
    for (name, job) in jobs.as_hash().unwrap() {
        for step in job["steps"].as_vec().unwrap() {
            if step["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/checkout@"))
            {
                assert_eq!(
                    step["with"]["persist-credentials"].as_bool(),
                    Some(false),
                    "{name:?}"
                );
            }
        }
    }
}

/// A published release asset is never replaced (issue 31: `gh release upload --clobber`): a re-run
/// uploads only the missing assets and stops at one that differs from what is published.
#[test]
fn a_release_rerun_never_replaces_a_published_asset() {
    let wf = load(&root().join(".github/workflows/release.yml"));
    let step = wf["jobs"]
        .as_hash()
        .unwrap()
        .values()
        .flat_map(|j| j["steps"].as_vec().into_iter().flatten())
        .find(|s| s["name"].as_str() == Some("Attach the wheels and binaries to the release"))
        .expect("the upload step");
    let run = step["run"].as_str().unwrap();
    assert!(!run.contains("--clobber"), "{run}");
    let dir = tempfile::tempdir().unwrap();
    let assets = dir.path().join("work/assets");
    std::fs::create_dir_all(&assets).unwrap();
    let published = dir.path().join("release");
    std::fs::create_dir_all(&published).unwrap();
    for (name, body) in [
        ("kernelgate-1.0.0.whl", "wheel"),
        ("kernelgate-x86_64.tar.gz", "bin"),
    ] {
        std::fs::write(assets.join(name), body).unwrap();
    }
    let bin = assets.join("kernelgate-x86_64.tar.gz");
    let digest = Command::new("sha256sum")
        .arg(&bin)
        .current_dir(&assets)
        .output()
        .unwrap();
    let line = String::from_utf8(digest.stdout)
        .unwrap()
        .replace(&bin.display().to_string(), "kernelgate-x86_64.tar.gz");
    std::fs::write(assets.join("kernelgate-x86_64.tar.gz.sha256"), line).unwrap();
    // The wheel is already published, byte for byte; the rest is missing.
    std::fs::write(published.join("kernelgate-1.0.0.whl"), "wheel").unwrap();
    let gh_dir = dir.path().join("gh");
    std::fs::create_dir_all(gh_dir.join("bin")).unwrap();
    write_executable(
        &gh_dir.join("bin/gh"),
        r#"#!/bin/bash
echo "$*" >> "$FAKE_GH/calls"
case "$1 $2" in
  "release view") exit 0 ;;
  "release download") cp "$FAKE_RELEASE"/* "$5"/ ;;
  *) ;;
esac
"#,
    );
    let path = format!(
        "{}:{}",
        gh_dir.join("bin").display(),
        std::env::var("PATH").unwrap()
    );
    let rerun = || {
        let _ = std::fs::remove_dir_all(dir.path().join("work/published"));
        let _ = std::fs::remove_file(gh_dir.join("calls"));
        let out = Command::new("bash")
            .args(["--noprofile", "--norc", "-c", run])
            .current_dir(dir.path().join("work"))
            .env("PATH", &path)
            .env("FAKE_GH", &gh_dir)
            .env("FAKE_RELEASE", &published)
            .env("TAG", "v1.0.0")
            .output()
            .unwrap();
        let log = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (
            out.status.code(),
            log,
            std::fs::read_to_string(gh_dir.join("calls")).unwrap_or_default(),
        )
    };
    let (code, log, calls) = rerun();
    assert_eq!(code, Some(0), "{log}");
    // The lines release-hashes.txt takes for this version, as the action reads them.
    let wheel_sum = Command::new("sha256sum")
        .arg("kernelgate-1.0.0.whl")
        .current_dir(&assets)
        .output()
        .unwrap();
    let wheel_sum = String::from_utf8(wheel_sum.stdout).unwrap();
    let wheel_sum = wheel_sum.split_whitespace().next().unwrap();
    assert!(
        log.contains(&format!("    1.0.0 {wheel_sum} kernelgate-1.0.0.whl")),
        "{log}"
    );
    assert!(
        !calls.contains("upload v1.0.0 -- kernelgate-1.0.0.whl"),
        "re-uploaded the published wheel: {calls}"
    );
    assert!(
        calls.contains("upload v1.0.0 -- kernelgate-x86_64.tar.gz"),
        "{calls}"
    );
    assert!(calls.contains("upload v1.0.0 -- SHA256SUMS"), "{calls}");
    // A different wheel already published under the tag: refused, nothing uploaded.
    std::fs::write(published.join("kernelgate-1.0.0.whl"), "another wheel").unwrap();
    let (code, log, calls) = rerun();
    assert_ne!(code, Some(0), "{log}");
    assert!(
        log.contains("differs from the asset already published"),
        "{log}"
    );
    assert!(
        !calls.contains("release upload"),
        "uploaded beside a differing asset: {calls}"
    );
}

//! `kernelgate lint --format sarif` over every lint fixture and the bundled kernels validates
//! against the official SARIF 2.1.0 schema (the OASIS JSON schema, vendored for the report
//! crate's tests), and says what the JSON format says: same findings, same places, rule indexes
//! that point at the right rule, regions inside the files.

use crate::common::root;

use serde_json::Value;
use std::process::Command;

const DIRS: [&str; 2] = ["tests/fixtures/lint", "kernels"];

fn lint(format: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_kernelgate"))
        .current_dir(root())
        .args(["lint", "--format", format])
        .args(DIRS)
        .output()
        .expect("run kernelgate lint");
    // The hack fixtures have errors: exit 1, not 2 (an I/O or usage error).
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("lint output is JSON")
}

fn validator() -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(include_str!(
        "../../crates/report/tests/data/sarif-schema-2.1.0.json"
    ))
    .expect("vendored schema parses");
    jsonschema::validator_for(&schema).expect("schema compiles")
}

#[test]
fn lint_sarif_validates_and_matches_the_json_findings() {
    let sarif = lint("sarif");
    let v = validator();
    let errors: Vec<String> = v
        .iter_errors(&sarif)
        .take(20)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    // The validator is not vacuous: a result without a message is rejected.
    let mut broken = sarif.clone();
    broken["runs"][0]["results"][0]
        .as_object_mut()
        .unwrap()
        .remove("message");
    assert!(!v.is_valid(&broken));

    let json = lint("json");
    let findings = json["findings"].as_array().unwrap();
    let run = &sarif["runs"][0];
    let results = run["results"].as_array().unwrap();
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    assert!(findings.len() > 50, "too few findings: {}", findings.len());
    assert_eq!(results.len(), findings.len());
    assert_eq!(
        run["artifacts"].as_array().unwrap().len() as u64,
        json["summary"]["files"].as_u64().unwrap()
    );
    let mut from_json: Vec<(String, String, u64, u64)> = findings
        .iter()
        .map(|f| {
            (
                f["file"].as_str().unwrap().to_string(),
                f["rule"].as_str().unwrap().to_string(),
                f["line"].as_u64().unwrap(),
                f["column"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut from_sarif = Vec::new();
    for r in results {
        let rule = r["ruleId"].as_str().unwrap();
        let index = r["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[index]["id"], rule, "ruleIndex of {r}");
        let loc = &r["locations"][0]["physicalLocation"];
        let file = loc["artifactLocation"]["uri"].as_str().unwrap();
        let region = &loc["region"];
        let (line, end_line) = (
            region["startLine"].as_u64().unwrap(),
            region["endLine"].as_u64().unwrap(),
        );
        assert!(end_line >= line, "{r}");
        let lines = std::fs::read_to_string(root().join(file))
            .unwrap_or_else(|e| panic!("{file}: {e}"))
            .lines()
            .count() as u64;
        assert!(
            end_line <= lines.max(1),
            "{file}:{end_line} is past its {lines} lines"
        );
        from_sarif.push((
            file.to_string(),
            rule.to_string(),
            line,
            region["startColumn"].as_u64().unwrap(),
        ));
    }
    from_json.sort();
    from_sarif.sort();
    assert_eq!(from_sarif, from_json);
}

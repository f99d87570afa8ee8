//! SARIF 2.1.0 for GitHub code scanning: one run, every rule with its help text, results with
//! repo-relative `artifactLocation.uri` and a `partialFingerprints` entry so alerts survive
//! unrelated edits (the fingerprint hashes rule, file and the finding's message, not its line).

use kernelgate_model::{Finding, Severity};
use sha2::{Digest, Sha256};

const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// Findings as a SARIF 2.1.0 log. `files` are the files linted (listed as artifacts).
pub fn to_sarif(findings: &[Finding], files: &[String]) -> serde_json::Value {
    let rules: Vec<serde_json::Value> = crate::rules()
        .iter()
        .map(|r| {
            serde_json::json!({
                "id": r.code,
                "name": r.name,
                "shortDescription": {"text": r.summary},
                "fullDescription": {"text": r.doc},
                "help": {
                    "text": format!("{}\n\nBad:\n{}\n\nGood:\n{}", r.doc, r.bad, r.good),
                    "markdown": format!("{}\n\nBad:\n```python\n{}\n```\n\nGood:\n```python\n{}\n```", r.doc, r.bad, r.good),
                },
                "defaultConfiguration": {"level": level(r.severity)},
                "properties": {"tags": ["security", "kernelgate"]},
            })
        })
        .collect();
    let results: Vec<serde_json::Value> = findings
        .iter()
        .map(|f| {
            let rule_index = crate::rules()
                .iter()
                .position(|r| r.code == f.rule)
                .unwrap_or(0);
            let mut fp = Sha256::new();
            fp.update(f.rule.as_bytes());
            fp.update([0]);
            fp.update(uri(&f.file).as_bytes());
            fp.update([0]);
            fp.update(f.message.as_bytes());
            let fingerprint = hex::encode(&fp.finalize()[..16]);
            serde_json::json!({
                "ruleId": f.rule,
                "ruleIndex": rule_index,
                "level": level(f.severity),
                "message": {"text": f.message},
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": {"uri": uri(&f.file), "uriBaseId": "%SRCROOT%"},
                        "region": {
                            "startLine": f.line.max(1),
                            "startColumn": f.column.max(1),
                            "endLine": f.end_line.max(f.line).max(1),
                            // SARIF's end column is exclusive; `Finding`'s is inclusive.
                            "endColumn": f.end_column.max(f.column).max(1) + 1,
                        }
                    }
                }],
                "partialFingerprints": {"primaryLocationLineHash": format!("{fingerprint}:1")},
            })
        })
        .collect();
    let artifacts: Vec<serde_json::Value> = files
        .iter()
        .map(|f| serde_json::json!({"location": {"uri": uri(f), "uriBaseId": "%SRCROOT%"}}))
        .collect();
    serde_json::json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "kernelgate",
                "informationUri": "https://github.com/kernelgate/kernelgate",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "artifacts": artifacts,
            "columnKind": "unicodeCodePoints",
            "results": results,
        }]
    })
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

/// A relative, forward-slash URI (GitHub resolves it against the checkout).
fn uri(path: &str) -> String {
    let p = path.replace('\\', "/");
    let p = p.trim_start_matches("./");
    p.split('/')
        .map(percent_encode)
        .collect::<Vec<_>>()
        .join("/")
}

fn percent_encode(seg: &str) -> String {
    let mut out = String::new();
    for b in seg.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sarif_has_rules_relative_uris_and_fingerprints() {
        let f = Finding {
            file: "./kernels/level 1/k.py".into(),
            line: 3,
            column: 5,
            end_line: 3,
            end_column: 9,
            rule: "KG201".into(),
            severity: Severity::Error,
            message: "try".into(),
        };
        let s = to_sarif(std::slice::from_ref(&f), std::slice::from_ref(&f.file));
        assert_eq!(s["version"], "2.1.0");
        let run = &s["runs"][0];
        let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
        assert_eq!(rules.len(), crate::rules().len());
        let r = &run["results"][0];
        assert_eq!(r["ruleId"], "KG201");
        assert_eq!(
            rules[r["ruleIndex"].as_u64().unwrap() as usize]["id"],
            "KG201"
        );
        assert_eq!(
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            "kernels/level%201/k.py"
        );
        assert_eq!(
            r["locations"][0]["physicalLocation"]["region"]["startColumn"],
            5
        );
        assert!(r["partialFingerprints"]["primaryLocationLineHash"]
            .as_str()
            .unwrap()
            .ends_with(":1"));
        assert!(rules[0]["help"]["text"].as_str().unwrap().contains("Bad:"));
    }
}

//! SARIF 2.1.0, the one writer: `results.sarif` of a gate run and `kernelgate lint --format
//! sarif`. One finding gets one fingerprint whichever command wrote it, so code scanning keeps
//! one alert for it.

use crate::annotate::{located, Located};
use crate::schema::Report;
use kernelgate_model::{Finding, Severity};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

pub const SARIF_SCHEMA_URI: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// A rule as the SARIF driver lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SarifRule {
    pub id: String,
    pub name: String,
    pub summary: String,
    /// Long description and help (text, markdown), when the rule has documentation.
    pub doc: Option<RuleDoc>,
    pub level: Severity,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleDoc {
    pub description: String,
    pub help_text: String,
    pub help_markdown: String,
}

/// The gate run's findings, runtime failures and flags.
pub fn to_sarif(report: &Report) -> Value {
    let results = located(report);
    let mut titles: BTreeMap<&str, &str> = BTreeMap::new();
    for l in &results {
        titles.entry(&l.rule).or_insert(&l.title);
    }
    let rules: Vec<SarifRule> = titles
        .iter()
        .map(|(id, title)| SarifRule {
            id: id.to_string(),
            name: id.replace(['/', '-'], "_"),
            summary: title.to_string(),
            doc: None,
            level: Severity::Warning,
        })
        .collect();
    let mut log = sarif_log(&rules, &results, &[]);
    if !report.run.repo.is_empty() && !report.run.head_sha.is_empty() {
        log["runs"][0]["versionControlProvenance"] = json!([{
            "repositoryUri": format!("https://github.com/{}", report.run.repo),
            "revisionId": report.run.head_sha,
            "mappedTo": {"uriBaseId": "%SRCROOT%"},
        }]);
    }
    log
}

/// Lint findings of `files` (listed as artifacts), with every rule of `rules`.
pub fn findings_to_sarif(findings: &[Finding], files: &[String], rules: &[SarifRule]) -> Value {
    let results: Vec<Located> = findings
        .iter()
        .map(|f| Located {
            path: f.file.clone(),
            start_line: f.line.max(1),
            end_line: f.end_line.max(f.line).max(1),
            // A SARIF region may span lines with columns (GitHub's annotations may not).
            start_column: Some(f.column.max(1)),
            end_column: Some(f.end_column.max(f.column).max(1)),
            rule: f.rule.clone(),
            severity: f.severity,
            title: format!("kernelgate: {}", f.rule),
            message: f.message.clone(),
        })
        .collect();
    sarif_log(rules, &results, files)
}

/// Stable across unrelated edits: rule, file and message, not the line.
pub fn fingerprint(rule: &str, path: &str, message: &str) -> String {
    let mut h = Sha256::new();
    for part in [rule, &uri(path), message] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    format!("{}:1", hex::encode(&h.finalize()[..16]))
}

fn sarif_log(rules: &[SarifRule], results: &[Located], artifacts: &[String]) -> Value {
    let results: Vec<Value> = results
        .iter()
        .map(|l| {
            let mut region = json!({"startLine": l.start_line, "endLine": l.end_line});
            if let Some(c) = l.start_column {
                region["startColumn"] = json!(c.max(1));
            }
            if let Some(c) = l.end_column {
                // SARIF end columns are exclusive; ours are inclusive.
                region["endColumn"] = json!(c.max(1) + 1);
            }
            json!({
                "ruleId": l.rule,
                "ruleIndex": rules.iter().position(|r| r.id == l.rule).unwrap_or(0),
                "level": l.severity.as_str(),
                "message": {"text": l.message},
                "partialFingerprints": {
                    "primaryLocationLineHash": fingerprint(&l.rule, &l.path, &l.message)
                },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": {"uri": uri(&l.path), "uriBaseId": "%SRCROOT%"},
                        "region": region,
                    }
                }],
            })
        })
        .collect();
    let mut run = json!({
        "tool": {"driver": {
            "name": "kernelgate",
            "informationUri": "https://github.com/kernelgate/kernelgate",
            "version": env!("CARGO_PKG_VERSION"),
            "rules": rules.iter().map(rule).collect::<Vec<_>>(),
        }},
        "results": results,
        "columnKind": "unicodeCodePoints",
    });
    if !artifacts.is_empty() {
        run["artifacts"] = artifacts
            .iter()
            .map(|f| json!({"location": {"uri": uri(f), "uriBaseId": "%SRCROOT%"}}))
            .collect();
    }
    json!({"$schema": SARIF_SCHEMA_URI, "version": "2.1.0", "runs": [run]})
}

fn rule(r: &SarifRule) -> Value {
    let mut v = json!({
        "id": r.id,
        "name": r.name,
        "shortDescription": {"text": r.summary},
    });
    if let Some(doc) = &r.doc {
        v["fullDescription"] = json!({"text": doc.description});
        v["help"] = json!({"text": doc.help_text, "markdown": doc.help_markdown});
        v["defaultConfiguration"] = json!({"level": r.level.as_str()});
        v["properties"] = json!({"tags": ["security", "kernelgate"]});
    }
    v
}

/// A relative, forward-slash, percent-encoded URI (GitHub resolves it against the checkout).
fn uri(path: &str) -> String {
    let p = path.replace('\\', "/");
    p.trim_start_matches("./")
        .split('/')
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

    fn finding() -> Finding {
        Finding {
            file: "./kernels/level 1/k.py".into(),
            line: 3,
            column: 5,
            end_line: 4,
            end_column: 9,
            rule: "KG201".into(),
            severity: Severity::Error,
            message: "try".into(),
        }
    }

    #[test]
    fn lint_findings_keep_rules_relative_uris_and_multi_line_columns() {
        let f = finding();
        let rules = [SarifRule {
            id: "KG201".into(),
            name: "try-fallback".into(),
            summary: "try".into(),
            doc: Some(RuleDoc {
                description: "d".into(),
                help_text: "Bad:".into(),
                help_markdown: "m".into(),
            }),
            level: Severity::Error,
        }];
        let s = findings_to_sarif(
            std::slice::from_ref(&f),
            std::slice::from_ref(&f.file),
            &rules,
        );
        let run = &s["runs"][0];
        let r = &run["results"][0];
        assert_eq!(r["ruleIndex"], 0);
        let loc = &r["locations"][0]["physicalLocation"];
        assert_eq!(loc["artifactLocation"]["uri"], "kernels/level%201/k.py");
        assert_eq!(loc["region"]["startColumn"], 5);
        assert_eq!(loc["region"]["endColumn"], 10);
        assert_eq!(
            run["artifacts"][0]["location"]["uri"],
            "kernels/level%201/k.py"
        );
        assert_eq!(run["tool"]["driver"]["rules"][0]["help"]["text"], "Bad:");
    }

    #[test]
    fn one_fingerprint_for_a_path_however_it_is_spelled() {
        assert_eq!(
            fingerprint("KG201", "./kernels/k.py", "try"),
            fingerprint("KG201", "kernels/k.py", "try")
        );
        assert_ne!(
            fingerprint("KG201", "kernels/k.py", "try"),
            fingerprint("KG202", "kernels/k.py", "try")
        );
    }
}

//! `results.sarif` (SARIF 2.1.0): static findings and runtime failures with their locations,
//! for GitHub code scanning and any SARIF viewer.

use crate::annotate::located;
use crate::schema::Report;
use kernelgate_model::Severity;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

pub const SARIF_SCHEMA_URI: &str = "https://json.schemastore.org/sarif-2.1.0.json";

pub fn to_sarif(report: &Report) -> Value {
    let located = located(report);
    let mut rules: BTreeMap<String, String> = BTreeMap::new();
    for l in &located {
        rules
            .entry(l.rule.clone())
            .or_insert_with(|| l.title.clone());
    }
    let rule_ids: Vec<&String> = rules.keys().collect();
    let results: Vec<Value> = located
        .iter()
        .map(|l| {
            let mut region = json!({"startLine": l.start_line, "endLine": l.end_line});
            if let Some(c) = l.start_column {
                region["startColumn"] = json!(c.max(1));
            }
            if let Some(c) = l.end_column {
                // SARIF end columns are exclusive.
                region["endColumn"] = json!(c.max(1) + 1);
            }
            json!({
                "ruleId": l.rule,
                "ruleIndex": rule_ids.iter().position(|r| **r == l.rule).unwrap_or(0),
                "level": match l.severity { Severity::Error => "error", Severity::Warning => "warning" },
                "message": {"text": l.message},
                "partialFingerprints": {"primaryLocationLineHash": fingerprint(l)},
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": {"uri": l.path, "uriBaseId": "%SRCROOT%"},
                        "region": region,
                    }
                }],
            })
        })
        .collect();
    let rules: Vec<Value> = rules
        .iter()
        .map(|(id, title)| json!({"id": id, "name": id.replace(['/', '-'], "_"), "shortDescription": {"text": title}}))
        .collect();
    let mut run = json!({
        "tool": {"driver": {
            "name": "kernelgate",
            "version": env!("CARGO_PKG_VERSION"),
            "rules": rules,
        }},
        "results": results,
        "columnKind": "unicodeCodePoints",
    });
    if !report.run.repo.is_empty() && !report.run.head_sha.is_empty() {
        run["versionControlProvenance"] = json!([{
            "repositoryUri": format!("https://github.com/{}", report.run.repo),
            "revisionId": report.run.head_sha,
            "mappedTo": {"uriBaseId": "%SRCROOT%"},
        }]);
    }
    json!({"$schema": SARIF_SCHEMA_URI, "version": "2.1.0", "runs": [run]})
}

/// Stable across unrelated edits: rule, file and message, not the line (as the lint's SARIF).
fn fingerprint(l: &crate::annotate::Located) -> String {
    let mut h = Sha256::new();
    for part in [l.rule.as_bytes(), l.path.as_bytes(), l.message.as_bytes()] {
        h.update(part);
        h.update([0]);
    }
    format!("{}:1", hex::encode(&h.finalize()[..16]))
}

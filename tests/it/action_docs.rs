//! The quickstart's table of the action's inputs against `action.yml`, input by input: a new
//! input cannot ship undocumented, a removed one cannot stay documented.

use std::collections::BTreeSet;
use std::path::Path;

use yaml_rust2::{Yaml, YamlLoader};

const DOCS: &str = "docs/quickstart.md";
/// The line that introduces the inputs' table in [`DOCS`].
const TABLE_INTRO: &str = "The action's inputs:";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The keys of `action.yml`'s `section` (`inputs`, `outputs`).
fn action_keys(section: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("action.yml")).expect("read action.yml");
    let docs = YamlLoader::load_from_str(&text).expect("action.yml is YAML");
    let Yaml::Hash(map) = &docs[0][section] else {
        panic!("action.yml has no `{section}:` mapping");
    };
    map.keys()
        .map(|k| k.as_str().expect("string key").to_string())
        .collect()
}

/// The backticked names in `cell`: `` `base`, `head` `` names two.
fn names(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The inputs [`DOCS`]'s table documents (first column) and the outputs its `Outputs:` line
/// names.
fn documented(docs: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let start = docs
        .find(TABLE_INTRO)
        .unwrap_or_else(|| panic!("{DOCS} has no line {TABLE_INTRO:?} before the inputs' table"));
    let mut lines = docs[start..]
        .lines()
        .skip(1)
        .skip_while(|l| l.trim().is_empty());
    let header = lines.next().unwrap_or_default();
    assert!(
        header.starts_with("| input |"),
        "{DOCS}: the table after {TABLE_INTRO:?} should start `| input |`, found {header:?}"
    );
    let mut inputs = BTreeSet::new();
    let mut rest = lines.skip(1);
    for line in rest.by_ref() {
        let Some(row) = line.strip_prefix('|') else {
            break;
        };
        let first = row.split('|').next().unwrap_or_default();
        for n in names(first) {
            assert!(
                inputs.insert(n.clone()),
                "{DOCS}: input `{n}` is documented twice"
            );
        }
    }
    let outputs = rest
        .find_map(|l| l.strip_prefix("Outputs:"))
        .map(|l| names(l).into_iter().collect())
        .unwrap_or_else(|| panic!("{DOCS}: no `Outputs:` line after the inputs' table"));
    (inputs, outputs)
}

fn differences(action: &BTreeSet<String>, docs: &BTreeSet<String>) -> (Vec<String>, Vec<String>) {
    (
        action.difference(docs).cloned().collect(),
        docs.difference(action).cloned().collect(),
    )
}

#[test]
fn every_action_input_and_output_is_documented_and_nothing_else() {
    let docs = std::fs::read_to_string(root().join(DOCS)).expect("read the quickstart");
    let (inputs, outputs) = documented(&docs);
    let (undocumented, unknown) = differences(&action_keys("inputs"), &inputs);
    assert!(
        undocumented.is_empty() && unknown.is_empty(),
        "action.yml's inputs and {DOCS}'s table differ: undocumented {undocumented:?} (add a row \
         for each: input, default, meaning), documented but not in action.yml {unknown:?} \
         (remove the row or add the input)"
    );
    let (undocumented, unknown) = differences(&action_keys("outputs"), &outputs);
    assert!(
        undocumented.is_empty() && unknown.is_empty(),
        "action.yml's outputs and {DOCS}'s `Outputs:` line differ: undocumented {undocumented:?}, \
         documented but not in action.yml {unknown:?}"
    );
}

#[test]
fn a_missing_or_unknown_row_is_caught() {
    // The parser must see each row: drop one input, add a stale one, and both are reported.
    let docs = std::fs::read_to_string(root().join(DOCS)).expect("read the quickstart");
    let edited = docs
        .lines()
        .filter(|l| !l.starts_with("| `shard` |"))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("| `all` |", "| `retired-input` | — | gone |\n| `all` |");
    let (inputs, _) = documented(&edited);
    let (undocumented, unknown) = differences(&action_keys("inputs"), &inputs);
    assert!(
        undocumented.contains(&"shard".to_string()),
        "{undocumented:?}"
    );
    assert_eq!(unknown, vec!["retired-input".to_string()]);
    // A row naming two inputs documents both.
    assert!(
        inputs.contains("base") && inputs.contains("head"),
        "{inputs:?}"
    );
}

//! Reading the deployment manifests without a cluster: YAML documents, compose
//! `${VAR:-default}` substitution, string lists.

use std::path::Path;

use serde_yaml::Value;

pub fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    text.split("\n---\n")
        .map(|d| serde_yaml::from_str(d).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// Replaces compose `${VAR:-default}` / `${VAR:?msg}` with the default (or VAR's name).
pub fn compose_defaults(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let end = rest[i..].find('}').map(|e| i + e).expect("unclosed ${");
        let inner = &rest[i + 2..end];
        out.push_str(match inner.split_once(":-") {
            Some((_, default)) => default,
            None => inner.split(':').next().unwrap(),
        });
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

pub fn strings(v: &Value) -> Vec<String> {
    v.as_sequence()
        .map(|s| {
            s.iter()
                .map(|x| x.as_str().expect("a string").to_string())
                .collect()
        })
        .unwrap_or_default()
}

//! The crates that only run inside the compiler (proc macros, and the libraries of proc macros and
//! build scripts) are built unoptimised: the workspace's `Cargo.toml` names each at `opt-level = 0`
//! beside `"*"`'s `opt-level = 3`, which would otherwise win over cargo's `build-override`. This check
//! reads cargo's unit graph for the builds `cargo xtask test` makes and fails on any such crate left
//! optimised, so a new dependency's proc macro cannot bring the slow build back silently.

use std::collections::BTreeSet;

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// The builds checked: the workspace's tests and benches, xtask itself, the browser step's client.
const BUILDS: [&[&str]; 3] = [
    &["test", "--workspace", "--all-targets", "--no-run"],
    &["build", "-p", "xtask"],
    &["build", "--profile", "webdriver", "-p", "browser-check"],
];

/// Fails naming every compile-time crate of [`BUILDS`] built at an opt-level other than 0.
pub fn check() -> Result<()> {
    let mut optimised = BTreeSet::new();
    let mut seen = 0;
    for args in BUILDS {
        let out = crate::paths::cargo()
            .args(args)
            .args(["--unit-graph", "-Z", "unstable-options"])
            .env("RUSTC_BOOTSTRAP", "1")
            .output()
            .context("running cargo --unit-graph")?;
        if !out.status.success() {
            bail!(
                "cargo {} --unit-graph: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let graph: Value = serde_json::from_slice(&out.stdout).context("cargo's unit graph")?;
        for (name, opt_level) in compile_time_libraries(&graph) {
            seen += 1;
            if opt_level != "0" {
                optimised.insert(name);
            }
        }
    }
    if !optimised.is_empty() {
        bail!(
            "compile-time crates built optimised (add them at opt-level 0 under [profile.dev.package] \
             in Cargo.toml): {}",
            optimised.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    println!("{seen} compile-time library units, every one at opt-level 0");
    Ok(())
}

/// `(package name, opt-level)` of every library unit that only the compiler runs: a proc macro, or a
/// dependency of a proc macro or of a build script, never linked into a program.
fn compile_time_libraries(graph: &Value) -> Vec<(String, String)> {
    let units = graph["units"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let kinds = |u: &Value| -> Vec<String> {
        u["target"]["kind"]
            .as_array()
            .map(|k| {
                k.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let is_build_script = |u: &Value| kinds(u).iter().any(|k| k == "custom-build");
    let mut compile_time = vec![false; units.len()];
    let mut stack: Vec<usize> = (0..units.len())
        .filter(|&i| {
            let k = kinds(&units[i]);
            k.iter().any(|k| k == "proc-macro")
                || (is_build_script(&units[i]) && units[i]["mode"] == "build")
        })
        .collect();
    while let Some(i) = stack.pop() {
        if std::mem::replace(&mut compile_time[i], true) {
            continue;
        }
        let deps = units[i]["dependencies"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        stack.extend(
            deps.iter()
                .filter_map(|d| d["index"].as_u64())
                .map(|d| d as usize),
        );
    }
    let name = |u: &Value| -> String {
        let id = u["pkg_id"].as_str().unwrap_or("");
        let id = id.rsplit('#').next().unwrap_or(id);
        id.split('@').next().unwrap_or(id).to_string()
    };
    // A package also linked into a program is left out: naming it would unoptimise that copy too.
    let linked: BTreeSet<String> = units
        .iter()
        .zip(&compile_time)
        .filter(|(u, c)| !**c && !is_build_script(u))
        .map(|(u, _)| name(u))
        .collect();
    units
        .iter()
        .zip(compile_time)
        .filter(|(u, c)| *c && !is_build_script(u) && !is_workspace(u))
        .map(|(u, _)| {
            (
                name(u),
                u["profile"]["opt_level"].as_str().unwrap_or("").to_string(),
            )
        })
        .filter(|(n, _)| !linked.contains(n))
        .collect()
}

/// Whether a unit is one of the workspace's own crates (a `path+file` package).
fn is_workspace(unit: &Value) -> bool {
    unit["pkg_id"]
        .as_str()
        .is_some_and(|id| id.starts_with("path+file"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_macros_and_their_libraries_are_found_linked_crates_are_not() {
        let graph = serde_json::json!({ "units": [
            { "pkg_id": "path+file:///w/host#0.1.0", "target": { "kind": ["lib"] }, "mode": "build",
              "profile": { "opt_level": "3" }, "dependencies": [{ "index": 1 }, { "index": 3 }] },
            { "pkg_id": "registry+x#serde_derive@1.0.0", "target": { "kind": ["proc-macro"] },
              "mode": "build", "profile": { "opt_level": "3" }, "dependencies": [{ "index": 2 }] },
            { "pkg_id": "registry+x#syn@2.0.0", "target": { "kind": ["lib"] }, "mode": "build",
              "profile": { "opt_level": "0" }, "dependencies": [{ "index": 5 }] },
            { "pkg_id": "registry+x#candle-core@0.1.0", "target": { "kind": ["lib"] },
              "mode": "build", "profile": { "opt_level": "3" }, "dependencies": [{ "index": 4 }] },
            { "pkg_id": "registry+x#memchr@2.0.0", "target": { "kind": ["lib"] }, "mode": "build",
              "profile": { "opt_level": "3" }, "dependencies": [] },
            { "pkg_id": "registry+x#memchr@2.0.0", "target": { "kind": ["lib"] }, "mode": "build",
              "profile": { "opt_level": "3" }, "dependencies": [] },
        ]});
        let mut found = compile_time_libraries(&graph);
        found.sort();
        assert_eq!(
            found,
            [
                ("serde_derive".into(), "3".into()),
                ("syn".into(), "0".into())
            ]
        );
    }
}

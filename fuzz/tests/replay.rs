//! Every fuzz target on its seeds and on deterministic mutations of them, without instrumentation: the
//! targets' own assertions and every panic below them, in `cargo test`. The seeds are
//! `$MICROLENS_FUZZ_CORPUS/<target>/*` when that is set (`cargo xtask test` sets it to the corpus
//! `cargo xtask fuzz` makes: the fixtures and the shipped model in every dtype, their checkpoints,
//! configs, tokenizers and frames), and always an empty input and random bytes. `MICROLENS_FUZZ_MUTANTS` mutants
//! per seed (default 64). A panicking input is written to `target/fuzz-replay/<target>` and named.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use microlens_fuzz::mutate::Mutator;
use microlens_fuzz::targets;

/// Largest input a mutant grows to (libFuzzer's `-max_len` of `cargo xtask fuzz` is larger; the seeds
/// themselves are run whole).
const MAX_LEN: usize = 1 << 20;

fn mutants_per_seed() -> usize {
    std::env::var("MICROLENS_FUZZ_MUTANTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

/// The seeds of `target`: the corpus directory's files (sorted) if there is a corpus, an empty input
/// and random inputs of 1 to 4,096 bytes.
fn seeds(target: &str, mutator: &mut Mutator) -> Vec<(String, Vec<u8>)> {
    let mut out = vec![("empty".to_owned(), Vec::new())];
    for len in [1, 16, 256, 4096] {
        out.push((format!("random {len}"), mutator.random(len)));
    }
    if let Some(dir) = std::env::var_os("MICROLENS_FUZZ_CORPUS") {
        let dir = Path::new(&dir).join(target);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("reading the corpus {}: {e}", dir.display()))
            .map(|e| e.expect("a corpus entry").path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no seeds in {}", dir.display());
        out.extend(files.into_iter().map(|f| {
            let bytes = std::fs::read(&f).expect("a seed reads");
            (f.display().to_string(), bytes)
        }));
    }
    out
}

/// Runs `input` through `run`; a panic writes the input out and fails the test naming it.
fn check(target: &str, what: &str, run: fn(&[u8]), input: &[u8]) {
    if catch_unwind(AssertUnwindSafe(|| run(input))).is_ok() {
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/fuzz-replay");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(target);
    let _ = std::fs::write(&path, input);
    panic!(
        "fuzz target {target} panicked on {what} ({} bytes, written to {}; replay: cargo xtask fuzz --target {target} with it in the corpus)",
        input.len(),
        path.display()
    );
}

#[test]
fn every_target_survives_its_seeds_and_their_mutants() {
    let per_seed = mutants_per_seed();
    for (i, &(target, run)) in targets::ALL.iter().enumerate() {
        let mut mutator = Mutator::new(0x5eed_0000 + i as u64);
        let seeds = seeds(target, &mut mutator);
        for (name, seed) in &seeds {
            check(target, &format!("seed {name}"), run, seed);
            for m in 0..per_seed {
                let mutant = mutator.mutant(seed, MAX_LEN);
                check(target, &format!("mutant {m} of seed {name}"), run, &mutant);
            }
        }
        println!("{target}: {} seeds, {per_seed} mutants each", seeds.len());
    }
}

#[test]
fn a_panicking_target_is_caught_and_its_input_named() {
    fn panics(data: &[u8]) {
        assert!(data.len() < 3, "too long");
    }
    let caught = catch_unwind(|| check("self-test", "a long input", panics, b"long"));
    let message = caught.expect_err("the panic reaches the test");
    let text = message
        .downcast_ref::<String>()
        .expect("a formatted message");
    assert!(
        text.contains("self-test panicked on a long input (4 bytes"),
        "{text}"
    );
}

#[test]
fn every_libfuzzer_binary_runs_a_target_and_every_target_has_one() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz_targets");
    let mut binaries: Vec<String> = std::fs::read_dir(&dir)
        .expect("fuzz_targets/ reads")
        .filter_map(|e| {
            let path = e.expect("an entry").path();
            let stem = path.file_stem()?.to_str()?.to_owned();
            (path.extension()? == "rs").then_some(stem)
        })
        .collect();
    binaries.sort();
    let mut targets: Vec<String> = targets::ALL.iter().map(|t| t.0.to_owned()).collect();
    targets.sort();
    assert_eq!(binaries, targets);
}

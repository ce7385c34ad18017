//! Writes the hand-built induction model (the test fixture `tests/suite/common/toy.rs`) to a blob, to try the analysis
//! commands on a model whose circuit is known:
//!
//! ```text
//! cargo run -p microlens-host --example induction_toy -- toy.mlb
//! microlens circuits toy.mlb --plot plots/
//! ```

#[path = "../tests/suite/common/toy.rs"]
mod toy;

fn main() -> anyhow::Result<()> {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "induction_toy.mlb".into());
    std::fs::write(&out, toy::induction_toy_model()?)?;
    println!("wrote {out}");
    Ok(())
}

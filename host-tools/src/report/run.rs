//! `microlens run`'s table: the top next tokens at every position.

use crate::eval::run::{log_softmax, RunOutput};

/// The `k` largest logits of a row as `(token, logit, prob)`, largest first.
fn top_k(logits: &[f32], k: usize) -> Vec<(usize, f32, f32)> {
    let lp = log_softmax(logits);
    let mut idx: Vec<usize> = (0..logits.len()).collect();
    idx.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
    idx.into_iter()
        .take(k)
        .map(|i| (i, logits[i], lp[i].exp()))
        .collect()
}

/// Prints the top 5 next tokens (token, logit, probability) at every position, with each position's
/// string token when there are `str_tokens`.
pub fn print_table(tokens: &[u32], str_tokens: Option<&[String]>, out: &RunOutput) {
    let text = |pos: usize| match str_tokens {
        Some(s) => format!(" {:<16}", quoted(&s[pos], 16)),
        None => String::new(),
    };
    let head = if str_tokens.is_some() {
        " text        "
    } else {
        ""
    };
    println!(
        "{:>4} {:>6}{head}  top-5 next tokens (token logit prob)",
        "pos", "token"
    );
    for (pos, (t, logits)) in tokens.iter().zip(&out.logits).enumerate() {
        let top: Vec<String> = top_k(logits, 5)
            .iter()
            .map(|(i, l, p)| format!("{i:>5} {l:>9.4} {p:>6.4}"))
            .collect();
        println!("{pos:>4} {t:>6}{}  {}", text(pos), top.join(" | "));
    }
}

/// A string token quoted as Rust quotes it (`"\n"`, `" the"`), cut to at most `width` characters.
pub fn quoted(token: &str, width: usize) -> String {
    let q = format!("{token:?}");
    match q.chars().count() > width {
        true => q.chars().take(width - 1).chain(['…']).collect(),
        false => q,
    }
}

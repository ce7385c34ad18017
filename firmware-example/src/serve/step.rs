//! `Step`: tokens through the session, each position's logits (or top-k) answered.

use microlens::analysis::HeadAblation;
use microlens::{Error, Hooks, Session};
use microlens_protocol::{ErrorKind, Output, Response, CHUNK, MAX_TOP_K};

use super::{Link, State};
use crate::board::Counter;

/// Consumes `tokens` with the ablations in force, answering `output` for each position.
pub fn step(
    session: &mut Session<'_, '_>,
    state: &mut State,
    tokens: &[u32],
    output: Output,
    link: &mut Link,
    counter: &mut Counter,
) -> Result<(), ErrorKind> {
    if let Output::TopK(k) = output {
        if k == 0 || usize::from(k) > MAX_TOP_K {
            return Err(ErrorKind::TopKOutOfRange);
        }
    }
    for &token in tokens {
        let t0 = counter.now();
        let pos = session.pos() as u32;
        let ablated = HeadAblation::zero(&state.ablated);
        let mut hooks = ablated;
        // Through `&mut dyn Hooks`, as every pass of the demo: one copy of the forward pass.
        let mut hooks: &mut dyn Hooks = &mut hooks;
        let t1 = counter.now();
        let logits = session.step_with(token, &mut hooks).map_err(kind_of)?;
        let t2 = counter.now();
        state.hash.write_f32s(logits);
        // Never full: the session refuses a token past its context first.
        let _ = state.tokens.push(token);
        match output {
            Output::Nothing => {}
            Output::Logits => send_values(link, pos, logits),
            Output::TopK(k) => link.send(&top_k(pos, logits, usize::from(k))),
        }
        let t3 = counter.now();
        state.spent.0 += t3 - t0;
        state.spent.1 += t2 - t1;
    }
    Ok(())
}

/// The protocol's kind of a step's error.
pub fn kind_of(e: Error) -> ErrorKind {
    match e {
        Error::TokenOutOfRange { token, .. } => ErrorKind::TokenOutOfRange(token),
        Error::ContextFull { .. } => ErrorKind::ContextFull,
        _ => ErrorKind::Model,
    }
}

/// Sends `values` (position `pos`) in [`CHUNK`]-value frames.
pub fn send_values(link: &mut Link, pos: u32, values: &[f32]) {
    for (i, chunk) in values.chunks(CHUNK).enumerate() {
        link.send(&Response::Values {
            pos,
            offset: (i * CHUNK) as u32,
            width: values.len() as u32,
            values: heapless::Vec::from_slice(chunk).unwrap_or_default(),
        });
    }
}

/// The `k` largest logits, largest first (by `f32::total_cmp`), the lower token first on ties.
fn top_k(pos: u32, logits: &[f32], k: usize) -> Response {
    let mut entries: heapless::Vec<(u32, f32), MAX_TOP_K> = heapless::Vec::new();
    for _ in 0..k.min(logits.len()) {
        let mut best: Option<(u32, f32)> = None;
        for (t, &v) in logits.iter().enumerate() {
            let t = t as u32;
            if entries.iter().any(|&(e, _)| e == t) {
                continue;
            }
            if best.is_none_or(|(_, b)| v.total_cmp(&b).is_gt()) {
                best = Some((t, v));
            }
        }
        if let Some(b) = best {
            let _ = entries.push(b);
        }
    }
    Response::TopK { pos, entries }
}

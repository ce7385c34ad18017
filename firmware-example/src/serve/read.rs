//! `Read`: one hook point over a range of positions, captured by running the consumed tokens again.

use microlens::analysis::HeadAblation;
use microlens::{HookKind, HookPoint, Hooks, Session};
use microlens_protocol::{hook_name, ErrorKind};

use super::step::{kind_of, send_values};
use super::{Link, State};
use crate::model;

/// Sends the activation at one point (kind, layer, head) for positions `start..end` as it passes.
///
/// It wants its kind, and `hook_result` with `attn_result` (the per-head output projection, as the
/// host's activation cache runs it), so that the forward pass takes the path the host's run of the same
/// request takes and computes the same bits.
struct Capture<'l> {
    attn_result: bool,
    kind: HookKind,
    layer: usize,
    head: usize,
    start: usize,
    end: usize,
    link: &'l mut Link,
    sent: bool,
}

impl Hooks for Capture<'_> {
    fn wants(&self, kind: HookKind) -> bool {
        kind == self.kind || (self.attn_result && kind == HookKind::Result)
    }

    fn hook(&mut self, point: HookPoint, act: &mut [f32]) {
        let here = point.kind == self.kind && point.layer == self.layer && point.head == self.head;
        if here && (self.start..self.end).contains(&point.pos) {
            send_values(self.link, point.pos as u32, act);
            self.sent = true;
        }
    }
}

/// Runs the consumed tokens again from position 0 with the ablations in force, sending the activation
/// named `name` (head `head`) at positions `start..end`. The session ends where it was.
#[allow(clippy::too_many_arguments)]
pub fn read(
    session: &mut Session<'_, '_>,
    state: &mut State,
    name: &str,
    head: u16,
    start: u32,
    end: u32,
    attn_result: bool,
    link: &mut Link,
) -> Result<(), ErrorKind> {
    let (kind, layer) = hook_name::parse(name).ok_or(ErrorKind::UnknownHook)?;
    let head = usize::from(head);
    if kind.per_layer() && layer >= model::N_LAYERS {
        return Err(ErrorKind::LayerOutOfRange);
    }
    if head >= model::N_HEADS || (!kind.per_head() && head != 0) {
        return Err(ErrorKind::HeadOutOfRange);
    }
    if !microlens::hooks::COMPILED.contains(kind) {
        return Err(ErrorKind::HookUnavailable);
    }
    let (start, end) = (start as usize, end as usize);
    if start >= end || end > state.tokens.len() {
        return Err(ErrorKind::PositionsOutOfRange);
    }
    let capture = Capture {
        attn_result,
        kind,
        layer,
        head,
        start,
        end,
        link,
        sent: false,
    };
    let mut both = (HeadAblation::zero(&state.ablated), capture);
    let mut hooks: &mut dyn Hooks = &mut both;
    session.reset();
    for &token in &state.tokens {
        session.step_with(token, &mut hooks).map_err(kind_of)?;
    }
    // A point the model does not have (an MLP's in an attention-only model) is never called.
    match both.1.sent {
        true => Ok(()),
        false => Err(ErrorKind::HookUnavailable),
    }
}

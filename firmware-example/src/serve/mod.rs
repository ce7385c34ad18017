//! Serve mode (feature `serve`): the board as an instrument. The firmware reads request frames on its
//! UART ([`microlens_protocol`]) and answers them through the same [`Session`] and hooks as the demo:
//! `Info`, `Reset`, `Step`, `Read` (a hook point by TransformerLens name), `Ablate`/`Restore`, `Hash`
//! and `Blob`. Bad input on the wire is answered with an `Error` of its kind and the device keeps
//! serving; every buffer is a fixed `static`, and there is no heap.

mod info;
mod link;
mod read;
mod step;

use microlens::analysis::Head;
use microlens::hash::Fnv1a64;
use microlens::Session;
use microlens_protocol::{decode, ErrorKind, FrameReader, Request, Response, MAX_FRAME};
use static_cell::ConstStaticCell;

use crate::board::{Counter, Uart};
use crate::model;
pub use link::Link;

/// The frame being read.
static READER: ConstStaticCell<FrameReader<MAX_FRAME>> = ConstStaticCell::new(FrameReader::new());

/// What the device holds between requests besides the session.
pub struct State {
    /// The tokens consumed since the last reset (a `Read` runs them again).
    pub tokens: heapless::Vec<u32, { model::N_CTX }>,
    /// The zero-ablated heads.
    pub ablated: heapless::Vec<Head, { model::N_LAYERS * model::N_HEADS }>,
    /// FNV-1a 64 of every logit since the last reset.
    pub hash: Fnv1a64,
    /// Instructions (cycles on a board) spent answering `Step`s since the last reset, and in their
    /// forward passes alone.
    pub spent: (u64, u64),
}

impl State {
    /// Empties the KV cache, the tokens and the hash, keeping the ablations.
    fn reset(&mut self, session: &mut Session<'_, '_>) {
        session.reset();
        self.tokens.clear();
        self.hash = Fnv1a64::new();
        self.spent = (0, 0);
    }
}

/// Serves requests for ever.
pub fn run(session: &mut Session<'_, '_>, counter: &mut Counter) -> ! {
    let (Some(reader), Some(mut link)) = (READER.try_take(), Link::take(Uart::take())) else {
        defmt::error!("serve: buffers taken");
        crate::board::exit(false)
    };
    let mut state = State {
        tokens: heapless::Vec::new(),
        ablated: heapless::Vec::new(),
        hash: Fnv1a64::new(),
        spent: (0, 0),
    };
    state.reset(session);
    defmt::println!("serving=1 max_frame={=usize}", MAX_FRAME);
    loop {
        let byte = link.read_byte();
        let request = match reader.push(byte) {
            None => continue,
            Some(frame) => frame.and_then(decode::<Request>),
        };
        match request {
            Ok(request) => answer(request, session, &mut state, &mut link, counter),
            Err(e) => link.send(&Response::Error(e.into())),
        }
    }
}

/// Answers one request; its last frame is `Done`, an answer of its own, or an `Error`.
fn answer(
    request: Request,
    session: &mut Session<'_, '_>,
    state: &mut State,
    link: &mut Link,
    counter: &mut Counter,
) {
    let last = match request {
        Request::Info => Response::Info(info::info(session)),
        Request::Reset => {
            state.reset(session);
            Response::Done
        }
        Request::Step { tokens, output } => {
            step::step(session, state, &tokens, output, link, counter)
                .map_or_else(Response::Error, |()| Response::Done)
        }
        Request::Read {
            name,
            head,
            start,
            end,
            attn_result,
        } => read::read(session, state, &name, head, start, end, attn_result, link)
            .map_or_else(Response::Error, |()| Response::Done),
        Request::Ablate { layer, head } => ablate(session, state, layer, head),
        Request::Restore => {
            state.ablated.clear();
            state.reset(session);
            Response::Done
        }
        Request::Hash => {
            let (all, forward) = state.spent;
            let n = (state.tokens.len() as u64).max(1);
            defmt::println!(
                "serve_tokens={=usize} serve_step_cost_per_token={=u64} serve_forward_cost_per_token={=u64} stack_bytes={=usize}",
                state.tokens.len(),
                crate::div::div_rem(all, n as u32).0,
                crate::div::div_rem(forward, n as u32).0,
                crate::stack::high_water()
            );
            Response::Hash {
                positions: state.tokens.len() as u32,
                hash: state.hash.finish(),
            }
        }
        Request::Blob { offset } => info::blob(offset),
    };
    link.send(&last);
}

/// Zero-ablates a head from now on (the KV cache emptied).
fn ablate(session: &mut Session<'_, '_>, state: &mut State, layer: u16, head: u16) -> Response {
    let (layer, head) = (usize::from(layer), usize::from(head));
    if layer >= model::N_LAYERS {
        return Response::Error(ErrorKind::LayerOutOfRange);
    }
    if head >= model::N_HEADS {
        return Response::Error(ErrorKind::HeadOutOfRange);
    }
    let head = Head::new(layer, head);
    if !state.ablated.contains(&head) && state.ablated.push(head).is_err() {
        return Response::Error(ErrorKind::HeadOutOfRange);
    }
    state.reset(session);
    Response::Done
}

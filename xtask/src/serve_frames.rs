//! Frames for the serve firmware's tests: valid requests, corrupted and random frames (the 10,000-frame
//! check of `cargo xtask test`), and the `frame_decoder` fuzz target's seeds.

use microlens_protocol::{
    decode, FrameReader, FrameWriter, Output, Request, Response, MAX_FRAME, VERSION,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// One request of every kind, valid for any model with at least one layer and head.
pub fn valid_requests() -> Vec<Request> {
    vec![
        Request::Info,
        Request::Reset,
        Request::Step {
            tokens: heapless::Vec::from_iter([1, 2, 3]),
            output: Output::Logits,
        },
        Request::Step {
            tokens: heapless::Vec::from_iter([4]),
            output: Output::TopK(3),
        },
        Request::Read {
            name: "blocks.0.attn.hook_pattern".try_into().unwrap_or_default(),
            head: 0,
            start: 0,
            end: 2,
            attn_result: true,
        },
        Request::Ablate { layer: 0, head: 0 },
        Request::Restore,
        Request::Hash,
        Request::Blob { offset: 0 },
    ]
}

/// `msg`'s frame, delimiter included.
pub fn frame<T: serde::Serialize>(msg: &T) -> Vec<u8> {
    FrameWriter::new()
        .frame(msg)
        .map(<[u8]>::to_vec)
        .unwrap_or_default()
}

/// Seeds of the `frame_decoder` fuzz target: every valid request, and a few responses, each alone; and
/// all of them in one stream.
pub fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let requests: Vec<u8> = valid_requests().iter().flat_map(frame).collect();
    let responses: Vec<u8> = [
        Response::Done,
        Response::Hash {
            positions: 3,
            hash: 0x0123_4567_89ab_cdef,
        },
        Response::Values {
            pos: 2,
            offset: 0,
            width: 3,
            values: heapless::Vec::from_iter([1.0, -0.5, f32::INFINITY]),
        },
    ]
    .iter()
    .flat_map(frame)
    .collect();
    vec![("requests", requests), ("responses", responses)]
}

/// `n` bad frames for a device whose vocabulary is `d_vocab`, each ended by a delimiter: random bytes,
/// valid frames with a byte changed or cut short, oversized frames, another version, a valid CRC over
/// garbage, and well-formed requests the device must refuse (a token out of range, an unknown hook
/// name, an empty position range, a layer out of range). None is a request the device would carry out.
pub fn corrupted(n: usize, d_vocab: u32, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let valid: Vec<Vec<u8>> = valid_requests().iter().map(frame).collect();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let pick = &valid[rng.random_range(0..valid.len())];
        // Oversized frames (the most bytes) one in 19: the check stays quick.
        let mut bytes = match rng.random_range(0..19) {
            0 | 1 => (0..rng.random_range(1..64)).map(|_| rng.random()).collect(),
            2..=4 => {
                let mut b = pick.clone();
                let i = rng.random_range(0..b.len() - 1);
                b[i] = b[i].wrapping_add(rng.random_range(1..=255));
                b
            }
            5 | 6 => pick[..rng.random_range(1..pick.len() - 1)].to_vec(),
            7 => (0..MAX_FRAME + rng.random_range(1..64))
                .map(|_| rng.random_range(1..=255))
                .collect(),
            8 => with_crc(rng.random_range(VERSION + 1..=255), &[0]),
            9 | 10 => {
                let body: Vec<u8> = (0..rng.random_range(1..32)).map(|_| rng.random()).collect();
                with_crc(VERSION, &body)
            }
            11 | 12 => frame(&Request::Step {
                tokens: heapless::Vec::from_iter([d_vocab + rng.random_range(0..1000)]),
                output: Output::Logits,
            }),
            13 | 14 => frame(&Request::Read {
                name: "blocks.0.hook_nothing".try_into().unwrap_or_default(),
                head: 0,
                start: 0,
                end: 1,
                attn_result: true,
            }),
            15 | 16 => frame(&Request::Read {
                name: "blocks.0.hook_resid_pre".try_into().unwrap_or_default(),
                head: 0,
                start: 5,
                end: 5,
                attn_result: true,
            }),
            _ => frame(&Request::Ablate {
                layer: 1000,
                head: 0,
            }),
        };
        if bytes.last() != Some(&0) {
            bytes.push(0);
        }
        if !carried_out(&bytes, d_vocab) {
            out.push(bytes);
        }
    }
    out
}

/// The frames (non-empty, delimited) in `bytes` as the device's reader sees them.
pub fn frames_in(bytes: &[u8]) -> usize {
    let mut reader = FrameReader::<MAX_FRAME>::new();
    bytes.iter().filter(|&&b| reader.push(b).is_some()).count()
}

/// Whether `bytes` holds a frame the device would carry out rather than refuse (a random change that
/// happens to give a valid request, e.g. another token in range).
fn carried_out(bytes: &[u8], d_vocab: u32) -> bool {
    let mut reader = FrameReader::<MAX_FRAME>::new();
    bytes.iter().any(|&b| {
        let Some(Ok(body)) = reader.push(b) else {
            return false;
        };
        match decode::<Request>(body) {
            Ok(Request::Step { tokens, .. }) => tokens.iter().all(|&t| t < d_vocab),
            Ok(Request::Read {
                name, start, end, ..
            }) => microlens_protocol::hook_name::parse(&name).is_some() && start < end,
            Ok(Request::Ablate { layer, .. }) => layer < 1000,
            Ok(_) => true,
            Err(_) => false,
        }
    })
}

/// A frame of `version ‖ body ‖ CRC-32` (a valid CRC over whatever `body` is).
fn with_crc(version: u8, body: &[u8]) -> Vec<u8> {
    let mut payload = vec![version];
    payload.extend_from_slice(body);
    let crc = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC).checksum(&payload);
    payload.extend_from_slice(&crc.to_le_bytes());
    let mut out = vec![0; payload.len() + payload.len() / 254 + 2];
    let n = cobs::encode(&payload, &mut out);
    out.truncate(n);
    out.push(0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrupted_frames_are_all_refused_and_valid_ones_accepted() {
        let frames = corrupted(2000, 64, 7);
        assert_eq!(frames.len(), 2000);
        for f in &frames {
            assert_eq!(f.last(), Some(&0));
            assert!(!carried_out(f, 64), "{f:?}");
        }
        assert!(frames_in(&frames.concat()) >= 2000);
        for req in valid_requests() {
            assert!(carried_out(&frame(&req), 64), "{req:?}");
        }
        let (_, stream) = &seeds()[0];
        assert_eq!(frames_in(stream), valid_requests().len());
    }
}

//! Frames: every message round-trips, the largest of each kind fits in a frame, and bad bytes (flipped
//! bits, truncation, garbage, oversize, another version, trailing bytes) are refused without a panic,
//! the reader resynchronising at the next delimiter.

use microlens_protocol::{
    decode, ErrorKind, FrameError, FrameReader, FrameWriter, Info, Output, Request, Response,
    BLOB_CHUNK, CHUNK, MAX_FRAME, MAX_NAME, MAX_STEP_TOKENS, MAX_TOP_K, VERSION,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Every message body `bytes` holds, in order, with the errors of refused frames.
fn read_all(bytes: &[u8]) -> Vec<Result<Vec<u8>, FrameError>> {
    let mut reader = FrameReader::<MAX_FRAME>::new();
    bytes
        .iter()
        .filter_map(|&b| reader.push(b).map(|r| r.map(<[u8]>::to_vec)))
        .collect()
}

/// `payload` COBS-encoded and delimited.
fn cobs_frame(payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0; payload.len() + payload.len() / 254 + 2];
    let n = cobs::encode(payload, &mut out);
    out.truncate(n);
    out.push(0);
    out
}

fn frame_of<T: serde::Serialize>(msg: &T) -> Vec<u8> {
    FrameWriter::new().frame(msg).unwrap().to_vec()
}

fn largest_requests() -> Vec<Request> {
    let name: heapless::String<MAX_NAME> = "x".repeat(MAX_NAME).as_str().try_into().unwrap();
    vec![
        Request::Info,
        Request::Reset,
        Request::Hash,
        Request::Restore,
        Request::Step {
            tokens: heapless::Vec::from_iter([u32::MAX; MAX_STEP_TOKENS]),
            output: Output::TopK(u8::MAX),
        },
        Request::Read {
            name,
            head: u16::MAX,
            start: u32::MAX,
            end: u32::MAX,
            attn_result: true,
        },
        Request::Ablate {
            layer: u16::MAX,
            head: u16::MAX,
        },
        Request::Blob { offset: u32::MAX },
    ]
}

/// `n` letters.
fn text<const N: usize>(n: usize) -> heapless::String<N> {
    "w".repeat(n).as_str().try_into().unwrap()
}

fn largest_responses() -> Vec<Response> {
    vec![
        Response::Values {
            pos: u32::MAX,
            offset: u32::MAX,
            width: u32::MAX,
            values: heapless::Vec::from_iter([f32::NAN; CHUNK]),
        },
        Response::TopK {
            pos: u32::MAX,
            entries: heapless::Vec::from_iter([(u32::MAX, f32::MIN); MAX_TOP_K]),
        },
        Response::Hash {
            positions: u32::MAX,
            hash: u64::MAX,
        },
        Response::Blob {
            offset: u32::MAX,
            total: u32::MAX,
            bytes: heapless::Vec::from_iter([0xff; BLOB_CHUNK]),
        },
        Response::Info(Info {
            protocol: VERSION,
            firmware: text(16),
            board: text(16),
            n_layers: u32::MAX,
            n_heads: u32::MAX,
            d_model: u32::MAX,
            d_head: u32::MAX,
            d_vocab: u32::MAX,
            d_vocab_out: u32::MAX,
            n_ctx: u32::MAX,
            context: u32::MAX,
            features: text(192),
            hooks: u32::MAX,
            max_frame: u32::MAX,
            blob_len: u32::MAX,
            blob_hash: u64::MAX,
        }),
        Response::Done,
        Response::Error(ErrorKind::TokenOutOfRange(u32::MAX)),
        Response::Error(ErrorKind::Version(u8::MAX)),
    ]
}

#[test]
fn the_largest_messages_fit_and_round_trip() {
    for req in largest_requests() {
        let frame = frame_of(&req);
        assert!(frame.len() <= MAX_FRAME + 1, "{req:?}: {} B", frame.len());
        let bodies = read_all(&frame);
        assert_eq!(bodies.len(), 1);
        let body = bodies[0].as_ref().unwrap();
        assert_eq!(decode::<Request>(body).unwrap(), req);
    }
    for resp in largest_responses() {
        let frame = frame_of(&resp);
        assert!(frame.len() <= MAX_FRAME + 1, "{resp:?}: {} B", frame.len());
        let body = read_all(&frame).remove(0).unwrap();
        let back: Response = decode(&body).unwrap();
        // NaN != NaN: compare the encodings.
        assert_eq!(frame_of(&back), frame);
    }
}

#[test]
fn every_flipped_bit_is_refused() {
    for req in largest_requests().into_iter().take(6) {
        let frame = frame_of(&req);
        for byte in 0..frame.len() - 1 {
            for bit in 0..8 {
                let mut bad = frame.clone();
                bad[byte] ^= 1 << bit;
                // A flip may make a delimiter (two frames) or remove one (no frame yet): then one more
                // delimiter ends what is left.
                bad.push(0);
                for result in read_all(&bad) {
                    let ok = result.is_ok_and(|body| decode::<Request>(&body).is_ok());
                    assert!(
                        !ok,
                        "{req:?} with byte {byte} bit {bit} flipped was accepted"
                    );
                }
            }
        }
    }
}

#[test]
fn truncated_oversized_and_foreign_frames_are_refused() {
    let frame = frame_of(&Request::Info);
    // Truncated: every proper prefix, delimited.
    for n in 1..frame.len() - 1 {
        let mut bad = frame[..n].to_vec();
        bad.push(0);
        let results = read_all(&bad);
        assert_eq!(results.len(), 1);
        assert!(results[0].is_err(), "prefix of {n} B accepted");
    }
    // Oversized: MAX_FRAME + 1 bytes before the delimiter.
    let mut long = vec![0x01; MAX_FRAME + 1];
    long.push(0);
    assert_eq!(read_all(&long), [Err(FrameError::Oversized)]);
    // Another version with a valid CRC.
    let crc = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC);
    let mut payload = vec![VERSION + 1, 0];
    payload.extend_from_slice(&crc.checksum(&payload).to_le_bytes());
    let foreign = cobs_frame(&payload);
    assert_eq!(read_all(&foreign), [Err(FrameError::Version(VERSION + 1))]);
    // A valid frame whose body has a trailing byte: malformed.
    let mut payload = vec![VERSION, 0, 0];
    payload.extend_from_slice(&crc.checksum(&payload).to_le_bytes());
    let trailing = cobs_frame(&payload);
    let body = read_all(&trailing).remove(0).unwrap();
    assert_eq!(decode::<Request>(&body), Err(FrameError::Malformed));
    assert_eq!(decode::<Request>(&body[..1]), Ok(Request::Info));
}

#[test]
fn garbage_then_a_valid_frame_resynchronises() {
    let mut rng = ChaCha8Rng::seed_from_u64(30);
    let good = frame_of(&Request::Hash);
    for round in 0..2000 {
        let len = rng.random_range(0..2 * MAX_FRAME);
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        bytes.push(0);
        bytes.extend_from_slice(&good);
        let results = read_all(&bytes);
        let (last, rest) = results.split_last().unwrap();
        assert_eq!(decode::<Request>(last.as_ref().unwrap()), Ok(Request::Hash));
        for r in rest {
            let ok = r.as_ref().is_ok_and(|body| decode::<Request>(body).is_ok());
            assert!(!ok, "round {round}: garbage accepted as a request");
        }
    }
}

#[test]
fn a_reader_keeps_working_after_an_oversized_frame() {
    let mut reader = FrameReader::<MAX_FRAME>::new();
    for _ in 0..3 * MAX_FRAME {
        assert!(reader.push(7).is_none());
    }
    assert_eq!(
        reader.push(0).map(|r| r.map(<[u8]>::len)),
        Some(Err(FrameError::Oversized))
    );
    let mut last = None;
    for &b in &frame_of(&Request::Reset) {
        if let Some(r) = reader.push(b) {
            last = Some(decode::<Request>(r.unwrap()).unwrap());
        }
    }
    assert_eq!(last, Some(Request::Reset));
}

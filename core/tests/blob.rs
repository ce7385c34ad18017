//! A bad blob is a typed error, never a panic or an out-of-bounds read.

mod common;

use common::{random_blob, small_config, Lcg};
use microlens::{Error, Model};

#[test]
fn a_written_blob_reads_back() {
    let cfg = small_config();
    let bytes = random_blob(&cfg, 1);
    let model = Model::from_bytes(&bytes).unwrap();
    assert_eq!(model.config(), &cfg);
    assert_eq!(model.blob_len(), bytes.len());
}

#[test]
fn every_truncation_is_rejected() {
    let bytes = random_blob(&small_config(), 2);
    for len in 0..bytes.len() {
        let err = Model::from_bytes(&bytes[..len]).unwrap_err();
        assert!(matches!(err, Error::Truncated { .. }), "len {len}: {err:?}");
    }
}

#[test]
fn bit_flips_are_rejected() {
    let bytes = random_blob(&small_config(), 3);
    let mut rng = Lcg(99);
    for _ in 0..500 {
        let mut bad = bytes.clone();
        let bit = rng.next_u32() as usize % (bad.len() * 8);
        bad[bit / 8] ^= 1 << (bit % 8);
        assert!(
            Model::from_bytes(&bad).is_err(),
            "flip of bit {bit} accepted"
        );
    }
}

#[test]
fn trailing_bytes_bad_magic_and_version_are_named() {
    let bytes = random_blob(&small_config(), 4);
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(matches!(
        Model::from_bytes(&longer),
        Err(Error::Inconsistent(_))
    ));
    let mut magic = bytes.clone();
    magic[0] = b'X';
    assert_eq!(Model::from_bytes(&magic).unwrap_err(), Error::BadMagic);
    let mut version = bytes.clone();
    version[4] = 9;
    assert_eq!(
        Model::from_bytes(&version).unwrap_err(),
        Error::UnsupportedVersion { found: 9 }
    );
    // A blob of the format before int8 matrices came in quads of rows: refused, with what to do.
    version[4] = 1;
    let err = Model::from_bytes(&version).unwrap_err();
    assert_eq!(err, Error::UnsupportedVersion { found: 1 });
    let says = std::format!("{err}");
    assert!(
        says.contains("version 1") && says.contains("microlens convert"),
        "{says}"
    );
}

#[test]
fn unaligned_blobs_read_the_same() {
    let cfg = small_config();
    let bytes = random_blob(&cfg, 5);
    let mut shifted = vec![0u8; bytes.len() + 1];
    shifted[1..].copy_from_slice(&bytes);
    let logits = |b: &[u8]| {
        let model = Model::from_bytes(b).unwrap();
        let (mut kv, mut ws) = (
            vec![0.0; model.kv_cache_len()],
            vec![0.0; model.workspace_len()],
        );
        let mut s = microlens::Session::new(&model, &mut kv, &mut ws).unwrap();
        s.step(3).unwrap().to_vec()
    };
    assert_eq!(logits(&bytes), logits(&shifted[1..]));
}

/// Re-signs a corrupted blob so the CRC passes and only the structural checks stand in the way.
fn resign(bytes: &mut [u8]) {
    let crc = microlens::blob::crc32(&bytes[microlens::blob::PREAMBLE_LEN..]);
    bytes[16..20].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn resigned_corrupt_headers_never_panic() {
    let bytes = random_blob(&small_config(), 6);
    let header_end = microlens::blob::PREAMBLE_LEN
        + u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
    let mut rng = Lcg(2024);
    let (mut accepted, mut rejected) = (0, 0);
    for _ in 0..3000 {
        let mut bad = bytes.clone();
        for _ in 0..1 + rng.next_u32() % 3 {
            let at = 8 + rng.next_u32() as usize % (header_end - 8);
            bad[at] ^= 1 << (rng.next_u32() % 8);
        }
        resign(&mut bad);
        match Model::from_bytes(&bad) {
            Err(_) => rejected += 1,
            Ok(model) => {
                accepted += 1;
                if model.kv_cache_len() + model.workspace_len() < 1 << 22 {
                    let (mut kv, mut ws) = (
                        vec![0.0; model.kv_cache_len()],
                        vec![0.0; model.workspace_len()],
                    );
                    let mut s = microlens::Session::new(&model, &mut kv, &mut ws).unwrap();
                    for t in 0..3 {
                        let _ = s.step(t);
                    }
                }
            }
        }
    }
    assert!(rejected > 2000, "accepted {accepted}, rejected {rejected}");
}

#[test]
fn a_tokenizer_record_follows_the_header_and_old_blobs_read_unchanged() {
    use microlens::blob::{with_tokenizer, TokenizerRecord};
    let bytes = random_blob(&small_config(), 5);
    // A blob without a record is written as before: removing none changes no byte.
    assert_eq!(with_tokenizer(&bytes, None).unwrap(), bytes);
    assert_eq!(Model::from_bytes(&bytes).unwrap().tokenizer(), None);
    let record = TokenizerRecord {
        fnv1a64: 0x0123_4567_89ab_cdef,
        prepend_bos: true,
    };
    let tagged = with_tokenizer(&bytes, Some(record)).unwrap();
    let model = Model::from_bytes(&tagged).unwrap();
    assert_eq!(model.tokenizer(), Some(record));
    let plain = Model::from_bytes(&bytes).unwrap();
    for id in plain.entries().map(|e| e.id()) {
        assert_eq!(
            model.matrix(id).map(|m| m.data()),
            plain.matrix(id).map(|m| m.data())
        );
    }
    assert_eq!(with_tokenizer(&tagged, None).unwrap(), bytes);
    // A header followed by bytes that are not one record is a bad header.
    let header_len = u32::from_le_bytes(tagged[8..12].try_into().unwrap()) as usize;
    let mut bad = tagged.clone();
    bad[20 + header_len - 1] = 7; // the record's bool
    resign(&mut bad);
    assert_eq!(Model::from_bytes(&bad).unwrap_err(), Error::BadHeader);
}

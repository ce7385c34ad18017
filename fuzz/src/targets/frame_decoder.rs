//! The serve protocol's frame decoder, as the firmware runs it on bytes from its UART: any bytes are
//! read frame by frame without a panic, a frame that passes its checks decodes or is refused, and a
//! decoded message encodes back to a frame that decodes to the same message.

use microlens_protocol::{decode, FrameReader, FrameWriter, Request, Response, MAX_FRAME};

/// One input of the target.
pub fn run(data: &[u8]) {
    let mut reader = FrameReader::<MAX_FRAME>::new();
    let mut writer = FrameWriter::new();
    for &byte in data {
        let Some(Ok(body)) = reader.push(byte) else {
            continue;
        };
        let body = body.to_vec();
        if let Ok(req) = decode::<Request>(&body) {
            round_trip(&mut writer, &req);
        }
        if let Ok(resp) = decode::<Response>(&body) {
            round_trip(&mut writer, &resp);
        }
    }
}

/// `msg` framed again reads back as a frame whose message encodes identically (`f32` NaNs compare by
/// their bits this way).
fn round_trip<T>(writer: &mut FrameWriter, msg: &T)
where
    T: serde::Serialize + for<'a> serde::Deserialize<'a>,
{
    let frame = writer
        .frame(msg)
        .expect("a decoded message fits a frame")
        .to_vec();
    let mut reader = FrameReader::<MAX_FRAME>::new();
    let mut bodies = frame
        .iter()
        .filter_map(|&b| reader.push(b).map(|r| r.map(<[u8]>::to_vec)));
    let body = bodies
        .next()
        .expect("one frame")
        .expect("a frame just written is valid");
    let back: T = decode(&body).expect("its message decodes");
    assert_eq!(
        writer.frame(&back).unwrap(),
        &frame[..],
        "re-encoding changed the frame"
    );
}

//! A device in serve mode, driven over its serial link with the wire protocol of `microlens-protocol`:
//! requests out, framed responses in, every wait bounded by a timeout.

mod cache;
mod link;

use std::io::ErrorKind as IoKind;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use microlens::hash::Fnv1a64;
use microlens_protocol::{
    decode, ErrorKind, FrameReader, FrameWriter, Output, Request, Response, MAX_FRAME, MAX_NAME,
    MAX_STEP_TOKENS, VERSION,
};

pub use link::Stream;
pub use microlens_protocol::Info;

/// The hook points `info` says the device can read (its `hooks` bits), by their suffixes.
pub fn hook_suffixes(info: &Info) -> Vec<&'static str> {
    microlens::HookKind::ALL
        .iter()
        .enumerate()
        .filter(|(k, _)| info.hooks & (1 << k) != 0)
        .map(|(_, kind)| kind.suffix())
        .collect()
}

/// A connected device.
pub struct Device {
    stream: Box<dyn Stream>,
    port: String,
    timeout: Duration,
    reader: FrameReader<MAX_FRAME>,
    writer: FrameWriter,
    pending: Vec<u8>,
    next: usize,
    /// The device's next position, as this client has moved it.
    pos: usize,
    /// Bytes received and sent so far.
    traffic: (u64, u64),
}

/// One position's values of a `Read` or `Step`.
pub type Values = Vec<f32>;

impl Device {
    /// Connects to `port` (`tcp:HOST:PORT` or a serial device at `baud`); a read waits at most
    /// `timeout`.
    pub fn open(port: &str, baud: u32, timeout: Duration) -> Result<Self> {
        Ok(Device {
            stream: link::open(port, baud, timeout)?,
            port: port.to_owned(),
            timeout,
            reader: FrameReader::new(),
            writer: FrameWriter::new(),
            pending: Vec::new(),
            next: 0,
            pos: 0,
            traffic: (0, 0),
        })
    }

    /// Sends raw bytes (tests send corrupted frames).
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.traffic.1 += bytes.len() as u64;
        self.stream
            .write_all(bytes)
            .and_then(|()| self.stream.flush())
            .with_context(|| format!("{}: cannot send", self.port))
    }

    /// Sends `request`, preceded by a delimiter that ends whatever partial frame the device holds.
    fn send(&mut self, request: &Request) -> Result<()> {
        let frame = self
            .writer
            .frame(request)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut bytes = Vec::with_capacity(frame.len() + 1);
        bytes.push(0);
        bytes.extend_from_slice(frame);
        self.send_raw(&bytes)
    }

    /// The next response frame (a frame that fails its checks is an error).
    pub fn receive(&mut self) -> Result<Response> {
        loop {
            while self.next < self.pending.len() {
                let byte = self.pending[self.next];
                self.next += 1;
                if let Some(frame) = self.reader.push(byte) {
                    let body =
                        frame.map_err(|e| anyhow::anyhow!("{}: bad frame: {e}", self.port))?;
                    return decode::<Response>(body)
                        .map_err(|e| anyhow::anyhow!("{}: bad response: {e}", self.port));
                }
            }
            self.pending.resize(4096, 0);
            self.next = 0;
            let n = match self.stream.read(&mut self.pending) {
                Ok(0) => bail!("{}: the device closed the connection", self.port),
                Ok(n) => n,
                Err(e) if matches!(e.kind(), IoKind::WouldBlock | IoKind::TimedOut) => bail!(
                    "{}: no answer from the device within {:.1} s",
                    self.port,
                    self.timeout.as_secs_f64()
                ),
                Err(e) if e.kind() == IoKind::Interrupted => 0,
                Err(e) => bail!("{}: {e}", self.port),
            };
            self.pending.truncate(n);
            self.traffic.0 += n as u64;
        }
    }

    /// Sends `request` and hands every response before the last to `each`; returns the last
    /// (`Done`, an answer of its own, or an error, as `Err`).
    pub fn request(
        &mut self,
        request: &Request,
        mut each: impl FnMut(Response) -> Result<()>,
    ) -> Result<Response> {
        self.send(request)?;
        loop {
            match self.receive()? {
                Response::Error(kind) => bail!(
                    "{}: the device refused {}: {kind:?}",
                    self.port,
                    name(request)
                ),
                r @ (Response::Done
                | Response::Info(_)
                | Response::Hash { .. }
                | Response::Blob { .. }) => return Ok(r),
                r => each(r)?,
            }
        }
    }

    /// Bytes received from and sent to the device so far.
    pub fn traffic(&self) -> (u64, u64) {
        self.traffic
    }

    /// What the device runs (its protocol version checked).
    pub fn info(&mut self) -> Result<Info> {
        match self.request(&Request::Info, unexpected)? {
            Response::Info(info) if info.protocol == VERSION => Ok(info),
            Response::Info(info) => bail!(
                "{}: the device speaks protocol {}, this tool {VERSION}",
                self.port,
                info.protocol
            ),
            r => bail!("{}: unexpected answer {r:?}", self.port),
        }
    }

    /// Empties the device's KV cache.
    pub fn reset(&mut self) -> Result<()> {
        self.pos = 0;
        self.request(&Request::Reset, unexpected).map(drop)
    }

    /// Zero-ablates a head (the KV cache emptied).
    pub fn ablate(&mut self, layer: usize, head: usize) -> Result<()> {
        let (layer, head) = (u16::try_from(layer)?, u16::try_from(head)?);
        self.pos = 0;
        self.request(&Request::Ablate { layer, head }, unexpected)
            .map(drop)
    }

    /// Ends every ablation (the KV cache emptied).
    pub fn restore(&mut self) -> Result<()> {
        self.pos = 0;
        self.request(&Request::Restore, unexpected).map(drop)
    }

    /// Consumes `tokens`, returning each position's `k` largest logits `(token, logit)`, largest first.
    pub fn step_top_k(&mut self, tokens: &[u32], k: u8) -> Result<Vec<Vec<(u32, f32)>>> {
        let mut out = Vec::with_capacity(tokens.len());
        for chunk in tokens.chunks(MAX_STEP_TOKENS) {
            let request = Request::Step {
                tokens: heapless::Vec::from_slice(chunk)
                    .map_err(|_| anyhow::anyhow!("too many tokens"))?,
                output: Output::TopK(k),
            };
            let first = self.pos;
            self.request(&request, |r| match r {
                Response::TopK { pos, entries } if pos as usize == first + out.len() => {
                    out.push(entries.to_vec());
                    Ok(())
                }
                r => bail!("unexpected response {r:?}"),
            })?;
            self.pos += chunk.len();
        }
        ensure!(
            out.len() == tokens.len(),
            "{} of {} positions answered",
            out.len(),
            tokens.len()
        );
        Ok(out)
    }

    /// Consumes `tokens`, returning each position's logits.
    pub fn step(&mut self, tokens: &[u32]) -> Result<Vec<Values>> {
        let mut logits: Vec<Values> = Vec::with_capacity(tokens.len());
        for chunk in tokens.chunks(MAX_STEP_TOKENS) {
            let first = self.pos;
            let request = Request::Step {
                tokens: heapless::Vec::from_slice(chunk)
                    .map_err(|_| anyhow::anyhow!("too many tokens"))?,
                output: Output::Logits,
            };
            let mut got = Positions::new(first, first + chunk.len());
            self.request(&request, |r| got.add(r))?;
            self.pos += chunk.len();
            logits.extend(got.finish(&self.port)?);
        }
        Ok(logits)
    }

    /// The device's logits hash since the last reset: `(positions, hash)`.
    pub fn hash(&mut self) -> Result<(u32, u64)> {
        match self.request(&Request::Hash, unexpected)? {
            Response::Hash { positions, hash } => Ok((positions, hash)),
            r => bail!("{}: unexpected answer {r:?}", self.port),
        }
    }

    /// [`Device::hash`] of the positions `logits` holds (every position since the last reset), checked
    /// against the hash of those logits as received: the device's `logits_hash`.
    pub fn checked_hash(&mut self, logits: &[Values]) -> Result<u64> {
        let (positions, hash) = self.hash()?;
        ensure!(
            positions as usize == logits.len(),
            "the device hashed {positions} positions, not {}",
            logits.len()
        );
        ensure!(
            hash == crate::hash::logits_hash(logits.iter().map(Vec::as_slice)),
            "the device's logits hash differs from the hash of the logits it sent"
        );
        Ok(hash)
    }

    /// The activation `name` (TransformerLens name; `head` for per-head points) at positions
    /// `start..end` of the tokens consumed, the output projection head by head if `attn_result` (as
    /// the host's activation cache runs it); `Ok(None)` if the device's model or build has no such
    /// point.
    pub fn read(
        &mut self,
        name: &str,
        head: usize,
        (start, end): (usize, usize),
        attn_result: bool,
    ) -> Result<Option<Vec<Values>>> {
        let request = Request::Read {
            name: heapless::String::<MAX_NAME>::try_from(name)
                .map_err(|_| anyhow::anyhow!("hook name {name:?} is too long"))?,
            head: u16::try_from(head)?,
            start: u32::try_from(start)?,
            end: u32::try_from(end)?,
            attn_result,
        };
        let mut got = Positions::new(start, end);
        self.send(&request)?;
        loop {
            match self.receive()? {
                Response::Error(ErrorKind::HookUnavailable) => return Ok(None),
                Response::Error(kind) => {
                    bail!("{}: the device refused to read {name}: {kind:?}", self.port)
                }
                Response::Done => return got.finish(&self.port).map(Some),
                r => got.add(r)?,
            }
        }
    }

    /// The device's blob, read back and checked against the hash its `Info` gives.
    pub fn blob(&mut self, info: &Info) -> Result<Vec<u8>> {
        let mut blob = Vec::with_capacity(info.blob_len as usize);
        while blob.len() < info.blob_len as usize {
            let offset = u32::try_from(blob.len())?;
            match self.request(&Request::Blob { offset }, unexpected)? {
                Response::Blob {
                    offset: o, bytes, ..
                } if o == offset && !bytes.is_empty() => blob.extend_from_slice(&bytes),
                r => bail!("{}: unexpected answer {r:?}", self.port),
            }
        }
        let mut hash = Fnv1a64::new();
        hash.write(&blob);
        if hash.finish() != info.blob_hash {
            bail!(
                "{}: the blob read back does not match the device's blob hash",
                self.port
            );
        }
        Ok(blob)
    }
}

/// Checks that `n` tokens fit the context of the device `info` describes.
pub fn check_context(info: &Info, n: usize) -> Result<()> {
    ensure!(
        n <= info.context as usize,
        "{n} tokens, but the device's context holds {}",
        info.context
    );
    Ok(())
}

/// A short name of a request, for errors.
fn name(request: &Request) -> &'static str {
    match request {
        Request::Info => "Info",
        Request::Reset => "Reset",
        Request::Step { .. } => "Step",
        Request::Read { .. } => "Read",
        Request::Ablate { .. } => "Ablate",
        Request::Restore => "Restore",
        Request::Hash => "Hash",
        Request::Blob { .. } => "Blob",
    }
}

/// For requests answered by one frame: any other frame is an error.
fn unexpected(r: Response) -> Result<()> {
    bail!("unexpected response {r:?}")
}

/// Values of positions `start..end`, assembled from `Values` chunks.
struct Positions {
    start: usize,
    rows: Vec<Option<(Values, usize)>>,
}

impl Positions {
    fn new(start: usize, end: usize) -> Self {
        Positions {
            start,
            rows: vec![None; end.saturating_sub(start)],
        }
    }

    /// Adds a `Values` chunk (bounds checked: a device never makes the host allocate or index beyond
    /// what it asked for).
    fn add(&mut self, r: Response) -> Result<()> {
        let Response::Values {
            pos,
            offset,
            width,
            values,
        } = r
        else {
            bail!("unexpected response {r:?}");
        };
        let (pos, offset, width) = (pos as usize, offset as usize, width as usize);
        let slot = pos
            .checked_sub(self.start)
            .and_then(|i| self.rows.get_mut(i))
            .with_context(|| format!("values for position {pos}, which was not asked for"))?;
        if width > microlens::config::MAX_DIM || offset + values.len() > width {
            bail!(
                "values {offset}..{} of a width {width}",
                offset + values.len()
            );
        }
        let (row, filled) = slot.get_or_insert_with(|| (vec![0.0; width], 0));
        if row.len() != width {
            bail!("position {pos}: widths {} and {width}", row.len());
        }
        row[offset..offset + values.len()].copy_from_slice(&values);
        *filled += values.len();
        Ok(())
    }

    /// Every position's values, each complete.
    fn finish(self, port: &str) -> Result<Vec<Values>> {
        self.rows
            .into_iter()
            .enumerate()
            .map(|(i, row)| match row {
                Some((row, filled)) if filled == row.len() => Ok(row),
                _ => bail!("{port}: position {} came incomplete", self.start + i),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn values(pos: u32, offset: u32, width: u32, v: &[f32]) -> Response {
        Response::Values {
            pos,
            offset,
            width,
            values: heapless::Vec::from_slice(v).unwrap(),
        }
    }

    #[test]
    fn chunks_outside_the_request_are_refused() {
        let mut p = Positions::new(2, 4);
        assert!(
            p.add(values(1, 0, 1, &[0.0])).is_err(),
            "position before start"
        );
        assert!(p.add(values(4, 0, 1, &[0.0])).is_err(), "position past end");
        assert!(
            p.add(values(2, 2, 3, &[0.0, 1.0])).is_err(),
            "past the width"
        );
        assert!(p.add(values(2, 0, u32::MAX, &[0.0])).is_err(), "huge width");
        assert!(p.add(Response::Done).is_err());
        p.add(values(2, 0, 3, &[1.0, 2.0])).unwrap();
        assert!(p.add(values(2, 0, 4, &[1.0])).is_err(), "another width");
        p.add(values(2, 2, 3, &[3.0])).unwrap();
        p.add(values(3, 0, 1, &[4.0])).unwrap();
        assert_eq!(p.finish("t").unwrap(), [vec![1.0, 2.0, 3.0], vec![4.0]]);
        let mut q = Positions::new(0, 1);
        q.add(values(0, 0, 2, &[1.0])).unwrap();
        assert!(q.finish("t").is_err(), "an incomplete position");
    }

    #[test]
    fn a_silent_device_times_out_with_one_line() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = format!("tcp:{}", listener.local_addr().unwrap());
        let mut device = Device::open(&port, 0, Duration::from_millis(200)).unwrap();
        let _held = listener.accept().unwrap();
        let e = device.info().unwrap_err().to_string();
        assert!(e.contains("no answer from the device within 0.2 s"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn a_vanished_device_is_an_error() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = format!("tcp:{}", listener.local_addr().unwrap());
        let mut device = Device::open(&port, 0, Duration::from_secs(5)).unwrap();
        drop(listener.accept().unwrap());
        let e = device.info().unwrap_err().to_string();
        assert!(
            e.contains("closed the connection") || e.contains("cannot send"),
            "{e}"
        );
    }

    #[test]
    fn garbage_from_the_device_is_an_error_not_a_panic() {
        use std::io::Write;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = format!("tcp:{}", listener.local_addr().unwrap());
        let mut device = Device::open(&port, 0, Duration::from_secs(5)).unwrap();
        let (mut conn, _) = listener.accept().unwrap();
        conn.write_all(&[7, 7, 7, 0]).unwrap();
        let e = device.info().unwrap_err().to_string();
        assert!(e.contains("bad frame"), "{e}");
    }
}

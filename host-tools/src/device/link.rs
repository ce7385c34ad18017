//! The byte stream to a device: a serial port (`/dev/ttyACM0`, the `serialport` crate) or a TCP socket
//! (`tcp:HOST:PORT`, QEMU's UART), each read with a timeout.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// A byte stream both ways.
pub trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// Seconds to keep retrying a TCP connection (QEMU may still be starting).
const CONNECT_RETRY: Duration = Duration::from_secs(5);

/// Opens `port`: `tcp:HOST:PORT`, or a serial device at `baud`; reads time out after `timeout`.
pub fn open(port: &str, baud: u32, timeout: Duration) -> Result<Box<dyn Stream>> {
    if let Some(addr) = port.strip_prefix("tcp:") {
        let addrs: Vec<_> = addr
            .to_socket_addrs()
            .with_context(|| format!("{port}: not a HOST:PORT address"))?
            .collect();
        let start = Instant::now();
        let stream = loop {
            match TcpStream::connect_timeout(&addrs[0], timeout) {
                Ok(s) => break s,
                Err(_) if start.elapsed() < CONNECT_RETRY => {
                    std::thread::sleep(Duration::from_millis(100))
                }
                Err(e) => bail!("cannot connect to {port}: {e}"),
            }
        };
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        return Ok(Box::new(stream));
    }
    let serial = serialport::new(port, baud)
        .timeout(timeout)
        .open()
        .with_context(|| format!("cannot open serial port {port}"))?;
    Ok(Box::new(serial))
}

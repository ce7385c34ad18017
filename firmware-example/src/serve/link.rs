//! Frames over the board's UART: bytes in, framed responses out through one fixed [`FrameWriter`].

use microlens_protocol::{ErrorKind, FrameWriter, Response};
use static_cell::ConstStaticCell;

use crate::board::Uart;

/// The frame being written.
static WRITER: ConstStaticCell<FrameWriter> = ConstStaticCell::new(FrameWriter::new());

/// The UART and the frame writer.
pub struct Link {
    uart: Uart,
    writer: &'static mut FrameWriter,
}

impl Link {
    /// The link over `uart`; `None` if the writer is taken.
    pub fn take(uart: Uart) -> Option<Self> {
        Some(Link {
            uart,
            writer: WRITER.try_take()?,
        })
    }

    /// The next byte received (waits for it).
    pub fn read_byte(&mut self) -> u8 {
        self.uart.read_byte()
    }

    /// Sends `response` as one frame (an `Oversized` error instead if it could not fit, which no
    /// response the firmware builds does).
    pub fn send(&mut self, response: &Response) {
        let frame = match self.writer.frame(response) {
            Ok(frame) => frame,
            Err(_) => match self.writer.frame(&Response::Error(ErrorKind::Oversized)) {
                Ok(frame) => frame,
                Err(_) => return,
            },
        };
        for &b in frame {
            self.uart.write_byte(b);
        }
    }
}

//! The pickle of a `.pth` file (`data.pkl`), straight to the bounded walk and candle's pickle reader:
//! deep nesting, memo copies, truncated or unknown opcodes must be errors, never a crash or a stack
//! overflow.

/// One input of the target.
pub fn run(data: &[u8]) {
    let _ = microlens_host::import::parse_pickle(data);
}

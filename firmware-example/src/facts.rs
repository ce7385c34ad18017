//! A fact model's recall: its fact prompt (`s1 s2 r`) through the session, and the object it predicts.

use microlens::Session;

use crate::error::FirmwareError;
use crate::eval::argmax;
use crate::line;
use crate::model::FACT_PROMPT;

/// Runs [`FACT_PROMPT`] from an empty cache and prints `fact_prompt=` and `recalled=` (the argmax after
/// its last token), which `cargo xtask firmware` checks against the host's `microlens generate`.
#[inline(never)]
pub fn recall(session: &mut Session<'_, '_>) -> Result<(), FirmwareError> {
    session.reset();
    let mut recalled = 0u32;
    for &token in FACT_PROMPT {
        recalled = argmax(session.step(u32::from(token))?);
    }
    line::print_tokens("fact_prompt=", FACT_PROMPT);
    defmt::println!("recalled={=u32}", recalled);
    Ok(())
}

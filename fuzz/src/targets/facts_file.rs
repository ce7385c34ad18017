//! Facts files (`t1,t2,... -> target` per line, `#` comments), as `microlens edit --facts` and
//! `--unrelated` read them: parsed or refused with an error, never a crash.

/// One input of the target.
pub fn run(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(facts) = microlens_host::train::facts::parse_facts(text, "fuzz") {
            assert!(!facts.is_empty(), "an empty list of facts was accepted");
        }
    }
}

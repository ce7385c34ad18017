//! The host's parsers, chosen by the first byte: checkpoints (safetensors, `.pth` zip) into a state dict
//! of a small config, TL / HF config JSON, comma-separated token lists.

use microlens_host::import as checkpoint;

/// One input of the target.
pub fn run(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 3 {
        0 => {
            if let Ok(raw) = checkpoint::parse(rest) {
                let mut cfg = microlens::Config::new(2, 32, 4, 8, 64, 16, None);
                cfg.normalization = microlens::Normalization::LN;
                let _ = checkpoint::state_dict(raw, &cfg);
            }
        }
        1 => {
            if let Ok(json) = serde_json::from_slice::<serde_json::Value>(rest) {
                if let Ok(imported) = microlens_host::import::tl_config::parse(&json) {
                    imported
                        .config
                        .validate()
                        .expect("a parsed config is valid");
                }
            }
        }
        _ => {
            if let Ok(text) = std::str::from_utf8(rest) {
                for line in text.lines() {
                    let _ = microlens_host::io::tokens::parse_tokens(line);
                }
            }
        }
    }
}

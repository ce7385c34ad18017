/// Every model fixture directory under `tests/fixtures/` (see its README; `tokenizer/` holds a
/// tokenizer, not a model), the one list of them: the end-to-end tests and the host crate's tests both
/// `include!` this file.
pub const FIXTURES: [&str; 8] = [
    "attn_only_2l",
    "gpt2_like",
    "shortformer",
    "lnpre_relu_3l",
    "nonorm_1l",
    "rotary_rms",
    "rotary_adjacent_rmspre",
    "hf_gpt2",
];

/// The LLaMA-family fixtures (gated MLP, grouped-query attention; `tests/fixtures/gen_llama.py`):
/// the forward, cache, composition and copying tests run them.
pub const LLAMA_FIXTURES: [&str; 2] = ["llama_tl", "hf_llama"];

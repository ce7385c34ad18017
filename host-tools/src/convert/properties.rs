//! Properties over arbitrary models and tokens (proptest): TransformerLens's weight processing (fold the
//! norms, centre the writing weights and the unembedding, fold the value biases) computes the same
//! function as the unprocessed model, whatever the architecture, the weights and the tokens.

use microlens::Normalization;
use proptest::prelude::*;

use crate::convert::convert_state_dict;
use crate::convert::fold::ProcessingOptions;
use crate::eval::run::{log_softmax, run_blob};
use crate::import::random_model::{config, state_dict, POSITIONALS};
use crate::quantize::encode::F32Encoder;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn processed_equals_unprocessed(
        norm in 0..Normalization::ALL.len(),
        pos in 0..POSITIONALS.len(),
        mlp in any::<bool>(),
        seed in any::<u64>(),
        flags in any::<[bool; 4]>(),
        tokens in prop::collection::vec(0u32..11, 1..=9),
    ) {
        let cfg = config(Normalization::ALL[norm], POSITIONALS[pos], mlp);
        let sd = state_dict(&cfg, seed);
        let opts = ProcessingOptions {
            fold_ln: flags[0],
            center_writing_weights: flags[1],
            center_unembed: flags[2],
            fold_value_biases: flags[3],
        };
        let run = |o: &ProcessingOptions| {
            let c = convert_state_dict(sd.clone(), &cfg, o, &F32Encoder).unwrap();
            run_blob(&c.blob, &tokens).unwrap()
        };
        let (folded, plain) = (run(&opts), run(&ProcessingOptions::none()));
        for (a, b) in folded.logits.iter().zip(&plain.logits) {
            for (x, y) in log_softmax(a).iter().zip(log_softmax(b)) {
                prop_assert!((x - y).abs() < 1e-4, "log-prob {x} vs {y} ({opts:?})");
            }
        }
        let flat = |p: &Vec<Vec<Vec<Vec<f32>>>>| p.iter().flatten().flatten().flatten().copied().collect::<Vec<_>>();
        for (x, y) in flat(&folded.patterns).iter().zip(flat(&plain.patterns)) {
            prop_assert!((x - y).abs() < 1e-5, "pattern {x} vs {y} ({opts:?})");
        }
    }
}

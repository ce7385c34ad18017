//! Every per-head figure of one model that `microlens report` shows, each computed by the function the
//! other commands use: detector scores on the given sequences, OV and full-OV copying scores, Q/K/V
//! composition scores, the attention patterns of the shown sequence and each head's direct logit
//! attribution at its last position.

use anyhow::Result;
use microlens::Model;

use super::circuits::heads;
use super::{
    all_composition_scores, full_ov_copying_score, head_scores, last_position_attribution,
    ov_copying_score, CircuitWeights, CompositionMode, CompositionScores, HeadScores,
};
use crate::eval::run::{run_model, RunOutput};

/// One model's figures.
pub struct HeadFigures {
    /// Logits and attention patterns of the shown sequence.
    pub run: RunOutput,
    /// Previous-token, duplicate-token and induction scores, averaged over the sequences.
    pub scores: HeadScores,
    /// OV copying score (eigenvalues of `W_V W_O`) per head, `[layer * n_heads + head]`.
    pub ov_copying: Vec<f64>,
    /// Full-OV-circuit copying score per head (`None` unless `d_vocab == d_vocab_out`).
    pub full_ov_copying: Vec<Option<f64>>,
    /// Q, K and V composition scores.
    pub composition: [CompositionScores; 3],
    /// Each head's direct contribution to the logit of `dla_token` at the shown sequence's last
    /// position.
    pub dla_last: Vec<f32>,
}

impl HeadFigures {
    /// Measures `model`: detectors on `seqs`, patterns and attribution (to `dla_token`, or to the
    /// model's own top next token when `None`) on `shown`.
    pub fn measure(
        model: &Model<'_>,
        seqs: &[Vec<u32>],
        shown: &[u32],
        dla_token: Option<u32>,
    ) -> Result<Self> {
        let cfg = *model.config();
        let w = CircuitWeights::from_model(model)?;
        let run = run_model(model, shown)?;
        let token = match dla_token {
            Some(t) => t,
            None => top_token(&run),
        };
        let square = cfg.d_vocab == cfg.d_vocab_out;
        Ok(HeadFigures {
            scores: head_scores(model, seqs)?,
            ov_copying: heads(&cfg).map(|h| ov_copying_score(w.head(h))).collect(),
            full_ov_copying: heads(&cfg)
                .map(|h| square.then(|| full_ov_copying_score(&w.w_e, w.head(h), &w.w_u)))
                .collect(),
            composition: CompositionMode::ALL.map(|m| all_composition_scores(&w, m)),
            dla_last: last_position_attribution(model, shown, token)?,
            run,
        })
    }
}

/// The top next token at the last position of `run`.
pub fn top_token(run: &RunOutput) -> u32 {
    run.logits
        .last()
        .map_or(0, |l| crate::eval::metrics::argmax(l) as u32)
}

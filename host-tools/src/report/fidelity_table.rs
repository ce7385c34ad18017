//! `microlens fidelity`'s text output: the compact table of a fidelity [`Report`].

use std::fmt::Write;

use crate::fidelity::Report;

impl Report {
    /// The compact human-readable table.
    pub fn table(&self) -> String {
        let m = &self.model;
        let mut s = String::new();
        let flips = if m.top1_agreement < 1.0 {
            format!(
                " (every flip where the reference's first logit leads by <= {:.2e})",
                m.top1_flip_max_margin
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "{} sequences, {} positions: mean KL {:.3e} nats, max KL {:.3e}, top-1 agreement {:.2}%{flips}, \
             logit RMSE {:.3e}",
            self.sequences,
            m.positions,
            m.mean_kl,
            m.max_kl,
            100.0 * m.top1_agreement,
            m.logit_rmse
        );
        let _ = writeln!(
            s,
            "repeated part ({} positions): loss reference {:.4}, candidate {:.4} nats; top-1 agreement {:.2}%, \
             {:.2}% at the {} whose reference margin exceeds {} times the candidate's margin noise {:.2e}",
            m.repeated_positions,
            m.loss_repeated_ref,
            m.loss_repeated_cand,
            100.0 * m.top1_agreement_repeated,
            100.0 * m.top1_agreement_repeated_decisive,
            m.repeated_decisive_positions,
            crate::fidelity::NEAR_TIE_NOISES,
            m.top1_margin_noise
        );
        let _ = writeln!(
            s,
            "{:<6} {:>9} {:>9} {:>15} {:>15} {:>15} {:>8}",
            "head", "max|dA|", "mean JS", "induction", "prev-token", "copying", "max dC"
        );
        let pair = |a: f64, b: f64| format!("{a:.3}/{b:.3}");
        for h in &self.heads {
            let copying = match (h.copying_score_ref, h.copying_score_cand) {
                (Some(a), Some(b)) => pair(a, b),
                _ => "-".into(),
            };
            let _ = writeln!(
                s,
                "L{}H{:<3} {:>9.2e} {:>9.2e} {:>15} {:>15} {:>15} {:>8.1e}",
                h.layer,
                h.head,
                h.pattern_max_abs_diff,
                h.pattern_mean_js,
                pair(h.induction_score_ref, h.induction_score_cand),
                pair(h.prev_token_score_ref, h.prev_token_score_cand),
                copying,
                h.composition_max_abs_change
            );
        }
        let comp: Vec<String> = self
            .composition
            .iter()
            .map(|c| format!("{} {:.2e}", c.mode, c.max_abs_change))
            .collect();
        let _ = writeln!(s, "composition scores, largest change: {}", comp.join(", "));
        if let Some(h) = &self.most_changed_head {
            let _ = writeln!(
                s,
                "most changed head: L{}H{} (mean JS {:.2e}, max |dA| {:.2e}, induction change {:.2e})",
                h.layer, h.head, h.pattern_mean_js, h.pattern_max_abs_diff, h.induction_score_change
            );
        }
        s
    }
}

//! Rendering: heatmaps shared by the analyses ([`plot`]) and the fidelity plots ([`fidelity_plot`]).

pub mod fidelity_plot;
pub mod plot;

//! Rendering: heatmaps shared by the analyses ([`plot`]), `microlens circuits`'s text, JSON and plots
//! ([`circuits`]), the fidelity plots ([`fidelity_plot`]).

pub mod circuits;
pub mod fidelity_plot;
pub mod patching;
pub mod plot;

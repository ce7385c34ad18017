//! Rendering, one module per output: heatmaps shared by the others ([`plot`]), `microlens circuits`'s
//! text, JSON and plots ([`circuits`]), the fidelity plots and table
//! ([`fidelity_plot`], [`fidelity_table`]), `inspect`'s summary
//! ([`inspect`]), the HTML pages ([`html`]), `patch`'s tables and plot ([`patching`]), `run`'s table ([`run`]), `trace`'s tables and plot ([`tracing`]).

pub mod circuits;
pub mod fidelity_plot;
pub mod fidelity_table;
pub mod html;
pub mod inspect;
pub mod patching;
pub mod plot;
pub mod run;
pub mod tracing;

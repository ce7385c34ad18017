//! [`HostWeights::new`]: the host's blocked copy built from a [`Model`] (a file above the model,
//! which holds the copy as a type defined below it).

use super::weights::HostWeights;
use crate::model::Model;

impl HostWeights {
    /// The blocked copy of every matrix of `model`.
    pub fn new(model: &Model<'_>) -> Self {
        let matrices = model.catalogue_ids().map(|id| model.matrix(id));
        HostWeights::from_matrices(model.data_span(), matrices)
    }
}

//! [`HostWeights::new`]: the host's blocked copy built from a [`Model`] (a file above the model,
//! which holds the copy as a type defined below it).

use crate::model::Model;
use crate::weights::host::HostWeights;

impl HostWeights {
    /// The blocked copy of every matrix of `model`.
    pub fn new(model: &Model<'_>) -> Self {
        let matrices = model.catalogue_ids().map(|id| model.matrix(id));
        HostWeights::from_matrices(model.data_span(), matrices)
    }
}

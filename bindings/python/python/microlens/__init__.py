"""microlens in Python: convert TransformerLens checkpoints to microlens blobs (float or quantised),
run them with `run_with_cache` under TransformerLens's hook names and shapes, and measure them.

The numbers come from the Rust crates (the core's forward pass, the host tools' converter and
analyses); this module only adapts TransformerLens's calling conventions. Reference: docs/python.md.
"""

from ._model import Model, convert, fidelity, from_transformer_lens
from ._cache import ActivationCache

__all__ = ["ActivationCache", "Model", "convert", "fidelity", "from_transformer_lens"]

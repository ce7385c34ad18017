"""microlens in Python: convert TransformerLens checkpoints to microlens blobs (float or quantised),
run them with `run_with_cache` under TransformerLens's hook names and shapes, and measure them;
`Device` gives a board's own activations the same way.

The numbers come from the Rust crates (the core's forward pass, the host tools' converter and
analyses); this module only adapts TransformerLens's calling conventions. Reference: docs/python.md.
"""

from ._model import Model, convert, fidelity, from_transformer_lens
from ._cache import ActivationCache
from ._device import Device

__all__ = ["ActivationCache", "Device", "Model", "convert", "fidelity", "from_transformer_lens"]

"""`microlens.Device`: a board in serve mode (a flashed serve build, or `cargo xtask serve` on QEMU) as
`microlens device` drives it, with `Model`'s `run_with_cache` and `hash` computed on the board."""

import json

import numpy as np

from . import _native
from ._cache import ActivationCache
from ._model import Model, _filtered_names, _tokens


class Device:
    """A device over its serial link: `port` is a serial device (`/dev/ttyACM0`, at `baud`) or QEMU's
    UART socket (`tcp:127.0.0.1:4000`); each answer is awaited at most `timeout` seconds. Its blob is
    read back when connecting (`device.model`, the same model on the host). A port that does not open,
    a timeout or a refusal raises `OSError` with `microlens device`'s one-line message."""

    def __init__(self, port, baud=115200, timeout=10.0):
        self._d = _native.Device(str(port), int(baud), float(timeout))
        self._model = None

    @property
    def model(self):
        """The device's model on the host (a `Model` of the blob it serves), for comparisons."""
        if self._model is None:
            self._model = Model.from_bytes(self._d.blob())
        return self._model

    def info(self):
        """What the device runs: board, firmware, protocol, the model's shape (`n_layers`, `n_heads`,
        `d_model`, `d_head`, `d_vocab`, `d_vocab_out`, `n_ctx`), `context` (positions its KV cache
        holds), `features`, `dtype`, `hooks` (the hook points its build calls), `blob_len`,
        `blob_hash`, `max_frame`."""
        return json.loads(self._d.info_json())

    @property
    def cfg(self):
        """The config of the device's model under TransformerLens's `cfg.to_dict()` names."""
        return json.loads(self._d.cfg_json())

    @property
    def hook_names(self):
        """The hook names of the device's model (`Model.hook_names`; a point the device's build
        leaves out is missing from its caches)."""
        return self.model.hook_names

    def run_with_cache(self, tokens, names_filter=None):
        """`(logits, cache)` as `Model.run_with_cache` gives them (names, aliases, shapes with the
        batch dimension first, `names_filter`), computed on the device: each sequence run from
        position 0, then its activations read back over the link. The logits are the device's forward
        pass (the one `hash` covers), equal to `Model(tokens)`; `Model.run_with_cache` with
        `hook_result` among the names runs the output projection head by head, as TransformerLens's
        `use_attn_result` does, and its logits can differ from these in the last bits."""
        names = _filtered_names(names_filter, self.hook_names)
        logits, arrays = self._d.run_with_cache(_tokens(tokens), names)
        return logits, ActivationCache(arrays, self.cfg["n_layers"])

    def hash(self, tokens):
        """The device's `logits_hash` of `tokens` (16 hex digits; a list for a batch), equal to
        `Model.hash` of the blob it serves."""
        hashes = self._d.hash(_tokens(tokens))
        return hashes[0] if np.asarray(tokens).ndim == 1 else hashes

    def reset(self):
        """Empties the device's KV cache."""
        self._d.reset()

    def close(self):
        """Closes the link; further calls raise `OSError`."""
        self._d.close()

    @property
    def closed(self):
        """Whether the link is closed."""
        return self._d.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        state = "closed" if self.closed else self.info()["board"]
        return f"microlens.Device({self._d.port!r}, {state})"

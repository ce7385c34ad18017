"""`microlens.Model`, `microlens.convert`, `microlens.fidelity` and `microlens.from_transformer_lens`."""

import json
import os
from collections.abc import Mapping

import numpy as np

from . import _native
from ._cache import ActivationCache

_U32_MAX = 2**32 - 1


def _tokens(tokens):
    """`tokens` (a list, or an int array `[pos]` or `[batch, pos]`) as a `uint32 [batch, pos]` array."""
    a = np.asarray(tokens.detach().cpu() if hasattr(tokens, "detach") else tokens)
    if a.size == 0:
        raise ValueError("no tokens given")
    if a.dtype == bool or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"tokens must be integers, not {a.dtype}")
    if a.ndim == 1:
        a = a[None, :]
    elif a.ndim != 2:
        raise ValueError(f"tokens must have shape [pos] or [batch, pos], not {list(a.shape)}")
    bad = np.argwhere((a < 0) | (a > _U32_MAX))
    if len(bad):
        b, p = bad[0]
        raise ValueError(f"token {a[b, p]} at position {p} is out of range")
    return np.ascontiguousarray(a, dtype=np.uint32)


def _filtered_names(names_filter, all_names):
    """The names `names_filter` keeps of `all_names` (`None`: all; a name, a list of names, or a
    callable taking a name); a `ValueError` for a name not in `all_names`."""
    if names_filter is None:
        return None
    if isinstance(names_filter, str):
        names = [names_filter]
    elif callable(names_filter):
        names = [n for n in all_names if names_filter(n)]
    else:
        names = list(names_filter)
    known = set(all_names)
    for n in names:
        if not isinstance(n, str) or n not in known:
            raise ValueError(f"this model has no activation named {n!r}")
    return names


class Model:
    """A converted model (a microlens blob), float or quantised, run by the core's forward pass."""

    def __init__(self, native):
        self._m = native
        self._names = None

    @classmethod
    def load(cls, path):
        """The model in the blob file `path` (`.mlb`)."""
        return cls(_native.Model.load(os.fspath(path)))

    @classmethod
    def from_bytes(cls, data):
        """The model of blob bytes."""
        return cls(_native.Model.from_bytes(bytes(data)))

    def save(self, path):
        """Writes the blob to `path` (atomically)."""
        self._m.save(os.fspath(path))

    def to_bytes(self):
        """The blob bytes."""
        return self._m.to_bytes()

    @property
    def cfg(self):
        """The config under TransformerLens's `cfg.to_dict()` names (after the blob's processing)."""
        return json.loads(self._m.cfg_json())

    @property
    def hook_names(self):
        """Every hook name this model's cache has: TransformerLens 2.x names, then 4.x aliases."""
        if self._names is None:
            self._names = self._m.hook_names()
        return [n for names in self._names for n in names]

    def __call__(self, tokens):
        """Logits `float32 [batch, pos, d_vocab_out]`."""
        return self._m.forward(_tokens(tokens))

    def run_with_cache(self, tokens, names_filter=None):
        """`(logits, cache)`: logits as `model(tokens)`, and a read-only `ActivationCache` of the
        activations `names_filter` keeps (all when `None`; a name, a list of names, or a callable
        taking a name), keyed by TransformerLens hook name with the batch dimension first."""
        names = _filtered_names(names_filter, self.hook_names)
        logits, arrays = self._m.run_with_cache(_tokens(tokens), names)
        return logits, ActivationCache(arrays, self.cfg["n_layers"])

    def hash(self, tokens):
        """The `logits_hash` the firmware and `microlens run --hash` print (16 hex digits); a list of
        them for a batch."""
        t = _tokens(tokens)
        hashes = self._m.hash(t)
        return hashes[0] if np.asarray(tokens).ndim == 1 else hashes

    def circuits(self, sequences=8, half=None, seed=0, top=5, tokens=None):
        """`microlens circuits --json` as a dict: on repeated random sequences, or on `tokens` (one
        sequence, repeated)."""
        given = None if tokens is None else [int(t) for t in _tokens(tokens)[0]]
        return json.loads(self._m.circuits_json(sequences, half, seed, top, given))

    def __repr__(self):
        c = self.cfg
        return (f"microlens.Model(n_layers={c['n_layers']}, d_model={c['d_model']}, "
                f"n_heads={c['n_heads']}, d_vocab={c['d_vocab']}, {len(self.to_bytes())} bytes)")


def _array(value):
    """A tensor (numpy, or torch without importing it) as a contiguous `float32` array."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().float().numpy()
    return np.ascontiguousarray(np.asarray(value, dtype=np.float32))


def convert(checkpoint, config=None, dtype="f32", activations=None, kv=None, fold_ln=True,
            center_writing_weights=True, center_unembed=True, fold_value_biases=True):
    """A `Model` of a checkpoint, as `microlens convert` makes it. `checkpoint`: a path (safetensors,
    `.pth`, HF GPT-2) or a dict of arrays under TransformerLens (or HF GPT-2) state-dict names;
    `config`: a path or a dict of TransformerLens (or HF GPT-2) config keys (default: config.json
    beside a checkpoint file)."""
    kwargs = dict(dtype=dtype, activations=activations, kv=kv, fold_ln=fold_ln,
                  center_writing_weights=center_writing_weights, center_unembed=center_unembed,
                  fold_value_biases=fold_value_biases)
    if isinstance(config, Mapping):
        kwargs["config_json"] = json.dumps(dict(config), default=str)
    elif config is not None:
        kwargs["config_file"] = os.fspath(config)
    if isinstance(checkpoint, Mapping):
        kwargs["tensors"] = [(str(k), _array(v)) for k, v in checkpoint.items()]
    else:
        kwargs["checkpoint"] = os.fspath(checkpoint)
    return Model(_native.convert(**kwargs))


def _model_and_label(m):
    if isinstance(m, Model):
        return m, "<memory>"
    return Model.load(m), os.fspath(m)


def fidelity(reference, candidate, sequences=200, seq_len=None, seed=0):
    """`microlens fidelity --json` as a dict: how closely `candidate` follows `reference` (Models or
    blob paths) on random induction sequences, whole model and head by head."""
    (r, rl), (c, cl) = _model_and_label(reference), _model_and_label(candidate)
    return json.loads(_native.fidelity(r._m, c._m, sequences, seq_len, seed, (rl, cl)))


def _bridge_state_dict(bridge):
    """A TransformerLens 2.x state dict of a 4.x `TransformerBridge`: its TransformerLens-layout
    weights (`W_Q` `[layer, head, d_model, d_head]`, ...) and its norms' weights."""
    cfg, sd = bridge.cfg, bridge.state_dict()
    out = {"embed.W_E": bridge.W_E, "unembed.W_U": bridge.W_U, "unembed.b_U": bridge.b_U}
    if cfg.positional_embedding_type in ("standard", "shortformer"):
        out["pos_embed.W_pos"] = bridge.W_pos
    attn = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")
    mlp = () if cfg.attn_only else ("W_in", "b_in", "W_out", "b_out")
    for layer in range(cfg.n_layers):
        for p in attn:
            out[f"blocks.{layer}.attn.{p}"] = getattr(bridge, p)[layer]
        for p in mlp:
            out[f"blocks.{layer}.mlp.{p}"] = getattr(bridge, p)[layer]
    norms = [f"blocks.{layer}.{ln}" for layer in range(cfg.n_layers) for ln in ("ln1", "ln2")]
    for norm in norms + ["ln_final"]:
        for theirs, ours in (("weight", "w"), ("bias", "b")):
            if f"{norm}.{theirs}" in sd:
                out[f"{norm}.{ours}"] = sd[f"{norm}.{theirs}"]
    return out


def from_transformer_lens(model, dtype="f32", **convert_options):
    """A `Model` of a live TransformerLens model: a 4.x `TransformerBridge` (its TransformerLens-layout
    weights and config; with compatibility mode's processing or without) or a 2.x/3.x
    `HookedTransformer` (its state dict and config). torch is not imported here."""
    if hasattr(model, "original_model") and hasattr(model, "cfg"):
        weights, config = _bridge_state_dict(model), model.cfg.to_dict()
    elif hasattr(model, "cfg") and hasattr(model.cfg, "to_dict"):
        weights, config = dict(model.state_dict()), model.cfg.to_dict()
    else:
        raise ValueError("not a TransformerLens model (a TransformerBridge or a HookedTransformer)")
    return convert(weights, config, dtype=dtype, **convert_options)

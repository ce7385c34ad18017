"""The read-only activation cache `Model.run_with_cache` returns."""

from collections.abc import Mapping

from . import _native


class ActivationCache(Mapping):
    """Activations keyed by TransformerLens hook name, each `[batch, ...]` as TransformerLens shapes it.

    `cache["pattern", 0]` is TransformerLens's shorthand for `cache["blocks.0.attn.hook_pattern"]`
    (`cache["embed"]`, `cache["resid_post", 1]`, `cache["scale", 0, "ln1"]` alike). A 4.x canonical
    name (`blocks.0.attn.q.hook_out`, `ln_final.hook_in`) finds the activation its 2.x name holds.
    """

    def __init__(self, arrays, n_layers):
        self._arrays = dict(arrays)
        self._n_layers = n_layers
        for a in self._arrays.values():
            a.flags.writeable = False

    def _key(self, key):
        if isinstance(key, tuple):
            key = _act_name(*key)
        if key in self._arrays:
            return key
        if isinstance(key, str) and "." not in key and not key.startswith("hook_"):
            key = _act_name(key)
            if key in self._arrays:
                return key
        canonical = _native.canonical_name(key, self._n_layers) if isinstance(key, str) else None
        if canonical in self._arrays:
            return canonical
        for name in self._arrays:
            if canonical is not None and _native.canonical_name(name, self._n_layers) == canonical:
                return name
        raise KeyError(key)

    def __getitem__(self, key):
        return self._arrays[self._key(key)]

    def __contains__(self, key):
        try:
            self._key(key)
            return True
        except KeyError:
            return False

    def __iter__(self):
        return iter(self._arrays)

    def __len__(self):
        return len(self._arrays)

    def __repr__(self):
        return f"ActivationCache({len(self)} activations: {', '.join(list(self)[:4])}, ...)"


# TransformerLens's `utils.get_act_name` abbreviations.
_SHORT = {
    "a": "pattern", "attn": "pattern", "attn_logits": "attn_scores", "k": "k", "q": "q",
    "v": "v", "z": "z", "result": "result", "rot_q": "rot_q", "rot_k": "rot_k",
    "pre": "pre", "post": "post", "mlp_pre": "pre", "mlp_post": "post",
    "resid_pre": "resid_pre", "resid_mid": "resid_mid", "resid_post": "resid_post",
    "attn_out": "attn_out", "mlp_out": "mlp_out", "embed": "embed", "pos_embed": "pos_embed",
    "scale": "scale", "normalized": "normalized",
}
_ATTN = {"q", "k", "v", "z", "pattern", "attn_scores", "result", "rot_q", "rot_k"}
_MLP = {"pre", "post"}


def _act_name(name, layer=None, layer_type=None):
    """The full hook name of TransformerLens's shorthand, as `utils.get_act_name` builds it."""
    if not isinstance(name, str) or (layer is not None and not isinstance(layer, int)):
        raise KeyError((name, layer, layer_type))
    if "." in name or name.startswith("hook_") or name == "logits":
        return name
    short = _SHORT.get(name, name)
    if layer is None:
        if short in ("embed", "pos_embed"):
            return f"hook_{short}"
        if short in ("scale", "normalized"):
            return f"ln_final.hook_{short}"
        return short
    if short in _ATTN:
        return f"blocks.{layer}.attn.hook_{short}"
    if short in _MLP:
        return f"blocks.{layer}.mlp.hook_{short}"
    if short in ("scale", "normalized"):
        ln = layer_type or "ln1"
        return f"blocks.{layer}.{ln}.hook_{short}"
    return f"blocks.{layer}.hook_{short}"

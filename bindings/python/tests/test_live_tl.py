"""Against a live TransformerLens model, when transformer-lens is importable (never in CI): a 4.x
TransformerBridge booted from a TransformerLens 4.x fixture's HF checkpoint, in compatibility mode,
or a 2.x/3.x HookedTransformer, converted by `microlens.from_transformer_lens`."""

import importlib
import json

import numpy as np
import pytest

import microlens
from conftest import FIXTURES, assert_close

tl = pytest.importorskip("transformer_lens")
torch = pytest.importorskip("torch")


def has(name):
    """Whether this transformer-lens has the module `name` (4.x removed `HookedTransformer`)."""
    try:
        importlib.import_module(f"transformer_lens.{name}")
        return True
    except ImportError:
        return False


def compare(model, logits, cache, tokens):
    ours_logits, ours = model.run_with_cache(tokens)
    assert_close(ours_logits, logits.detach().numpy(), "logits")
    compared = 0
    for name, theirs in cache.items():
        if theirs.is_floating_point() and name in ours:
            assert_close(ours[name], theirs.detach().numpy(), name)
            compared += 1
    return compared


@pytest.mark.skipif(not has("model_bridge"), reason="transformer-lens < 4")
@pytest.mark.parametrize("processed", [False, True], ids=["raw", "compatibility"])
def test_a_bridge(processed):
    from transformer_lens.model_bridge import TransformerBridge

    path = FIXTURES / "tl4_gpt2"
    tokens = json.loads((path / "expected.json").read_text())["tokens"]
    bridge = TransformerBridge.boot_transformers(str(path), device="cpu")
    if processed:
        bridge.enable_compatibility_mode()
    else:
        bridge.enable_compatibility_mode(no_processing=True)
    with torch.no_grad():
        logits, cache = bridge.run_with_cache(torch.tensor([tokens]))
    # The raw bridge's numerics are HF's: convert without processing (centring shifts logits).
    flags = ("fold_ln", "center_writing_weights", "center_unembed", "fold_value_biases")
    model = microlens.from_transformer_lens(bridge, **{f: processed for f in flags})
    if not processed:  # 4.x's unprocessed hook_normalized is before the norm's weights
        cache = {k: v for k, v in cache.items() if not k.endswith("hook_normalized")}
    assert compare(model, logits, cache, tokens) > 70
    i8 = microlens.from_transformer_lens(bridge, dtype="i8")
    assert microlens.fidelity(model, i8, sequences=4)["top1_agreement"] > 0.5


@pytest.mark.skipif(not has("HookedTransformer"), reason="transformer-lens >= 4")
def test_a_hooked_transformer():
    cfg = tl.HookedTransformerConfig(n_layers=2, d_model=32, d_head=8, n_heads=4, d_mlp=64, n_ctx=16,
                                     d_vocab=50, act_fn="gelu_new", normalization_type="LN")
    torch.manual_seed(0)
    model = tl.HookedTransformer(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
        tokens = [1, 7, 3, 9, 22, 7, 3, 9]
        logits, cache = model.run_with_cache(torch.tensor([tokens]))
    assert compare(microlens.from_transformer_lens(model, fold_ln=False, center_writing_weights=False,
                                                   center_unembed=False, fold_value_biases=False),
                   logits, cache, tokens) > 30

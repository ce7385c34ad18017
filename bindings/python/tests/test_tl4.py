"""The package against TransformerLens 4.x (tests/fixtures/tl4_*, by gen_tl4.py): a TransformerBridge's
whole cache, under its 2.x names and its 4.x canonical names, with compatibility mode's processing
and without it."""

import json

import numpy as np
import pytest

import microlens
from microlens import _native
from conftest import FIXTURES, assert_close, read_safetensors

TL4 = sorted(p.name for p in FIXTURES.glob("tl4_*") if (p / "expected.json").exists())


def test_there_are_fixtures():
    assert len(TL4) >= 2


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


@pytest.mark.parametrize("processed", [False, True], ids=["unprocessed", "processed"])
@pytest.mark.parametrize("name", TL4)
def test_cache_equals_the_bridge(name, processed):
    expected = json.loads((FIXTURES / name / "expected.json").read_text())
    flags = ("fold_ln", "center_writing_weights", "center_unembed", "fold_value_biases")
    model = microlens.convert(FIXTURES / name / "model.safetensors", **{f: processed for f in flags})
    logits, cache = model.run_with_cache(expected["tokens"])
    key = "processed" if processed else "unprocessed"
    assert_close(log_softmax(logits[0]), expected[f"log_probs_{key}"], f"{name} log_probs")
    golden = read_safetensors(FIXTURES / name / f"cache_{key}.safetensors".replace("_unprocessed", ""))
    compared = 0
    for k, theirs in golden.items():
        ours = cache[k][0]
        if not processed and k.endswith("hook_normalized"):
            # 4.x without processing normalises before the weights (2.x, and 4.x's `hook_out`: after):
            # its hook_normalized is (x - mean x) / scale of the norm's input x.
            x = {"ln1": "hook_resid_pre", "ln2": "hook_resid_mid"}
            layer, ln = (k.split(".")[1], k.split(".")[2]) if k.startswith("blocks.") else (None, None)
            resid = (cache[f"blocks.{layer}.{x[ln]}"] if layer is not None else
                     cache[f"blocks.{model.cfg['n_layers'] - 1}.hook_resid_post"])[0]
            scale = cache[k.replace("hook_normalized", "hook_scale")][0]
            ours = (resid - resid.mean(axis=-1, keepdims=True)) / scale
        assert_close(ours, theirs, f"{name} {key} {k}")
        compared += 1
    assert compared == len(golden)


@pytest.mark.parametrize("name", TL4)
def test_the_alias_table_is_the_bridges(name):
    aliases = json.loads((FIXTURES / name / "expected.json").read_text())["aliases_processed"]
    n_layers = json.loads((FIXTURES / name / "config.json").read_text())["n_layer"]
    assert "ln_final.hook_in" in aliases
    for tl4, same_tensor in aliases.items():
        canonical = _native.canonical_name(tl4, n_layers)
        if canonical == "logits":  # not a TransformerLens 2.x hook, so not in the bridge's cache
            assert same_tensor == []
        else:
            assert canonical in same_tensor, (tl4, canonical, same_tensor)

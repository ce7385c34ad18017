"""The package against TransformerLens's golden fixtures and against the `microlens` command: every
fixture, processed and unprocessed."""

import json

import numpy as np
import pytest

import microlens
from conftest import (FIXTURES, NAMES, WITH_CACHE, assert_close, cli, expected, processing,
                      read_safetensors)


def converted(name, processed):
    return microlens.convert(FIXTURES / name / "model.safetensors", **processing(name, processed))


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


@pytest.mark.parametrize("processed", [False, True], ids=["unprocessed", "processed"])
@pytest.mark.parametrize("name", WITH_CACHE)
def test_cache_equals_transformer_lens(name, processed):
    golden = read_safetensors(FIXTURES / name / ("cache_processed.safetensors" if processed
                                                 else "cache.safetensors"))
    tokens = expected(name)["cases"][0]["tokens"]
    logits, cache = converted(name, processed).run_with_cache(tokens)
    # Every name TransformerLens has, plus `logits` (not a TransformerLens 2.x hook).
    assert set(cache) == set(golden) | {"logits"}
    for key, theirs in golden.items():
        assert cache[key].shape == (1, *theirs.shape), key
        assert cache[key].dtype == np.float32
        assert_close(cache[key][0], theirs, f"{name} {key}")
    np.testing.assert_array_equal(cache["logits"], logits)


@pytest.mark.parametrize("processed", [False, True], ids=["unprocessed", "processed"])
@pytest.mark.parametrize("name", NAMES)
def test_log_probs_and_patterns_equal_transformer_lens(name, processed):
    model = converted(name, processed)
    cases = expected(name)["processed_cases" if processed else "cases"]
    for case in cases:
        logits, cache = model.run_with_cache(case["tokens"], names_filter=lambda n: "pattern" in n)
        assert logits.shape == (1, len(case["tokens"]), model.cfg["d_vocab_out"])
        assert_close(log_softmax(logits[0]), case["log_probs"], f"{name} log_probs")
        patterns = np.stack([cache["pattern", layer][0] for layer in range(model.cfg["n_layers"])])
        assert_close(patterns, case["patterns"], f"{name} patterns")


@pytest.mark.parametrize("name", NAMES)
def test_logits_and_hash_equal_the_command(name, tmp_path):
    model = converted(name, True)
    blob = tmp_path / "model.mlb"
    model.save(blob)
    for case in expected(name)["cases"]:
        tokens = case["tokens"]
        arg = ",".join(map(str, tokens))
        out = json.loads(cli("run", blob, "--tokens", arg, "--json", "--hash"))
        ours = model(tokens)
        # The command prints each f32 in its shortest exact form: equal bits.
        np.testing.assert_array_equal(ours[0], np.asarray(out["logits"], dtype=np.float32))
        assert model.hash(tokens) == out["logits_hash"]
        assert cli("run", blob, "--tokens", arg, "--hash").strip() == f"logits_hash={out['logits_hash']}"


def test_a_batch_is_its_rows():
    model = converted("gpt2_like", True)
    rows = [c["tokens"][:5] for c in expected("gpt2_like")["cases"]]
    batch = np.array(rows, dtype=np.int64)
    logits, cache = model.run_with_cache(batch)
    assert logits.shape == (3, 5, model.cfg["d_vocab_out"])
    assert cache["blocks.0.attn.hook_pattern"].shape == (3, 4, 5, 5)
    assert cache["blocks.1.attn.hook_q"].shape == (3, 5, 4, 8)
    assert cache["blocks.0.ln1.hook_scale"].shape == (3, 5, 1)
    for i, row in enumerate(rows):
        alone, one = model.run_with_cache(row)
        np.testing.assert_array_equal(logits[i], alone[0])
        np.testing.assert_array_equal(cache["pattern", 1][i], one["pattern", 1][0])
    assert model.hash(batch) == [model.hash(r) for r in rows]

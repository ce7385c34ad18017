"""The package's API: names filters, TransformerLens 4.x names, the cache mapping, saving and loading,
converting a dict, the config, fidelity and circuits as the command reports them."""

import json
import threading

import numpy as np
import pytest

import microlens
from conftest import FIXTURES, assert_close, cli, read_safetensors


@pytest.fixture(scope="module")
def model():
    return microlens.convert(FIXTURES / "gpt2_like" / "model.safetensors")


TOKENS = [3, 1, 4, 1, 5, 9, 2]


def test_names_filter_keeps_only_what_it_names(model):
    _, by_str = model.run_with_cache(TOKENS, names_filter="blocks.1.attn.hook_z")
    assert list(by_str) == ["blocks.1.attn.hook_z"]
    _, by_list = model.run_with_cache(TOKENS, names_filter=["hook_embed", "blocks.0.hook_resid_post"])
    assert sorted(by_list) == ["blocks.0.hook_resid_post", "hook_embed"]
    _, by_callable = model.run_with_cache(TOKENS, names_filter=lambda n: n.endswith("hook_pattern"))
    assert sorted(by_callable) == ["blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"]
    # Caching `hook_result` sums the heads' outputs one by one (TransformerLens's use_attn_result):
    # later activations agree within rounding, earlier ones exactly.
    _, everything = model.run_with_cache(TOKENS)
    assert_close(by_str["blocks.1.attn.hook_z"], everything["blocks.1.attn.hook_z"], "hook_z")
    np.testing.assert_array_equal(by_list["hook_embed"], everything["hook_embed"])
    _, no_result = model.run_with_cache(TOKENS, names_filter=lambda n: "result" not in n)
    np.testing.assert_array_equal(by_str["blocks.1.attn.hook_z"], no_result["blocks.1.attn.hook_z"])


def test_transformer_lens_4_names_are_aliases(model):
    _, everything = model.run_with_cache(TOKENS)
    pairs = {
        "blocks.0.attn.q.hook_out": "blocks.0.attn.hook_q",
        "blocks.1.attn.o.hook_in": "blocks.1.attn.hook_z",
        "blocks.0.hook_in": "blocks.0.hook_resid_pre",
        "blocks.1.hook_out": "blocks.1.hook_resid_post",
        "blocks.0.mlp.in.hook_out": "blocks.0.mlp.hook_pre",
        "blocks.0.ln1.hook_out": "blocks.0.ln1.hook_normalized",
        "embed.hook_out": "hook_embed",
        "pos_embed.hook_out": "hook_pos_embed",
        "ln_final.hook_out": "ln_final.hook_normalized",
        "unembed.hook_out": "logits",
        "hook_unembed": "logits",
    }
    for tl4, tl2 in pairs.items():
        assert tl4 in model.hook_names
        np.testing.assert_array_equal(everything[tl4], everything[tl2])
    _, asked = model.run_with_cache(TOKENS, names_filter=["blocks.0.attn.q.hook_out"])
    assert list(asked) == ["blocks.0.attn.q.hook_out"]
    # Found under either name.
    np.testing.assert_array_equal(asked["blocks.0.attn.hook_q"], everything["blocks.0.attn.hook_q"])
    _, both = model.run_with_cache(TOKENS, names_filter=lambda n: "attn.q" in n or "hook_q" in n)
    assert sorted(both) == sorted(["blocks.0.attn.hook_q", "blocks.0.attn.q.hook_out",
                                   "blocks.1.attn.hook_q", "blocks.1.attn.q.hook_out",
                                   "blocks.0.attn.q.hook_in", "blocks.1.attn.q.hook_in"])


def test_shorthand_and_read_only(model):
    _, cache = model.run_with_cache(TOKENS)
    assert cache["pattern", 0] is cache["blocks.0.attn.hook_pattern"]
    assert cache["resid_post", 1] is cache["blocks.1.hook_resid_post"]
    assert cache["scale", 0, "ln2"] is cache["blocks.0.ln2.hook_scale"]
    assert cache["embed"] is cache["hook_embed"]
    assert cache["q", 1].shape == (1, 7, 4, 8)
    with pytest.raises(ValueError):
        cache["pattern", 0][0, 0, 0, 0] = 1.0
    with pytest.raises(TypeError):
        cache["x"] = 1
    with pytest.raises(KeyError):
        cache["blocks.9.attn.hook_pattern"]


def test_command_cache_names_take_4x_aliases(model, tmp_path):
    blob, out = tmp_path / "m.mlb", tmp_path / "cache.safetensors"
    model.save(blob)
    cli("run", blob, "--tokens", "3,1,4", "--cache", out, "--names", r"attn\.q\.hook_out$|hook_k$")
    written = read_safetensors(out)
    assert sorted(written) == ["blocks.0.attn.hook_k", "blocks.0.attn.q.hook_out",
                               "blocks.1.attn.hook_k", "blocks.1.attn.q.hook_out"]
    _, cache = model.run_with_cache([3, 1, 4])
    np.testing.assert_array_equal(written["blocks.1.attn.q.hook_out"], cache["blocks.1.attn.hook_q"][0])


def test_save_load_bytes_round_trip(model, tmp_path):
    path = tmp_path / "m.mlb"
    model.save(path)
    assert path.read_bytes() == model.to_bytes()
    for again in (microlens.Model.load(path), microlens.Model.load(str(path)),
                  microlens.Model.from_bytes(model.to_bytes())):
        np.testing.assert_array_equal(again(TOKENS), model(TOKENS))
        assert again.hash(TOKENS) == model.hash(TOKENS)


def test_cfg_has_transformer_lens_names(model):
    cfg = model.cfg
    assert (cfg["n_layers"], cfg["d_model"], cfg["n_heads"], cfg["d_head"], cfg["d_mlp"]) == (2, 32, 4, 8, 64)
    assert cfg["d_vocab"] == 50 and cfg["n_ctx"] == 16 and cfg["act_fn"] == "gelu_new"
    assert cfg["normalization_type"] == "LNPre"  # folded, as TransformerLens's processed model


def test_convert_a_dict_as_a_file():
    path = FIXTURES / "gpt2_like" / "model.safetensors"
    config = json.loads((FIXTURES / "gpt2_like" / "config.json").read_text())
    from_dict = microlens.convert(read_safetensors(path), config)
    assert from_dict.to_bytes() == microlens.convert(path).to_bytes()
    hf = FIXTURES / "hf_gpt2"
    from_hf_dict = microlens.convert(read_safetensors(hf / "model.safetensors"), hf / "config.json")
    assert from_hf_dict.to_bytes() == microlens.convert(hf / "model.safetensors").to_bytes()


def test_quantised_models_convert_as_the_command(tmp_path, shipped):
    out = tmp_path / "i8.mlb"
    cli("convert", shipped, "--dtype", "i8", "-o", out)
    i8 = microlens.convert(shipped, dtype="i8")
    assert i8.to_bytes() == out.read_bytes()
    w8a16 = microlens.convert(shipped, dtype="i8", activations="i16", kv="i16")
    cli("convert", shipped, "--dtype", "i8", "--activations", "i16", "--kv", "i16", "-o", out)
    assert w8a16.to_bytes() == out.read_bytes()
    integer = microlens.convert(shipped, dtype="i8", activations="integer")
    cli("convert", shipped, "--dtype", "i8", "--arith", "integer", "-o", out)
    assert integer.to_bytes() == out.read_bytes()
    tokens = [5, 9, 2, 7, 5, 9, 2, 7]
    logits, cache = integer.run_with_cache(tokens, names_filter="blocks.1.attn.hook_pattern")
    assert logits.shape == (1, 8, 64)
    np.testing.assert_allclose(cache["pattern", 1].sum(-1), 1.0, atol=1e-3)
    hashed = cli("run", out, "--tokens", ",".join(map(str, tokens)), "--hash").strip()
    assert hashed == f"logits_hash={integer.hash(tokens)}"


def test_fidelity_and_circuits_are_the_commands(tmp_path, shipped):
    f32, i8 = microlens.convert(shipped), microlens.convert(shipped, dtype="i8")
    ref, cand = tmp_path / "f32.mlb", tmp_path / "i8.mlb"
    f32.save(ref)
    i8.save(cand)
    ours = microlens.fidelity(ref, cand, sequences=6, seed=3)
    theirs = json.loads(cli("fidelity", ref, cand, "--sequences", 6, "--seed", 3, "--json"))
    assert ours == theirs
    in_memory = microlens.fidelity(f32, i8, sequences=6, seed=3)
    assert in_memory["reference"]["path"] == in_memory["candidate"]["path"] == "<memory>"
    for side in ("reference", "candidate"):
        in_memory[side]["path"] = theirs[side]["path"]
    assert in_memory == theirs
    circuits = f32.circuits(sequences=3, seed=1)
    assert circuits == json.loads(cli("circuits", ref, "--sequences", 3, "--seed", 1, "--json"))


def test_forward_passes_release_the_gil(shipped):
    model = microlens.convert(shipped)
    tokens = np.random.default_rng(0).integers(0, model.cfg["d_vocab"], size=(16, model.cfg["n_ctx"]))
    results = [None] * 4

    def work(i):
        results[i] = model(tokens)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        np.testing.assert_array_equal(r, results[0])

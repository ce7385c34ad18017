"""Bad inputs raise ValueError or OSError with the command's one-line message."""

import json

import numpy as np
import pytest

import microlens
from conftest import FIXTURES, cli_error


@pytest.fixture(scope="module")
def model():
    return microlens.convert(FIXTURES / "attn_only_2l" / "model.safetensors")


def test_a_wrong_path_is_an_os_error(tmp_path):
    missing = tmp_path / "missing.mlb"
    with pytest.raises(OSError) as e:
        microlens.Model.load(missing)
    assert str(e.value) == cli_error("run", missing, "--tokens", "1")
    with pytest.raises(OSError):
        microlens.convert(tmp_path / "missing.safetensors", FIXTURES / "gpt2_like" / "config.json")


def test_a_file_that_is_not_a_blob_is_a_value_error(tmp_path):
    bad = tmp_path / "bad.mlb"
    bad.write_bytes(b"not a blob at all, just some bytes")
    with pytest.raises(ValueError) as e:
        microlens.Model.load(bad)
    assert str(e.value) == cli_error("run", bad, "--tokens", "1")
    with pytest.raises(ValueError):
        microlens.Model.from_bytes(b"\x00" * 100)


def test_a_token_out_of_range(model, tmp_path):
    blob = tmp_path / "m.mlb"
    model.save(blob)
    with pytest.raises(ValueError) as e:
        model([1, 2, 64])
    assert str(e.value) == cli_error("run", blob, "--tokens", "1,2,64")
    assert "token 64 at position 2 is out of range (d_vocab = 64)" in str(e.value)
    with pytest.raises(ValueError):
        model.run_with_cache([[1, 2], [3, 70]])
    with pytest.raises(ValueError):
        model([-1, 2])
    with pytest.raises(ValueError):
        model.hash(list(range(17)))  # longer than n_ctx = 16


def test_tokens_of_the_wrong_type_or_shape(model):
    with pytest.raises(ValueError, match="integers"):
        model(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="shape"):
        model(np.zeros((1, 2, 3), dtype=np.int64))
    with pytest.raises(ValueError, match="no tokens"):
        model([])
    with pytest.raises(ValueError):
        model(["a", "b"])


def test_a_config_missing_a_key(tmp_path):
    config = json.loads((FIXTURES / "gpt2_like" / "config.json").read_text())
    del config["d_head"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError) as e:
        microlens.convert(FIXTURES / "gpt2_like" / "model.safetensors", config)
    assert "d_head" in str(e.value)
    out = tmp_path / "m.mlb"
    from_file = cli_error("convert", FIXTURES / "gpt2_like" / "model.safetensors", "--config",
                          tmp_path / "config.json", "-o", out)
    with pytest.raises(ValueError) as e2:
        microlens.convert(FIXTURES / "gpt2_like" / "model.safetensors", tmp_path / "config.json")
    assert str(e2.value) == from_file


def test_bad_options_and_names(model):
    with pytest.raises(ValueError, match="dtype"):
        microlens.convert(FIXTURES / "gpt2_like" / "model.safetensors", dtype="i7")
    with pytest.raises(ValueError, match="--kv needs --activations i16"):
        microlens.convert(FIXTURES / "gpt2_like" / "model.safetensors", dtype="i8", kv="i16")
    with pytest.raises(ValueError, match="no activation named"):
        model.run_with_cache([1, 2], names_filter=["blocks.0.hook_resid_mid"])  # attention-only
    with pytest.raises(ValueError, match="config"):
        microlens.convert({"embed.W_E": np.zeros((4, 4), np.float32)})

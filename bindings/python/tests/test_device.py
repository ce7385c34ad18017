"""`microlens.Device` against the host's `Model` on the blob the device serves: hashes, every cached
activation bit for bit, attention patterns head by head, names filters. Needs a device in serve mode:
`MICROLENS_DEVICE` (its port, e.g. `tcp:127.0.0.1:4000`) and `MICROLENS_DEVICE_BLOB` (the blob it
serves); `cargo xtask test` runs it against the serve firmware on QEMU (xtask/src/served.rs)."""

import os

import numpy as np
import pytest

import microlens
from conftest import cli_error

PORT = os.environ.get("MICROLENS_DEVICE")
BLOB = os.environ.get("MICROLENS_DEVICE_BLOB")
needs_device = pytest.mark.skipif(
    not (PORT and BLOB), reason="no device (set MICROLENS_DEVICE and MICROLENS_DEVICE_BLOB)")

# A prefix, then a segment repeated (an induction prompt), all below 64.
PROMPT = [5, 17, 3, 42, 8, 23, 61, 11, 30, 2, 5, 17, 3, 42, 8, 23]


@pytest.fixture(scope="module")
def host():
    return microlens.Model.load(BLOB)


@pytest.fixture(scope="module")
def device():
    """One connection for the module (the device serves one at a time); the last test closes it."""
    with microlens.Device(PORT) as d:
        yield d


@pytest.fixture(scope="module")
def tokens(device):
    return PROMPT[:device.info()["context"]]


def same_bits(a, b):
    a, b = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_a_port_that_does_not_open_is_an_os_error(tmp_path):
    bad = str(tmp_path / "no-such-port")
    with pytest.raises(OSError) as e:
        microlens.Device(bad, timeout=1)
    assert str(e.value) == cli_error("device", "info", "--port", bad, "--timeout", "1")
    with pytest.raises(ValueError):
        microlens.Device(bad, timeout=0)


@needs_device
def test_info_and_model_are_the_blob_served(device, host):
    info = device.info()
    assert device.model.to_bytes() == host.to_bytes()
    assert device.cfg == host.cfg
    assert info["blob_len"] == len(host.to_bytes())
    assert (info["n_layers"], info["n_heads"]) == (host.cfg["n_layers"], host.cfg["n_heads"])
    assert 1 <= info["context"] <= info["n_ctx"]
    assert "hook_pattern" in " ".join(info["hooks"])
    assert not device.closed


@needs_device
def test_the_device_hash_is_the_hosts(device, host, tokens):
    assert device.hash(tokens) == host.hash(tokens)
    batch = [tokens, tokens[::-1]]
    assert device.hash(batch) == host.hash(batch)
    device.reset()
    assert device.hash(tokens[:3]) == host.hash(tokens[:3])


@needs_device
def test_every_activation_is_the_hosts_bit_for_bit(device, host, tokens):
    logits, cache = device.run_with_cache(tokens)
    _, host_cache = host.run_with_cache(tokens)
    # The logits are the device's forward pass (the one its logits_hash covers). The host's cache of
    # every name includes `hook_result`, for which it runs the output projection head by head (as
    # TransformerLens's `use_attn_result`), whose sums round differently: its logits are not these.
    assert same_bits(logits, host(tokens))
    assert sorted(cache) == sorted(host_cache)
    for name in host_cache:
        assert cache[name].shape == host_cache[name].shape, name
        assert same_bits(cache[name], host_cache[name]), name
    cfg = host.cfg
    for layer in range(cfg["n_layers"]):
        ours, theirs = cache["pattern", layer], host_cache["pattern", layer]
        assert ours.shape == (1, cfg["n_heads"], len(tokens), len(tokens))
        for head in range(cfg["n_heads"]):
            assert same_bits(ours[0, head], theirs[0, head]), (layer, head)


@needs_device
def test_names_filter_keeps_only_the_names_asked(device, host, tokens):
    # The last layer's pattern too: without `hook_result` asked for, neither side runs the output
    # projection head by head.
    last = host.cfg["n_layers"] - 1
    asked = sorted({"blocks.0.attn.hook_pattern", f"blocks.{last}.attn.hook_pattern", "hook_embed"})
    _, listed = device.run_with_cache(tokens, names_filter=asked)
    _, patterns = device.run_with_cache(tokens, names_filter=lambda n: n.endswith("hook_pattern"))
    with pytest.raises(ValueError):
        device.run_with_cache(tokens, names_filter=["blocks.0.attn.hook_nothing"])
    assert sorted(listed) == sorted(asked)
    _, host_listed = host.run_with_cache(tokens, names_filter=asked)
    for name in asked:
        assert same_bits(listed[name], host_listed[name]), name
    _, host_patterns = host.run_with_cache(tokens, names_filter=lambda n: n.endswith("hook_pattern"))
    assert sorted(patterns) == sorted(host_patterns)
    assert patterns and all(n.endswith("hook_pattern") for n in patterns)


@needs_device
def test_bad_tokens_are_value_errors_and_a_closed_device_an_os_error(device, host, tokens):
    d = device
    with pytest.raises(ValueError):
        d.hash([1, 2, host.cfg["d_vocab"]])
    with pytest.raises(ValueError):
        d.run_with_cache([0] * (d.info()["context"] + 1))
    with pytest.raises(ValueError):
        d.hash([])
    assert d.hash(tokens) == host.hash(tokens)
    d.close()
    assert d.closed
    with pytest.raises(OSError):
        d.hash(tokens)

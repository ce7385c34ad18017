"""Shared by the tests: the TransformerLens fixtures (tests/fixtures), the `microlens` command, and a
reader of the fixtures' safetensors caches (numpy only)."""

import json
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"
# Every model fixture (tests/fixture_names.rs is the one list).
NAMES = [
    line.strip().strip('",')
    for line in (ROOT / "tests" / "fixture_names.rs").read_text().splitlines()
    if line.strip().startswith('"')
]
WITH_CACHE = [n for n in NAMES if (FIXTURES / n / "cache.safetensors").exists()]
# `microlens run`'s cache tolerance (host-tools/tests/suite/cache_vs_tl.rs): |ours - tl| <= TOL (1 + |tl|).
TOL = 1e-4


def expected(name):
    return json.loads((FIXTURES / name / "expected.json").read_text())


def processing(name, processed):
    """The convert keywords of TransformerLens's processing of fixture `name` (or none)."""
    flags = expected(name)["processing"]
    return {k: bool(flags[k]) and processed for k in
            ("fold_ln", "center_writing_weights", "center_unembed", "fold_value_biases")}


DTYPES = {"F32": "<f4", "F64": "<f8", "BOOL": "?", "I64": "<i8", "I32": "<i4"}


def read_safetensors(path):
    """`{name: array}` of a safetensors file."""
    data = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        buf = data[8 + n + start:8 + n + end]
        out[name] = np.frombuffer(buf, dtype=DTYPES[meta["dtype"]]).reshape(meta["shape"])
    return out


def microlens_bin():
    """The `microlens` command (`MICROLENS_BIN`, else the workspace's test-profile build)."""
    return os.environ.get("MICROLENS_BIN", str(ROOT / "target" / "debug" / "microlens"))


def cli(*args):
    """Runs `microlens ARGS` and returns its stdout."""
    done = subprocess.run([microlens_bin(), *map(str, args)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def cli_error(*args):
    """Runs `microlens ARGS`, which must fail, and returns its one-line error (without `error: `)."""
    done = subprocess.run([microlens_bin(), *map(str, args)], capture_output=True, text=True)
    assert done.returncode != 0
    return done.stderr.strip().removeprefix("error: ")


def assert_close(ours, theirs, what):
    """Elementwise `|ours - theirs| <= TOL (1 + |theirs|)` (equal infinities pass)."""
    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    assert ours.shape == theirs.shape, (what, ours.shape, theirs.shape)
    same = ours == theirs
    with np.errstate(invalid="ignore"):  # inf - inf where both are -inf (masked attention scores)
        rel = np.where(same, 0.0, np.abs(ours - theirs) / (1.0 + np.abs(theirs)))
    worst = float(np.nanmax(rel)) if rel.size else 0.0
    assert not np.isnan(rel).any() and worst <= TOL, (what, worst)
    return worst


@pytest.fixture(scope="session")
def shipped():
    """The shipped induction model's checkpoint."""
    return ROOT / "firmware-example" / "model" / "induction-2l.safetensors"

"""The example and the command-line tools run end to end (small sizes)."""

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import gpu

from fp4_inductor import accuracy

ROOT = Path(__file__).resolve().parents[1]


def test_decode_loop_example_runs():
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples/decode_loop.py"), "--steps", "2", "--context", "256", "--heads", "16",
         "--topk", "32", "--no-compile"],
        capture_output=True, text=True, timeout=300, check=True,
    ).stdout
    assert "swapped 2 indexers to FP4" in out and "overlap" in out and "FP4 68, FP8 132, BF16 256" in out


@pytest.mark.gpu
@gpu
def test_decode_loop_example_on_gpu_from_captured_graphs():
    """The example as an inference engineer runs it: on the GPU, compiled, each step replayed
    from a captured CUDA graph (Inductor skipped none); the FP4 indexer keeps most of the BF16
    one's top-k."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples/decode_loop.py"), "--steps", "4", "--device", "cuda",
         "--mode", "reduce-overhead"],
        capture_output=True, text=True, timeout=600, check=True,
    ).stdout
    assert "device: cuda" in out
    assert "CUDA graphs Inductor skipped: 0" in out, out
    mean = float(out.split("overlap of the FP4 indexer with the BF16 one: mean ")[1].split(",")[0])
    assert mean > 0.7, out


def test_demo_runs():
    out = subprocess.run([sys.executable, str(ROOT / "examples/demo.py"), "--context", "512", "--topk", "64"],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    assert "overlap with the BF16 indexer" in out
    assert "fp4.decode_step, the same step in one call: the same top-k sets" in out


def test_accuracy_tool(capsys):
    accuracy.main(["--contexts", "2048", "--ks", "512", "--rows", "2", "--heads", "16", "--data", "gaussian,outliers"])
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("| gaussian") or l.startswith("| outliers")]
    assert len(lines) == 8
    overlaps = {l.split("|")[4].strip(): float(l.split("|")[5]) for l in lines if "gaussian" in l}
    # FP8 keeps more of the BF16 top-k than FP4 on Gaussian data (3 vs 1 mantissa bits).
    assert overlaps["fp8"] > overlaps["fp4"] > 0.5

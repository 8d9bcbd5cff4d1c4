"""What the inline-PTX wgmma scripts (``asm_wgmma.py``, ``wgmma_scorer.py``) share: importing the
kernels they write out, reading a compiled kernel's wgmma groups and waits, and ptxas's verdict
on its PTX. (The scripts put the repository's root on the path before they import it.)"""

import importlib.util
import os
import subprocess
import tempfile

import triton

from fp4_inductor.kernels.sm90 import dump_cubin, sass_instructions


def load_written(directory: str, name: str, source: str):
    """The module ``name`` with ``source``, written to ``directory`` first (Triton reads a
    kernel's source from its file)."""
    path = os.path.join(directory, f"{name}.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def wgmma_order(cubin: bytes, counts: bool = False) -> str:
    """The kernel's wgmma groups (the GMMA that closes each) and waits, in SASS order; with
    ``counts``, each with the instructions since the one before it in brackets (what runs under
    a dot: the count before each wait)."""
    order, since = [], 0
    for _, text in sass_instructions(dump_cubin(cubin)):
        if "GMMA" in text and "gsb0" in text:
            entry = "group"
        elif "WARPGROUP.DEPBAR" in text:
            entry = "wait " + text.split("gsb0,")[1].strip()
        else:
            since += 1
            continue
        order.append(f"[{since}] {entry}" if counts else entry)
        since = 0
    return ", ".join(order)


def ptxas_verdict(ptx: str) -> tuple[str, list[str]]:
    """(ptxas -v's report, the codes of its serialization warnings) for ``ptx``, assembled again
    for sm_90a with the wheel's ptxas: Triton does not pass on ptxas's notes."""
    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "k.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        report = subprocess.run([ptxas, "-arch=sm_90a", "-v", path, "-o", os.path.join(scratch, "k.cubin")],
                                capture_output=True, text=True).stderr
    return report, [w.split(")")[0].split("(")[-1] for w in report.splitlines() if "(C75" in w]

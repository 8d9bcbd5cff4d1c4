"""What the inline-PTX wgmma scripts (``asm_wgmma.py``, ``wgmma_scorer.py``) share: importing the
kernels they write out; reading a compiled kernel's wgmma groups and waits, and ptxas's verdict on
its PTX (``fp4_inductor.kernels.sm90``). (The scripts put the repository's root on the path
before they import it.)"""

import importlib.util
import os

from fp4_inductor.kernels.sm90 import ptxas_verdict, wgmma_order  # noqa: F401


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

import os

import pytest
import torch

# The Triton interpreter must be switched on before the kernels are first imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

HAS_TRITON = __import__("importlib").util.find_spec("triton") is not None

# backend="fp4_inductor" from a source checkout too (a no-op where the package is installed).
import fp4_inductor.inductor  # noqa: E402

fp4_inductor.inductor.register()
HAS_GPU = torch.cuda.is_available()
INTERPRETER = os.environ.get("TRITON_INTERPRET") == "1" and HAS_TRITON

gpu = pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA/ROCm GPU (run on the device machine)")

# (backend, device) pairs every kernel test runs over: the reference on the CPU, the Triton
# kernels through the interpreter on the CPU (so CI executes the real kernel code), and the
# Triton kernels on a GPU where one is present.
BACKENDS = [
    pytest.param(("reference", "cpu"), id="reference-cpu"),
    pytest.param(
        ("triton", "cpu"),
        id="triton-interpreter",
        marks=[pytest.mark.interpreter, pytest.mark.skipif(not INTERPRETER, reason="needs TRITON_INTERPRET=1 and triton")],
    ),
    pytest.param(("triton", "cuda"), id="triton-gpu", marks=[pytest.mark.gpu, gpu]),
]


@pytest.fixture(params=BACKENDS)
def backend_device(request):
    return request.param


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)

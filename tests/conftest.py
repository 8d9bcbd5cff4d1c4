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

INTERPRETER_MARKS = [pytest.mark.interpreter, pytest.mark.skipif(not INTERPRETER, reason="needs TRITON_INTERPRET=1 and triton")]
GPU_MARKS = [pytest.mark.gpu, gpu]

# (backend, device) pairs every kernel test runs over: the reference on the CPU, the Triton
# kernels through the interpreter on the CPU (so CI executes the real kernel code), and the
# Triton kernels on a GPU where one is present.
BACKENDS = [
    pytest.param(("reference", "cpu"), id="reference-cpu"),
    pytest.param(("triton", "cpu"), id="triton-interpreter", marks=INTERPRETER_MARKS),
    pytest.param(("triton", "cuda"), id="triton-gpu", marks=GPU_MARKS),
]

# The devices a test of a kernel helper (a small @triton.jit kernel of its own) runs on: the
# interpreter on the CPU, and a GPU where one is present.
KERNEL_DEVICES = [pytest.param("cpu", marks=INTERPRETER_MARKS), pytest.param("cuda", marks=GPU_MARKS)]


@pytest.fixture(params=BACKENDS)
def backend_device(request):
    return request.param


@pytest.fixture(params=BACKENDS[1:])
def triton_backend_device(request):
    """The (backend, device) pairs that run the Triton kernels: for tests of their launch forms
    and knobs, which the reference does not have."""
    return request.param


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)

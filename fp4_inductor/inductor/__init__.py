"""The Inductor side: the reference-indexer rewrite pass and the ``fp4_inductor`` backend.

``torch.compile(model, backend="fp4_inductor")`` finds the backend through the
``torch_dynamo_backends`` entry point of the installed package; from a source
checkout, call ``fp4_inductor.inductor.register()`` once first.
"""

from .backend import IndexShadow, fp4_inductor, register, rewrite_indexers, write_keys
from .rewrite import find_indexers

__all__ = ["IndexShadow", "find_indexers", "fp4_inductor", "register", "rewrite_indexers", "write_keys"]

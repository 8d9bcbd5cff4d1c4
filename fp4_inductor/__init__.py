"""FP4 lightning-indexer ops for torch.compile, CUDA graphs and paged merged caches.

See README.md and docs/ for the layouts and the contract of every op.
"""

from .layout import allocate_merged_cache, cache_views, decode_tile_size, index_section
from .modules import FP4Indexer, ReferenceIndexer, swap_indexers
from .ops import (
    decode_layout,
    decode_step,
    dequantize_pages,
    dequantize_queries,
    quantize_queries,
    score_paged,
    select_topk,
    store_keys,
)
from .rotation import hadamard_matrix

__all__ = [
    "FP4Indexer",
    "ReferenceIndexer",
    "allocate_merged_cache",
    "cache_views",
    "decode_layout",
    "decode_step",
    "decode_tile_size",
    "dequantize_pages",
    "dequantize_queries",
    "hadamard_matrix",
    "index_section",
    "quantize_queries",
    "score_paged",
    "select_topk",
    "store_keys",
    "swap_indexers",
]

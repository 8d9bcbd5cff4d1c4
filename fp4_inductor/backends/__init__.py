"""Adapters for kernels that live in other libraries."""

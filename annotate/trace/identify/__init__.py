"""Identification by comparison against HF transformers: the peer's math variables and the margin rule
(reference), a --tp run's shards, HF's own traced lines, and vLLM's native kernels.
"""

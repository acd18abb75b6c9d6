"""annotate: an annotated source reader for nano-vllm.

Data flows one way: vendor -> source -> notes -> pages -> site, and
runtime -> recorder -> reference -> store -> pages.
"""
from __future__ import annotations

__version__ = "0.1.0"

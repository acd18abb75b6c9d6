"""The source pages: one page per vendored file, its index, and the values panels beside its lines (nano-vllm's
and HF's), with a device trace's value against the CPU's.
"""

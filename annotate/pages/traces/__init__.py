"""The trace pages: the trace's index and flow diagram, the kernels page, the numerics page and the tensor-
parallel page.
"""

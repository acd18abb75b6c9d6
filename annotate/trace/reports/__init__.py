"""What a trace reports: the text report of `annotate trace`, and the fused-kernel bandwidth check.
"""

"""The trace format, below every stage: its one model (schema), validation, the tensors file, atomic write and
validated load (store), today's lines (placement) and the provenance a trace carries.
"""

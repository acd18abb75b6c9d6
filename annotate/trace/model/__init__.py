"""The model and its run: the options (the one home of a run's defaults and choices), the checkpoint's shapes
and the memory budget, the tokenizer, the shims, torch's private names (internals), compile graphs and
captured kernels, and the runtime that builds and runs the vendored model.
"""

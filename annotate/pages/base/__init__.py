"""What every page family shares: the trace set and its labels, number formats, plots, folds, the vendored
sources' snapshot, syntax highlighting, the extras protocol and the site's nav.
"""

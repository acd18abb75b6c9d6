"""The site's generated pages, one subpackage a page family; imports point one way, down this list:

- :mod:`annotate.pages.base`: what every family shares (the trace set and its labels, number formats,
  plots, folds, the vendored sources' snapshot, highlighting, the extras protocol, the nav);
- :mod:`annotate.pages.traces`: the trace pages (flow, kernels, numerics, tensor parallel);
- :mod:`annotate.pages.source`: one page per vendored file and the values panels beside its lines;
- :mod:`annotate.pages.lesson`: the lesson's formulas and values, the diagrams, the three-framework map;
- :mod:`annotate.pages.experiments`: the experiment, lab and route pages.

tests/test_import_graph.py holds them to that order.
"""

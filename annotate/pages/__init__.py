"""Source pages: the Markdown (with raw HTML) MkDocs turns into one page per vendored file.

- :mod:`annotate.pages.highlight` splits Pygments tokens into balanced per-line HTML,
- :mod:`annotate.safe_html` renders note prose (Markdown + ``$inline math$``, sanitised),
- :mod:`annotate.pages.extras` is the hook for per-line extras (trace values panels),
- :mod:`annotate.pages.source_page` assembles one page; :mod:`annotate.pages.index` the file list.
"""

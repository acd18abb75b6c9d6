"""Numbers for the lesson pages, computed at build time by running the vendored nano-vllm.

- :mod:`annotate.lesson.model`: the `Claim` record and the check helpers (pure, no torch).
- :mod:`annotate.lesson.capture`: read a function's locals when it returns (sys.settrace).
- :mod:`annotate.lesson.rmsnorm`, :mod:`annotate.lesson.swiglu`, :mod:`annotate.lesson.shapes`:
  the claim families (``rmsnorm.*``; ``mlp.*`` and ``swiglu.*``; ``shape.*``).
- :mod:`annotate.lesson.compute`: the child process that imports the vendored code and runs them.
- :mod:`annotate.lesson.cache`: the cache key (vendored file hashes), the cache file, the child call.
- :mod:`annotate.lesson.forked`: where that child runs: forked from a server with torch and transformers
  imported (`_server_env` is its environment), else a fresh interpreter.
- :mod:`annotate.lesson.table`: every claim of a root by name, plus ``vendor.*`` facts from the lock.

:mod:`annotate.claims` is the page-facing side: placeholder syntax and ``expand``.
"""

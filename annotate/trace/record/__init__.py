"""Recording: the line recorder and its line events (monitor), the copies it takes, the aliasing it reads,
object keys without id()'s audit event (identity), the statements of each traced line (sourcemap), and the
mypyc build of these per-line modules (native, native_build).
"""

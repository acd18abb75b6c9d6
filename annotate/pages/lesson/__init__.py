"""The lesson's pages and parts: its formulas and values, the element-level diagrams, the three-framework map
and the float32 facts it is checked against.
"""

"""The experiment pages: each experiment against its baseline, the index, the lab and route pages.
"""

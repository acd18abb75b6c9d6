"""Rendering helpers shared by the site: server-side math (KaTeX) and Markdown prose."""

# SPDX-License-Identifier: GPL-2.0
# sphinx-build Documentation build/doc  (optional: the .rst files read as text)
project = "plabel"
copyright = "the plabel authors"
master_doc = "index"
exclude_patterns = []
html_theme = "alabaster"

"""One compressor per content class (``registry.COMPRESSORS``), and the helpers they share.

Importing the package loads nothing else: each caller imports the module it needs.
"""

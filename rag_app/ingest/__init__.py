"""Loaders: a file on disk -> ParsedDocument (exact text + blocks with offsets and pages)."""

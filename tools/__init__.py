"""Scripts about the code itself (not shipped with the package)."""

"""Offset-level allocators and trace-driven swapping (E4-E7; docs/allocators.md)."""

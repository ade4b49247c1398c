"""Compilation of rendered variants to CUBIN."""

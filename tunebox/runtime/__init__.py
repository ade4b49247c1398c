"""Run-time lookup of tuned configurations; imports no search or plotting libraries."""

"""Figures from rdasim results: single runs (rdasim noc/run --out) and sweep datasets (rdasim sweep)."""

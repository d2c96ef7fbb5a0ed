"""Shared test settings: a non-interactive plotting backend for every test."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")

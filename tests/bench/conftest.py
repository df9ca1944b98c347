"""The benchmark runners live in ``benchmarks/`` at the repository root,
which is not installed: make it importable (appended, so the installed
polyc still comes first)."""
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.append(ROOT)

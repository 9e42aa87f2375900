"""Loaded by every Python subprocess the tests start (PYTHONPATH): records its AWS calls."""

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).parents[2]))
try:
    from tests.support.aws_actions import install
except ImportError:  # not this checkout's tests
    pass
else:
    install()

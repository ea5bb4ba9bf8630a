"""The test suite.

Bytecode caches stay on here whatever PYTHONDONTWRITEBYTECODE says: each
pytest-xdist worker imports every test module, and the suite starts about a
hundred server processes from the same sources. Without caches each of them
compiles (and each worker rewrites) it all again.
"""

import sys

sys.dont_write_bytecode = False

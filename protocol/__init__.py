"""Wire types, framing and error codes of the bashrpc protocol.

Pure: nothing here performs I/O or starts processes, so a client can import
this package on its own.
"""

PROTOCOL_NAME = "bashrpc"
__version__ = "0.1.0"

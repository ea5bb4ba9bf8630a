"""bashrpc runtime: the stdio JSON-RPC server and its shells."""

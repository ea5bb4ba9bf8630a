"""Build-time generators: the schemas, the reference pages, and the files they write."""

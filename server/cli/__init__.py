"""The command line: `bashrpc` serves on stdio; `bashrpc exec` is a client.

Imports: `protocol`, `settings`; `serve` only when serving.
"""

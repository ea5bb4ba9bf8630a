"""What the surfaces ask of the runtime: one command service under both
`bash` and `tools/call`, sessions, artifacts, and the tool call's own steps
(normalize, intercept, shape). Imports: `runtime`, `output`, `protocol`.
"""

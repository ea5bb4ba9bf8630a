"""What the surfaces ask of the runtime: one command service under both
`bash` and `tools/call`, sessions, resumable requests. `tool/` holds the
model's tool call on top of it (normalize, intercept, shape); nothing here
imports `tool/`. Imports: `runtime`, `output`, `protocol`.
"""

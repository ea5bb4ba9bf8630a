"""The git guard: what a sandboxed command may do to a repository, and the readers it trusts."""

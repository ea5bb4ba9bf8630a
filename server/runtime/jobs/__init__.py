"""Background jobs: programs a session starts that outlive the command that
started them (terminals), their table and limits, the pure state of one job,
and the wait for a job's output to say it is ready."""

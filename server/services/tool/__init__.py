"""The model's tool call: its arguments, the plan before the command runs
(normalize, intercept on a real bash parse, check the cwd), the updates while
it runs, and the result shaped for the model after. Imports the command
service, never the other way."""
